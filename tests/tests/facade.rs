//! The facade (`Client`) over the stdio transport, against the scripted server as a real
//! child process: custom transports, negotiation in both eras, calls, cancellation, the
//! handler, known tools, disconnect and close.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolwire::{
    BoxFuture, Client, Error, Inbound, Outbound, ProtocolMode, ProtocolVersion, StderrMode,
    StdioConfig, StdioTransport, Transport, TransportError,
};

fn server(eras: &str) -> StdioConfig {
    StdioConfig::new(env!("CARGO_BIN_EXE_toolwire-test-server"), [eras])
        .with_stderr(StderrMode::Discard)
}

/// A custom transport: stdio, counting the negotiation requests it carries.
struct Counting {
    inner: StdioTransport,
    probes: Arc<AtomicUsize>,
    cancels: Arc<AtomicUsize>,
}

impl Transport for Counting {
    fn carries_headers(&self) -> bool {
        self.inner.carries_headers()
    }
    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        let text = String::from_utf8_lossy(&message.body);
        if text.contains("\"server/discover\"") || text.contains("\"initialize\"") {
            self.probes.fetch_add(1, Ordering::SeqCst);
        }
        if text.contains("\"notifications/cancelled\"") {
            self.cancels.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.send(message)
    }
    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
        self.inner.recv()
    }
    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        self.inner.close()
    }
}

#[tokio::test]
async fn concurrent_first_callers_share_one_negotiation() {
    let probes = Arc::new(AtomicUsize::new(0));
    let transport = Counting {
        inner: StdioTransport::spawn(server("modern")).unwrap(),
        probes: probes.clone(),
        cancels: Arc::default(),
    };
    let client = Client::builder("e2e", "0").connect(transport).unwrap();
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .call_tool("echo", json!({"text": format!("call {i}")}))
                    .await
            })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let result = call.await.unwrap().unwrap();
        assert_eq!(
            result.content[0].as_text(),
            Some(format!("call {i}").as_str())
        );
    }
    assert_eq!(
        probes.load(Ordering::SeqCst),
        1,
        "one server/discover for eight first callers"
    );
    assert_eq!(
        client.ready().await.unwrap().version,
        ProtocolVersion::V2026_07_28
    );
    client.close().await;
}

#[tokio::test]
async fn list_call_and_errors_over_a_legacy_server() {
    let client = Client::builder("e2e", "0")
        .connect_stdio(server("legacy"))
        .unwrap();
    let outcome = client.list_tools().await.unwrap();
    assert_eq!(outcome.commit.diff.added.len(), 11);
    assert!(client.tools().contains("execute_sql"));
    let n = client.ready().await.unwrap();
    assert_eq!(n.version, ProtocolVersion::V2025_11_25);
    assert_eq!(n.server_info.as_ref().unwrap().name, "scripted-legacy");

    let result = client
        .call_tool("execute_sql", json!({"region": "us", "query": "q"}))
        .await
        .unwrap();
    assert!(!result.is_error());
    assert_eq!(result.content[0].as_text(), Some("region=us rows=1"));

    let err = client.call_tool("nope", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, Error::Server(e) if e.code == -32602),
        "{err}"
    );
    assert!(matches!(
        client.call_tool("echo", json!([1])).await,
        Err(Error::Usage(toolwire::UsageError::ArgumentsNotAnObject))
    ));

    client.close().await;
    assert!(matches!(
        client.call_tool("echo", json!({})).await,
        Err(Error::Closed)
    ));
}

#[tokio::test]
async fn known_tools_and_a_pinned_version() {
    let config =
        Client::builder("e2e", "0").mode(ProtocolMode::Pinned(ProtocolVersion::V2026_07_28));
    let client = config.connect_stdio(server("both")).unwrap();
    let tool: toolwire::Tool =
        serde_json::from_value(json!({"name": "execute_sql", "inputSchema": {
        "type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}))
        .unwrap();
    client.add_known_tools([tool]).unwrap();
    let bad: toolwire::Tool = serde_json::from_value(json!({"name": "bad", "inputSchema": {
        "properties": {"r": {"type": "string", "x-mcp-header": "a b"}}}}))
    .unwrap();
    assert!(matches!(
        client.add_known_tools([bad]),
        Err(Error::Usage(toolwire::UsageError::KnownTools(_)))
    ));
    let result = client
        .call_tool("execute_sql", json!({"region": "eu", "query": "q"}))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("region=eu rows=1"));
    assert!(client.tools().get("execute_sql").unwrap().is_known());
    client.close().await;
}

#[tokio::test]
async fn a_server_that_dies_fails_pending_calls_with_the_reason() {
    let config = StdioConfig::new(
        "sh",
        [
            "-c",
            "read -r line; echo 'fatal: out of memory' >&2; exit 7",
        ],
    )
    .with_stderr(StderrMode::Discard);
    let client = Client::builder("e2e", "0").connect_stdio(config).unwrap();
    let err = client.call_tool("echo", json!({})).await.unwrap_err();
    // It died reading the handshake: nothing was established, so it is not restarted, and
    // the call that waited for the handshake hears its exit status and its last words.
    let Error::Connection(toolwire::ConnectionError::EndedBeforeHandshake {
        peer: Some(peer), ..
    }) = &err
    else {
        panic!("{err:?}")
    };
    assert!(
        peer.contains("exit status: 7") && peer.contains("out of memory"),
        "{peer}"
    );
    // Later calls say why the client cannot go on.
    let again = client.call_tool("echo", json!({})).await.unwrap_err();
    assert!(
        toolwire::ErrorChain(&again)
            .to_string()
            .contains("exit status: 7"),
        "{again}"
    );
}

#[tokio::test]
async fn progress_reaches_the_callback() {
    let client = Client::builder("e2e", "0")
        .connect_stdio(server("modern"))
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let result = client
        .call_tool_with_progress(
            "count",
            json!({"to": 4}),
            toolwire::CallOptions::default(),
            move |p| {
                sink.lock().unwrap().push((p.progress, p.total));
            },
        )
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("counted to 4"));
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (1.0, Some(4.0)),
            (2.0, Some(4.0)),
            (3.0, Some(4.0)),
            (4.0, Some(4.0))
        ]
    );
    client.close().await;
}

#[tokio::test]
async fn dropping_a_call_cancels_it_on_the_server() {
    let cancels = Arc::new(AtomicUsize::new(0));
    let transport = Counting {
        inner: StdioTransport::spawn(server("modern")).unwrap(),
        probes: Arc::default(),
        cancels: cancels.clone(),
    };
    let client = Client::builder("e2e", "0").connect(transport).unwrap();
    client.ready().await.unwrap();
    let slow = client.call_tool("slow", json!({}));
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(100), slow)
            .await
            .is_err()
    );
    // The next call goes through the same driver, after the cancellation.
    let echo = client
        .call_tool("echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(echo.content[0].as_text(), Some("after"));
    assert_eq!(
        cancels.load(Ordering::SeqCst),
        1,
        "modern over stdio sends notifications/cancelled"
    );
    client.close().await;
}

#[tokio::test]
async fn the_handler_answers_the_servers_elicitation() {
    let capabilities: toolwire::ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {}})).unwrap();
    let config = Client::builder("e2e", "0").handler(capabilities, |request| {
        Box::pin(async move {
            match request {
                toolwire::ServerRequest::Elicit(params) => {
                    assert_eq!(params.message, "Your name?");
                    Ok(json!({"action": "accept", "content": {"name": "ferris"}}))
                }
                other => Err(toolwire::ErrorObject::new(
                    -32601,
                    format!("unexpected {}", other.method()),
                )),
            }
        })
    });
    let client = config.connect_stdio(server("legacy")).unwrap();
    let result = client.call_tool("ask", json!({})).await.unwrap();
    assert_eq!(result.content[0].as_text(), Some("hello ferris"));
    client.close().await;

    // Without the capability the session refuses the request itself.
    let client = Client::builder("e2e", "0")
        .connect_stdio(server("legacy"))
        .unwrap();
    let result = client.call_tool("ask", json!({})).await.unwrap();
    assert_eq!(
        result.content[0].as_text(),
        Some("elicitation refused: -32601")
    );
    client.close().await;
}

#[tokio::test]
async fn structured_output_is_validated_against_the_output_schema() {
    let client = Client::builder("e2e", "0")
        .connect_stdio(server("modern"))
        .unwrap();
    client.list_tools().await.unwrap();
    let ok = client.call_tool("weather", json!({})).await.unwrap();
    assert_eq!(ok.structured_content, Some(json!({"temp": 21})));

    let err = client.call_tool("liar", json!({})).await.unwrap_err();
    let Error::Protocol(toolwire::ProtocolError::StructuredOutput { tool, message }) = &err else {
        panic!("{err}")
    };
    assert_eq!(tool, "liar");
    assert!(
        message.contains("\"hot\"") && message.contains("/temp"),
        "{message}"
    );

    // A tool error is passed to the model as it is.
    assert!(
        client
            .call_tool("failing_liar", json!({}))
            .await
            .unwrap()
            .is_error()
    );

    // A remote $ref is never fetched: the schema cannot be used, and the call says so.
    let err = client.call_tool("remote_ref", json!({})).await.unwrap_err();
    assert!(
        err.to_string().contains("outputSchema cannot be used"),
        "{err}"
    );
    client.close().await;

    // Switched off, the same results pass.
    let config = Client::builder("e2e", "0").validate_structured_output(false);
    let client = config.connect_stdio(server("modern")).unwrap();
    client.list_tools().await.unwrap();
    assert_eq!(
        client
            .call_tool("liar", json!({}))
            .await
            .unwrap()
            .structured_content,
        Some(json!({"temp": "hot"}))
    );
    client.close().await;
}

#[tokio::test]
async fn shutdown_then_reuse_reconnects_and_keeps_known_tools() {
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    let connector: toolwire::Connector = Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        StdioTransport::spawn(server("both")).map(|t| Arc::new(t) as Arc<dyn Transport>)
    });
    let client = Client::builder("e2e", "0").connect_with(connector).unwrap();
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "lazy: nothing started yet"
    );
    let known: toolwire::Tool =
        serde_json::from_value(json!({"name": "offline_tool", "inputSchema": {"type": "object"}}))
            .unwrap();
    client.add_known_tools([known]).unwrap();
    client.list_tools().await.unwrap();
    assert!(client.tools().contains("echo"));
    assert_eq!(connections.load(Ordering::SeqCst), 1);

    client.disconnect().await;
    assert_eq!(
        client.tools().names(),
        ["offline_tool"],
        "discovered tools forgotten, known kept"
    );

    let again = client
        .call_tool("echo", json!({"text": "back"}))
        .await
        .unwrap();
    assert_eq!(again.content[0].as_text(), Some("back"));
    assert_eq!(
        connections.load(Ordering::SeqCst),
        2,
        "a new connection (a new child process)"
    );
    assert_eq!(
        client.ready().await.unwrap().version,
        ProtocolVersion::V2026_07_28
    );

    client.close().await;
    assert!(matches!(
        client.call_tool("echo", json!({})).await,
        Err(Error::Closed)
    ));
    assert_eq!(
        connections.load(Ordering::SeqCst),
        2,
        "closed for good: no reconnect"
    );
}

#[tokio::test]
async fn resources_prompts_and_ping_in_both_eras() {
    for eras in ["legacy", "modern"] {
        let client = Client::builder("e2e", "0")
            .connect_stdio(server(eras))
            .unwrap();
        let resources = client.list_resources(None).await.unwrap();
        assert_eq!(resources.resources[0].uri, "file:///notes.txt");
        let read = client.read_resource("file:///notes.txt").await.unwrap();
        assert_eq!(read.contents[0].uri(), "file:///notes.txt");
        let missing = client.read_resource("file:///nope").await.unwrap_err();
        let expected = if eras == "legacy" { -32002 } else { -32602 };
        assert!(
            matches!(&missing, Error::Server(e) if e.code == expected),
            "{eras}: {missing}"
        );
        let prompts = client.list_prompts(None).await.unwrap();
        assert_eq!(prompts.prompts[0].name, "greet");
        let prompt = client
            .get_prompt("greet", [("who".to_owned(), "Ferris".to_owned())])
            .await
            .unwrap();
        assert_eq!(prompt.messages[0].content.as_text(), Some("Hello, Ferris!"));
        let ping = client.ping().await;
        if eras == "legacy" {
            ping.unwrap();
        } else {
            assert!(
                matches!(ping, Err(Error::Server(e)) if e.code == -32601),
                "no ping in 2026-07-28"
            );
        }
        client.close().await;
    }
}

#[tokio::test]
async fn input_required_rounds_go_through_the_handler() {
    let capabilities: toolwire::ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {}})).unwrap();
    let config = Client::builder("e2e", "0").handler(capabilities, |request| {
        Box::pin(async move {
            match request {
                toolwire::ServerRequest::Elicit(p) if p.message == "GitHub login?" => {
                    Ok(json!({"action": "accept", "content": {"name": "ferris"}}))
                }
                toolwire::ServerRequest::Elicit(p) if p.message == "PIN?" => {
                    Ok(json!({"action": "accept", "content": {"pin": 1234}}))
                }
                other => Err(toolwire::ErrorObject::new(
                    -32601,
                    format!("unexpected {}", other.method()),
                )),
            }
        })
    });
    let client = config.connect_stdio(server("modern")).unwrap();
    let result = client
        .call_tool("login", json!({"org": "rust-lang"}))
        .await
        .unwrap();
    assert_eq!(
        result.content[0].as_text(),
        Some("welcome ferris of rust-lang"),
        "requestState echoed exactly, the arguments sent again"
    );
    // prompts/get may ask for input too.
    let prompt = client.get_prompt("secret", []).await.unwrap();
    assert_eq!(
        prompt.messages[0].content.as_text(),
        Some("the secret for PIN 1234")
    );
    client.close().await;

    // Without a handler the call cannot go on.
    let client = Client::builder("e2e", "0")
        .connect_stdio(server("modern"))
        .unwrap();
    assert!(matches!(
        client.call_tool("login", json!({})).await,
        Err(Error::Input(toolwire::InputError::NoHandler))
    ));
    client.close().await;
}

/// The blocking client, from a plain thread (no runtime here).
#[test]
fn the_blocking_client_works_without_a_runtime() {
    let client =
        toolwire::blocking::Client::connect_stdio(Client::builder("e2e", "0"), server("legacy"))
            .unwrap();
    assert_eq!(
        client.ready().unwrap().version,
        ProtocolVersion::V2025_11_25
    );
    assert_eq!(client.list_tools().unwrap().commit.diff.added.len(), 11);
    let result = client.call_tool("echo", json!({"text": "sync"})).unwrap();
    assert_eq!(result.content[0].as_text(), Some("sync"));
    client.disconnect().unwrap();
    assert_eq!(
        client
            .call_tool("echo", json!({"text": "again"}))
            .unwrap()
            .content[0]
            .as_text(),
        Some("again")
    );
    client.close().unwrap();
    assert!(matches!(
        client.call_tool("echo", json!({})),
        Err(Error::Closed)
    ));
}

#[tokio::test]
async fn the_blocking_client_refuses_async_contexts_and_drops_safely() {
    let err =
        toolwire::blocking::Client::connect_stdio(Client::builder("e2e", "0"), server("legacy"))
            .unwrap_err();
    assert!(matches!(
        err,
        Error::Usage(toolwire::UsageError::BlockingInAsync)
    ));
    // Made on a plain thread, dropped here inside a runtime: no panic.
    let client = std::thread::spawn(|| {
        toolwire::blocking::Client::connect_stdio(Client::builder("e2e", "0"), server("legacy"))
            .unwrap()
    })
    .join()
    .unwrap();
    assert!(matches!(
        client.list_tools(),
        Err(Error::Usage(toolwire::UsageError::BlockingInAsync))
    ));
    drop(client);
}

/// Some stdio servers (rmcp-based ones) exit on any request before `initialize`: the probe
/// kills them. The client starts the server again and uses `initialize`.
#[tokio::test]
async fn a_server_that_dies_on_the_probe_is_restarted_in_the_legacy_era() {
    let client = Client::builder("e2e", "0")
        .connect_stdio(server("strict-legacy"))
        .unwrap();
    let result = client
        .call_tool("echo", json!({"text": "second try"}))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("second try"));
    assert_eq!(
        client.ready().await.unwrap().version,
        ProtocolVersion::V2025_11_25
    );
    // Reconnecting after a shutdown goes straight to initialize.
    client.disconnect().await;
    assert_eq!(
        client.ready().await.unwrap().version,
        ProtocolVersion::V2025_11_25
    );
    client.close().await;

    // Without a way to start it again, the death is the caller's error.
    let transport = StdioTransport::spawn(server("strict-legacy")).unwrap();
    let client = Client::builder("e2e", "0").connect(transport).unwrap();
    let ended = client.ready().await;
    assert!(
        matches!(
            ended,
            Err(Error::Connection(
                toolwire::ConnectionError::EndedBeforeHandshake { .. }
            ))
        ),
        "{ended:?}"
    );
}

#[tokio::test]
async fn the_builder_and_what_was_negotiated() {
    let client = Client::builder("e2e", "0")
        .title("End to end")
        .mode(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25))
        .timeouts(
            std::time::Duration::from_secs(5),
            std::time::Duration::from_secs(1),
        )
        .connect_stdio(server("both"))
        .unwrap();
    assert!(
        client.negotiated().is_none(),
        "nothing negotiated before the first use"
    );
    client.ready().await.unwrap();
    assert_eq!(
        client.protocol_version(),
        Some(ProtocolVersion::V2025_11_25)
    );
    assert_eq!(client.server_info().unwrap().name, "scripted-legacy");
    assert!(client.server_capabilities().unwrap().tools.is_some());
    // A legacy server is held to what it declared: no `completions` here.
    let params: toolwire_types::CompleteParams = serde_json::from_value(json!({
        "ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "F"}}))
    .unwrap();
    let err = client
        .request::<toolwire_types::methods::method::Complete>(params)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Usage(toolwire::UsageError::InvalidCall(_))),
        "{err}"
    );
    assert!(
        std::error::Error::source(&err)
            .unwrap()
            .to_string()
            .contains("`completions`")
    );
    client.close().await;
}

#[tokio::test]
async fn the_settle_barrier_over_stdio_in_both_eras() {
    for eras in ["both", "legacy"] {
        let client = Client::builder("e2e", "0")
            .connect_stdio(server(eras))
            .unwrap();
        client.list_tools().await.unwrap();
        assert!(!client.tools().contains("read_file"));
        let result = client.call_tool("unlock", json!({})).await.unwrap();
        assert!(!toolwire::tools_may_be_stale(&result), "{eras}");
        assert!(client.tools().contains("read_file"), "{eras}");
        client.close().await;
    }
}

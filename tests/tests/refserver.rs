//! The facade over HTTP against the reference server and its fault knobs: retries, session
//! expiry, SSE resumption, the Accept fallback, header validation and mismatch recovery, and
//! the settle barrier through the legacy GET stream and the modern listen stream.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use toolwire::{Client, HttpTransport, ProtocolMode, ProtocolVersion, RetryPolicy, Tool};
use toolwire_refserver::{Eras, Framing, Options, serve_http, serve_http_again};

async fn server(options: Options) -> toolwire_refserver::HttpServer {
    serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), options)
        .await
        .unwrap()
}

fn options(eras: Eras) -> Options {
    let mut o = Options::default();
    o.server.eras = eras;
    o
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy::new(4, Duration::from_millis(10), Duration::from_millis(50))
}

#[tokio::test]
async fn transient_statuses_are_retried_for_safe_requests() {
    let mut o = options(Eras::Both);
    o.faults.fail_429 = 1;
    o.faults.fail_503 = 2;
    let s = server(o).await;
    let client = Client::builder("e2e", "0")
        .connect_http(HttpTransport::builder(s.url()).retry_policy(fast_retries()))
        .unwrap();
    // The probe itself is retry-safe: 429 (Retry-After: 1), 503, 503, then the answer.
    let n = client.ready().await.unwrap();
    assert_eq!(n.version, ProtocolVersion::V2026_07_28);
    // The three faults did happen (a knob that did nothing would leave this at 0).
    assert_eq!(s.faults_injected(), 3);
    client.close().await;
}

#[tokio::test]
async fn an_expired_legacy_session_is_re_established_transparently() {
    let mut o = options(Eras::Legacy);
    o.faults.session_expiry = Some(3);
    let s = server(o).await;
    let transport = HttpTransport::new(s.url()).unwrap();
    let client = Client::builder("e2e", "0")
        .connect(transport.clone())
        .unwrap();
    client.list_tools().await.unwrap();
    let first = transport.session_id().unwrap();
    for i in 0..6 {
        let r = client
            .call_tool("echo", json!({"text": format!("call {i}")}))
            .await
            .unwrap();
        assert_eq!(r.content[0].as_text(), Some(format!("call {i}").as_str()));
    }
    assert_ne!(
        transport.session_id().unwrap(),
        first,
        "a new session was made"
    );
    assert!(s.faults_injected() >= 1, "no session expired");
    client.close().await;
}

#[tokio::test]
async fn a_cut_legacy_stream_is_resumed_with_last_event_id() {
    let mut o = options(Eras::Legacy);
    o.faults.cut_sse_every = Some(1);
    let s = server(o).await;
    let client = Client::builder("e2e", "0")
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let started = std::time::Instant::now();
    let r = client
        .call_tool("echo", json!({"text": "resumed"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("resumed"));
    // initialize and the call were both cut; each resumed after the server's `retry: 500`.
    assert!(s.faults_injected() >= 2, "{} cuts", s.faults_injected());
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    client.close().await;
}

#[tokio::test]
async fn a_406_steps_the_accept_header_down() {
    let mut o = options(Eras::Both);
    o.faults.reject_accept = Some("application/json, text/event-stream".into());
    let s = server(o).await;
    let transport = HttpTransport::new(s.url()).unwrap();
    let client = Client::builder("e2e", "0")
        .connect(transport.clone())
        .unwrap();
    client.ready().await.unwrap();
    assert_eq!(
        transport.accept_profile(),
        toolwire::AcceptProfile::JsonOnly
    );
    assert_eq!(s.faults_injected(), 1, "the first Accept was refused once");
    client.close().await;
}

#[tokio::test]
async fn stale_headers_are_refused_by_the_server_and_recovered_by_the_client() {
    let s = server(options(Eras::Both)).await;
    let client = Client::builder("e2e", "0")
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    // A stale known definition: no x-mcp-header, so no Mcp-Param-Region goes out.
    let stale: Tool = serde_json::from_value(json!({"name": "execute_sql", "inputSchema": {
        "type": "object", "properties": {"region": {"type": "string"}, "query": {"type": "string"}}}}))
    .unwrap();
    client.add_known_tools([stale]).unwrap();
    let r = client
        .call_tool(
            "execute_sql",
            json!({"region": "us-west-2", "query": "SELECT 1"}),
        )
        .await
        .unwrap();
    assert_eq!(
        r.content[0].as_text(),
        Some("region=us-west-2 rows=1 query=SELECT 1")
    );
    // The re-list replaced the definition; the tool stays known.
    let snapshot = client.tools();
    let cached = snapshot.get("execute_sql").unwrap();
    assert!(cached.is_known());
    assert_eq!(cached.plan().params().len(), 1);
    client.close().await;
}

#[tokio::test]
async fn unlock_files_returns_once_its_tools_are_listed_over_http_in_both_eras() {
    for (eras, framing, mode) in [
        (Eras::Legacy, Framing::Sse, ProtocolMode::Auto),
        (
            Eras::Both,
            Framing::Json,
            ProtocolMode::Pinned(ProtocolVersion::V2025_06_18),
        ),
        (Eras::Both, Framing::Sse, ProtocolMode::Auto),
        (Eras::Both, Framing::Json, ProtocolMode::Auto),
        (Eras::Legacy, Framing::Json, ProtocolMode::Auto),
        (
            Eras::Both,
            Framing::Sse,
            ProtocolMode::Pinned(ProtocolVersion::V2025_06_18),
        ),
    ] {
        let mut o = options(eras);
        o.server.framing = framing;
        let s = server(o).await;
        let client = Client::builder("e2e", "0")
            .mode(mode.clone())
            .connect_http(HttpTransport::builder(s.url()))
            .unwrap();
        client.list_tools().await.unwrap();
        assert!(!client.tools().contains("read_file"));
        let r = client.call_tool("unlock_files", json!({})).await.unwrap();
        let label = format!("{eras:?} {framing:?} {mode:?}");
        assert!(!toolwire::tools_may_be_stale(&r), "{label}");
        assert!(client.tools().contains("read_file"), "{label}");
        assert!(client.tools().contains("write_file"), "{label}");
        let w = client
            .call_tool("write_file", json!({"path": "a.txt", "content": "hello"}))
            .await
            .unwrap();
        assert!(!w.is_error(), "{label}");
        let r = client
            .call_tool("read_file", json!({"path": "a.txt"}))
            .await
            .unwrap();
        assert_eq!(r.content[0].as_text(), Some("hello"), "{label}");
        // And a tool that removes itself is gone when its call returns.
        client.call_tool("ephemeral", json!({})).await.unwrap();
        assert!(!client.tools().contains("ephemeral"), "{label}");
        client.close().await;
    }
}

/// POSTs one JSON-RPC body over a plain socket and returns the JSON answer.
async fn raw_post(url: &str, headers: &[(&str, &str)], body: &str) -> serde_json::Value {
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(authority).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1;
        // A JSON answer, possibly chunked: the JSON object is the line that starts with `{`.
        let json = body.lines().find(|l| l.starts_with('{')).unwrap();
        serde_json::from_str(json).unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn discovery_carries_the_required_cache_fields() {
    let mut o = options(Eras::Both);
    o.server.framing = Framing::Json;
    let server = server(o).await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}});
    let answer = raw_post(
        &server.url(),
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "server/discover"),
        ],
        &body.to_string(),
    )
    .await;
    let result = &answer["result"];
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28"]),
        "{answer}"
    );
    assert_eq!(result["resultType"], "complete");
    // Required on discovery results (rmcp refuses a discovery without them).
    assert_eq!(result["ttlMs"], 0);
    assert_eq!(result["cacheScope"], "private");
}

/// The blocking client over Streamable HTTP, from a plain thread: `list_all_tools` returns the
/// server's tools in the order it lists them (echo, add, execute_sql, … as registered).
#[test]
fn the_blocking_client_lists_every_tool_over_http_in_the_servers_order() {
    // The server runs on a runtime of its own; this thread is outside it.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let s = runtime.block_on(server(options(Eras::Both)));
    let client = toolwire::blocking::Client::connect_http(
        Client::builder("e2e", "0"),
        HttpTransport::builder(s.url()),
    )
    .unwrap();
    let tools = client.list_all_tools().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names[..3], ["echo", "add", "execute_sql"], "{names:?}");
    assert_eq!(names.len(), client.tools().len(), "{names:?}");
    let r = client.call_tool("echo", json!({"text": "sync"})).unwrap();
    assert_eq!(r.content[0].as_text(), Some("sync"));
    client.close().unwrap();
    drop(s);
}

/// The server stops (its connections end with it) and starts again on the same port: a call
/// made while it is down waits through the resends (nothing was sent, so even a call that is
/// not safe to repeat goes again) and reaches the new server; a legacy session it forgot is
/// re-established on its 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stopped_and_restarted_on_the_same_port_is_reached_again_in_both_eras() {
    for (eras, mode) in [
        (Eras::Both, ProtocolMode::Auto),
        (
            Eras::Legacy,
            ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
        ),
    ] {
        let first = server(options(eras)).await;
        let addr = first.addr();
        let client = Client::builder("restart", "0")
            .mode(mode.clone())
            .connect_http(
                HttpTransport::builder(first.url()).retry_policy(RetryPolicy::new(
                    8,
                    Duration::from_millis(50),
                    Duration::from_millis(200),
                )),
            )
            .unwrap();
        let args = json!({"region": "eu", "query": "select 1"});
        client.call_tool("execute_sql", args.clone()).await.unwrap();
        drop(first);
        // Time for the closed connections to reach the client's pool: a request written on
        // one at the very moment it closes may have been sent, and is not resent.
        tokio::time::sleep(Duration::from_millis(100)).await;

        // Not retry-safe (no annotations); the server comes back 300 ms into the resends.
        let started = std::time::Instant::now();
        let call = tokio::spawn({
            let client = client.clone();
            let args = args.clone();
            async move { client.call_tool("execute_sql", args).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let again = serve_http_again(addr, options(eras)).await.unwrap();
        let result = call.await.unwrap().unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "the call did not wait for the server: {:?}",
            started.elapsed()
        );
        assert_eq!(
            result.content[0].as_text(),
            Some("region=eu rows=1 query=select 1"),
            "{eras:?}"
        );
        assert!(client.call_tool("execute_sql", args).await.is_ok());
        drop(again);
        client.close().await;
    }
}

/// The texts of the log messages waiting on `notifications`, in order.
fn logged(notifications: &mut toolwire::Notifications) -> Vec<String> {
    let mut texts = Vec::new();
    while let Some(notice) = notifications.try_recv() {
        if let toolwire::ServerNotification::LoggingMessage(log) = &notice.notification {
            texts.push(log.data.as_str().unwrap_or("").to_owned());
        }
    }
    texts
}

/// Log messages reach the application's notification stream, filtered by the level asked:
/// in the modern era on each request (none without one), in the legacy era through
/// `logging/setLevel`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_reach_the_notification_stream_at_the_level_asked_in_both_eras() {
    let s = server(options(Eras::Both)).await;
    for mode in [
        ProtocolMode::Auto,
        ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
    ] {
        let client = Client::builder("logs", "0")
            .mode(mode.clone())
            .log_level(toolwire::LoggingLevel::Info)
            .connect_http(HttpTransport::builder(s.url()))
            .unwrap();
        let mut notifications = client.notifications();
        let r = client
            .call_tool("log", json!({"message": "hi"}))
            .await
            .unwrap();
        assert_eq!(
            r.content[0].as_text(),
            Some("logged 3 messages"),
            "{mode:?}"
        );
        // The messages came before the answer on the same stream.
        assert_eq!(
            logged(&mut notifications),
            ["info: hi", "warning: hi", "error: hi"],
            "{mode:?}"
        );

        client
            .set_log_level(toolwire::LoggingLevel::Error)
            .await
            .unwrap();
        client
            .call_tool("log", json!({"message": "again"}))
            .await
            .unwrap();
        assert_eq!(logged(&mut notifications), ["error: again"], "{mode:?}");
        assert_eq!(notifications.lost(), 0);
        client.close().await;
    }

    // Modern, no level asked: the server must send none.
    let client = Client::builder("logs", "0")
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let mut notifications = client.notifications();
    let r = client
        .call_tool("log", json!({"message": "quiet"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("logged 0 messages"));
    assert!(logged(&mut notifications).is_empty());
    client.close().await;
}

/// A subscriber that does not read loses the oldest notifications, counted; the calls that
/// produce them never wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_notification_consumer_loses_the_oldest_and_never_blocks_calls() {
    let s = server(options(Eras::Both)).await;
    // Legacy: the only notifications are the twenty log messages (a modern client's listen
    // stream would add its acknowledgement).
    let client = Client::builder("logs", "0")
        .mode(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25))
        .log_level(toolwire::LoggingLevel::Debug)
        .notification_buffer(4)
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let mut slow = client.notifications();
    for i in 0..5 {
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            client.call_tool("log", json!({"message": format!("m{i}")})),
        )
        .await
        .expect("a call waited for the notification consumer")
        .unwrap();
        assert_eq!(r.content[0].as_text(), Some("logged 4 messages"));
    }
    // 20 sent, room for 4: the newest four are kept, the rest counted as lost.
    let kept = logged(&mut slow);
    assert_eq!(kept, ["debug: m4", "info: m4", "warning: m4", "error: m4"]);
    assert_eq!(slow.lost(), 16);
    client.close().await;
}

/// The URI of the next `notifications/resources/updated` on `notifications` (other
/// notifications skipped), within 5 s.
async fn next_update(notifications: &mut toolwire::Notifications) -> String {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let notice = notifications.recv().await.expect("the client is open");
            if let toolwire::ServerNotification::ResourceUpdated(updated) = &notice.notification {
                return updated.uri.clone();
            }
        }
    })
    .await
    .expect("a resource update within 5 s")
}

/// A subscribed resource's updates reach the notification stream (legacy: through
/// `resources/subscribe` and the GET stream; modern: through a listen stream replaced with
/// one that names it), and an unsubscribed one's stop: after unsubscribing `a` and
/// subscribing `b`, writing `a` then `b` yields `b` first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_updates_reach_subscribers_and_stop_after_unsubscribing_in_both_eras() {
    let s = server(options(Eras::Both)).await;
    for mode in [
        ProtocolMode::Auto,
        ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
    ] {
        let client = Client::builder("subscriptions", "0")
            .mode(mode.clone())
            .connect_http(HttpTransport::builder(s.url()))
            .unwrap();
        let mut notifications = client.notifications();
        client.call_tool("unlock_files", json!({})).await.unwrap();
        let (a, b) = ("toolwire://files/a", "toolwire://files/b");
        client.subscribe_resource(a).await.unwrap();
        let write = |path: &'static str| {
            let client = client.clone();
            async move {
                client
                    .call_tool("write_file", json!({"path": path, "content": "x"}))
                    .await
                    .unwrap()
            }
        };
        write("a").await;
        assert_eq!(next_update(&mut notifications).await, a, "{mode:?}");

        client.subscribe_resource(b).await.unwrap();
        client.unsubscribe_resource(a).await.unwrap();
        write("a").await;
        write("b").await;
        assert_eq!(next_update(&mut notifications).await, b, "{mode:?}");
        client.close().await;
    }
}

/// A saved negotiation is adopted by a later client: against the same server its calls work
/// at once; against a server that went legacy, the first call fails with the refusal, the
/// client probes again and the next call works at the legacy version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_negotiation_is_adopted_and_probed_again_when_the_server_refuses_it() {
    let modern = server(options(Eras::Both)).await;
    let first = Client::builder("prior", "0")
        .connect_http(HttpTransport::builder(modern.url()))
        .unwrap();
    let saved = serde_json::to_string(&*first.ready().await.unwrap()).unwrap();
    first.close().await;
    let prior: toolwire::Negotiated = serde_json::from_str(&saved).unwrap();
    assert_eq!(prior.version, ProtocolVersion::V2026_07_28);

    let again = Client::builder("prior", "0")
        .prior(prior.clone())
        .connect_http(HttpTransport::builder(modern.url()))
        .unwrap();
    let args = json!({"text": "hi"});
    again.call_tool("echo", args.clone()).await.unwrap();
    assert_eq!(
        again.ready().await.unwrap().version,
        ProtocolVersion::V2026_07_28
    );
    again.close().await;

    let legacy = server(options(Eras::Legacy)).await;
    let moved = Client::builder("prior", "0")
        .prior(prior)
        .connect_http(HttpTransport::builder(legacy.url()))
        .unwrap();
    let refused = moved.call_tool("echo", args.clone()).await;
    assert!(
        refused.is_err(),
        "the stale version is refused: {refused:?}"
    );
    let result = moved.call_tool("echo", args).await.unwrap();
    assert_eq!(result.content[0].as_text(), Some("hi"));
    assert!(!moved.ready().await.unwrap().version.is_modern());
    moved.close().await;
}

/// The skill's directory, read through `resources/directory/read` in both eras (the server
/// declares `directoryRead`): its direct children, a subdirectory as `inode/directory`; a
/// file is not a directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_directory_lists_its_direct_children_in_both_eras() {
    let s = server(options(Eras::Both)).await;
    for mode in [
        ProtocolMode::Auto,
        ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
    ] {
        let client = Client::builder("dirs", "0")
            .mode(mode.clone())
            .connect_http(HttpTransport::builder(s.url()))
            .unwrap();
        let children = client
            .read_directory("skill://release-notes")
            .await
            .unwrap();
        let listed: Vec<(&str, Option<&str>)> = children
            .iter()
            .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
            .collect();
        assert_eq!(
            listed,
            [
                ("skill://release-notes/SKILL.md", Some("text/markdown")),
                ("skill://release-notes/examples/", Some("inode/directory")),
                ("skill://release-notes/reference.md", Some("text/markdown")),
            ],
            "{mode:?}"
        );
        let nested = client
            .read_directory("skill://release-notes/examples/")
            .await
            .unwrap();
        assert_eq!(nested.len(), 1, "{mode:?}");
        let file = client
            .read_directory("skill://release-notes/SKILL.md")
            .await
            .unwrap_err();
        assert!(
            matches!(&file, toolwire::Error::Server(e) if e.code == -32602),
            "{mode:?}: {file}"
        );
        client.close().await;
    }
}

/// A client that answers elicitation with the name "Ferris".
fn naming_client(mode: ProtocolMode) -> toolwire::ClientBuilder {
    let capabilities: toolwire::ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
    Client::builder("tasks", "0")
        .mode(mode)
        .handler(capabilities, |request| {
            Box::pin(async move {
                match request {
                    toolwire::ServerRequest::Elicit(_) => {
                        Ok(json!({"action": "accept", "content": {"name": "Ferris"}}))
                    }
                    other => Err(toolwire::ErrorObject::new(
                        -32601,
                        format!("unexpected {}", other.method()),
                    )),
                }
            })
        })
}

/// `call_tool` keeps returning the final result when the server answers with a task
/// (2026-07-28, the client declaring the extension): it polls `tasks/get` and answers the
/// task's input request through the handler with `tasks/update`. In the legacy era the same
/// tool answers in the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_followed_to_its_result_with_its_input_asked_through_the_handler() {
    let s = server(options(Eras::Both)).await;
    for mode in [
        ProtocolMode::Auto,
        ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
    ] {
        let client = naming_client(mode.clone())
            .connect_http(HttpTransport::builder(s.url()))
            .unwrap();
        let done = client
            .call_tool("slow_task", json!({"ms": 100}))
            .await
            .unwrap();
        assert_eq!(
            done.content[0].as_text(),
            Some("done after 100 ms"),
            "{mode:?}"
        );
        let asked = client
            .call_tool("slow_task", json!({"ms": 50, "ask": true}))
            .await
            .unwrap();
        let expected = if mode == ProtocolMode::Auto {
            "done after 50 ms, for Ferris"
        } else {
            "done after 50 ms"
        };
        assert_eq!(asked.content[0].as_text(), Some(expected), "{mode:?}");
        client.close().await;
    }
    assert_eq!(s.tasks_cancelled(), 0);
}

/// A task still working at the call's deadline is cancelled (`tasks/cancel`) and the call
/// fails with `Error::Timeout`; so is one whose caller stops waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_the_deadline_or_abandoned_by_its_caller_is_cancelled() {
    let s = server(options(Eras::Both)).await;
    let client = naming_client(ProtocolMode::Auto)
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let late = client
        .call_tool_with(
            "slow_task",
            json!({"ms": 10_000}),
            toolwire::CallOptions::default().with_timeout(Duration::from_millis(300)),
        )
        .await
        .unwrap_err();
    assert!(matches!(late, toolwire::Error::Timeout(_)), "{late}");
    assert_eq!(s.tasks_cancelled(), 1);
    let abandoned = tokio::time::timeout(
        Duration::from_millis(300),
        client.call_tool("slow_task", json!({"ms": 10_000})),
    )
    .await;
    assert!(abandoned.is_err(), "still working");
    let waited = tokio::time::timeout(Duration::from_secs(5), async {
        while s.tasks_cancelled() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "no tasks/cancel for the abandoned call");
    client.close().await;
}

/// The handle API: the task id and its states as polled, an input request answered by the
/// caller, the result at the end; a handle cancelled; a result given at once is `Done`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_handle_shows_the_states_takes_answers_and_cancels() {
    let s = server(options(Eras::Both)).await;
    let client = Client::builder("tasks", "0")
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let options = toolwire::CallOptions::default;
    let called = client
        .call_tool_as_task("slow_task", json!({"ms": 50, "ask": true}), options())
        .await
        .unwrap();
    let toolwire::Called::Task(mut handle) = called else {
        panic!("a task was expected");
    };
    assert!(handle.id().starts_with("task-"), "{}", handle.id());
    let mut seen = vec![handle.task().status];
    while handle.task().status != toolwire::types::TaskStatus::InputRequired {
        let status = handle.next().await.unwrap().status;
        seen.push(status);
        assert!(seen.len() < 200, "never asked: {seen:?}");
    }
    let asked = handle.task().input_requests.clone().unwrap_or_default();
    assert_eq!(asked.keys().collect::<Vec<_>>(), ["name-1"]);
    let answer = json!({"name-1": {"action": "accept", "content": {"name": "Ada"}}});
    handle
        .answer(answer.as_object().unwrap().clone())
        .await
        .unwrap();
    let result = handle.result().await.unwrap();
    assert_eq!(
        result.content[0].as_text(),
        Some("done after 50 ms, for Ada")
    );
    assert_eq!(seen[0], toolwire::types::TaskStatus::Working);

    let toolwire::Called::Task(long) = client
        .call_tool_as_task("slow_task", json!({"ms": 10_000}), options())
        .await
        .unwrap()
    else {
        panic!("a task was expected");
    };
    long.cancel().await.unwrap();
    assert_eq!(s.tasks_cancelled(), 1);
    let at_once = client
        .call_tool_as_task("echo", json!({"text": "now"}), options())
        .await
        .unwrap();
    assert!(matches!(at_once, toolwire::Called::Done(r) if r.content[0].as_text() == Some("now")));
    client.close().await;
}

/// Every way a task ends, through `call_tool`: a tool error is a result with `isError`
/// (`completed`), a JSON-RPC error is `Error::Server` (`failed`), two input requests at once
/// are both answered by the handler, and an MRTR round before the task is answered too. A
/// client without the extension is told by the server that the tool needs it (`-32021`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ending_of_a_task_reaches_the_caller_as_call_tool_would_give_it() {
    let mut o = options(Eras::Both);
    o.task_fixtures = true;
    let s = server(o).await;
    let client = naming_client(ProtocolMode::Auto)
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let failed_tool = client.call_tool("failing_job", json!({})).await.unwrap();
    assert_eq!(failed_tool.is_error, Some(true), "completed with isError");
    let protocol = client
        .call_tool("protocol_error_job", json!({}))
        .await
        .unwrap_err();
    assert!(
        matches!(&protocol, toolwire::Error::Server(e) if e.code == -32603),
        "{protocol}"
    );
    let two = client.call_tool("multi_input", json!({})).await.unwrap();
    assert_eq!(two.content[0].as_text(), Some("answered 2 questions"));
    let greeted = client
        .call_tool("test_tool_with_task", json!({}))
        .await
        .unwrap();
    assert_eq!(greeted.content[0].as_text(), Some("Hello, Ferris!"));
    let computed = client
        .call_tool("slow_compute", json!({"seconds": 0, "label": "zero"}))
        .await
        .unwrap();
    assert_eq!(computed.content[0].as_text(), Some("computed zero in 0 s"));
    client.close().await;

    let without = naming_client(ProtocolMode::Auto)
        .tasks(false)
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let refused = without
        .call_tool("failing_job", json!({}))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, toolwire::Error::Server(e) if e.code == -32021),
        "{refused}"
    );
    let in_call = without
        .call_tool("slow_compute", json!({"seconds": 0}))
        .await
        .unwrap();
    assert_eq!(in_call.content[0].as_text(), Some("computed job in 0 s"));
    without.close().await;
}

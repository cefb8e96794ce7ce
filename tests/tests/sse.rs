//! The 2024-11-05 HTTP+SSE transport against real servers on loopback: the reference server's
//! SSE front end (list, call, progress, list changes down the stream), and the scripted
//! server's, which also asks the client for input on the stream.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use toolwire::{Client, ConnectionState, HttpTransport, ReconnectPolicy, SseTransport};
use toolwire_refserver::{Options, serve_http, serve_http_again};

async fn reference() -> toolwire_refserver::HttpServer {
    let mut options = Options::default();
    options.server.sse = true;
    serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), options)
        .await
        .unwrap()
}

fn sse_url(server: &toolwire_refserver::HttpServer) -> String {
    format!("{}/sse", server.url())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_calls_and_progress_over_the_sse_transport() {
    let server = reference().await;
    let client = Client::builder("sse", "0")
        .connect_sse(HttpTransport::builder(sse_url(&server)))
        .unwrap();
    let outcome = client.list_tools().await.unwrap();
    assert!(outcome.commit.diff.added.iter().any(|n| &**n == "echo"));
    let negotiated = client.ready().await.unwrap();
    assert!(!negotiated.version.is_modern(), "{}", negotiated.version);

    let result = client
        .call_tool("echo", json!({"text": "over sse"}))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("over sse"));

    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    client
        .call_tool_with_progress("slow", json!({"steps": 3}), Default::default(), move |p| {
            sink.lock().unwrap().push(p.progress)
        })
        .await
        .unwrap();
    // Every step, in order: what the call sent on the way came down the stream before its
    // answer.
    assert_eq!(*seen.lock().unwrap(), [1.0, 2.0, 3.0]);

    // A list change travels down the same stream and reaches the cache.
    let mut changes = client.subscribe_tools();
    client.call_tool("unlock_files", json!({})).await.unwrap();
    let change = tokio::time::timeout(Duration::from_secs(10), changes.recv())
        .await
        .expect("the list change never came down the stream")
        .unwrap();
    assert!(
        change.diff.added.iter().any(|n| &**n == "read_file"),
        "{change:?}"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transport_names_its_endpoint_and_a_missing_stream_is_a_typed_error() {
    let server = reference().await;
    let transport: SseTransport = HttpTransport::builder(sse_url(&server))
        .build_sse()
        .unwrap();
    assert_eq!(transport.endpoint(), None, "nothing opened before use");
    let client = Client::builder("sse", "0")
        .connect(transport.clone())
        .unwrap();
    // Auto mode over `connect`: the probe is refused (-32601) and `initialize` follows.
    let result = client
        .call_tool("echo", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("x"));
    assert!(!client.ready().await.unwrap().version.is_modern());
    let endpoint = transport.endpoint().unwrap();
    assert!(
        endpoint.starts_with(&format!("{}/messages?session_id=", server.url())),
        "{endpoint}"
    );
    client.close().await;

    // A URL that serves no stream: the first use fails and says why.
    let client = Client::builder("sse", "0")
        .connect_sse(HttpTransport::builder(format!("{}/nothing", server.url())))
        .unwrap();
    let err = client.call_tool("echo", json!({})).await.unwrap_err();
    let chain = toolwire::ErrorChain(&err).to_string();
    assert!(chain.contains("404"), "{chain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_away_is_reconnected_over_a_new_stream() {
    let server = reference().await;
    let addr = server.addr();
    let client = Client::builder("sse", "0")
        .reconnect(ReconnectPolicy::new(
            20,
            Duration::from_millis(50),
            Duration::from_millis(200),
        ))
        .connect_sse(HttpTransport::builder(sse_url(&server)))
        .unwrap();
    assert_eq!(
        client
            .call_tool("echo", json!({"text": "one"}))
            .await
            .unwrap()
            .content[0]
            .as_text(),
        Some("one")
    );
    let mut state = client.watch_connection();
    drop(server);
    tokio::time::timeout(
        Duration::from_secs(10),
        state.wait_for(|s| matches!(s, ConnectionState::Reconnecting { .. })),
    )
    .await
    .expect("the end of the stream went unnoticed")
    .unwrap();
    // The same port again: a new server, a new stream, a new session.
    let mut options = Options::default();
    options.server.sse = true;
    let _again = serve_http_again(addr, options).await.unwrap();
    assert_eq!(
        client
            .call_tool("echo", json!({"text": "two"}))
            .await
            .unwrap()
            .content[0]
            .as_text(),
        Some("two")
    );
    client.close().await;
}

/// The server asks the client for input on the stream (`elicitation/create`); the handler's
/// answer goes back as a POST, and the call it held completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_requests_come_down_the_stream_and_answers_go_back_as_posts() {
    let peer =
        toolwire_test_support::sse::SsePeer::start(toolwire_test_support::Eras::Legacy).await;
    let capabilities: toolwire::ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {}})).unwrap();
    let client = Client::builder("sse", "0")
        .handler(capabilities, |request| {
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
        })
        .connect_sse(HttpTransport::builder(peer.url()))
        .unwrap();
    let result = client.call_tool("ask", json!({})).await.unwrap();
    assert_eq!(result.content[0].as_text(), Some("hello ferris"));
    assert_eq!(
        peer.posts(),
        4,
        "initialize, initialized, the call, and the handler's answer"
    );
    client.close().await;
}

/// `connect_http` given a server that speaks only HTTP+SSE: the `initialize` POST is refused,
/// the GET of the same URL opens the stream, and the client goes on over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_falls_back_to_sse_when_the_server_refuses_the_post() {
    // The reference server: 404 to a POST of its SSE URL.
    let server = reference().await;
    let client = Client::builder("sse", "0")
        .connect_http(HttpTransport::builder(sse_url(&server)))
        .unwrap();
    let result = client
        .call_tool("echo", json!({"text": "fell back"}))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("fell back"));
    assert!(!client.ready().await.unwrap().version.is_modern());
    client.close().await;

    // The scripted server: 405, as Python's SSE server answers.
    let peer =
        toolwire_test_support::sse::SsePeer::start(toolwire_test_support::Eras::Legacy).await;
    let transport = HttpTransport::builder(peer.url())
        .build_with_sse_fallback()
        .unwrap();
    let client = Client::builder("sse", "0")
        .connect(transport.clone())
        .unwrap();
    let result = client
        .call_tool("echo", json!({"text": "via 405"}))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("via 405"));
    assert!(transport.sse().is_some_and(|s| s.endpoint().is_some()));
    client.close().await;

    // A URL that serves neither: the refusal is the caller's error, nothing hangs.
    let client = Client::builder("sse", "0")
        .connect_http(HttpTransport::builder(format!("{}/nothing", server.url())))
        .unwrap();
    // A hang would be for ever; a machine under heavy load has been seen to need over 20 s.
    let err = tokio::time::timeout(Duration::from_secs(60), client.call_tool("echo", json!({})))
        .await
        .expect("the failed fallback hung")
        .unwrap_err();
    let chain = toolwire::ErrorChain(&err).to_string();
    assert!(chain.contains("404"), "{chain}");
}

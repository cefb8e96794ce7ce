//! Faults between client and server, through a TCP proxy: refused connections, responses cut
//! mid-way, stalls and delays. Every request completes once or fails with a typed error; a
//! request that is not retry-safe is never sent twice.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use toolwire::{Client, Error, HttpTransport, ProtocolMode, ProtocolVersion, RetryPolicy};
use toolwire_refserver::{Eras, Framing, Options, serve_http};
use toolwire_test_support::proxy::{Fault, FaultProxy, Rule};

async fn refserver(framing: Framing) -> toolwire_refserver::HttpServer {
    let mut o = Options::default();
    o.server.eras = Eras::Both;
    o.server.framing = framing;
    serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), o)
        .await
        .unwrap()
}

fn client(proxy: &FaultProxy, mode: ProtocolMode) -> Client {
    Client::builder("proxy", "0")
        .mode(mode)
        .timeouts(Duration::from_millis(1500), Duration::from_secs(5))
        .connect_http(
            HttpTransport::builder(proxy.url("/mcp")).retry_policy(RetryPolicy::new(
                3,
                Duration::from_millis(10),
                Duration::from_millis(50),
            )),
        )
        .unwrap()
}

#[tokio::test]
async fn refused_connections_are_retried_for_safe_requests_in_both_eras() {
    for mode in [
        ProtocolMode::Auto,
        ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
    ] {
        let server = refserver(Framing::Json).await;
        // The first two connections are refused.
        // The first two connections are refused.
        let proxy = FaultProxy::start(server.addr(), Rule::connections(Fault::Refuse, 2)).await;
        let client = client(&proxy, mode.clone());
        // server/discover is retry-safe and gets through on the third connection; initialize
        // is not retry-safe, so a pinned legacy client reports the refusal.
        let ready = client.ready().await;
        match &mode {
            ProtocolMode::Auto => {
                ready.unwrap();
                let r = client
                    .call_tool("echo", json!({"text": "through"}))
                    .await
                    .unwrap();
                assert_eq!(r.content[0].as_text(), Some("through"));
                assert!(proxy.connections() >= 3);
            }
            _ => {
                // initialize is not retry-safe: the refusal fails negotiation, with its cause.
                let err = ready.unwrap_err();
                assert!(err.to_string().contains("negotiation"), "{err}");
                assert_eq!(proxy.sent_count("\"initialize\""), 0);
            }
        }
        client.close().await;
    }
}

#[tokio::test]
async fn a_response_cut_mid_way_fails_the_call_once_and_the_client_goes_on() {
    let server = refserver(Framing::Json).await;
    // Connection 0 carries negotiation and the list; connection 1 is cut after 20 bytes of
    // its response; later ones pass.
    // The first answer to a deploy is cut after 20 bytes.
    let proxy = FaultProxy::start(
        server.addr(),
        Rule::on("\"name\":\"deploy\"", Fault::CutResponseAfter(20), 1),
    )
    .await;
    let client = client(&proxy, ProtocolMode::Auto);
    client.list_tools().await.unwrap();
    let (a, b) = tokio::join!(
        client.call_tool(
            "deploy",
            json!({"target": {"cluster": "blue", "priority": 1}})
        ),
        client.call_tool(
            "deploy",
            json!({"target": {"cluster": "green", "priority": 2}})
        ),
    );
    let failures: Vec<&Error> = [&a, &b]
        .into_iter()
        .filter_map(|r| r.as_ref().err())
        .collect();
    assert_eq!(failures.len(), 1, "{a:?} {b:?}");
    assert!(
        matches!(failures[0], Error::Connection(toolwire::ConnectionError::Undelivered(f)) if f.status.is_none()),
        "{}",
        failures[0]
    );
    // deploy is not retry-safe: each was sent exactly once.
    assert_eq!(proxy.sent_count("\"name\":\"deploy\""), 2);
    let r = client
        .call_tool("echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("after"));
    client.close().await;
}

#[tokio::test]
async fn a_stalled_response_times_out_and_the_next_call_works() {
    let server = refserver(Framing::Sse).await;
    let proxy =
        FaultProxy::start(server.addr(), Rule::on("\"text\":\"one\"", Fault::Stall, 1)).await;
    let client = client(&proxy, ProtocolMode::Auto);
    client.list_tools().await.unwrap();
    let (a, b) = tokio::join!(
        client.call_tool("echo", json!({"text": "one"})),
        client.call_tool("echo", json!({"text": "two"})),
    );
    assert!(matches!(a, Err(Error::Timeout(_))), "{a:?}");
    assert_eq!(b.unwrap().content[0].as_text(), Some("two"));
    let r = client
        .call_tool("echo", json!({"text": "three"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("three"));
    client.close().await;
}

#[tokio::test]
async fn delayed_responses_each_reach_the_call_whose_id_they_answer() {
    let server = refserver(Framing::Sse).await;
    let proxy = FaultProxy::start(
        server.addr(),
        Rule::connections(Fault::Delay(Duration::from_millis(30)), usize::MAX),
    )
    .await;
    let client = client(&proxy, ProtocolMode::Pinned(ProtocolVersion::V2025_11_25));
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .call_tool("echo", json!({"text": format!("d{i}")}))
                    .await
                    .map(|r| r.content[0].as_text().map(str::to_owned))
            })
        })
        .collect();
    // Eight calls in flight at once behind a delaying proxy: each gets the answer to its own
    // request (its own text back), whatever order the answers arrive in.
    for (i, c) in calls.into_iter().enumerate() {
        assert_eq!(c.await.unwrap().unwrap(), Some(format!("d{i}")));
    }
    client.close().await;
}

/// The proxy drops every connection between calls (as NATs and proxies drop idle ones): the
/// next calls open new connections and go on, in both eras (the legacy GET stream too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_cut_between_calls_are_opened_again_and_calls_go_on() {
    for mode in [
        ProtocolMode::Auto,
        ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
    ] {
        let server = refserver(Framing::Sse).await;
        let proxy = FaultProxy::start(server.addr(), Rule::connections(Fault::Pass, 0)).await;
        let client = client(&proxy, mode.clone());
        for round in 0..3 {
            let text = format!("round {round}");
            let r = client
                .call_tool("echo", json!({"text": text}))
                .await
                .unwrap_or_else(|e| panic!("{mode:?} round {round}: {e}"));
            assert_eq!(r.content[0].as_text(), Some(text.as_str()));
            let before = proxy.connections();
            proxy.cut_all();
            // Time for the close to reach the client's pool.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let r = client
                .call_tool("echo", json!({"text": "after the cut"}))
                .await
                .unwrap_or_else(|e| panic!("{mode:?} round {round}, after the cut: {e}"));
            assert_eq!(r.content[0].as_text(), Some("after the cut"));
            assert!(
                proxy.connections() > before,
                "no new connection after the cut"
            );
        }
        client.close().await;
    }
}

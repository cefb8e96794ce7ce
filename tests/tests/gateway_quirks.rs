//! Real clients' era quirks, replayed against the gateway: a version header that disagrees
//! with the body (the version the client first negotiated), `initialize` after a successful
//! `server/discover`, and no `server/discover` at all. Strict by default, as the spec says;
//! the first is served with `era_repair`, counted in `/metrics`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod gateway_common;

use gateway_common::*;
use serde_json::{Value, json};

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "quirky", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}})
}

fn echo_call(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "new__echo", "arguments": {"text": text}, "_meta": meta()}})
}

/// The headers of a modern `tools/call` of `new__echo`, with `version` as the version header.
fn headers(version: &str, name: &'static str) -> [(&'static str, String); 3] {
    [
        ("mcp-protocol-version", version.to_owned()),
        ("mcp-method", "tools/call".to_owned()),
        ("mcp-name", name.to_owned()),
    ]
}

fn borrowed<'a>(headers: &'a [(&'static str, String); 3]) -> Vec<(&'static str, &'a str)> {
    headers.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_header_that_disagrees_with_the_body_is_refused_strict_and_served_with_era_repair()
 {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new"]).await;
    let mut lenient = toolwire_server::Options::default();
    lenient.era_repair = true;
    let repairing = gateway.serve_http(LOOPBACK, lenient).await.unwrap();
    let quirky = headers("2025-11-25", "new__echo");

    // Strict: -32020, as the spec says.
    let (status, refused) = post(front.addr(), &borrowed(&quirky), &echo_call("hi")).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], -32020, "{refused}");

    // With the switch: served as the body says, twice, and counted each time.
    for text in ["first", "second"] {
        let (status, served) = post(repairing.addr(), &borrowed(&quirky), &echo_call(text)).await;
        assert_eq!(status, 200, "{served}");
        assert_eq!(served["result"]["content"][0]["text"], text, "{served}");
    }
    // Only the version is overlooked: a routing header that lies is still refused, and so is
    // a version header naming no version at all.
    for (version, name) in [("2025-11-25", "new__add"), ("yesterday", "new__echo")] {
        let lying = headers(version, name);
        let (status, refused) = post(repairing.addr(), &borrowed(&lying), &echo_call("x")).await;
        assert_eq!(status, 400, "{version} {name}: {refused}");
        assert_eq!(refused["error"]["code"], -32020, "{refused}");
    }
    let (_, _, metrics) = fetch(front.addr(), "/metrics", None).await;
    assert!(
        metrics.contains(r#"toolwire_gateway_era_repairs_total{kind="version-header"} 2"#),
        "{metrics}"
    );
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_after_a_successful_discover_and_calls_without_any_discover_are_served_strict() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new"]).await;
    // No discover at all: a modern call is stateless, served as it is.
    let modern = headers("2026-07-28", "new__echo");
    let (status, served) = post(front.addr(), &borrowed(&modern), &echo_call("direct")).await;
    assert_eq!(status, 200, "{served}");
    assert_eq!(served["result"]["content"][0]["text"], "direct");

    // Discover, then initialize anyway: the gateway serves both eras, so the legacy session
    // opens and works.
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": meta()}});
    let (status, discovered) = post(
        front.addr(),
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "server/discover"),
        ],
        &discover,
    )
    .await;
    assert_eq!(status, 200, "{discovered}");
    assert!(
        discovered["result"]["supportedVersions"].is_array(),
        "{discovered}"
    );
    let initialize = json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "quirky", "version": "0"}}});
    let (status, session, initialized) = exchange(front.addr(), &[], &initialize).await;
    assert_eq!(status, 200, "{initialized}");
    assert_eq!(initialized["result"]["protocolVersion"], "2025-11-25");
    let session = session.expect("a legacy session");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "new__echo", "arguments": {"text": "legacy after all"}}});
    let (status, answered) = post(
        front.addr(),
        &[
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &call,
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["result"]["content"][0]["text"], "legacy after all");
    gateway.host().shutdown().await;
}

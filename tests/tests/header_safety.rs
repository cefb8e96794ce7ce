//! Property: whatever a tool argument holds, it reaches the server through the real HTTP
//! transport as a printable-ASCII header (never CR or LF) that decodes back to the argument,
//! and the body carries the argument unchanged.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use toolwire::{Client, HttpTransport, Tool};
use toolwire_test_support::Eras;
use toolwire_test_support::http::{Framing, HttpPeer, scripted};

#[test]
fn any_argument_becomes_a_safe_header_over_real_http() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (peer, client) = rt.block_on(async {
        let peer = HttpPeer::start(scripted(Eras::Modern, Framing::Json)).await;
        let client = Client::builder("props", "0")
            .connect_http(HttpTransport::builder(peer.url()))
            .unwrap();
        let tool: Tool = serde_json::from_value(json!({"name": "execute_sql", "inputSchema": {
            "type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"}}}}))
        .unwrap();
        client.add_known_tools([tool]).unwrap();
        (peer, client)
    });
    let strings = prop_oneof![
        any::<String>(),
        "[ -~]{0,40}",
        "[\\r\\n\\t\\u{0}\\u{7f}\\u{85}\\u{2028} a]{0,20}",
        Just(" padded ".to_owned()),
        Just("=?base64?bm90IHJlYWxseQ==?=".to_owned()),
    ];
    let mut runner = TestRunner::new(Config {
        cases: 64,
        ..Config::default()
    });
    runner
        .run(&strings, |region| {
            let before = peer.calls("tools/call").len();
            let result = rt
                .block_on(client.call_tool("execute_sql", json!({"region": region, "query": "q"})));
            let result = result.map_err(|e| TestCaseError::fail(e.to_string()))?;
            let calls = peer.calls("tools/call");
            prop_assert_eq!(calls.len(), before + 1);
            let sent = calls.last().unwrap();
            let raw = sent
                .headers
                .get("mcp-param-region")
                .expect("the header went out");
            prop_assert!(
                raw.as_bytes().iter().all(|b| (0x20..=0x7e).contains(b)),
                "non-printable byte in {:?}",
                raw
            );
            let decoded = toolwire_headers::decode_value(raw.as_bytes())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&decoded, &region);
            let expected = format!("region={region} rows=1");
            prop_assert_eq!(result.content[0].as_text(), Some(expected.as_str()));
            Ok(())
        })
        .unwrap();
    rt.block_on(client.close());
}

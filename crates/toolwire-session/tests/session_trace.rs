//! The W3C trace context in `_meta`: on every request the session queues while it is set
//! (negotiation, listings and their later pages, calls, any other request), in both eras, and
//! on none after it is cleared.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

mod common;

#[allow(
    unused_imports,
    reason = "the imports every file of these tests shares"
)]
use common::*;
use toolwire_types::TraceContext;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const OTHER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn trace(parent: &str) -> Option<TraceContext> {
    TraceContext::new(parent, Some("vendor=1"), Some("user=alice"))
}

fn traceparent(request: &Value) -> Option<&str> {
    request["params"]["_meta"]["traceparent"].as_str()
}

#[test]
fn discover_and_initialize_carry_the_trace_context_set_before_start() {
    let mut modern = Peer::new(ProtocolMode::Auto, false);
    modern.session.set_trace_context(trace(PARENT));
    modern.session.start(modern.at(0));
    let (discover, _) = modern.sent();
    assert_eq!(discover["method"], "server/discover");
    assert_eq!(traceparent(&discover), Some(PARENT));
    assert_eq!(discover["params"]["_meta"]["tracestate"], "vendor=1");
    assert_eq!(discover["params"]["_meta"]["baggage"], "user=alice");

    let mut legacy = Peer::new(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25), false);
    legacy.session.set_trace_context(trace(PARENT));
    legacy.session.start(legacy.at(0));
    let (initialize, _) = legacy.sent();
    assert_eq!(initialize["method"], "initialize");
    assert_eq!(traceparent(&initialize), Some(PARENT));
}

/// A second start (another caller's `Start`, after the first) neither negotiates again nor
/// takes over the context the handshake carries.
#[test]
fn a_traced_start_after_the_first_changes_neither_the_handshake_nor_its_context() {
    let mut legacy = Peer::new(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25), false);
    legacy.session.start_traced(trace(PARENT), legacy.at(0));
    let (initialize, _) = legacy.sent();
    assert_eq!(traceparent(&initialize), Some(PARENT));
    legacy.session.start_traced(trace(OTHER), legacy.at(0));
    legacy.nothing_sent();
    // Held until ready, then sent with the context in force when it was asked.
    legacy
        .session
        .call_tool("a", None, CallOptions::default(), legacy.at(1))
        .unwrap();
    legacy.reply(&initialize, init_result("2025-11-25"), 2);
    let (initialized, _) = legacy.sent();
    assert_eq!(initialized["method"], "notifications/initialized");
    let (call, _) = legacy.sent();
    assert_eq!(call["method"], "tools/call");
    assert_eq!(traceparent(&call), Some(PARENT), "{call}");
}

#[test]
fn calls_and_listings_carry_the_context_in_force_and_none_once_it_is_cleared() {
    for mut p in [Peer::ready_modern(false), Peer::ready_legacy(false)] {
        p.session.set_trace_context(trace(PARENT));
        p.session
            .call_tool("a", None, CallOptions::default(), p.at(2))
            .unwrap();
        let (call, _) = p.sent();
        assert_eq!(traceparent(&call), Some(PARENT), "{call}");
        p.session.list_tools(p.at(2)).unwrap();
        let (list, _) = p.sent();
        assert_eq!(traceparent(&list), Some(PARENT), "{list}");

        p.session.set_trace_context(None);
        p.session
            .call_tool("b", None, CallOptions::default(), p.at(3))
            .unwrap();
        let (call, _) = p.sent();
        assert_eq!(traceparent(&call), None, "{call}");
        // The modern envelope is still there without it.
        if p.session.version().is_some_and(ProtocolVersion::is_modern) {
            assert!(call["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].is_string());
        }
    }
}

#[test]
fn a_listings_later_pages_carry_its_first_pages_context_not_the_one_in_force() {
    let mut p = Peer::ready_modern(false);
    p.session.set_trace_context(trace(PARENT));
    p.session.list_tools(p.at(2)).unwrap();
    let (first, _) = p.sent();
    // Another caller's request is queued before the first page's answer.
    p.session.set_trace_context(trace(OTHER));
    p.reply(
        &first,
        json!({"tools": [region_tool("one")], "nextCursor": "2"}),
        3,
    );
    let (second, _) = p.sent();
    assert_eq!(second["params"]["cursor"], "2");
    assert_eq!(traceparent(&second), Some(PARENT));
    // And the context in force is the other caller's again afterwards.
    p.session
        .call_tool("a", None, CallOptions::default(), p.at(4))
        .unwrap();
    let (call, _) = p.sent();
    assert_eq!(traceparent(&call), Some(OTHER));
}

#[test]
fn a_calls_own_traceparent_overrides_the_context_in_force() {
    let mut p = Peer::ready_modern(false);
    p.session.set_trace_context(trace(PARENT));
    p.session
        .call_tool(
            "a",
            None,
            CallOptions::default().with_meta("traceparent", OTHER),
            p.at(2),
        )
        .unwrap();
    let (call, _) = p.sent();
    assert_eq!(traceparent(&call), Some(OTHER));
    // The members the call did not give are the context's.
    assert_eq!(call["params"]["_meta"]["baggage"], "user=alice");
}

/// The value of header `name` among `headers`, if sent.
fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn over_http_the_context_also_goes_as_headers_and_a_calls_own_context_wins_there_too() {
    for mut p in [Peer::ready_modern(true), Peer::ready_legacy(true)] {
        p.session.set_trace_context(trace(PARENT));
        p.session
            .call_tool("a", None, CallOptions::default(), p.at(2))
            .unwrap();
        let (call, headers) = p.sent();
        assert_eq!(traceparent(&call), Some(PARENT));
        assert_eq!(header(&headers, "traceparent"), Some(PARENT), "{headers:?}");
        assert_eq!(header(&headers, "tracestate"), Some("vendor=1"));
        p.session.list_tools(p.at(2)).unwrap();
        let (_, headers) = p.sent();
        assert_eq!(header(&headers, "traceparent"), Some(PARENT), "{headers:?}");
        // A call's own context: in `_meta` and in the header alike.
        let own = CallOptions::default().with_meta("traceparent", OTHER);
        p.session.call_tool("b", None, own, p.at(3)).unwrap();
        let (call, headers) = p.sent();
        assert_eq!(traceparent(&call), Some(OTHER));
        assert_eq!(header(&headers, "traceparent"), Some(OTHER), "{headers:?}");
        // No context, no header.
        p.session.set_trace_context(None);
        p.session
            .call_tool("c", None, CallOptions::default(), p.at(4))
            .unwrap();
        let (_, headers) = p.sent();
        assert_eq!(header(&headers, "traceparent"), None, "{headers:?}");
    }
    // Over a pipe there are no headers: `_meta` alone carries it.
    let mut p = Peer::ready_modern(false);
    p.session.set_trace_context(trace(PARENT));
    p.session
        .call_tool("a", None, CallOptions::default(), p.at(2))
        .unwrap();
    let (call, headers) = p.sent();
    assert_eq!(traceparent(&call), Some(PARENT));
    assert!(headers.is_empty(), "{headers:?}");
}

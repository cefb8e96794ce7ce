//! The session against a scripted peer with a fake clock: no sockets, no sleeps.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire_cache::{RejectReason, ToolCache};
use toolwire_session::*;
use toolwire_types::{Capability, Implementation, ProtocolVersion, Tool};
use toolwire_wire::RequestFailure;

/// A session, its cache and the fake clock's origin.
struct Peer {
    session: Session,
    t0: Instant,
}

/// The test client's configuration: the listen stream and automatic refreshes off, so each
/// test sees only the messages of the behaviour it is about (`dynamic_config` turns them on).
fn config() -> SessionConfig {
    SessionConfig::new(Implementation::new("toolwire-test", "0.1.0"))
        .with_listen(false)
        .with_auto_refresh(false)
}

/// The defaults, as users get them.
fn dynamic_config() -> SessionConfig {
    SessionConfig::new(Implementation::new("toolwire-test", "0.1.0"))
}

impl Peer {
    fn new(mode: ProtocolMode, carries_headers: bool) -> Self {
        Self::with_config(config().with_mode(mode), carries_headers)
    }

    fn with_config(config: SessionConfig, carries_headers: bool) -> Self {
        Self {
            session: Session::new(config, Arc::new(ToolCache::default()), carries_headers),
            t0: Instant::now(),
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    /// The next message the session sends, as JSON, with its headers.
    fn sent(&mut self) -> (Value, Vec<(String, String)>) {
        let t = self
            .session
            .poll_transmit()
            .expect("the session should have sent something");
        let headers = t
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        (serde_json::from_slice(&t.body).unwrap(), headers)
    }

    fn nothing_sent(&mut self) {
        if let Some(t) = self.session.poll_transmit() {
            panic!("unexpected transmit {}", String::from_utf8_lossy(&t.body));
        }
    }

    fn reply(&mut self, request: &Value, result: Value, ms: u64) {
        let msg = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        self.session
            .handle_inbound(msg.to_string().as_bytes(), self.at(ms));
    }

    fn reply_error(&mut self, request: &Value, code: i64, data: Value, ms: u64) {
        let msg = json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": "no", "data": data}});
        self.session
            .handle_inbound(msg.to_string().as_bytes(), self.at(ms));
    }

    fn event(&mut self) -> Event {
        self.session.poll_event().expect("an event")
    }

    /// Negotiates the modern era.
    fn ready_modern(carries_headers: bool) -> Self {
        Self::ready_modern_with(config(), carries_headers)
    }

    /// Negotiates the modern era with `config`.
    fn ready_modern_with(config: SessionConfig, carries_headers: bool) -> Self {
        let mut p = Self::with_config(config, carries_headers);
        p.session.start(p.at(0));
        let (discover, _) = p.sent();
        p.reply(&discover, json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}), 1);
        assert!(matches!(p.event(), Event::Ready(_)));
        p
    }

    /// Negotiates the legacy era at 2025-11-25.
    fn ready_legacy(carries_headers: bool) -> Self {
        let mut p = Self::new(
            ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
            carries_headers,
        );
        p.session.start(p.at(0));
        let (init, _) = p.sent();
        p.reply(&init, init_result("2025-11-25"), 1);
        let (initialized, _) = p.sent();
        assert_eq!(initialized["method"], "notifications/initialized");
        assert!(matches!(p.event(), Event::Ready(_)));
        p
    }
}

fn init_result(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "legacy", "version": "1"}})
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn region_tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}}}})
}

#[test]
fn modern_negotiation_sends_the_envelope_and_headers() {
    let mut p = Peer::new(ProtocolMode::Auto, true);
    p.session.start(p.at(0));
    let (discover, headers) = p.sent();
    assert_eq!(discover["method"], "server/discover");
    let meta = &discover["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"tools": {"wait_for": true, "wait_for_timeout": 5000}}),
        "the settle barrier is on by default and advertised with the wait_for capability"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "toolwire-test"
    );
    assert_eq!(header(&headers, "MCP-Protocol-Version"), Some("2026-07-28"));
    assert_eq!(header(&headers, "Mcp-Method"), Some("server/discover"));
    p.reply(&discover, json!({"supportedVersions": ["2026-07-28"], "capabilities": {}, "serverInfo": {"name": "mock", "version": "0"}}), 5);
    let Event::Ready(n) = p.event() else { panic!() };
    assert_eq!(n.version, ProtocolVersion::V2026_07_28);
    assert_eq!(n.server_info.unwrap().name, "mock");
    p.nothing_sent();
}

#[test]
fn any_other_error_falls_back_to_initialize() {
    let mut p = Peer::new(ProtocolMode::Auto, true);
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    p.reply_error(&discover, -32601, Value::Null, 1);
    let (init, headers) = p.sent();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert!(init["params"].get("_meta").is_none());
    assert!(
        headers.is_empty(),
        "no version header before initialize: {headers:?}"
    );
    p.reply(&init, init_result("2025-06-18"), 2);
    let (initialized, headers) = p.sent();
    assert_eq!(
        initialized,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    );
    assert_eq!(header(&headers, "MCP-Protocol-Version"), Some("2025-06-18"));
    let Event::Ready(n) = p.event() else { panic!() };
    assert_eq!(n.version, ProtocolVersion::V2025_06_18);
}

#[test]
fn unsupported_version_with_only_legacy_versions_goes_legacy() {
    let mut p = Peer::new(ProtocolMode::Auto, true);
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    p.reply_error(
        &discover,
        -32022,
        json!({"supported": ["2025-03-26", "2024-11-05"], "requested": "2026-07-28"}),
        1,
    );
    let (init, _) = p.sent();
    assert_eq!(
        init["params"]["protocolVersion"], "2025-03-26",
        "the newest one both speak"
    );
}

#[test]
fn a_silent_probe_falls_back_after_its_timeout() {
    let mut p = Peer::new(ProtocolMode::Auto, false);
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    assert_eq!(p.session.poll_timeout(), Some(p.at(5000)));
    p.session.handle_timeout(p.at(4999));
    p.nothing_sent();
    p.session.handle_timeout(p.at(5000));
    let (init, _) = p.sent();
    assert_eq!(init["method"], "initialize");
    // The probe's late answer is dropped.
    p.reply(
        &discover,
        json!({"supportedVersions": ["2026-07-28"], "capabilities": {}}),
        6000,
    );
    assert!(p.session.poll_event().is_none());
}

#[test]
fn modern_refusals_do_not_fall_back() {
    for code in [-32020, -32021] {
        let mut p = Peer::new(ProtocolMode::Auto, true);
        p.session.start(p.at(0));
        let (discover, _) = p.sent();
        p.reply_error(&discover, code, Value::Null, 1);
        let Event::Failed(e) = p.event() else {
            panic!()
        };
        assert!(
            matches!(
                e,
                SessionError::Refused {
                    method: "server/discover",
                    ..
                }
            ),
            "{e}"
        );
        p.nothing_sent();
    }
}

#[test]
fn pinned_modes() {
    let mut p = Peer::new(ProtocolMode::Pinned(ProtocolVersion::V2026_07_28), true);
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    p.reply_error(&discover, -32601, Value::Null, 1);
    assert!(
        matches!(p.event(), Event::Failed(_)),
        "pinned modern: no fallback"
    );

    let mut p = Peer::new(ProtocolMode::Pinned(ProtocolVersion::V2024_11_05), false);
    p.session.start(p.at(0));
    let (init, _) = p.sent();
    assert_eq!(init["params"]["protocolVersion"], "2024-11-05");
    p.reply(&init, init_result("1999-01-01"), 1);
    let Event::Failed(e) = p.event() else {
        panic!()
    };
    assert_eq!(
        e.to_string(),
        "the server chose protocol version 1999-01-01, which this client does not speak"
    );
}

#[test]
fn nothing_is_sent_before_ready() {
    let mut p = Peer::new(ProtocolMode::Auto, true);
    assert!(matches!(
        p.session.list_tools(p.at(0)),
        Err(RequestError::NotReady)
    ));
    assert!(matches!(
        p.session
            .call_tool("x", None, CallOptions::default(), p.at(0)),
        Err(RequestError::NotReady)
    ));
}

#[test]
fn tools_list_walks_pages_into_the_cache() {
    let mut p = Peer::ready_modern(true);
    let op = p.session.list_tools(p.at(10)).unwrap();
    let (page1, headers) = p.sent();
    assert_eq!(page1["method"], "tools/list");
    assert!(page1["params"].get("cursor").is_none());
    assert_eq!(
        page1["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(header(&headers, "Mcp-Method"), Some("tools/list"));
    p.reply(
        &page1,
        json!({"tools": [region_tool("execute_sql")], "nextCursor": ""}),
        11,
    );
    assert!(
        p.session.cache().load().is_empty(),
        "nothing reaches the cache before the last page"
    );
    let (page2, _) = p.sent();
    assert_eq!(page2["params"]["cursor"], "", "an empty cursor is a cursor");
    p.reply(&page2, json!({"tools": [{"name": "bad", "inputSchema": {"properties": {"r": {"type": "object", "x-mcp-header": "R"}}}}, {"name": "plain", "inputSchema": {"type": "object"}}]}), 12);
    let Event::ToolsListed { op: done, result } = p.event() else {
        panic!()
    };
    assert_eq!(done, op);
    let outcome = result.unwrap();
    assert_eq!(outcome.commit.diff.added, ["execute_sql", "plain"]);
    assert_eq!(outcome.rejected.len(), 1);
    assert_eq!(p.session.cache().load().names(), ["execute_sql", "plain"]);
}

#[test]
fn a_malformed_definition_is_rejected_alone_and_a_malformed_page_fails_the_walk() {
    let mut p = Peer::ready_modern(true);
    let op = p.session.list_tools(p.at(10)).unwrap();
    let (page1, _) = p.sent();
    p.reply(
        &page1,
        json!({"tools": [region_tool("a"), {"name": "broken"}], "nextCursor": "c1"}),
        11,
    );
    let (page2, _) = p.sent();
    // Positions count across pages: `b`'s bad title is the listing's fourth definition.
    p.reply(
        &page2,
        json!({"tools": [region_tool("c"), {"name": "b", "title": 5, "inputSchema": {}}]}),
        12,
    );
    let Event::ToolsListed { op: done, result } = p.event() else {
        panic!()
    };
    assert_eq!(done, op);
    let outcome = result.unwrap();
    assert_eq!(p.session.cache().load().names(), ["a", "c"]);
    let rejected: Vec<_> = outcome
        .rejected
        .iter()
        .map(|r| (r.index, r.name.as_str()))
        .collect();
    assert_eq!(rejected, [(1, "broken"), (3, "b")]);
    assert!(
        matches!(&outcome.rejected[0].reason, RejectReason::Malformed(e) if e.contains("inputSchema")),
        "{:?}",
        outcome.rejected[0].reason
    );

    // A page whose own shape is wrong fails the walk with the strict decoder's error and
    // leaves the cache as it was.
    p.session.list_tools(p.at(20)).unwrap();
    let (page, _) = p.sent();
    p.reply(
        &page,
        json!({"tools": [region_tool("z")], "nextCursor": 7}),
        21,
    );
    let Event::ToolsListed { result, .. } = p.event() else {
        panic!()
    };
    assert!(
        matches!(&result, Err(RequestError::Decode(e)) if e.to_string().contains("tools/list")),
        "{result:?}"
    );
    assert_eq!(p.session.cache().load().names(), ["a", "c"]);
}

#[test]
fn a_repeated_cursor_stops_the_walk_and_changes_nothing() {
    let mut p = Peer::ready_modern(true);
    p.session.list_tools(p.at(10)).unwrap();
    let (page1, _) = p.sent();
    p.reply(
        &page1,
        json!({"tools": [region_tool("a")], "nextCursor": "c1"}),
        11,
    );
    let (page2, _) = p.sent();
    p.reply(
        &page2,
        json!({"tools": [region_tool("b")], "nextCursor": "c1"}),
        12,
    );
    let Event::ToolsListed { result, .. } = p.event() else {
        panic!()
    };
    assert!(matches!(result, Err(RequestError::RepeatedCursor(c)) if c == "c1"));
    assert!(p.session.cache().load().is_empty());
    assert_eq!(p.session.cache().load().generation(), 0);
}

#[test]
fn an_endless_listing_hits_the_page_cap() {
    let config = config().with_max_list_pages(3);
    let mut p = Peer::ready_modern_with(config, true);
    p.session.list_tools(p.at(2)).unwrap();
    for i in 0..3 {
        let (page, _) = p.sent();
        p.reply(
            &page,
            json!({"tools": [], "nextCursor": format!("c{i}")}),
            3,
        );
    }
    let Event::ToolsListed { result, .. } = p.event() else {
        panic!()
    };
    assert!(matches!(result, Err(RequestError::TooManyPages(3))));
}

/// Collects `warn!` messages (a minimal `tracing` subscriber).
#[derive(Default, Clone)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message<'a>(&'a mut String);
        impl tracing::field::Visit for Message<'_> {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0.push_str(&format!("{value:?}"));
                }
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = String::new();
            event.record(&mut Message(&mut text));
            self.0.lock().unwrap().push(text);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn call(
    p: &mut Peer,
    name: &str,
    args: Value,
    options: CallOptions,
) -> (Value, Vec<(String, String)>, bool, Vec<String>) {
    let warnings = Warnings::default();
    tracing::subscriber::with_default(warnings.clone(), || {
        p.session
            .call_tool(name, args.as_object().cloned(), options, p.at(20))
            .unwrap();
    });
    let t = p.session.poll_transmit().unwrap();
    let headers = t
        .headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    let w = warnings.0.lock().unwrap().clone();
    (
        serde_json::from_slice(&t.body).unwrap(),
        headers,
        t.retry == toolwire_wire::RetryClass::Safe,
        w,
    )
}

#[test]
fn every_modern_call_carries_the_whole_envelope() {
    let mut p = Peer::ready_modern(false);
    let mut metas = Vec::new();
    for _ in 0..3 {
        p.session
            .call_tool("x", None, CallOptions::default(), p.at(1))
            .unwrap();
        let (request, _) = p.sent();
        metas.push(request["params"]["_meta"].clone());
    }
    // The first call renders the envelope, the others reuse its bytes: all three the same.
    assert_eq!(metas[0], metas[1]);
    assert_eq!(metas[1], metas[2]);
    assert_eq!(
        metas[0]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        metas[0]["io.modelcontextprotocol/clientInfo"]["name"],
        "toolwire-test"
    );
    assert!(metas[0]["io.modelcontextprotocol/clientCapabilities"].is_object());
    assert_eq!(metas[0].as_object().unwrap().len(), 3, "{}", metas[0]);
}

#[test]
fn calls_carry_headers_from_the_cached_plan() {
    let mut p = Peer::ready_modern(true);
    let tool: Tool = serde_json::from_value(region_tool("execute_sql")).unwrap();
    p.session.cache().add_known_tools([tool]).unwrap();
    let (body, headers, retry, warnings) = call(
        &mut p,
        "execute_sql",
        json!({"region": "us-west-2", "query": "SELECT 1"}),
        CallOptions::default(),
    );
    assert_eq!(body["params"]["name"], "execute_sql");
    assert_eq!(
        body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    let names: Vec<_> = headers.iter().map(|(n, v)| format!("{n}: {v}")).collect();
    assert_eq!(
        names,
        [
            // As they travel: `http` names are lower case.
            "mcp-protocol-version: 2026-07-28",
            "mcp-method: tools/call",
            "mcp-name: execute_sql",
            "mcp-param-region: us-west-2"
        ]
    );
    assert!(!retry, "not annotated read-only or idempotent");
    assert!(warnings.is_empty());
}

#[test]
fn an_unknown_tool_over_http_warns_and_over_stdio_does_not() {
    let mut p = Peer::ready_modern(true);
    let (_, headers, _, warnings) = call(
        &mut p,
        "mystery",
        json!({"region": "eu"}),
        CallOptions::default(),
    );
    assert_eq!(header(&headers, "Mcp-Name"), Some("mystery"));
    assert!(header(&headers, "Mcp-Param-Region").is_none());
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("`mystery`") && warnings[0].contains("add_known_tools"),
        "{warnings:?}"
    );

    let mut p = Peer::ready_modern(false);
    let (_, _, _, warnings) = call(&mut p, "mystery", json!({}), CallOptions::default());
    assert!(warnings.is_empty(), "no warning on stdio");
}

#[test]
fn per_call_definitions_and_header_maps_leave_the_cache_alone() {
    let mut p = Peer::ready_modern(true);
    let tool: Tool = serde_json::from_value(region_tool("execute_sql")).unwrap();
    let (_, headers, _, warnings) = call(
        &mut p,
        "execute_sql",
        json!({"region": "ap"}),
        CallOptions::default().with_tool(tool),
    );
    assert_eq!(header(&headers, "Mcp-Param-Region"), Some("ap"));
    assert!(warnings.is_empty());
    let map = [("tenant".to_owned(), "Tenant".to_owned())];
    let (_, headers, _, _) = call(
        &mut p,
        "anything",
        json!({"tenant": "acme"}),
        CallOptions::default().with_header_map(map),
    );
    assert_eq!(header(&headers, "Mcp-Param-Tenant"), Some("acme"));
    assert!(p.session.cache().load().is_empty());
    // A bad per-call definition is the caller's error, before anything is sent.
    let bad: Tool = serde_json::from_value(json!({"name": "b", "inputSchema": {"properties": {"x": {"type": "number", "x-mcp-header": "X"}}}})).unwrap();
    let err = p
        .session
        .call_tool("b", None, CallOptions::default().with_tool(bad), p.at(30))
        .unwrap_err();
    assert!(matches!(err, RequestError::InvalidTool(_)));
    p.nothing_sent();
}

#[test]
fn a_bad_argument_fails_the_call_before_sending() {
    let mut p = Peer::ready_modern(true);
    let tool: Tool = serde_json::from_value(json!({"name": "n", "inputSchema": {"properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}})).unwrap();
    p.session.cache().add_known_tools([tool]).unwrap();
    let err = p
        .session
        .call_tool(
            "n",
            json!({"n": 1.5}).as_object().cloned(),
            CallOptions::default(),
            p.at(1),
        )
        .unwrap_err();
    assert!(matches!(err, RequestError::Argument(_)), "{err}");
    p.nothing_sent();
}

#[test]
fn over_stdio_annotations_build_no_headers_and_refuse_no_argument() {
    // stdio "MAY ignore x-mcp-header annotations entirely": nothing is built for headers the
    // transport cannot send, so the argument HTTP refuses for its header goes to the server.
    let mut p = Peer::ready_modern(false);
    let n: Tool = serde_json::from_value(json!({"name": "n", "inputSchema": {"properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}})).unwrap();
    let region: Tool = serde_json::from_value(region_tool("execute_sql")).unwrap();
    p.session.cache().add_known_tools([n, region]).unwrap();
    let (body, headers, _, warnings) = call(&mut p, "n", json!({"n": 1.5}), CallOptions::default());
    assert_eq!(body["params"]["arguments"]["n"], 1.5);
    assert!(headers.is_empty(), "{headers:?}");
    assert!(warnings.is_empty());
    let (body, headers, _, _) = call(
        &mut p,
        "execute_sql",
        json!({"region": "us-west-2"}),
        CallOptions::default(),
    );
    assert_eq!(
        body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "the envelope still says the version"
    );
    assert!(headers.is_empty(), "{headers:?}");
}

#[test]
fn retry_class_follows_annotations_or_the_caller() {
    let mut p = Peer::ready_modern(true);
    let mut read_only = region_tool("read");
    read_only["annotations"] = json!({"readOnlyHint": true});
    p.session
        .cache()
        .add_known_tools([serde_json::from_value::<Tool>(read_only).unwrap()])
        .unwrap();
    assert!(call(&mut p, "read", json!({}), CallOptions::default()).2);
    assert!(
        !call(
            &mut p,
            "read",
            json!({}),
            CallOptions::default().with_retry_safe(false)
        )
        .2
    );
    assert!(
        call(
            &mut p,
            "other",
            json!({}),
            CallOptions::default().with_retry_safe(true)
        )
        .2
    );
}

#[test]
fn a_headerless_transport_gets_no_version_header_on_any_handshake_message() {
    // Over stdio nothing carries MCP-Protocol-Version, `notifications/initialized` included;
    // over HTTP everything after `initialize` does.
    for carries_headers in [false, true] {
        let mut p = Peer::new(
            ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
            carries_headers,
        );
        p.session.start(p.at(0));
        let (init, headers) = p.sent();
        assert!(headers.is_empty(), "initialize: {headers:?}");
        p.reply(&init, init_result("2025-11-25"), 1);
        let (initialized, headers) = p.sent();
        assert_eq!(initialized["method"], "notifications/initialized");
        let expected = carries_headers.then_some("2025-11-25");
        assert_eq!(
            header(&headers, "MCP-Protocol-Version"),
            expected,
            "carries_headers = {carries_headers}: {headers:?}"
        );
        if !carries_headers {
            assert!(headers.is_empty(), "{headers:?}");
        }
    }
}

#[test]
fn legacy_calls_carry_no_sep2243_headers_and_no_envelope() {
    let mut p = Peer::ready_legacy(true);
    let tool: Tool = serde_json::from_value(region_tool("execute_sql")).unwrap();
    p.session.cache().add_known_tools([tool]).unwrap();
    let (body, headers, _, warnings) = call(
        &mut p,
        "execute_sql",
        json!({"region": "us"}),
        CallOptions::default(),
    );
    assert!(body["params"].get("_meta").is_none());
    let names: Vec<_> = headers.iter().map(|(n, v)| format!("{n}: {v}")).collect();
    assert_eq!(names, ["mcp-protocol-version: 2025-11-25"]);
    assert!(warnings.is_empty());
    // Unknown tools do not warn either: no version of this era sends Mcp-Param-*.
    let (_, _, _, warnings) = call(&mut p, "unknown", json!({}), CallOptions::default());
    assert!(warnings.is_empty());
}

#[test]
fn deadlines_expire_and_late_answers_are_dropped() {
    let mut p = Peer::ready_modern(false);
    let op = p
        .session
        .call_tool(
            "slow",
            None,
            CallOptions::default().with_timeout(Duration::from_secs(1)),
            p.at(100),
        )
        .unwrap();
    let (request, _) = p.sent();
    assert_eq!(p.session.poll_timeout(), Some(p.at(1100)));
    p.session.handle_timeout(p.at(1100));
    let Event::Completed { op: done, result } = p.event() else {
        panic!()
    };
    assert_eq!(done, op);
    assert!(matches!(result, Err(RequestError::Timeout(d)) if d == Duration::from_secs(1)));
    p.reply(&request, json!({"content": []}), 1200);
    assert!(p.session.poll_event().is_none());
    assert_eq!(p.session.poll_timeout(), None);
}

#[test]
fn results_and_errors_reach_their_operation() {
    let mut p = Peer::ready_modern(false);
    let a = p
        .session
        .call_tool("a", None, CallOptions::default(), p.at(1))
        .unwrap();
    let b = p
        .session
        .call_tool("b", None, CallOptions::default(), p.at(1))
        .unwrap();
    let (ra, _) = p.sent();
    let (rb, _) = p.sent();
    p.reply_error(&rb, -32602, json!({"tool": "b"}), 2);
    p.reply(
        &ra,
        json!({"content": [{"type": "text", "text": "A"}], "isError": true}),
        3,
    );
    let Event::Completed { op, result } = p.event() else {
        panic!()
    };
    assert_eq!(op, b);
    assert!(matches!(result, Err(RequestError::Server { error }) if error.code == -32602));
    let Event::Completed { op, result } = p.event() else {
        panic!()
    };
    assert_eq!(op, a);
    assert!(
        result.unwrap().get().contains("\"isError\":true"),
        "a tool error is a result, not an error"
    );
}

#[test]
fn server_ping_is_answered_and_list_changed_marks_the_cache_stale() {
    let mut p = Peer::ready_legacy(false);
    p.session
        .handle_inbound(br#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#, p.at(5));
    let (pong, _) = p.sent();
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 0, "result": {}}));
    p.session.handle_inbound(
        br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        p.at(6),
    );
    assert!(p.session.cache().load().is_stale());
    assert!(
        matches!(p.event(), Event::Notification(n) if n.method == "notifications/tools/list_changed")
    );
    // A method this client does not know is refused there and then (-32601), never handed up.
    p.session.handle_inbound(
        br#"{"jsonrpc":"2.0","id":"s1","method":"vendor/custom","params":{}}"#,
        p.at(7),
    );
    let (refused, _) = p.sent();
    assert_eq!(refused["id"], "s1");
    assert_eq!(refused["error"]["code"], -32601);
    p.session.handle_inbound(b"not json", p.at(8));
    assert!(matches!(p.event(), Event::Malformed(_)));
}

#[test]
fn progress_reaches_its_call_and_pushes_the_deadline_up_to_a_maximum() {
    let mut config = config();
    config.max_request_time = Duration::from_secs(3);
    let mut p = Peer::ready_modern_with(config, false);
    let options = CallOptions::default()
        .with_progress()
        .with_timeout(Duration::from_secs(1));
    let op = p.session.call_tool("slow", None, options, p.at(0)).unwrap();
    let (request, _) = p.sent();
    let token = request["params"]["_meta"]["progressToken"].clone();
    assert_eq!(token, request["id"], "the token is the request's id");
    assert_eq!(
        request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
        "the envelope travels beside the token"
    );
    let progress = |ms: u64, n: u64, p: &mut Peer| {
        let msg = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n, "total": 10}});
        p.session
            .handle_inbound(msg.to_string().as_bytes(), p.at(ms));
    };
    progress(900, 1, &mut p);
    let Event::Progress { op: got, params } = p.event() else {
        panic!()
    };
    assert_eq!((got, params.progress, params.total), (op, 1.0, Some(10.0)));
    assert_eq!(
        p.session.poll_timeout(),
        Some(p.at(1900)),
        "reset by progress"
    );
    progress(1800, 2, &mut p);
    progress(2700, 3, &mut p);
    assert_eq!(
        p.session.poll_timeout(),
        Some(p.at(3000)),
        "never past the hard maximum"
    );
    p.session.handle_timeout(p.at(3000));
    assert!(matches!(p.event(), Event::Progress { .. }));
    assert!(matches!(p.event(), Event::Progress { .. }));
    assert!(matches!(
        p.event(),
        Event::Completed {
            result: Err(RequestError::Timeout(_)),
            ..
        }
    ));
    // Progress for a finished request is passed up as a plain notification.
    progress(3100, 4, &mut p);
    assert!(matches!(p.event(), Event::Notification(n) if n.method == "notifications/progress"));
}

#[test]
fn cancelling_sends_notifications_where_the_era_and_transport_call_for_it() {
    // Modern over stdio and legacy anywhere: notifications/cancelled.
    for (mut p, expects_notification) in [
        (Peer::ready_modern(false), true),
        (Peer::ready_legacy(true), true),
        (Peer::ready_modern(true), false),
    ] {
        let op = p
            .session
            .call_tool("long", None, CallOptions::default(), p.at(1))
            .unwrap();
        let (request, _) = p.sent();
        let id = p
            .session
            .cancel(op, Some("user pressed stop"))
            .expect("pending");
        assert_eq!(serde_json::to_value(&id).unwrap(), request["id"]);
        assert!(
            matches!(p.event(), Event::Completed { op: o, result: Err(RequestError::Cancelled) } if o == op)
        );
        if expects_notification {
            let (note, _) = p.sent();
            assert_eq!(note["method"], "notifications/cancelled");
            assert_eq!(note["params"]["requestId"], request["id"]);
            assert_eq!(note["params"]["reason"], "user pressed stop");
        } else {
            p.nothing_sent();
        }
        // A late answer is dropped, and cancelling again does nothing.
        p.reply(&request, json!({"content": []}), 2);
        assert!(p.session.poll_event().is_none());
        assert_eq!(p.session.cancel(op, None), None);
    }
}

#[test]
fn undeclared_capabilities_are_refused_and_declared_ones_handed_up() {
    let mut p = Peer::ready_legacy(true);
    p.session.handle_inbound(br#"{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}"#, p.at(2));
    let (answer, headers) = p.sent();
    assert_eq!(answer["id"], 0);
    assert_eq!(answer["error"]["code"], -32601);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`sampling`")
    );
    assert_eq!(header(&headers, "MCP-Protocol-Version"), Some("2025-11-25"));
    assert!(p.session.poll_event().is_none());

    let caps: toolwire_types::ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {}})).unwrap();
    let config = config()
        .with_mode(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25))
        .with_capabilities(caps);
    let mut p = Peer::with_config(config, false);
    p.session.start(p.at(0));
    let (init, _) = p.sent();
    assert_eq!(
        init["params"]["capabilities"],
        json!({"elicitation": {}, "tools": {"wait_for": true, "wait_for_timeout": 5000}})
    );
    p.reply(&init, init_result("2025-11-25"), 1);
    p.sent();
    p.event();
    p.session.handle_inbound(br#"{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"message":"name?"}}"#, p.at(2));
    let Event::ServerRequest { id, request } = p.event() else {
        panic!()
    };
    assert!(matches!(request, toolwire_types::ServerRequest::Elicit(e) if e.message == "name?"));
    p.session
        .respond(
            &id,
            Ok(&json!({"action": "accept", "content": {"name": "octocat"}})),
        )
        .unwrap();
    let (answer, _) = p.sent();
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": "e1", "result": {"action": "accept", "content": {"name": "octocat"}}})
    );
}

#[test]
fn legacy_servers_are_held_to_their_declared_capabilities() {
    // The legacy server here declares tools only.
    let mut p = Peer::ready_legacy(true);
    p.session.list_tools(p.at(1)).unwrap();
    let err = p
        .session
        .request::<toolwire_types::methods::method::ListPrompts>(Default::default(), p.at(1))
        .unwrap_err();
    assert!(
        matches!(err, RequestError::NotAdvertised(Capability::Prompts)),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "the server did not declare the `prompts` capability"
    );
    let err = p
        .session
        .request::<toolwire_types::methods::method::Subscribe>(
            serde_json::from_value(json!({"uri": "file:///a"})).unwrap(),
            p.at(1),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        RequestError::NotAdvertised(Capability::ResourceSubscribe)
    ));
    // Modern servers answer for themselves.
    let mut p = Peer::ready_modern(true);
    p.session
        .request::<toolwire_types::methods::method::ListPrompts>(Default::default(), p.at(1))
        .unwrap();
}

// ---- Dynamic tools: auto-refresh, the settle barrier, header-mismatch recovery ----

impl Peer {
    /// Every event so far.
    fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.session.poll_event()).collect()
    }

    /// Negotiates the modern era with the defaults and answers the listen request with its
    /// acknowledgement; returns the listen request.
    fn ready_dynamic() -> (Self, Value) {
        let mut p = Self::ready_modern_with(dynamic_config(), true);
        let (listen, headers) = p.sent();
        assert_eq!(listen["method"], "subscriptions/listen");
        assert_eq!(
            listen["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        assert_eq!(header(&headers, "Mcp-Method"), Some("subscriptions/listen"));
        p.listen_ack(&listen, 2);
        p.nothing_sent();
        p.events();
        (p, listen)
    }

    fn listen_ack(&mut self, listen: &Value, ms: u64) {
        let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": true},
                "_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]}}});
        self.session
            .handle_inbound(ack.to_string().as_bytes(), self.at(ms));
    }

    fn list_changed(&mut self, listen: &Value, ms: u64) {
        let n = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]}}});
        self.session
            .handle_inbound(n.to_string().as_bytes(), self.at(ms));
    }

    /// Expects a `tools/list` and answers it with `tools`.
    fn answer_list(&mut self, tools: Value, ms: u64) {
        let (list, _) = self.sent();
        assert_eq!(list["method"], "tools/list");
        self.reply(&list, json!({ "tools": tools }), ms);
    }

    fn completed(&mut self, op: OpId) -> Option<Result<String, String>> {
        self.events().into_iter().find_map(|e| match e {
            Event::Completed { op: o, result } if o == op => Some(
                result
                    .map(|r| r.get().to_owned())
                    .map_err(|e| e.to_string()),
            ),
            _ => None,
        })
    }
}

/// Starts a call; its request is the next transmit.
fn start_call(p: &mut Peer, name: &str, args: Value, options: CallOptions) -> OpId {
    p.session
        .call_tool(name, args.as_object().cloned(), options, p.at(5))
        .unwrap()
}

fn named(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

fn unlock_result(field: &str, names: &[&str]) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": "ok"}]});
    r[field] = json!(names);
    r
}

#[test]
fn the_barrier_holds_a_result_until_every_registered_tool_is_listed() {
    let (mut p, listen) = Peer::ready_dynamic();
    let op = start_call(&mut p, "unlock_files", json!({}), CallOptions::default());
    let (request, _) = p.sent();
    p.reply(
        &request,
        unlock_result("registers", &["read_file", "write_file"]),
        10,
    );
    // The server announces list changes on the listen stream: no refresh until it does.
    p.nothing_sent();
    assert_eq!(p.completed(op), None);
    p.list_changed(&listen, 20);
    p.answer_list(json!([named("unlock_files"), named("read_file")]), 30);
    assert_eq!(
        p.completed(op),
        None,
        "partial: still waiting for write_file"
    );
    p.list_changed(&listen, 40);
    p.answer_list(
        json!([
            named("unlock_files"),
            named("read_file"),
            named("write_file")
        ]),
        50,
    );
    let result = p.completed(op).expect("released").unwrap();
    assert!(result.contains("write_file"));
    assert!(p.session.cache().load().contains("write_file"));
}

#[test]
fn the_barrier_gives_up_at_its_timeout_and_says_so() {
    let (mut p, _listen) = Peer::ready_dynamic();
    let op = start_call(&mut p, "unlock_files", json!({}), CallOptions::default());
    let (request, _) = p.sent();
    p.reply(&request, unlock_result("registers", &["never"]), 10);
    assert_eq!(p.session.poll_timeout(), Some(p.at(10 + 5000)));
    p.session.handle_timeout(p.at(5009));
    assert_eq!(p.completed(op), None);
    p.session.handle_timeout(p.at(5010));
    let events = p.events();
    assert!(matches!(events[0], Event::SettleTimedOut { op: o } if o == op));
    assert!(matches!(&events[1], Event::Completed { op: o, result: Ok(_) } if *o == op));
}

#[test]
fn unregistered_tools_must_be_gone_and_updates_must_change_the_definition() {
    let (mut p, listen) = Peer::ready_dynamic();
    p.session.list_tools(p.at(3)).unwrap();
    p.answer_list(json!([named("temp_tool"), named("foo_tool")]), 4);
    p.events();

    let op = start_call(&mut p, "navigate", json!({}), CallOptions::default());
    let (request, _) = p.sent();
    let mut result = unlock_result("unregisters", &["temp_tool"]);
    result["updates"] = json!(["foo_tool"]);
    p.reply(&request, result, 10);
    // temp_tool gone, but foo_tool's definition is the same: not yet.
    p.list_changed(&listen, 20);
    p.answer_list(json!([named("foo_tool")]), 30);
    assert_eq!(p.completed(op), None);
    // foo_tool's schema changes: released.
    p.list_changed(&listen, 40);
    p.answer_list(
        json!([{"name": "foo_tool", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}]),
        50,
    );
    assert!(p.completed(op).expect("released").is_ok());
}

#[test]
fn the_barrier_can_be_turned_off_per_call_and_per_session() {
    let (mut p, _listen) = Peer::ready_dynamic();
    let op = start_call(
        &mut p,
        "unlock_files",
        json!({}),
        CallOptions::default().with_settle(false),
    );
    let (request, _) = p.sent();
    p.reply(&request, unlock_result("registers", &["read_file"]), 10);
    assert!(p.completed(op).expect("at once").is_ok());

    let config = dynamic_config()
        .with_settle(SettleMode::Off, Duration::from_secs(5))
        .with_listen(false);
    let mut p = Peer::ready_modern_with(config, true);
    let op = start_call(&mut p, "unlock_files", json!({}), CallOptions::default());
    let (request, _) = p.sent();
    p.reply(&request, unlock_result("registers", &["read_file"]), 10);
    assert!(p.completed(op).expect("at once").is_ok());
}

#[test]
fn a_server_that_does_not_announce_list_changes_is_asked_at_once() {
    // The listen stream is off, so no list change will come: the barrier fetches the list.
    let mut p = Peer::ready_modern_with(dynamic_config().with_listen(false), true);
    let op = start_call(&mut p, "unlock_files", json!({}), CallOptions::default());
    let (request, _) = p.sent();
    p.reply(&request, unlock_result("registers", &["read_file"]), 10);
    p.answer_list(json!([named("read_file")]), 20);
    assert!(p.completed(op).expect("released").is_ok());
}

#[test]
fn a_burst_of_list_changes_causes_one_more_refresh() {
    let (mut p, listen) = Peer::ready_dynamic();
    p.list_changed(&listen, 10);
    let (first, _) = p.sent();
    assert_eq!(first["method"], "tools/list");
    for ms in 11..16 {
        p.list_changed(&listen, ms);
    }
    p.nothing_sent();
    p.reply(&first, json!({"tools": [named("a")]}), 20);
    p.answer_list(json!([named("a"), named("b")]), 30);
    p.nothing_sent();
    let refreshed: Vec<Event> = p
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::ToolsRefreshed(_)))
        .collect();
    assert_eq!(refreshed.len(), 2);
    assert!(p.session.cache().load().contains("b"));
}

#[test]
fn announced_or_refresh_mode_waits_for_a_refresh_under_way() {
    let config =
        dynamic_config().with_settle(SettleMode::AnnouncedOrRefresh, Duration::from_secs(5));
    let mut p = Peer::ready_modern_with(config, true);
    let (listen, _) = p.sent();
    p.listen_ack(&listen, 2);
    let op = start_call(&mut p, "navigate", json!({}), CallOptions::default());
    let (request, _) = p.sent();
    p.list_changed(&listen, 5);
    let (list, _) = p.sent();
    p.reply(&request, json!({"content": []}), 10);
    assert_eq!(p.completed(op), None, "held: a refresh is under way");
    p.reply(&list, json!({"tools": [named("page2_tool")]}), 20);
    assert!(p.completed(op).expect("released").is_ok());
}

#[test]
fn a_header_mismatch_relists_and_retries_once_with_a_new_id() {
    let (mut p, _listen) = Peer::ready_dynamic();
    let op = start_call(
        &mut p,
        "execute_sql",
        json!({"region": "eu", "query": "q"}),
        CallOptions::default(),
    );
    let (first, headers) = p.sent();
    assert_eq!(
        header(&headers, "Mcp-Param-Region"),
        None,
        "unknown tool: no header"
    );
    p.reply_error(&first, -32020, json!({}), 10);
    p.answer_list(json!([region_tool("execute_sql")]), 20);
    let (second, headers) = p.sent();
    assert_eq!(second["method"], "tools/call");
    assert_ne!(second["id"], first["id"]);
    assert_eq!(
        second["params"]["arguments"],
        json!({"region": "eu", "query": "q"})
    );
    assert_eq!(header(&headers, "Mcp-Param-Region"), Some("eu"));
    // A second mismatch is final.
    p.reply_error(&second, -32001, json!({}), 30);
    p.nothing_sent();
    let err = p.completed(op).expect("failed").unwrap_err();
    assert!(err.contains("-32001"), "{err}");

    // Other errors are never retried.
    let op = start_call(
        &mut p,
        "execute_sql",
        json!({"region": "eu"}),
        CallOptions::default(),
    );
    let (request, _) = p.sent();
    p.reply_error(&request, -32022, json!({}), 40);
    p.nothing_sent();
    assert!(p.completed(op).expect("failed").is_err());
}

#[test]
fn the_listen_stream_reopens_with_backoff_and_refreshes_after_a_gap() {
    let (mut p, listen) = Peer::ready_dynamic();
    // The stream drops.
    p.session.handle_undelivered(
        RequestFailure {
            id: serde_json::from_value(listen["id"].clone()).unwrap(),
            status: None,
            body: Default::default(),
            cause: Arc::new(std::io::Error::other("stream ended")),
        },
        p.at(100),
    );
    assert_eq!(p.session.poll_timeout(), Some(p.at(1100)));
    p.session.handle_timeout(p.at(1100));
    let (again, _) = p.sent();
    assert_eq!(again["method"], "subscriptions/listen");
    assert_ne!(again["id"], listen["id"]);
    // Once it is back, changes missed meanwhile are fetched.
    p.listen_ack(&again, 1200);
    p.answer_list(json!([named("a")]), 1300);
    // A list change for another subscription is not ours.
    p.list_changed(&listen, 1400);
    p.nothing_sent();
    // A server without subscriptions/listen is not asked again.
    let (mut p, listen) = Peer::ready_dynamic();
    p.reply_error(&listen, -32601, json!({}), 10);
    assert_eq!(p.session.poll_timeout(), None);
}

#[test]
fn cancelling_a_held_call_completes_it_as_cancelled() {
    let (mut p, _listen) = Peer::ready_dynamic();
    let op = start_call(&mut p, "unlock_files", json!({}), CallOptions::default());
    let (request, _) = p.sent();
    p.reply(&request, unlock_result("registers", &["x"]), 10);
    assert_eq!(p.session.cancel(op, None), None, "nothing left to close");
    let err = p.completed(op).expect("cancelled").unwrap_err();
    assert_eq!(err, "cancelled");
    p.session.handle_timeout(p.at(10_000));
    assert!(p.events().is_empty());
}

// ---- Hostile input: each a typed report or a documented no-op, never a panic ----

#[test]
fn hostile_frames_are_reported_as_malformed() {
    let mut p = Peer::ready_modern(true);
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let deep_object = r#"{"jsonrpc":"2.0","method":"x","params":"#.to_owned()
        + &r#"{"a":"#.repeat(50_000)
        + "1"
        + &"}".repeat(50_001);
    let hostile: Vec<Vec<u8>> = vec![
        deep.into_bytes(),
        br#"{"jsonrpc":"2.0","id":1e999999,"result":{}}"#.to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\xfe\"}".to_vec(),
        br#"{"jsonrpc":"1.0","id":1,"result":{}}"#.to_vec(),
        b"".to_vec(),
        b"\x00\x01\x02".to_vec(),
        br#"{"jsonrpc":"2.0","id":{"nested":true},"result":{}}"#.to_vec(),
    ];
    for bytes in &hostile {
        p.session.handle_inbound(bytes, p.at(5));
    }
    let events = p.events();
    assert_eq!(events.len(), hostile.len(), "{events:?}");
    assert!(
        events.iter().all(|e| matches!(e, Event::Malformed(_))),
        "{events:?}"
    );
    p.nothing_sent();

    // Deep nesting inside params is kept raw (bounded by the transport's message size) and
    // fails typed decoding with serde_json's recursion limit, not with a stack overflow.
    p.session.handle_inbound(deep_object.as_bytes(), p.at(6));
    let Some(Event::Notification(n)) = p.session.poll_event() else {
        panic!("the notification is handed up with its params raw")
    };
    let decoded: Result<Value, _> = n.params();
    assert!(decoded.is_err());
}

#[test]
fn stray_duplicate_and_late_answers_change_nothing() {
    let mut p = Peer::ready_modern(true);
    // An answer to nothing, with a huge integer id.
    p.session.handle_inbound(
        br#"{"jsonrpc":"2.0","id":9007199254740993,"result":{}}"#,
        p.at(5),
    );
    let op = start_call(&mut p, "echo", json!({"text": "x"}), CallOptions::default());
    let (request, _) = p.sent();
    p.reply(&request, json!({"content": []}), 10);
    p.reply(
        &request,
        json!({"content": [{"type": "text", "text": "again"}]}),
        11,
    );
    let completions = p
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::Completed { .. }))
        .count();
    assert_eq!(completions, 1, "a duplicate answer is dropped");
    // An answer to a cancelled call is dropped too.
    let op2 = start_call(&mut p, "echo", json!({"text": "y"}), CallOptions::default());
    let (request, _) = p.sent();
    p.session.cancel(op2, None);
    p.events();
    p.reply(&request, json!({"content": []}), 20);
    assert!(p.events().is_empty());
    let _ = op;
}

#[test]
fn a_listing_of_100_000_tools_is_committed_whole() {
    let mut p = Peer::ready_modern(true);
    let op = p.session.list_tools(p.at(5)).unwrap();
    let (list, _) = p.sent();
    let tools: Vec<Value> = (0..100_000).map(|i| named(&format!("tool_{i}"))).collect();
    p.reply(&list, json!({ "tools": tools }), 10);
    let listed = p.events().into_iter().find_map(|e| match e {
        Event::ToolsListed { op: o, result } if o == op => Some(result),
        _ => None,
    });
    let outcome = listed.expect("listed").unwrap();
    assert_eq!(outcome.commit.diff.added.len(), 100_000);
    assert_eq!(p.session.cache().load().len(), 100_000);
}

/// A call's own `_meta` members (trace context) travel beside the envelope in the modern era
/// and alone in the legacy one; a key the session owns is refused, on calls and on any
/// request, and nothing is sent.
#[test]
fn a_calls_own_meta_travels_with_the_envelope_and_reserved_keys_are_refused() {
    let trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let mut p = Peer::ready_modern(false);
    let options = CallOptions::default()
        .with_meta("traceparent", trace)
        .with_progress();
    p.session.call_tool("echo", None, options, p.at(2)).unwrap();
    let (call, _) = p.sent();
    let meta = &call["params"]["_meta"];
    assert_eq!(meta["traceparent"], trace);
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(meta["progressToken"], call["id"]);

    for reserved in [
        "io.modelcontextprotocol/protocolVersion",
        "dev.mcp/x",
        "progressToken",
    ] {
        let options = CallOptions::default().with_meta(reserved, "mine");
        let err = p
            .session
            .call_tool("echo", None, options, p.at(3))
            .unwrap_err();
        assert!(
            matches!(&err, RequestError::ReservedMeta(k) if k == reserved),
            "{reserved}: {err}"
        );
    }
    let meta = |key: &str, value: &str| toolwire_types::ListParams {
        meta: Some(toolwire_types::Meta {
            extra: [(key.to_owned(), json!(value))].into_iter().collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let params = meta("io.modelcontextprotocol/clientInfo", "spoofed");
    let err = p
        .session
        .request::<toolwire_types::methods::method::ListResources>(params, p.at(4))
        .unwrap_err();
    assert!(matches!(err, RequestError::ReservedMeta(_)), "{err}");
    p.nothing_sent();

    // A list request keeps the caller's trace context beside the envelope.
    let params = meta("traceparent", trace);
    p.session
        .request::<toolwire_types::methods::method::ListResources>(params, p.at(5))
        .unwrap_or_else(|e| panic!("{e}"));
    let (list, _) = p.sent();
    assert_eq!(list["params"]["_meta"]["traceparent"], trace);
    assert_eq!(
        list["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );

    let mut p = Peer::ready_legacy(false);
    let options = CallOptions::default().with_meta("traceparent", trace);
    p.session.call_tool("echo", None, options, p.at(2)).unwrap();
    let (call, _) = p.sent();
    assert_eq!(call["params"]["_meta"], json!({"traceparent": trace}));
}

// ---- Resource subscriptions ----

const FILE_A: &str = "toolwire://files/a";
const FILE_B: &str = "toolwire://files/b";

impl Peer {
    /// Negotiates the modern era with the defaults against a server declaring `capabilities`;
    /// returns the listen request, if one was sent.
    fn ready_modern_declaring(capabilities: Value, carries_headers: bool) -> (Self, Option<Value>) {
        let mut p = Self::with_config(dynamic_config(), carries_headers);
        p.session.start(p.at(0));
        let (discover, _) = p.sent();
        p.reply(
            &discover,
            json!({"supportedVersions": ["2026-07-28"], "capabilities": capabilities,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}),
            1,
        );
        assert!(matches!(p.event(), Event::Ready(_)));
        let listen = p.session.poll_transmit().map(|t| {
            let v: Value = serde_json::from_slice(&t.body).unwrap();
            assert_eq!(v["method"], "subscriptions/listen");
            v
        });
        (p, listen)
    }

    /// Acknowledges listen request `listen` with `notifications` as the honoured set.
    fn ack(&mut self, listen: &Value, notifications: Value, ms: u64) {
        let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": notifications,
                "_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]}}});
        self.session
            .handle_inbound(ack.to_string().as_bytes(), self.at(ms));
    }

    /// A `notifications/resources/updated` for `uri` on listen stream `listen`.
    fn updated(&mut self, listen: &Value, uri: &str, ms: u64) {
        let n = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]}}});
        self.session
            .handle_inbound(n.to_string().as_bytes(), self.at(ms));
    }

    /// Negotiates 2025-11-25 with `config` against a server declaring `resources.subscribe`,
    /// through `notifications/initialized`.
    fn legacy_subscribable(config: SessionConfig) -> Self {
        let config = config.with_mode(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25));
        let mut p = Self::with_config(config, true);
        p.session.start(p.at(0));
        let (init, _) = p.sent();
        p.reply(&init, json!({"protocolVersion": "2025-11-25", "capabilities": {"resources": {"subscribe": true}},
            "serverInfo": {"name": "legacy", "version": "1"}}), 1);
        let (initialized, _) = p.sent();
        assert_eq!(initialized["method"], "notifications/initialized");
        p
    }

    fn subscriptions(&self) -> Vec<String> {
        self.session
            .resource_subscriptions()
            .map(str::to_owned)
            .collect()
    }
}

/// Whether `events` hold `op`'s successful completion.
fn succeeded(events: &[Event], op: OpId) -> bool {
    events
        .iter()
        .any(|e| matches!(e, Event::Completed { op: o, result: Ok(_) } if *o == op))
}

fn request_id(request: &Value) -> toolwire_types::RequestId {
    serde_json::from_value(request["id"].clone()).unwrap()
}

#[test]
fn a_modern_subscription_opens_a_new_stream_and_closes_the_old_one_only_once_it_is_acknowledged() {
    let (mut p, old) = Peer::ready_dynamic();
    let op = p.session.subscribe_resource(FILE_A, p.at(10)).unwrap();
    let (new, _) = p.sent();
    assert_eq!(new["method"], "subscriptions/listen");
    assert_eq!(
        new["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": [FILE_A]})
    );
    // Until the new stream is acknowledged the old one stays open, and what it carries is
    // still ours.
    let events = p.events();
    assert!(
        !events.iter().any(|e| matches!(e, Event::CloseStream(_))),
        "{events:?}"
    );
    p.updated(&old, FILE_A, 15);
    assert!(
        p.events().iter().any(
            |e| matches!(e, Event::Notification(n) if n.method == "notifications/resources/updated")
        ),
        "the old stream's notification reaches the caller"
    );
    p.ack(
        &new,
        json!({"toolsListChanged": true, "resourceSubscriptions": [FILE_A]}),
        20,
    );
    let events = p.events();
    assert!(succeeded(&events, op), "{events:?}");
    let closed: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::CloseStream(id) => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(closed, vec![request_id(&old)]);
    // Over HTTP closing the stream is the cancellation: no notification.
    p.nothing_sent();
    // The old stream's notifications are someone else's from now on.
    p.list_changed(&old, 30);
    p.nothing_sent();
    assert_eq!(p.subscriptions(), vec![FILE_A.to_owned()]);
}

#[test]
fn a_subscription_the_acknowledgement_leaves_out_fails_and_is_forgotten() {
    let (mut p, _old) = Peer::ready_dynamic();
    let kept = p.session.subscribe_resource(FILE_A, p.at(10)).unwrap();
    let (first, _) = p.sent();
    // A second change before the first is acknowledged: the unacknowledged stream goes at
    // once, the new one carries both.
    let dropped = p.session.subscribe_resource(FILE_B, p.at(11)).unwrap();
    let (second, _) = p.sent();
    assert_eq!(
        second["params"]["notifications"]["resourceSubscriptions"],
        json!([FILE_A, FILE_B])
    );
    let events = p.events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::CloseStream(id) if *id == request_id(&first))),
        "{events:?}"
    );
    p.ack(
        &second,
        json!({"toolsListChanged": true, "resourceSubscriptions": [FILE_A]}),
        20,
    );
    let results: Vec<_> = p
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Completed { op, result } => Some((op, result.map_err(|e| e.to_string()))),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results.iter().any(|(op, r)| *op == kept && r.is_ok()));
    assert!(results.iter().any(|(op, r)| *op == dropped
        && r.as_ref().unwrap_err()
            == &format!("the server did not acknowledge the subscription to {FILE_B}")));
    assert_eq!(p.subscriptions(), vec![FILE_A.to_owned()]);
}

#[test]
fn over_stdio_a_replaced_listen_stream_is_cancelled_by_notification() {
    let mut p = Peer::ready_modern_with(dynamic_config(), false);
    let (old, _) = p.sent();
    p.ack(&old, json!({"toolsListChanged": true}), 2);
    p.session.subscribe_resource(FILE_A, p.at(10)).unwrap();
    let (new, _) = p.sent();
    p.nothing_sent();
    p.ack(
        &new,
        json!({"toolsListChanged": true, "resourceSubscriptions": [FILE_A]}),
        20,
    );
    let (cancelled, _) = p.sent();
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], old["id"]);
}

#[test]
fn a_refused_listen_fails_the_subscription_and_the_next_stream_leaves_it_out() {
    let (mut p, _old) = Peer::ready_dynamic();
    let op = p.session.subscribe_resource(FILE_A, p.at(10)).unwrap();
    let (new, _) = p.sent();
    p.reply_error(&new, -32602, json!({"uri": FILE_A}), 20);
    let err = p.completed(op).expect("answered").unwrap_err();
    assert!(err.contains("-32602"), "{err}");
    assert!(p.subscriptions().is_empty());
    // The stream is opened again after its backoff, without the refused resource.
    let reopen = p.session.poll_timeout().expect("a reopen");
    p.session.handle_timeout(reopen);
    let (again, _) = p.sent();
    assert_eq!(
        again["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
}

#[test]
fn an_unacknowledged_subscription_times_out_at_the_request_timeout_and_stays_asked_for() {
    let (mut p, _old) = Peer::ready_dynamic();
    let op = p.session.subscribe_resource(FILE_A, p.at(10)).unwrap();
    p.sent();
    assert_eq!(
        p.session.poll_timeout(),
        Some(p.at(10) + Duration::from_secs(60))
    );
    p.session.handle_timeout(p.at(10) + Duration::from_secs(60));
    let err = p.completed(op).expect("timed out").unwrap_err();
    assert!(err.starts_with("no answer within"), "{err}");
    assert_eq!(p.subscriptions(), vec![FILE_A.to_owned()]);
}

#[test]
fn with_nothing_else_to_hear_subscriptions_alone_open_and_close_the_stream() {
    // No list changes declared: no stream until a subscription, none after the last goes.
    let (mut p, listen) =
        Peer::ready_modern_declaring(json!({"resources": {"subscribe": true}}), true);
    assert!(listen.is_none());
    let op = p.session.subscribe_resource(FILE_A, p.at(10)).unwrap();
    let (stream, _) = p.sent();
    assert_eq!(
        stream["params"]["notifications"],
        json!({"resourceSubscriptions": [FILE_A]})
    );
    p.ack(&stream, json!({"resourceSubscriptions": [FILE_A]}), 20);
    assert!(p.completed(op).expect("acknowledged").is_ok());
    let op = p.session.unsubscribe_resource(FILE_A, p.at(30)).unwrap();
    p.nothing_sent();
    let events = p.events();
    assert!(succeeded(&events, op), "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::CloseStream(id) if *id == request_id(&stream))),
        "{events:?}"
    );
    assert_eq!(p.session.poll_timeout(), None, "nothing to reopen");
}

#[test]
fn the_listen_stream_asks_for_the_list_changes_the_server_declares() {
    let (_p, listen) = Peer::ready_modern_declaring(
        json!({"prompts": {"listChanged": true}, "resources": {"listChanged": true, "subscribe": true}}),
        true,
    );
    assert_eq!(
        listen.expect("a listen stream")["params"]["notifications"],
        json!({"promptsListChanged": true, "resourcesListChanged": true})
    );
}

#[test]
fn a_session_made_with_subscriptions_makes_them_again_in_either_era() {
    let mut config = dynamic_config();
    config.resource_subscriptions.insert(FILE_A.to_owned());
    // Modern: the first listen stream names it.
    let mut p = Peer::with_config(config.clone(), true);
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    p.reply(
        &discover,
        json!({"supportedVersions": ["2026-07-28"], "capabilities": {},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}),
        1,
    );
    let (listen, _) = p.sent();
    assert_eq!(
        listen["params"]["notifications"],
        json!({"resourceSubscriptions": [FILE_A]})
    );
    // Legacy: resources/subscribe right after initialize; a refusal forgets it.
    let mut p = Peer::legacy_subscribable(config);
    let (subscribe, _) = p.sent();
    assert_eq!(subscribe["method"], "resources/subscribe");
    assert_eq!(subscribe["params"], json!({"uri": FILE_A}));
    p.reply_error(&subscribe, -32602, json!({}), 2);
    assert!(p.subscriptions().is_empty());
}

#[test]
fn legacy_subscriptions_are_requests_gated_by_the_declared_capability() {
    let mut p = Peer::ready_legacy(true);
    let err = p.session.subscribe_resource(FILE_A, p.at(2)).unwrap_err();
    assert!(matches!(
        err,
        RequestError::NotAdvertised(Capability::ResourceSubscribe)
    ));
    assert!(p.subscriptions().is_empty());

    let mut p = Peer::legacy_subscribable(config());
    let op = p.session.subscribe_resource(FILE_A, p.at(2)).unwrap();
    let (subscribe, _) = p.sent();
    assert_eq!(subscribe["method"], "resources/subscribe");
    p.reply(&subscribe, json!({}), 3);
    assert!(p.completed(op).expect("answered").is_ok());
    assert_eq!(p.subscriptions(), vec![FILE_A.to_owned()]);
    let op = p.session.unsubscribe_resource(FILE_A, p.at(4)).unwrap();
    let (unsubscribe, _) = p.sent();
    assert_eq!(unsubscribe["method"], "resources/unsubscribe");
    assert_eq!(unsubscribe["params"], json!({"uri": FILE_A}));
    assert!(p.subscriptions().is_empty(), "forgotten at once");
    p.reply(&unsubscribe, json!({}), 5);
    assert!(p.completed(op).expect("answered").is_ok());
}

// ---- A prior negotiation adopted ----

fn prior(version: ProtocolVersion) -> Negotiated {
    serde_json::from_value(json!({
        "version": version.as_str(),
        "serverInfo": {"name": "srv", "version": "1"},
        "capabilities": {"tools": {}},
    }))
    .unwrap()
}

#[test]
fn negotiated_round_trips_through_serde() {
    let mut p = Peer::ready_modern(true);
    let negotiated = p.session.negotiated().unwrap().clone();
    let saved = serde_json::to_string(&negotiated).unwrap();
    let loaded: Negotiated = serde_json::from_str(&saved).unwrap();
    assert_eq!(loaded, negotiated);
    p.nothing_sent();
}

#[test]
fn a_modern_prior_is_ready_at_once_and_an_answer_confirms_it() {
    let config = config().with_prior(Some(prior(ProtocolVersion::V2026_07_28)));
    let mut p = Peer::with_config(config, true);
    p.session.start(p.at(0));
    assert!(matches!(p.event(), Event::Ready(n) if n.version == ProtocolVersion::V2026_07_28));
    p.nothing_sent();
    let op = p.session.list_tools(p.at(1)).unwrap();
    let (list, _) = p.sent();
    assert_eq!(list["method"], "tools/list");
    assert_eq!(
        list["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    p.reply(&list, json!({"tools": []}), 2);
    assert!(
        p.events()
            .iter()
            .any(|e| matches!(e, Event::ToolsListed { op: o, result: Ok(_) } if *o == op))
    );
    // Confirmed: a later refusal is that request's alone.
    let op = p.session.list_tools(p.at(3)).unwrap();
    let (list, _) = p.sent();
    p.reply_error(&list, -32022, json!({"supported": ["2026-07-28"]}), 4);
    let events = p.events();
    assert!(
        !events.iter().any(|e| matches!(e, Event::Renegotiating)),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ToolsListed { op: o, result: Err(_) } if *o == op))
    );
    p.nothing_sent();
}

#[test]
fn a_refused_modern_prior_fails_that_request_and_probes_again() {
    for refusal in ["-32022", "404"] {
        let config = config().with_prior(Some(prior(ProtocolVersion::V2026_07_28)));
        let mut p = Peer::with_config(config, true);
        p.session.start(p.at(0));
        p.events();
        let op = p
            .session
            .request::<toolwire_types::methods::method::ListPrompts>(Default::default(), p.at(1))
            .unwrap();
        let (list, _) = p.sent();
        if refusal == "404" {
            p.session.handle_undelivered(
                RequestFailure {
                    id: request_id(&list),
                    status: Some(404),
                    body: Default::default(),
                    cause: Arc::new(std::io::Error::other("not found")),
                },
                p.at(2),
            );
        } else {
            p.reply_error(&list, -32022, json!({"supported": ["2025-11-25"]}), 2);
        }
        let events = p.events();
        assert!(
            events.iter().any(|e| matches!(e, Event::Renegotiating)),
            "{refusal}: {events:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Completed { op: o, result: Err(_) } if *o == op)),
            "{refusal}: {events:?}"
        );
        let err = p
            .session
            .list_tools(p.at(3))
            .expect_err("not ready while probing");
        assert!(matches!(err, RequestError::NotReady), "{err}");
        let (discover, _) = p.sent();
        assert_eq!(discover["method"], "server/discover", "{refusal}");
        p.reply_error(&discover, -32601, json!({}), 4);
        let (init, _) = p.sent();
        assert_eq!(init["method"], "initialize", "{refusal}");
        p.reply(&init, init_result("2025-11-25"), 5);
        p.sent();
        assert!(
            p.events()
                .iter()
                .any(|e| matches!(e, Event::Ready(n) if n.version == ProtocolVersion::V2025_11_25))
        );
    }
}

#[test]
fn a_legacy_prior_initializes_at_its_version_without_probing_and_probes_if_refused() {
    let config = config().with_prior(Some(prior(ProtocolVersion::V2025_06_18)));
    let mut p = Peer::with_config(config.clone(), true);
    p.session.start(p.at(0));
    let (init, _) = p.sent();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["protocolVersion"], "2025-06-18");
    p.reply(&init, init_result("2025-06-18"), 1);
    p.sent();
    assert!(matches!(p.event(), Event::Ready(n) if n.version == ProtocolVersion::V2025_06_18));

    // The server went modern: initialize is refused, the probe follows.
    let mut p = Peer::with_config(config, true);
    p.session.start(p.at(0));
    let (init, _) = p.sent();
    p.reply_error(&init, -32601, json!({}), 1);
    let (discover, _) = p.sent();
    assert_eq!(discover["method"], "server/discover");
    p.reply(
        &discover,
        json!({"supportedVersions": ["2026-07-28"], "capabilities": {},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "2"}}}),
        2,
    );
    assert!(matches!(p.event(), Event::Ready(n) if n.version == ProtocolVersion::V2026_07_28));
}

#[test]
fn a_prior_is_ignored_in_a_pinned_mode() {
    let config = config()
        .with_prior(Some(prior(ProtocolVersion::V2026_07_28)))
        .with_mode(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25));
    let mut p = Peer::with_config(config, true);
    p.session.start(p.at(0));
    let (init, _) = p.sent();
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
}

// ---- SEP-2549: the tool listing's freshness ----

/// A `tools/list` page of tools named `names`, with `ttl` as its `ttlMs` (none when `None`)
/// and `next` as its cursor.
fn tools_page(names: &[&str], ttl: Option<i64>, next: Option<&str>) -> Value {
    let mut page = json!({"tools": names.iter().map(|n| named(n)).collect::<Vec<_>>(),
        "cacheScope": "private"});
    if let Some(ttl) = ttl {
        page["ttlMs"] = json!(ttl);
    }
    if let Some(next) = next {
        page["nextCursor"] = json!(next);
    }
    page
}

impl Peer {
    /// Lists the tools in `mode` at `ms`; `Some(request)` if that sent one, else the listing's
    /// tool names (answered from the last listing).
    fn list_in(&mut self, mode: CacheMode, ms: u64) -> Result<Value, Vec<String>> {
        let op = self.session.list_tools_with(mode, self.at(ms)).unwrap();
        if let Some(t) = self.session.poll_transmit() {
            return Ok(serde_json::from_slice(&t.body).unwrap());
        }
        let listed = self.events().into_iter().find_map(|e| match e {
            Event::ToolsListed { op: o, result } if o == op => Some(result.unwrap()),
            _ => None,
        });
        let outcome = listed.expect("answered at once");
        assert!(
            outcome.commit.diff.is_empty(),
            "a cached answer changes nothing"
        );
        Err(outcome.tools.iter().map(|t| t.name.clone()).collect())
    }
}

#[test]
fn a_fresh_listing_answers_at_once_until_its_earliest_page_expires() {
    let mut p = Peer::ready_modern(true);
    let first = p.list_in(CacheMode::Use, 0).expect("nothing kept yet");
    p.reply(&first, tools_page(&["a"], Some(10_000), Some("c")), 1);
    let (second, _) = p.sent();
    p.reply(&second, tools_page(&["b"], Some(5_000), None), 2);
    p.events();
    // Fresh: no round trip, the same listing.
    assert_eq!(
        p.list_in(CacheMode::Use, 3),
        Err(vec!["a".into(), "b".into()])
    );
    assert_eq!(
        p.list_in(CacheMode::Use, 5_001),
        Err(vec!["a".into(), "b".into()])
    );
    // The second page's clock (received at 2 ms, 5 s) ends it: now >= received + ttlMs.
    let again = p
        .list_in(CacheMode::Use, 5_002)
        .expect("stale: asked again");
    assert_eq!(again["method"], "tools/list");
}

#[test]
fn an_absent_zero_or_negative_ttl_is_never_fresh() {
    for ttl in [None, Some(0), Some(-5)] {
        let mut p = Peer::ready_modern(true);
        let list = p.list_in(CacheMode::Use, 0).unwrap();
        p.reply(&list, tools_page(&["a"], ttl, None), 1);
        p.events();
        assert!(p.list_in(CacheMode::Use, 1).is_ok(), "{ttl:?}: asked again");
    }
}

#[test]
fn a_list_change_invalidates_and_a_walk_asked_before_it_cannot_make_the_listing_fresh() {
    let mut p = Peer::ready_modern(true);
    let list = p.list_in(CacheMode::Use, 0).unwrap();
    p.reply(&list, tools_page(&["a"], Some(60_000), None), 1);
    p.events();
    assert!(p.list_in(CacheMode::Use, 2).is_err(), "fresh");
    // A walk is under way when the server says the list changed; its answer (fresh by its
    // own ttlMs) came from before the change.
    let walk = p.list_in(CacheMode::Refresh, 3).unwrap();
    let change = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    p.session
        .handle_inbound(change.to_string().as_bytes(), p.at(4));
    p.reply(&walk, tools_page(&["a", "b"], Some(60_000), None), 5);
    p.events();
    assert!(
        p.list_in(CacheMode::Use, 6).is_ok(),
        "invalidated: asked again"
    );
}

#[test]
fn refresh_always_asks_and_bypass_leaves_the_fresh_listing_alone() {
    let mut p = Peer::ready_modern(true);
    let list = p.list_in(CacheMode::Use, 0).unwrap();
    p.reply(&list, tools_page(&["a"], Some(60_000), None), 1);
    p.events();
    // Bypass asks, and its answer (stale at once) does not replace the fresh listing.
    let bypass = p.list_in(CacheMode::Bypass, 2).unwrap();
    p.reply(&bypass, tools_page(&["a", "b"], Some(0), None), 3);
    p.events();
    assert_eq!(p.list_in(CacheMode::Use, 4), Err(vec!["a".into()]));
    // Refresh asks, and its answer is what counts from then on: stale at once here.
    let refresh = p.list_in(CacheMode::Refresh, 5).unwrap();
    p.reply(&refresh, tools_page(&["a", "b"], Some(0), None), 6);
    p.events();
    assert!(p.list_in(CacheMode::Use, 6).is_ok(), "ttlMs 0: asked again");
}

#[test]
fn a_cursor_the_server_no_longer_takes_drops_the_pages_and_starts_over_once() {
    let mut p = Peer::ready_modern(true);
    let op = p.session.list_tools(p.at(0)).unwrap();
    let (first, _) = p.sent();
    p.reply(&first, tools_page(&["old"], Some(60_000), Some("c1")), 1);
    let (second, _) = p.sent();
    assert_eq!(second["params"]["cursor"], "c1");
    p.reply_error(&second, -32602, json!({}), 2);
    // From the first page again, without a cursor; the dropped page is not in the result.
    let (again, _) = p.sent();
    assert_eq!(again["method"], "tools/list");
    assert!(again["params"].get("cursor").is_none(), "{again}");
    p.reply(&again, tools_page(&["new"], Some(60_000), Some("c2")), 3);
    let (next, _) = p.sent();
    // A second refusal in the same walk ends it.
    p.reply_error(&next, -32602, json!({}), 4);
    p.nothing_sent();
    let failed = p.events().into_iter().find_map(|e| match e {
        Event::ToolsListed { op: o, result } if o == op => Some(result),
        _ => None,
    });
    assert!(
        matches!(failed, Some(Err(RequestError::Server { .. }))),
        "{failed:?}"
    );
    assert!(p.session.cache().snapshot().get("old").is_none());
}

// ---- SEP-2549: the response cache ----

use toolwire_types::methods::method::{ListPrompts, ListResources, ReadResource};

fn read_params(uri: &str, extra: Value) -> toolwire_types::ReadResourceParams {
    let mut params = json!({"uri": uri});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    serde_json::from_value(params).unwrap()
}

fn list_params(cursor: Option<&str>) -> toolwire_types::ListParams {
    serde_json::from_value(json!({ "cursor": cursor })).unwrap()
}

impl Peer {
    /// Issues a cached request; `Ok(request)` if it was sent, `Err(result)` if it was
    /// answered at once.
    fn cached<M>(&mut self, params: M::Params, mode: CacheMode, ms: u64) -> Result<Value, String>
    where
        M: toolwire_types::RequestMethod,
        M::Params: toolwire_types::HasMeta,
    {
        let op = self
            .session
            .request_cached::<M>(params, mode, self.at(ms))
            .unwrap();
        if let Some(t) = self.session.poll_transmit() {
            return Ok(serde_json::from_slice(&t.body).unwrap());
        }
        Err(self
            .completed(op)
            .expect("answered at once")
            .expect("a kept answer"))
    }
}

const READ: &str = "file:///a";

impl Peer {
    /// A cached `resources/read` of [`READ`] in `mode` at `ms` (see [`Peer::cached`]).
    fn read(&mut self, mode: CacheMode, ms: u64) -> Result<Value, String> {
        self.cached::<ReadResource>(read_params(READ, json!({})), mode, ms)
    }

    /// `notifications/resources/updated` for [`READ`] at `ms`.
    fn read_updated(&mut self, ms: u64) {
        let update = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": READ}});
        self.session
            .handle_inbound(update.to_string().as_bytes(), self.at(ms));
    }
}

/// A `resources/read` result for [`READ`] with `ttl` as its `ttlMs`.
fn read_result(text: &str, ttl: Value) -> Value {
    json!({"contents": [{"uri": READ, "text": text}], "ttlMs": ttl, "cacheScope": "private"})
}

#[test]
fn a_fresh_read_is_served_without_a_round_trip_until_an_update_evicts_it() {
    let mut p = Peer::ready_modern(true);
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 0)
        .unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1);
    p.events();
    // `_meta` is not part of the key.
    let traced = read_params(READ, json!({"_meta": {"traceparent": "00-1-2-01"}}));
    let kept = p
        .cached::<ReadResource>(traced, CacheMode::Use, 2)
        .unwrap_err();
    assert!(kept.contains("\"one\""), "{kept}");
    // Fresh until received + ttlMs, not at it.
    assert!(p.read(CacheMode::Use, 60_001).is_ok());
    let again = p.read(CacheMode::Use, 60_002);
    p.reply(&again.unwrap(), read_result("two", json!(60_000)), 60_003);
    p.events();
    p.read_updated(60_004);
    p.events();
    assert!(
        p.read(CacheMode::Use, 60_005).is_ok(),
        "evicted by the update although fresh"
    );
}

#[test]
fn an_absent_zero_or_negative_ttl_keeps_nothing() {
    for ttl in [Value::Null, json!(0), json!(-1)] {
        let mut p = Peer::ready_modern(true);
        let sent = p.read(CacheMode::Use, 0);
        p.reply(&sent.unwrap(), read_result("one", ttl.clone()), 1);
        p.events();
        assert!(p.read(CacheMode::Use, 1).is_ok(), "{ttl}: asked again");
    }
}

#[test]
fn each_page_is_kept_on_its_own_and_a_list_change_or_a_refused_cursor_drops_them_all() {
    let mut p = Peer::ready_modern(true);
    let page = |names: &[&str], next: Option<&str>| {
        json!({"prompts": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
            "nextCursor": next, "ttlMs": 60_000, "cacheScope": "public"})
    };
    let first = p
        .cached::<ListPrompts>(list_params(None), CacheMode::Use, 0)
        .unwrap();
    p.reply(&first, page(&["a"], Some("c")), 1);
    let second = p
        .cached::<ListPrompts>(list_params(Some("c")), CacheMode::Use, 2)
        .unwrap();
    assert_eq!(second["params"]["cursor"], "c");
    p.reply(&second, page(&["b"], None), 3);
    p.events();
    assert!(
        p.cached::<ListPrompts>(list_params(None), CacheMode::Use, 4)
            .is_err()
    );
    assert!(
        p.cached::<ListPrompts>(list_params(Some("c")), CacheMode::Use, 4)
            .is_err()
    );
    let change = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
    p.session
        .handle_inbound(change.to_string().as_bytes(), p.at(5));
    p.events();
    let first = p
        .cached::<ListPrompts>(list_params(None), CacheMode::Use, 6)
        .unwrap();
    p.reply(&first, page(&["a"], Some("c")), 7);
    let second = p
        .cached::<ListPrompts>(list_params(Some("c")), CacheMode::Use, 8)
        .unwrap();
    p.reply(&second, page(&["b"], None), 9);
    p.events();

    // resources/list: a cursor refused drops the first page too.
    let resources = |next: Option<&str>| json!({"resources": [], "nextCursor": next, "ttlMs": 60_000, "cacheScope": "private"});
    let first = p
        .cached::<ListResources>(list_params(None), CacheMode::Use, 10)
        .unwrap();
    p.reply(&first, resources(Some("r")), 11);
    let second = p
        .cached::<ListResources>(list_params(Some("r")), CacheMode::Use, 12)
        .unwrap();
    p.reply_error(&second, -32602, json!({}), 13);
    p.events();
    assert!(
        p.cached::<ListResources>(list_params(None), CacheMode::Use, 14)
            .is_ok()
    );
    // The prompts are kept: only that list went.
    assert!(
        p.cached::<ListPrompts>(list_params(None), CacheMode::Use, 15)
            .is_err()
    );
}

#[test]
fn retries_input_required_answers_and_answers_asked_before_an_eviction_are_not_kept() {
    let mut p = Peer::ready_modern(true);
    // An MRTR retry: asked, never kept, never served.
    let retry = read_params(READ, json!({"requestState": "s", "inputResponses": {}}));
    let sent = p.cached::<ReadResource>(retry, CacheMode::Use, 0).unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1);
    p.events();
    assert!(p.read(CacheMode::Use, 2).is_ok());
    // An input_required round with hints: not kept.
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Refresh, 3)
        .unwrap();
    p.reply(
        &sent,
        json!({"resultType": "input_required", "inputRequests": {}, "ttlMs": 60_000}),
        4,
    );
    p.events();
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 5)
        .unwrap();
    // The update arrives while the read is in flight: its answer is from before it.
    p.read_updated(6);
    p.reply(&sent, read_result("old", json!(60_000)), 7);
    p.events();
    assert!(p.read(CacheMode::Use, 8).is_ok());
}

#[test]
fn refresh_keeps_bypass_does_not_and_a_cache_turned_off_keeps_nothing() {
    let mut p = Peer::ready_modern(true);
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 0)
        .unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1);
    p.events();
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Bypass, 2)
        .unwrap();
    p.reply(&sent, read_result("bypassed", json!(60_000)), 3);
    p.events();
    let kept = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 4)
        .unwrap_err();
    assert!(kept.contains("\"one\""), "bypass left it alone: {kept}");
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Refresh, 5)
        .unwrap();
    p.reply(&sent, read_result("refreshed", json!(60_000)), 6);
    p.events();
    let kept = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 7)
        .unwrap_err();
    assert!(kept.contains("\"refreshed\""), "{kept}");

    let mut p = Peer::ready_modern_with(config().with_response_cache(false), true);
    let sent = p
        .cached::<ReadResource>(read_params(READ, json!({})), CacheMode::Use, 0)
        .unwrap();
    p.reply(&sent, read_result("one", json!(60_000)), 1);
    p.events();
    assert!(p.read(CacheMode::Use, 2).is_ok());
}

#[test]
fn directory_reads_are_refused_in_either_era_unless_the_skills_extension_declares_them() {
    let params = || -> toolwire_types::ReadDirectoryParams {
        serde_json::from_value(json!({"uri": "skill://x"})).unwrap()
    };
    for (declared, allowed) in [
        (json!({}), false),
        (json!({"io.modelcontextprotocol/skills": {}}), false),
        (
            json!({"io.modelcontextprotocol/skills": {"directoryRead": false}}),
            false,
        ),
        (
            json!({"io.modelcontextprotocol/skills": {"directoryRead": true}}),
            true,
        ),
    ] {
        let (mut p, _) =
            Peer::ready_modern_declaring(json!({"extensions": declared.clone()}), true);
        let asked = p
            .session
            .request::<toolwire_types::methods::method::ReadDirectory>(params(), p.at(2));
        match asked {
            Ok(_) => {
                assert!(allowed, "{declared}");
                let (sent, _) = p.sent();
                assert_eq!(sent["method"], "resources/directory/read");
            }
            Err(e) => {
                assert!(!allowed, "{declared}: {e}");
                assert!(matches!(
                    e,
                    RequestError::NotAdvertised(Capability::SkillsDirectoryRead)
                ));
                p.nothing_sent();
            }
        }
    }
}

impl Peer {
    /// The transport gives up on `request` at `ms` (no HTTP status).
    fn undelivered(&mut self, request: &Value, ms: u64) {
        self.session.handle_undelivered(
            RequestFailure {
                id: request_id(request),
                status: None,
                body: Default::default(),
                cause: Arc::new(std::io::Error::other("connection reset")),
            },
            self.at(ms),
        );
    }
}

#[test]
fn a_stale_answer_stands_in_for_a_failed_refetch_only_when_asked_to() {
    for serve_stale in [false, true] {
        let config = config().with_serve_stale_on_error(serve_stale);
        let mut p = Peer::ready_modern_with(config, true);
        let sent = p.read(CacheMode::Use, 0).unwrap();
        p.reply(&sent, read_result("kept", json!(1_000)), 1);
        let list = p.list_in(CacheMode::Use, 2).unwrap();
        p.reply(&list, tools_page(&["a"], Some(1_000), None), 3);
        p.events();
        // Both stale now; asking again fails at the transport.
        let again = p.read(CacheMode::Use, 5_000).unwrap();
        p.undelivered(&again, 5_001);
        let events = p.events();
        let served = events.iter().any(
            |e| matches!(e, Event::Completed { result: Ok(raw), .. } if raw.get().contains("kept")),
        );
        assert_eq!(served, serve_stale, "{events:?}");
        let walk = p.list_in(CacheMode::Use, 5_002).unwrap();
        p.undelivered(&walk, 5_003);
        let listed = p.events().into_iter().find_map(|e| match e {
            Event::ToolsListed { result, .. } => Some(result.is_ok()),
            _ => None,
        });
        assert_eq!(listed, Some(serve_stale));
        // A server's own answer, an error included, always counts; and Refresh never serves
        // stale.
        let again = p.read(CacheMode::Use, 5_004).unwrap();
        p.reply_error(&again, -32603, json!({}), 5_005);
        let refresh = p.read(CacheMode::Refresh, 5_006).unwrap();
        p.undelivered(&refresh, 5_007);
        let errors = p
            .events()
            .into_iter()
            .filter(|e| matches!(e, Event::Completed { result: Err(_), .. }))
            .count();
        assert_eq!(errors, 2, "serve_stale {serve_stale}");
    }
}

// ---- SEP-2549: cacheScope and the authorization context ----

#[test]
fn a_new_identity_drops_private_and_unmarked_answers_and_keeps_public_ones() {
    let mut p = Peer::ready_modern(true);
    let private = p.read(CacheMode::Use, 0).unwrap();
    p.reply(&private, read_result("mine", json!(60_000)), 1);
    let public = || read_params("file:///public", json!({}));
    let sent = p
        .cached::<ReadResource>(public(), CacheMode::Use, 2)
        .unwrap();
    p.reply(
        &sent,
        json!({"contents": [{"uri": "file:///public", "text": "everyone's"}],
            "ttlMs": 60_000, "cacheScope": "public"}),
        3,
    );
    let unmarked = p
        .cached::<ListPrompts>(list_params(None), CacheMode::Use, 4)
        .unwrap();
    p.reply(&unmarked, json!({"prompts": [], "ttlMs": 60_000}), 5);
    p.events();
    assert!(p.read(CacheMode::Use, 6).is_err(), "fresh");
    assert!(
        p.cached::<ListPrompts>(list_params(None), CacheMode::Use, 6)
            .is_err(),
        "fresh"
    );

    p.session.authorization_changed();
    let kept = p
        .cached::<ReadResource>(public(), CacheMode::Use, 7)
        .unwrap_err();
    assert!(kept.contains("everyone's"), "{kept}");
    assert!(p.read(CacheMode::Use, 8).is_ok(), "private: asked again");
    assert!(
        p.cached::<ListPrompts>(list_params(None), CacheMode::Use, 9)
            .is_ok(),
        "no scope is private: asked again"
    );
}

#[test]
fn an_answer_to_a_request_asked_under_the_identity_before_is_not_kept() {
    let mut p = Peer::ready_modern(true);
    let asked = p.read(CacheMode::Use, 0).unwrap();
    p.session.authorization_changed();
    p.reply(&asked, read_result("whose?", json!(60_000)), 1);
    p.events();
    assert!(p.read(CacheMode::Use, 2).is_ok(), "asked again");
}

#[test]
fn a_new_identity_makes_a_private_tool_listing_stale_and_leaves_a_public_one_fresh() {
    for (scope, asked_again) in [
        (Some("private"), true),
        (None, true),
        (Some("public"), false),
    ] {
        let mut p = Peer::ready_modern(true);
        let list = p.list_in(CacheMode::Use, 0).unwrap();
        let mut page = tools_page(&["a"], Some(60_000), None);
        match scope {
            Some(scope) => page["cacheScope"] = json!(scope),
            None => drop(page.as_object_mut().unwrap().remove("cacheScope")),
        }
        p.reply(&list, page, 1);
        p.events();
        assert!(p.list_in(CacheMode::Use, 2).is_err(), "{scope:?}: fresh");
        p.session.authorization_changed();
        assert_eq!(
            p.list_in(CacheMode::Use, 3).is_ok(),
            asked_again,
            "{scope:?}"
        );
        assert!(
            p.session.cache().snapshot().get("a").is_some(),
            "{scope:?}: the tools themselves stay"
        );
    }
}

#[test]
fn a_maximal_timeout_and_a_huge_ttl_saturate_instead_of_panicking() {
    let mut p = Peer::ready_modern(true);
    // A caller's Duration::MAX timeout: the call goes out and waits "for ever".
    p.session
        .call_tool(
            "x",
            None,
            CallOptions::default().with_timeout(Duration::MAX),
            p.at(2),
        )
        .unwrap();
    let (call, _) = p.sent();
    assert_eq!(call["method"], "tools/call");
    assert!(p.session.poll_timeout().is_some_and(|t| t > p.at(2)));
    p.session.handle_timeout(p.at(10_000_000));
    p.reply(&call, json!({"content": []}), 10_000_001);
    assert!(
        p.events()
            .iter()
            .any(|e| matches!(e, Event::Completed { .. })),
        "the call was still waiting, and completes"
    );
    // A server's ttlMs of i64::MAX: kept "for ever", no panic.
    let first = p
        .list_in(CacheMode::Use, 10_000_002)
        .expect("nothing kept yet");
    p.reply(&first, tools_page(&["a"], Some(i64::MAX), None), 10_000_003);
    p.events();
    assert_eq!(
        p.list_in(CacheMode::Use, 10_000_004),
        Err(vec!["a".to_owned()]),
        "fresh"
    );
}

#[test]
fn an_answer_with_invalid_utf8_fails_its_call_at_once_with_the_decode_error() {
    let mut p = Peer::ready_modern(true);
    let op = p
        .session
        .call_tool("x", None, CallOptions::default(), p.at(2))
        .unwrap();
    let (call, _) = p.sent();
    let mut answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":""#,
        call["id"]
    )
    .into_bytes();
    answer.extend_from_slice(&[0xff, 0xfe]);
    answer.extend_from_slice(br#""}]}}"#);
    p.session.handle_inbound(&answer, p.at(3));
    let failed = p.events().into_iter().find_map(|e| match e {
        Event::Completed { op: o, result } if o == op => Some(result),
        _ => None,
    });
    match failed {
        Some(Err(RequestError::Undelivered(failure))) => {
            assert!(
                failure
                    .cause
                    .downcast_ref::<toolwire_types::DecodeError>()
                    .is_some(),
                "{}",
                failure.cause
            );
        }
        other => panic!("expected the call to fail now, got {other:?}"),
    }
}

#[test]
fn postponed_deadlines_move_by_the_time_given_and_no_more() {
    let mut p = Peer::ready_modern(true);
    let op = p
        .session
        .call_tool(
            "x",
            None,
            CallOptions::default().with_timeout(Duration::from_secs(1)),
            p.at(0),
        )
        .unwrap();
    let _ = p.sent();
    // A login took five seconds: the call's second starts after it.
    p.session.postpone(Duration::from_secs(5));
    assert_eq!(p.session.poll_timeout(), Some(p.at(6_000)));
    p.session.handle_timeout(p.at(5_999));
    assert!(
        !p.events()
            .iter()
            .any(|e| matches!(e, Event::Completed { op: o, .. } if *o == op))
    );
    p.session.handle_timeout(p.at(6_000));
    assert!(p.events().iter().any(|e| matches!(
        e,
        Event::Completed { op: o, result: Err(RequestError::Timeout(_)) } if *o == op
    )));
}

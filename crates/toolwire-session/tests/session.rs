//! The session against a scripted peer with a fake clock (no sockets, no sleeps): negotiation, the tools/list walk, calls and their headers.

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
fn a_call_with_capabilities_of_its_own_declares_those_and_the_next_the_sessions_again() {
    let mut p = Peer::ready_modern(false);
    let own: toolwire_types::ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
    let options = CallOptions::default()
        .with_progress()
        .with_capabilities(own);
    p.session.call_tool("x", None, options, p.at(1)).unwrap();
    let (first, _) = p.sent();
    let meta = &first["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"elicitation": {"form": {}}})
    );
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(meta["progressToken"].is_number(), "{meta}");
    p.session
        .call_tool("x", None, CallOptions::default(), p.at(2))
        .unwrap();
    let (second, _) = p.sent();
    assert_ne!(
        second["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({"elicitation": {"form": {}}}),
        "the session's own again"
    );
}

#[test]
fn calls_declaring_capabilities_in_turn_each_carry_their_own_whole_envelope() {
    // The envelope built for one declaration is kept for the next call declaring the same:
    // calls that alternate between two must never carry the other's.
    let mut p = Peer::ready_modern(false);
    let form: toolwire_types::Rendered<toolwire_types::ClientCapabilities> =
        serde_json::from_value::<toolwire_types::ClientCapabilities>(
            json!({"elicitation": {"form": {}}}),
        )
        .unwrap()
        .into();
    let roots: toolwire_types::ClientCapabilities =
        serde_json::from_value(json!({"roots": {}})).unwrap();
    let declared = [
        Some(form.clone()),
        Some(form.clone()),
        Some(roots.clone().into()),
        // Equal to the one before, though not the same shared value.
        Some(roots.into()),
        None,
        Some(form),
    ];
    let mut seen = Vec::new();
    for (n, capabilities) in declared.into_iter().enumerate() {
        let mut options = CallOptions::default();
        if let Some(capabilities) = capabilities {
            options = options.with_capabilities(capabilities);
        }
        p.session
            .call_tool("x", None, options, p.at(n as u64 + 1))
            .unwrap();
        let (call, _) = p.sent();
        let meta = call["params"]["_meta"].clone();
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "toolwire-test"
        );
        seen.push(meta["io.modelcontextprotocol/clientCapabilities"].clone());
    }
    let form = json!({"elicitation": {"form": {}}});
    let roots = json!({"roots": {}});
    assert_eq!(seen[0], form);
    assert_eq!(seen[1], form);
    assert_eq!(seen[2], roots);
    assert_eq!(seen[3], roots);
    assert!(
        seen[4] != form && seen[4] != roots,
        "the session's own: {}",
        seen[4]
    );
    assert_eq!(seen[5], form);
}

#[test]
fn a_calls_own_log_level_is_in_its_envelope_and_its_log_messages_are_about_it() {
    let mut p = Peer::ready_modern(false);
    let options = CallOptions::default().with_log_level(toolwire_types::LoggingLevel::Warning);
    let op = p.session.call_tool("x", None, options, p.at(1)).unwrap();
    let (call, _) = p.sent();
    assert_eq!(
        call["params"]["_meta"]["io.modelcontextprotocol/logLevel"],
        "warning"
    );
    let call_id: toolwire_types::RequestId = serde_json::from_value(call["id"].clone()).unwrap();
    let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "error", "data": "d"}})
    .to_string();
    // On the call's stream: about the call. Elsewhere (the standalone stream): for anyone.
    p.session
        .handle_inbound_on(log.as_bytes(), Some(&call_id), p.at(2));
    let Event::CallLog {
        op: about,
        notification,
    } = p.event()
    else {
        panic!()
    };
    assert_eq!(
        (about, notification.method.as_str()),
        (op, "notifications/message")
    );
    p.session.handle_inbound_on(log.as_bytes(), None, p.at(3));
    assert!(matches!(p.event(), Event::Notification(_)));
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
fn the_headers_a_call_would_carry_follow_the_version_and_the_transport() {
    let tool: Tool = serde_json::from_value(region_tool("query")).unwrap();
    let plan = toolwire_headers::HeaderPlan::for_schema("query", &tool.input_schema).unwrap();
    let args = json!({"region": "eu", "query": "q"});
    let names = |version: ProtocolVersion, carries: bool| -> Vec<String> {
        call_headers_at(&version, carries, "query", Some(&plan), args.as_object())
            .unwrap()
            .into_iter()
            .map(|h| h.name.as_str().to_owned())
            .collect()
    };
    assert_eq!(
        names(ProtocolVersion::LATEST, true),
        [
            "MCP-Protocol-Version",
            "Mcp-Method",
            "Mcp-Name",
            "Mcp-Param-Region"
        ]
    );
    assert_eq!(
        names(ProtocolVersion::V2025_11_25, true),
        ["MCP-Protocol-Version"]
    );
    assert!(
        names(ProtocolVersion::LATEST, false).is_empty(),
        "stdio sends none"
    );
}

/// Keep-alive is a legacy habit: a stateless modern connection holds nothing to keep, so a
/// quiet one gets no `ping` however long it stays quiet (the legacy side is in `upkeep.rs`).
#[test]
fn a_quiet_modern_session_is_never_pinged() {
    let mut p = Peer::ready_modern_with(
        config().with_keep_alive(Some(Duration::from_millis(200))),
        true,
    );
    assert_eq!(p.session.poll_timeout(), None);
    p.session.handle_timeout(p.at(600_000));
    p.nothing_sent();
    // The same configuration on a legacy session does ping: the test above is about the era.
    let mut legacy = Peer::with_config(
        config()
            .with_mode(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25))
            .with_keep_alive(Some(Duration::from_millis(200))),
        true,
    );
    legacy.session.start(legacy.at(0));
    let (init, _) = legacy.sent();
    legacy.reply(&init, init_result("2025-11-25"), 1);
    let _initialized = legacy.sent();
    legacy.session.handle_timeout(legacy.at(600_000));
    assert_eq!(legacy.sent().0["method"], "ping");
}

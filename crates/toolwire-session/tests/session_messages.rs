//! The session on a fake clock: deadlines, answers, server requests, progress, cancellation, declared capabilities, the settle barrier and the refreshes, hostile frames, a call's own _meta.

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
    let Event::ServerRequest { id, request, .. } = p.event() else {
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
    let result = p.completed(op).expect("released at the timeout").unwrap();
    let value: serde_json::Value = serde_json::from_str(&result).unwrap();
    assert_eq!(value["_meta"][toolwire_session::TOOLS_STALE_META], true);
    assert_eq!(value["registers"], json!(["never"]));
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
            session_gone: false,
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

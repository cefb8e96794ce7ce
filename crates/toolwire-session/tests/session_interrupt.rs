//! A connection that dies under a session: which operations go again on the next connection
//! (`Session::interrupt`), on a fake clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

mod common;
use common::*;
use toolwire_session::Succession;
use toolwire_types::TraceContext;

/// A modern session over stdio with `read` (read-only) and `write` (no hints) listed.
fn listed() -> Peer {
    let mut p = Peer::ready_modern(false);
    p.session.list_tools(p.at(1)).unwrap();
    p.answer_list(
        json!([
            {"name": "read", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
            {"name": "write", "inputSchema": {"type": "object"}}
        ]),
        2,
    );
    p.events();
    p
}

/// The session after `before` for `why` (over a transport that does or does not carry
/// headers), started at `ms`.
fn started_successor(before: &mut Peer, why: Succession, carries_headers: bool, ms: u64) -> Peer {
    let mut next = Peer {
        session: before.session.successor(why, config(), carries_headers),
        t0: before.t0,
    };
    next.session.start(next.at(ms));
    next
}

fn id_of(request: &Value) -> toolwire_types::RequestId {
    serde_json::from_value(request["id"].clone()).unwrap()
}

#[test]
fn safe_and_unread_requests_go_again_and_the_rest_are_lost_in_the_order_sent() {
    let mut p = listed();
    let patience = CallOptions::default().with_timeout(Duration::from_secs(7));
    let read = start_call(&mut p, "read", json!({"path": "a"}), patience.clone());
    p.sent();
    let write = start_call(&mut p, "write", json!({"n": 1}), CallOptions::default());
    p.sent();
    let unread_write = start_call(&mut p, "write", json!({"n": 2}), CallOptions::default());
    let (never_read, _) = p.sent();
    let opted_in = CallOptions::default().with_retry_safe(true);
    let opted = start_call(&mut p, "write", json!({"n": 3}), opted_in);
    p.sent();
    let prompts = p
        .session
        .request::<toolwire_types::methods::method::ListPrompts>(Default::default(), p.at(6))
        .unwrap();
    p.sent();
    let walk = p.session.list_tools(p.at(7)).unwrap();
    p.sent();
    let complete = p
        .session
        .request::<toolwire_types::methods::method::Complete>(
            serde_json::from_value(json!({"ref": {"type": "ref/prompt", "name": "p"},
                "argument": {"name": "a", "value": "b"}}))
            .unwrap(),
            p.at(8),
        )
        .unwrap();
    p.sent();

    let interrupted = p.session.interrupt(&[id_of(&never_read)], p.at(20));
    let ops: Vec<OpId> = interrupted.iter().map(Interrupted::op).collect();
    assert_eq!(
        ops,
        [read, write, unread_write, opted, prompts, walk, complete]
    );
    match &interrupted[0] {
        Interrupted::Replay {
            call,
            may_have_run,
            deadline,
            ..
        } => {
            assert_eq!(call.name, "read");
            assert!(*may_have_run);
            assert_eq!(*deadline, p.at(5) + Duration::from_secs(7));
        }
        other => panic!("a read-only call is replayed: {other:?}"),
    }
    assert!(matches!(
        interrupted[1],
        Interrupted::Lost {
            may_have_run: true,
            ..
        }
    ));
    assert!(matches!(
        &interrupted[2],
        Interrupted::Replay { call, may_have_run: false, .. } if call.arguments.as_ref().unwrap()["n"] == 2
    ));
    assert!(
        matches!(&interrupted[3], Interrupted::Replay { call, .. } if call.options.retry_safe == Some(true))
    );
    // A list is safe to ask again; a completion is not (its method says so).
    assert!(matches!(
        interrupted[4],
        Interrupted::Reissue {
            may_have_run: true,
            ..
        }
    ));
    assert!(matches!(interrupted[5], Interrupted::Relist { .. }));
    assert!(matches!(
        interrupted[6],
        Interrupted::Lost {
            may_have_run: true,
            ..
        }
    ));
    // Nothing of the dead connection is left to time out or to answer.
    assert_eq!(p.session.poll_timeout(), None);
    p.session.handle_timeout(p.at(60_000));
    assert!(p.events().is_empty());
}

/// Whether `events` end operation `op` as lost, and if so whether it may have run.
fn lost_in(events: &[Event], op: OpId) -> Option<bool> {
    events.iter().find_map(|e| match e {
        Event::Completed {
            op: o,
            result: Err(RequestError::Lost { may_have_run }),
        }
        | Event::ToolsListed {
            op: o,
            result: Err(RequestError::Lost { may_have_run }),
        } if *o == op => Some(*may_have_run),
        _ => None,
    })
}

#[test]
fn without_a_next_connection_each_operation_fails_as_lost_saying_whether_the_server_read_it() {
    let mut p = listed();
    let read = start_call(&mut p, "write", json!({"n": 1}), CallOptions::default());
    p.sent();
    let unread = start_call(&mut p, "read", json!({"path": "a"}), CallOptions::default());
    let (never_read, _) = p.sent();
    let walk = p.session.list_tools(p.at(7)).unwrap();
    p.sent();
    p.session
        .lose_connection(&[id_of(&never_read)], false, p.at(8));
    let events = p.events();
    let lost = |op| lost_in(&events, op);
    assert_eq!(
        lost(read),
        Some(true),
        "read by the dead server: {events:?}"
    );
    assert_eq!(lost(unread), Some(false), "never read: {events:?}");
    assert_eq!(lost(walk), Some(false), "a walk ends as listed: {events:?}");
    assert!(!p.session.is_ready());
    assert_eq!(p.session.poll_timeout(), None, "nothing is held");
}

#[test]
fn a_request_queued_and_never_sent_is_lost_as_never_read_and_a_spent_session_sends_nothing() {
    let mut p = listed();
    let sent = start_call(&mut p, "write", json!({"n": 1}), CallOptions::default());
    p.sent();
    // Queued, never handed to the transport.
    let queued = start_call(&mut p, "write", json!({"n": 2}), CallOptions::default());
    p.session.lose_connection(&[], false, p.at(8));
    let events = p.events();
    let may_have_run = |op| lost_in(&events, op);
    assert_eq!(may_have_run(sent), Some(true), "{events:?}");
    assert_eq!(may_have_run(queued), Some(false), "{events:?}");
    assert!(
        p.session.poll_transmit().is_none(),
        "nothing queued is left"
    );
    // A handler's late answer to the dead connection's server request goes nowhere.
    p.session
        .respond(&toolwire_types::RequestId::Number(7), Ok(&json!({})))
        .unwrap();
    assert!(p.session.poll_transmit().is_none());
}

#[test]
fn a_call_carried_to_the_next_connection_goes_with_the_trace_context_it_was_asked_under() {
    let mut p = listed();
    p.session.set_trace_context(TraceContext::new(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        None,
        None,
    ));
    let op = start_call(&mut p, "read", json!({"path": "a"}), CallOptions::default());
    p.session.set_trace_context(None);
    let (first, _) = p.sent();
    let parent = first["params"]["_meta"]["traceparent"].clone();
    assert!(parent.is_string(), "{first}");
    p.session.lose_connection(&[], true, p.at(10));
    assert!(p.events().is_empty(), "read-only: carried, not failed");
    let (next, sent) = reconnected(&mut p);
    let call = sent
        .iter()
        .find(|r| r["method"] == "tools/call")
        .expect("the carried call goes out once ready");
    assert_eq!(call["params"]["_meta"]["traceparent"], parent);
    assert_eq!(next.session.request_of(op), Some(id_of(call)));
}

#[test]
fn a_replayed_call_goes_out_on_the_next_session_as_it_was_asked() {
    let mut p = listed();
    let op = start_call(&mut p, "read", json!({"path": "a"}), CallOptions::default());
    let (first, _) = p.sent();
    let Some(Interrupted::Replay { call, .. }) = p.session.interrupt(&[], p.at(10)).pop() else {
        panic!("a read-only call is replayed");
    };
    let mut next = Peer::ready_modern(false);
    let again = next.session.call(call, next.at(5)).unwrap();
    let (sent, _) = next.sent();
    assert_eq!(sent["params"]["name"], first["params"]["name"]);
    assert_eq!(sent["params"]["arguments"], first["params"]["arguments"]);
    next.reply(&sent, json!({"content": []}), 6);
    assert!(next.completed(again).unwrap().is_ok());
    assert_eq!(
        p.completed(op),
        None,
        "the dead session completes nothing itself"
    );
}

#[test]
fn a_result_held_for_announced_changes_is_handed_over_marked_stale() {
    let (mut p, _listen) = Peer::ready_dynamic();
    let op = start_call(&mut p, "unlock_files", json!({}), CallOptions::default());
    let (request, _) = p.sent();
    p.reply(
        &request,
        json!({"content": [], "registers": ["read_file"]}),
        10,
    );
    assert_eq!(p.completed(op), None, "held until the changes are listed");
    assert!(p.session.interrupt(&[], p.at(11)).is_empty());
    let result = p.completed(op).expect("handed over").unwrap();
    let value: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(value["_meta"][TOOLS_STALE_META], true);
}

#[test]
fn a_call_parked_for_a_relist_after_a_header_mismatch_is_replayed_as_never_run() {
    let mut p = Peer::ready_modern(true);
    p.session.list_tools(p.at(1)).unwrap();
    p.answer_list(json!([region_tool("query")]), 2);
    p.events();
    let op = start_call(
        &mut p,
        "query",
        json!({"region": "eu", "query": "q"}),
        CallOptions::default(),
    );
    let (call, _) = p.sent();
    p.reply_error(&call, -32020, json!(null), 6);
    let (relist, _) = p.sent();
    assert_eq!(relist["method"], "tools/list");
    let interrupted = p.session.interrupt(&[], p.at(7));
    assert!(
        matches!(&interrupted[..], [Interrupted::Replay { op: o, may_have_run: false, call, .. }] if *o == op && call.name == "query"),
        "{interrupted:?}"
    );
}

fn gone(request: &Value) -> RequestFailure {
    RequestFailure {
        id: id_of(request),
        status: Some(404),
        body: Default::default(),
        cause: Arc::new(std::io::Error::other("session gone")),
        session_gone: true,
    }
}

#[test]
fn a_lost_legacy_session_is_said_once_and_its_calls_go_again_on_the_next_as_never_run() {
    let mut p = Peer::ready_legacy(true);
    let first = start_call(&mut p, "write", json!({"n": 1}), CallOptions::default());
    let (one, _) = p.sent();
    let second = start_call(&mut p, "write", json!({"n": 2}), CallOptions::default());
    let (two, _) = p.sent();
    p.session.handle_undelivered(gone(&one), p.at(6));
    p.session.handle_undelivered(gone(&two), p.at(6));
    let events = p.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(matches!(events[0], Event::SessionGone));
    // Still pending (nothing failed), until the caller ends the session.
    assert_eq!(p.completed(first), None);
    let interrupted = p.session.interrupt(&[], p.at(7));
    let replayed: Vec<(OpId, bool)> = interrupted
        .iter()
        .map(|i| match i {
            Interrupted::Replay {
                op, may_have_run, ..
            } => (*op, *may_have_run),
            other => panic!("a call that found the session gone goes again: {other:?}"),
        })
        .collect();
    assert_eq!(replayed, [(first, false), (second, false)]);

    // The next session opens a new one; its ids go on from the old one's, so a late answer
    // for request 2 of the old session is nobody's.
    let mut next = started_successor(&mut p, Succession::SessionGone, true, 8);
    let opening = next.session.poll_transmit().unwrap();
    assert_eq!(opening.session, toolwire_wire::SessionStep::Opens);
    let init: Value = serde_json::from_slice(&opening.body).unwrap();
    assert_eq!(init["method"], "initialize");
    assert!(init["id"].as_i64().unwrap() > two["id"].as_i64().unwrap());
    next.reply(&init, init_result("2025-11-25"), 9);
    let done = next.session.poll_transmit().unwrap();
    assert_eq!(done.session, toolwire_wire::SessionStep::Opened);
    next.reply(&two, json!({"content": []}), 10);
    assert!(
        next.events()
            .iter()
            .all(|e| !matches!(e, Event::Completed { .. })),
        "a late answer of the old session completes nothing"
    );
}

/// A log-level change in flight when the legacy session is lost completes: the next session
/// carries the level and sets it before it says it is ready, so nothing goes out at the old
/// level and the caller's change is not reported lost.
#[test]
fn a_level_change_in_flight_when_the_session_is_lost_completes_and_the_next_one_sets_it() {
    let mut p = Peer::new(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25), true);
    p.session.start(p.at(0));
    let (init, _) = p.sent();
    let mut result = init_result("2025-11-25");
    result["capabilities"]["logging"] = json!({});
    p.reply(&init, result, 1);
    let _initialized = p.sent();
    p.events();
    let op = p
        .session
        .change_log_level(toolwire_types::LoggingLevel::Warning, p.at(2))
        .unwrap()
        .expect("a legacy level change is a request");
    let (set, _) = p.sent();
    assert_eq!(set["method"], "logging/setLevel");
    p.session.handle_undelivered(gone(&set), p.at(3));
    assert!(matches!(p.events()[..], [Event::SessionGone]));
    let interrupted = p.session.interrupt(&[], p.at(4));
    assert!(interrupted.is_empty(), "{interrupted:?}");
    assert_eq!(p.completed(op), Some(Ok("{}".to_owned())));

    let mut next = started_successor(&mut p, Succession::SessionGone, true, 5);
    let (init, _) = next.sent();
    let mut result = init_result("2025-11-25");
    result["capabilities"]["logging"] = json!({});
    next.reply(&init, result, 6);
    let _initialized = next.sent();
    let (again, _) = next.sent();
    assert_eq!(again["method"], "logging/setLevel");
    assert_eq!(again["params"]["level"], "warning", "the carried level");
    assert!(
        next.events().iter().all(|e| !matches!(e, Event::Ready(_))),
        "ready only once the level is in force"
    );
    next.reply(&again, json!({}), 7);
    assert!(next.events().iter().any(|e| matches!(e, Event::Ready(_))));
}

/// The session after a reconnect, negotiated in the modern era, and the requests it sends
/// once ready, in order.
fn reconnected(before: &mut Peer) -> (Peer, Vec<Value>) {
    let mut next = started_successor(before, Succession::Reconnect, false, 30);
    let (discover, _) = next.sent();
    assert_eq!(discover["method"], "server/discover");
    next.reply(
        &discover,
        json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}),
        31,
    );
    let sent = std::iter::from_fn(|| next.session.poll_transmit())
        .map(|t| serde_json::from_slice::<Value>(&t.body).unwrap())
        .collect();
    (next, sent)
}

#[test]
fn a_session_after_a_reconnect_lists_the_tools_again_only_if_a_listing_succeeded_before() {
    let (mut next, sent) = reconnected(&mut Peer::ready_modern(false));
    assert!(
        sent.is_empty(),
        "never listed, nothing to list again: {sent:?}"
    );
    assert!(matches!(next.events()[..], [Event::Ready(_)]));

    let (mut next, sent) = reconnected(&mut listed());
    let methods: Vec<&Value> = sent.iter().map(|r| &r["method"]).collect();
    assert_eq!(
        methods,
        ["tools/list"],
        "listed before: listed again once ready"
    );
    let events = next.events();
    assert!(matches!(events[..], [Event::Ready(_)]), "{events:?}");
    next.reply(
        &sent[0],
        json!({"tools": [{"name": "read", "inputSchema": {"type": "object"}}]}),
        32,
    );
    let events = next.events();
    assert!(
        matches!(&events[..], [Event::ToolsRefreshed(Ok(_))]),
        "the session's own refresh: {events:?}"
    );
    // After a further reconnect too: the listing is remembered along the chain.
    let (_, sent) = reconnected(&mut next);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["method"], "tools/list");
}

#[test]
fn a_death_during_the_era_probe_makes_the_next_session_start_with_initialize() {
    let mut p = Peer::new(ProtocolMode::Auto, false);
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    assert_eq!(discover["method"], "server/discover");
    assert!(p.session.falls_back_on_death(), "the probe is in flight");
    p.session.interrupt(&[], p.at(1));
    let mut next = started_successor(&mut p, Succession::Reconnect, false, 2);
    let (init, _) = next.sent();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");

    // A death once negotiated says nothing about the probe: the next session probes again.
    let mut p = Peer::ready_modern(false);
    assert!(!p.session.falls_back_on_death());
    let (_, sent) = reconnected(&mut p);
    assert!(sent.is_empty(), "{sent:?}");
}

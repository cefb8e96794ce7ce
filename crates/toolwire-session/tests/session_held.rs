//! What is asked before a session is ready, or of a spent one: held in order, sent once
//! negotiation ends (by the session after a spent one, under the same ids), failed when its
//! caller stops waiting or negotiation fails; on a fake clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

mod common;
use common::*;
use toolwire_types::methods::method;

/// The answer of a modern `server/discover`.
fn discovered() -> Value {
    json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "prompts": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}})
}

/// The methods of everything sent until now.
fn methods_sent(p: &mut Peer) -> Vec<String> {
    std::iter::from_fn(|| p.session.poll_transmit())
        .map(|t| {
            let body: Value = serde_json::from_slice(&t.body).unwrap();
            body["method"].as_str().unwrap_or("(answer)").to_owned()
        })
        .collect()
}

fn call_with_timeout(ms: u64) -> CallOptions {
    let mut options = CallOptions::default();
    options.timeout = Some(Duration::from_millis(ms));
    options
}

#[test]
fn what_is_asked_before_ready_is_held_and_goes_out_in_order_once_ready() {
    let mut p = Peer::new(ProtocolMode::Auto, true);
    assert!(!p.session.is_ready());
    let list = p.session.list_tools(p.at(0)).unwrap();
    let call = p
        .session
        .call_tool("x", None, CallOptions::default(), p.at(0))
        .unwrap();
    let prompts = p
        .session
        .request::<method::ListPrompts>(Default::default(), p.at(0))
        .unwrap();
    assert_eq!(methods_sent(&mut p), Vec::<String>::new(), "held, not sent");
    p.session.start(p.at(1));
    let (discover, _) = p.sent();
    assert_eq!(discover["method"], "server/discover");
    p.nothing_sent();
    p.reply(&discover, discovered(), 2);
    assert!(matches!(p.event(), Event::Ready(_)));
    assert!(p.session.is_ready());
    let (listing, _) = p.sent();
    let (called, headers) = p.sent();
    let (prompted, _) = p.sent();
    assert_eq!(
        [&listing["method"], &called["method"], &prompted["method"]],
        ["tools/list", "tools/call", "prompts/list"],
        "in the order asked"
    );
    assert_eq!(header(&headers, "mcp-name"), Some("x"), "built once ready");
    p.reply(&called, json!({"content": []}), 3);
    p.reply(&prompted, json!({"prompts": []}), 3);
    let events = p.events();
    let completed: Vec<OpId> = events
        .iter()
        .filter_map(|e| match e {
            Event::Completed { op, result: Ok(_) } => Some(*op),
            _ => None,
        })
        .collect();
    assert_eq!(completed, [call, prompts], "under the ids handed out");
    assert_ne!(list, call);
}

#[test]
fn a_held_call_fails_as_unnegotiated_when_its_caller_stops_waiting() {
    let mut p = Peer::new(ProtocolMode::Auto, true);
    let op = p
        .session
        .call_tool("x", None, call_with_timeout(50), p.at(0))
        .unwrap();
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    assert!(p.session.poll_timeout().unwrap() <= p.at(50));
    p.session.handle_timeout(p.at(50));
    let failed = p.events().into_iter().find_map(|e| match e {
        Event::Completed { op: o, result } if o == op => Some(result),
        _ => None,
    });
    assert!(
        matches!(failed, Some(Err(RequestError::Unnegotiated(waited))) if waited == Duration::from_millis(50)),
        "{failed:?}"
    );
    p.reply(&discover, discovered(), 60);
    assert!(
        !methods_sent(&mut p).iter().any(|m| m == "tools/call"),
        "the call its caller gave up on never goes out"
    );
}

#[test]
fn a_held_call_cancelled_completes_as_cancelled_and_is_never_sent() {
    let mut p = Peer::new(ProtocolMode::Auto, true);
    let op = p
        .session
        .call_tool("x", None, CallOptions::default(), p.at(0))
        .unwrap();
    assert_eq!(p.session.cancel(op, Some("gone")), None, "nothing to close");
    assert!(matches!(
        p.event(),
        Event::Completed { op: o, result: Err(RequestError::Cancelled) } if o == op
    ));
    p.session.start(p.at(1));
    let (discover, _) = p.sent();
    p.reply(&discover, discovered(), 2);
    assert_eq!(methods_sent(&mut p), Vec::<String>::new());
}

#[test]
fn what_is_held_fails_with_the_negotiation_and_later_asks_are_refused() {
    let mut p = Peer::new(ProtocolMode::Pinned(ProtocolVersion::V2024_11_05), false);
    let list = p.session.list_tools(p.at(0)).unwrap();
    p.session.start(p.at(0));
    let (init, _) = p.sent();
    p.reply(&init, init_result("1999-01-01"), 1);
    let events = p.events();
    assert!(matches!(events[0], Event::Failed(_)), "{events:?}");
    assert!(
        matches!(&events[1], Event::ToolsListed { op, result: Err(RequestError::NotReady) } if *op == list),
        "{events:?}"
    );
    assert!(matches!(
        p.session
            .call_tool("x", None, CallOptions::default(), p.at(2)),
        Err(RequestError::NotReady)
    ));
}

#[test]
fn a_spent_session_holds_what_is_asked_and_carried_for_its_successor_under_the_same_ids() {
    let mut p = Peer::ready_modern(false);
    let in_flight = p
        .session
        .call_tool("x", None, CallOptions::default(), p.at(1))
        .unwrap();
    let (first, _) = p.sent();
    let unread = [request_id(&first)];
    p.session.lose_connection(&unread, true, p.at(2));
    assert!(
        p.events().is_empty(),
        "never read: it goes again, nothing fails"
    );
    assert!(!p.session.is_ready(), "spent");
    let asked = p
        .session
        .call_tool("y", None, CallOptions::default(), p.at(3))
        .unwrap();
    p.nothing_sent();
    let mut next = Peer {
        session: p.session.successor(Succession::Reconnect, config(), false),
        t0: p.t0,
    };
    next.session.start(next.at(4));
    let (discover, _) = next.sent();
    next.reply(&discover, discovered(), 5);
    assert!(matches!(next.event(), Event::Ready(_)));
    let (again, _) = next.sent();
    let (then, _) = next.sent();
    assert_eq!(
        [&again["params"]["name"], &then["params"]["name"]],
        ["x", "y"]
    );
    next.reply(&again, json!({"content": []}), 6);
    next.reply(&then, json!({"content": []}), 6);
    let completed: Vec<OpId> = next
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Completed { op, result: Ok(_) } => Some(op),
            _ => None,
        })
        .collect();
    assert_eq!(completed, [in_flight, asked]);
}

#[test]
fn a_level_changed_before_ready_is_set_by_the_handshake_once_and_completes_when_in_force() {
    let mut p = Peer::new(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25), false);
    let op = p
        .session
        .change_log_level(toolwire_types::LoggingLevel::Debug, p.at(0))
        .unwrap()
        .expect("held until ready: there is something to wait for");
    p.session.start(p.at(0));
    let (init, _) = p.sent();
    let declares_logging = json!({"protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}, "logging": {}}, "serverInfo": {"name": "s", "version": "1"}});
    p.reply(&init, declares_logging, 1);
    let (_initialized, _) = p.sent();
    let (set_level, _) = p.sent();
    assert_eq!(set_level["method"], "logging/setLevel");
    assert_eq!(set_level["params"]["level"], "debug");
    p.reply(&set_level, json!({}), 2);
    let events = p.events();
    assert!(matches!(events[0], Event::Ready(_)), "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Completed { op: o, result: Ok(_) } if *o == op)),
        "{events:?}"
    );
    assert_eq!(
        methods_sent(&mut p),
        Vec::<String>::new(),
        "the level is sent once"
    );
}

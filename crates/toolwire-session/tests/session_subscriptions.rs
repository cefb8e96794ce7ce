//! The session on a fake clock: resource subscriptions and the listen stream in both eras, and a negotiation adopted from before.

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

const FILE_A: &str = "toolwire://files/a";
const FILE_B: &str = "toolwire://files/b";

impl Peer {
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
                    session_gone: false,
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
        // Asked while it probes again: held until it is ready.
        p.session.list_tools(p.at(3)).unwrap();
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
        let (held, _) = p.sent();
        assert_eq!(held["method"], "tools/list", "{refusal}: sent once ready");
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

/// `is_listening` says when a watcher may cause a change and still hear of it: a modern
/// session only once its listen stream is acknowledged (and again only once a stream that
/// dropped is acknowledged anew); a modern one with nothing to listen for, and a legacy one,
/// as soon as they are negotiated.
#[test]
fn a_session_is_listening_once_its_listen_stream_is_acknowledged_or_none_is_needed() {
    let mut p = Peer::with_config(dynamic_config(), true);
    assert!(!p.session.is_listening(), "not negotiated");
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    p.reply(&discover, json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}), 1);
    let (listen, _) = p.sent();
    assert_eq!(listen["method"], "subscriptions/listen");
    assert!(!p.session.is_listening(), "the stream is not acknowledged");
    p.listen_ack(&listen, 2);
    assert!(p.session.is_listening());
    // The stream ends: not listening until its successor is acknowledged.
    p.reply(&listen, json!({}), 3);
    assert!(!p.session.is_listening(), "the stream dropped");
    p.session.handle_timeout(p.at(3 + 1_000));
    let (again, _) = p.sent();
    assert_eq!(again["method"], "subscriptions/listen");
    assert!(!p.session.is_listening());
    p.listen_ack(&again, 1_004);
    assert!(p.session.is_listening());

    // Nothing declared to listen for: no stream, listening once negotiated.
    let quiet = Peer::ready_modern(true);
    assert!(quiet.session.is_listening());
    let legacy = Peer::ready_legacy(true);
    assert!(legacy.session.is_listening());
}

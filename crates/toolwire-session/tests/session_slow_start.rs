//! A server slow to start, against the session with a fake clock: the `server/discover` probe
//! that times out sends `initialize`, and over stdio the probe's late answer still settles the
//! era; a probe pinned to the modern era waits the whole request timeout.

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

const DISCOVERED: fn() -> Value = || json!({"supportedVersions": ["2026-07-28"], "capabilities": {}, "serverInfo": {"name": "slow", "version": "0"}});

/// A probe with no answer in its 5 s: `initialize` goes out after it.
fn silent_probe(carries_headers: bool) -> (Peer, Value, Value) {
    let mut p = Peer::new(ProtocolMode::Auto, carries_headers);
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    assert_eq!(p.session.poll_timeout(), Some(p.at(5000)));
    p.session.handle_timeout(p.at(4999));
    p.nothing_sent();
    p.session.handle_timeout(p.at(5000));
    let (init, _) = p.sent();
    assert_eq!(init["method"], "initialize");
    (p, discover, init)
}

#[test]
fn a_slow_stdio_server_that_answers_the_probe_late_is_modern_and_its_initialize_refusal_is_dropped()
{
    let (mut p, discover, init) = silent_probe(false);
    // A server that started after 6 s reads the probe first, then refuses `initialize`.
    p.reply(&discover, DISCOVERED(), 6000);
    let Event::Ready(n) = p.event() else { panic!() };
    assert_eq!(n.version, ProtocolVersion::V2026_07_28);
    assert_eq!(n.server_info.unwrap().name, "slow");
    p.reply_error(&init, -32022, json!({"supported": ["2026-07-28"]}), 6001);
    assert!(
        p.session.poll_event().is_none(),
        "the refusal of the initialize that lost the race is dropped"
    );
    p.nothing_sent();
}

#[test]
fn a_slow_legacy_stdio_server_that_refuses_the_probe_late_is_legacy_through_initialize() {
    let (mut p, discover, init) = silent_probe(false);
    p.reply_error(&discover, -32601, Value::Null, 6000);
    assert!(p.session.poll_event().is_none(), "initialize decides");
    p.nothing_sent();
    p.reply(&init, init_result("2025-06-18"), 6001);
    let (initialized, _) = p.sent();
    assert_eq!(initialized["method"], "notifications/initialized");
    let Event::Ready(n) = p.event() else { panic!() };
    assert_eq!(n.version, ProtocolVersion::V2025_06_18);
}

#[test]
fn an_initialize_refused_before_the_late_probe_waits_for_its_answer() {
    let (mut p, discover, init) = silent_probe(false);
    p.reply_error(&init, -32022, json!({"supported": ["2026-07-28"]}), 6000);
    assert!(p.session.poll_event().is_none(), "not failed yet");
    p.reply(&discover, DISCOVERED(), 6001);
    let Event::Ready(n) = p.event() else { panic!() };
    assert_eq!(n.version, ProtocolVersion::V2026_07_28);
}

#[test]
fn an_initialize_refused_fails_with_its_refusal_once_the_late_probe_times_out() {
    let (mut p, _discover, init) = silent_probe(false);
    p.reply_error(&init, -32022, json!({"supported": ["2026-07-28"]}), 6000);
    assert!(p.session.poll_event().is_none());
    // The late probe's deadline: initialize's, a whole request timeout after it went out.
    assert_eq!(p.session.poll_timeout(), Some(p.at(65_000)));
    p.session.handle_timeout(p.at(65_000));
    let Event::Failed(e) = p.event() else {
        panic!()
    };
    assert!(
        matches!(
            e,
            SessionError::Refused {
                method: "initialize",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn over_http_a_probe_answered_after_its_timeout_is_dropped() {
    let (mut p, discover, _init) = silent_probe(true);
    p.reply(&discover, DISCOVERED(), 6000);
    assert!(
        p.session.poll_event().is_none(),
        "over HTTP the transport follows initialize's exchange"
    );
}

#[test]
fn a_probe_pinned_to_the_modern_era_waits_the_whole_request_timeout() {
    let mut p = Peer::new(ProtocolMode::Pinned(ProtocolVersion::V2026_07_28), false);
    p.session.start(p.at(0));
    let (discover, _) = p.sent();
    assert_eq!(p.session.poll_timeout(), Some(p.at(60_000)));
    p.session.handle_timeout(p.at(30_000));
    p.nothing_sent();
    p.reply(&discover, DISCOVERED(), 30_000);
    let Event::Ready(n) = p.event() else { panic!() };
    assert_eq!(n.version, ProtocolVersion::V2026_07_28);
}

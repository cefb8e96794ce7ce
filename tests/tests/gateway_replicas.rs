//! Gateway replicas behind one load balancer, with no affinity: a legacy session begun on one
//! goes on at any replica holding the key, a stream resumed at a replica that did not write
//! it is told what it can have (and at the one that did, gets what it sent, and sends), a
//! session's messages go on its newest GET stream only, and each replica counts its own
//! sessions.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod gateway_common;

use std::sync::Arc;

use gateway_common::*;
use serde_json::{Value, json};
use toolwire_gateway::Gateway;
use toolwire_host::Naming;
use toolwire_refserver::{Eras, Framing};

/// A gateway over its own host of `upstream`, its legacy sessions sealed with `keys`.
async fn replica(upstream: &str, keys: &[[u8; 32]]) -> (Arc<Gateway>, toolwire_server::HttpServer) {
    let host = host(json!({"new": {"url": upstream}}), Naming::Qualified).await;
    let gateway = Gateway::builder(host).build();
    let mut options = toolwire_server::Options::default();
    options.session_keys = Some(toolwire_server::SessionKeys::new(keys.iter().copied()).unwrap());
    let front = gateway.serve_http(LOOPBACK, options).await.unwrap();
    (gateway, front)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_started_on_one_replica_goes_on_at_any_replica_with_the_key() {
    let new = reference(Eras::Modern, Framing::Json).await;
    let (old_key, new_key, other_key) = ([1u8; 32], [2u8; 32], [3u8; 32]);
    let (a_gw, a) = replica(&new.url(), &[old_key]).await;
    // B has moved to a new key and still opens the old one; C has another key altogether.
    let (b_gw, b) = replica(&new.url(), &[new_key, old_key]).await;
    let (c_gw, c) = replica(&new.url(), &[other_key]).await;

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, session, _) = exchange(a.addr(), &[], &initialize).await;
    assert_eq!(status, 200);
    let session = session.expect("a session id");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "new__echo", "arguments": {"text": "on B"}}});
    let with = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];

    // B never saw the session: it opens it, and serves it.
    let (status, body) = post(b.addr(), &with, &call).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "on B");
    // C cannot open it.
    assert_eq!(post(c.addr(), &with, &call).await.0, 404);
    // A tampered id opens nowhere.
    let mut tampered = session.clone().into_bytes();
    tampered[5] = if tampered[5] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let forged = [
        ("mcp-session-id", tampered.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    assert_eq!(post(a.addr(), &forged, &call).await.0, 404);

    // B seals with its new key: A, which has only the old one, does not know B's sessions.
    let (_, from_b, _) = exchange(b.addr(), &[], &initialize).await;
    let from_b = from_b.unwrap();
    let with_b = [
        ("mcp-session-id", from_b.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    assert_eq!(post(a.addr(), &with_b, &call).await.0, 404);
    assert_eq!(post(b.addr(), &with_b, &call).await.0, 200);

    for gateway in [a_gw, b_gw, c_gw] {
        gateway.host().shutdown().await;
    }
}

/// A legacy session begun at `addr` (2025-06-18): its id.
async fn legacy_session(addr: std::net::SocketAddr) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (_, sid, _) = exchange(addr, &[], &initialize).await;
    sid.expect("a session id")
}

/// A raw GET of `sid`'s stream from `addr`, resuming after `last`: the status and the
/// messages of a stream that ends.
async fn resume(addr: std::net::SocketAddr, sid: &str, last: &str) -> (u16, Vec<Value>) {
    let request = format!(
        "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nmcp-session-id: {sid}\r\nmcp-protocol-version: 2025-06-18\r\nlast-event-id: {last}\r\nconnection: close\r\n\r\n"
    );
    let (status, _, messages) = raw(addr, request.as_bytes()).await;
    (status, messages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_refuses_to_resume_another_replicas_answer_and_its_own_replays_it() {
    let new = reference(Eras::Modern, Framing::Json).await;
    let key = [9u8; 32];
    let (a_gw, a) = replica(&new.url(), &[key]).await;
    let (b_gw, b) = replica(&new.url(), &[key]).await;
    let sid = legacy_session(a.addr()).await;
    let with = [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let call = json!({"jsonrpc": "2.0", "id": "call-7", "method": "tools/call", "params": {
        "name": "new__echo", "arguments": {"text": "on A"}}});
    let (status, _, body) =
        raw_text(a.addr(), post_request(a.addr(), &with, &call).as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    // The priming event's id: where a client whose stream broke resumes from.
    let primed = event_ids(&body)
        .into_iter()
        .next()
        .expect("a priming event");

    // A wrote the stream: it replays the answer.
    let (status, replayed) = resume(a.addr(), &sid, &primed).await;
    assert_eq!(status, 200);
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert_eq!(replayed[0]["id"], "call-7");
    assert_eq!(replayed[0]["result"]["content"][0]["text"], "on A");

    // B holds the session but not A's streams, and has streams of the same numbers: it
    // replays none of its own in their place, and refuses (503) for the client or the
    // balancer to try the next replica (an empty stream had the client come back for ever).
    let on_b = json!({"jsonrpc": "2.0", "id": "call-7", "method": "tools/call", "params": {
        "name": "new__echo", "arguments": {"text": "on B"}}});
    for _ in 0..2 {
        let (_, _, answer) = exchange_all(b.addr(), &with, &on_b).await;
        assert_eq!(
            answer.last().unwrap()["result"]["content"][0]["text"],
            "on B"
        );
    }
    let (status, refused) = resume(b.addr(), &sid, &primed).await;
    assert_eq!(status, 503);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].get("result").is_none(), "{refused:?}");
    let message = refused[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("another server process"), "{message}");
    // A, asked again, still replays it.
    assert_eq!(resume(a.addr(), &sid, &primed).await.1, replayed);
    // Another session presenting that id at A reads nothing of the first one's stream.
    let other = legacy_session(a.addr()).await;
    let (_, foreign) = resume(a.addr(), &other, &primed).await;
    assert!(
        foreign.iter().all(|m| m.get("result").is_none()),
        "{foreign:?}"
    );

    // An id no replica wrote resumes nothing, at once.
    assert_eq!(resume(b.addr(), &sid, "2:0").await.0, 400);

    for gateway in [a_gw, b_gw] {
        gateway.host().shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_resumed_while_its_call_runs_comes_down_the_resumed_stream() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let new = reference(Eras::Modern, Framing::Json).await;
    let (gateway, a) = replica(&new.url(), &[[5u8; 32]]).await;
    let sid = legacy_session(a.addr()).await;
    let with = [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    // The call's own connection goes once its priming event came, the call still running.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "new__slow", "arguments": {"steps": 1, "delay_ms": 800}}});
    let mut connection = tokio::net::TcpStream::connect(a.addr()).await.unwrap();
    connection
        .write_all(post_request(a.addr(), &with, &call).as_bytes())
        .await
        .unwrap();
    let mut seen = Vec::new();
    let primed = loop {
        let mut buf = [0u8; 4096];
        let n = connection.read(&mut buf).await.unwrap();
        assert!(n > 0, "the stream ended before its priming event");
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if let Some(id) = event_ids(&text).into_iter().next()
            && text.contains("retry:")
        {
            break id;
        }
    };
    drop(connection);

    // Resumed while it runs: the stream stays open and brings the answer when it comes
    // (ended at once, it would have the client come back again and again).
    let (status, resumed) = resume(a.addr(), &sid, &primed).await;
    assert_eq!(status, 200);
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!(resumed[0]["id"], 3);
    assert_eq!(
        resumed[0]["result"]["content"][0]["text"],
        "done after 1 steps"
    );
    gateway.host().shutdown().await;
}

/// The value of the series `line` starts with in a `/metrics` page, if it is there.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_each_replicas_legacy_sessions_and_requests_by_method() {
    let new = reference(Eras::Modern, Framing::Json).await;
    let key = [7u8; 32];
    let (a_gw, a) = replica(&new.url(), &[key]).await;
    let (b_gw, b) = replica(&new.url(), &[key]).await;
    let sessions = |addr| async move {
        let (_, text) = get(addr, "/metrics").await;
        metric(&text, "toolwire_gateway_legacy_sessions").unwrap_or(-1.0)
    };
    assert_eq!(sessions(a.addr()).await, 0.0);

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, session, _) = exchange(a.addr(), &[], &initialize).await;
        assert_eq!(status, 200);
        ids.push(session.expect("a session id"));
    }
    assert_eq!(sessions(a.addr()).await, 2.0);
    assert_eq!(sessions(b.addr()).await, 0.0);

    // B takes one of A's sessions up: it holds it from then on.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let with = [
        ("mcp-session-id", ids[0].as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    assert_eq!(post(b.addr(), &with, &list).await.0, 200);
    assert_eq!(sessions(b.addr()).await, 1.0);

    // Its client ends it there.
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nhost: {}\r\nmcp-session-id: {}\r\nmcp-protocol-version: 2025-06-18\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        b.addr(),
        ids[0]
    );
    let (status, _, _) = raw(b.addr(), delete.as_bytes()).await;
    assert!((200..300).contains(&status), "{status}");
    assert_eq!(sessions(b.addr()).await, 0.0);

    let (_, text) = get(a.addr(), "/metrics").await;
    assert_eq!(
        metric(
            &text,
            r#"toolwire_gateway_requests_total{method="initialize"}"#
        ),
        Some(2.0),
        "{text}"
    );
    let (_, text) = get(b.addr(), "/metrics").await;
    assert_eq!(
        metric(
            &text,
            r#"toolwire_gateway_requests_total{method="tools/list"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        text.contains("toolwire_gateway_build_info{version="),
        "{text}"
    );
    for gateway in [a_gw, b_gw] {
        gateway.host().shutdown().await;
    }
}

/// Each message of a legacy session goes on one of its GET streams (the spec forbids sending
/// one on several): the newest open one. A client that resumes its stream while the old
/// connection still lingers here (a balancer cut it on the client's side) reads the new one;
/// the old one hears nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_messages_go_on_its_newest_get_stream_and_not_on_the_one_it_resumed() {
    let upstream = reference(Eras::Modern, Framing::Json).await;
    let (gateway, front) = replica(&upstream.url(), &[[5u8; 32]]).await;
    let sid = legacy_session(front.addr()).await;
    let change = |name: &str| {
        let schema = serde_json::from_value(json!({"type": "object"})).unwrap();
        let tool = toolwire::Tool::new(name, schema);
        gateway.host().add_known_tools("new", [tool]).unwrap();
    };
    const CHANGED: &str = "notifications/tools/list_changed";
    let mut old = GetStream::open(front.addr(), &sid, &[]).await;
    change("first");
    let last = event_ids(old.until(CHANGED).await)
        .pop()
        .expect("an event id");
    // The client resumes after the event it read, on a new connection; the old one is open.
    let mut new = GetStream::open(front.addr(), &sid, &[("last-event-id", &last)]).await;
    change("second");
    new.until(CHANGED).await;
    let heard = old.during(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        heard.matches(CHANGED).count(),
        1,
        "the old stream heard it too: {heard}"
    );
    gateway.host().shutdown().await;
}

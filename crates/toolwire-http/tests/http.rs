//! The HTTP transport against scripted HTTP peers on loopback sockets.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use toolwire_http::{AcceptProfile, HttpError, HttpTransport, Proxy, RetryPolicy};
use toolwire_test_support::forward::ForwardProxy;
use toolwire_test_support::http::{HttpPeer, Part, Recorded, Reply, sse_event};
use toolwire_transport::{
    Inbound, MessageKind, Outbound, RequestId, RetryClass, Transport, TransportError,
};

fn request(id: i64, method: &'static str, retry: RetryClass) -> Outbound {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method}).to_string();
    let mut out = Outbound::new(
        body,
        MessageKind::Request {
            id: RequestId::Number(id),
            method,
        },
    );
    out.retry = retry;
    out
}

fn notification(method: &'static str) -> Outbound {
    Outbound::new(
        json!({"jsonrpc": "2.0", "method": method}).to_string(),
        MessageKind::Notification { method },
    )
}

fn answer(id: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"ok": true}}).to_string()
}

/// The next thing `recv` yields, within 10 s.
async fn next(t: &HttpTransport) -> Result<Inbound, TransportError> {
    tokio::time::timeout(Duration::from_secs(10), t.recv())
        .await
        .expect("no message within 10 s")
        .expect("transport closed")
}

/// The failure of the next item, with its HTTP error.
async fn failure(t: &HttpTransport) -> (Option<u16>, String, Bytes) {
    match next(t).await {
        Err(TransportError::Request(f)) => (f.status, f.cause.to_string(), f.body),
        other => panic!("expected a request failure, got {other:?}"),
    }
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy::new(3, Duration::from_millis(10), Duration::from_millis(50))
}

/// Answers every request with a JSON result, and notifications with 202.
fn json_ok(req: &Recorded) -> Reply {
    match req.rpc_id() {
        Some(id) => Reply::json(200, answer(&id)),
        None => Reply::status(202),
    }
}

#[tokio::test]
async fn json_answers_carry_every_header_and_notifications_get_202() {
    let peer = HttpPeer::start(json_ok).await;
    let sent = Arc::new(Mutex::new(Vec::new()));
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let (s, r) = (sent.clone(), statuses.clone());
    let t = HttpTransport::builder(peer.url())
        .header("X-Tenant", "acme")
        .user_agent("agent/9")
        .bearer_token("tok")
        .on_sending(move |m| s.lock().unwrap().push(m.to_owned()))
        .on_received(move |r| {
            statuses.lock().unwrap().push((
                r.method.map(str::to_owned),
                r.status.as_u16(),
                r.snippet.to_owned(),
            ))
        })
        .build()
        .unwrap();
    let mut out = request(1, "tools/call", RetryClass::Never);
    out.headers.push((
        http::HeaderName::from_static("mcp-param-region"),
        http::HeaderValue::from_static("us-west1"),
    ));
    out.headers.push((
        http::HeaderName::from_static("mcp-protocol-version"),
        http::HeaderValue::from_static("2026-07-28"),
    ));
    t.send(out).await.unwrap();
    let got = next(&t).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&got.body).unwrap()["id"], 1);
    t.send(notification("notifications/initialized"))
        .await
        .unwrap();

    let reqs = peer.requests();
    assert_eq!(reqs.len(), 2);
    let call = &reqs[0];
    assert_eq!(call.method, http::Method::POST);
    assert_eq!(call.header("content-type"), "application/json");
    assert_eq!(call.header("accept"), "application/json, text/event-stream");
    assert_eq!(call.header("mcp-param-region"), "us-west1");
    assert_eq!(call.header("mcp-protocol-version"), "2026-07-28");
    assert_eq!(call.header("x-tenant"), "acme");
    assert_eq!(call.header("user-agent"), "agent/9");
    assert_eq!(call.header("authorization"), "Bearer tok");
    assert_eq!(
        call.header("mcp-session-id"),
        "",
        "no session in a stateless exchange"
    );
    assert_eq!(
        *sent.lock().unwrap(),
        ["tools/call", "notifications/initialized"]
    );
    let r = r.lock().unwrap();
    assert_eq!(r[0].0.as_deref(), Some("tools/call"));
    assert_eq!(r[0].1, 200);
    assert!(r[0].2.contains("\"ok\":true"));
    assert_eq!(r[1].1, 202);
    assert!(!format!("{t:?}").contains("tok\""), "{t:?}");
}

#[tokio::test]
async fn sse_skips_comments_priming_and_other_events_and_keeps_order() {
    let peer = HttpPeer::start(|req| {
        let id = req.rpc_id().unwrap();
        Reply::sse([
            ": keep-alive\n\n".to_owned(),
            "id: 0\ndata:\n\n".to_owned(),
            "event: ping\ndata: {}\n\n".to_owned(),
            sse_event(
                Some("1"),
                br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
            ),
            format!("id: 2\nevent: message\ndata: {}\n\n", answer(&id)),
        ])
    })
    .await;
    let t = HttpTransport::new(peer.url()).unwrap();
    t.send(request(5, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let first: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(first["method"], "notifications/progress");
    let second: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(second["id"], 5);
}

#[tokio::test]
async fn the_answer_is_delivered_before_the_stream_ends() {
    // The server keeps the stream open for a long time after the answer (or writes its tail
    // slowly): the call must not wait for it.
    let peer = HttpPeer::start(|req| {
        let id = req.rpc_id().unwrap();
        Reply::sse([sse_event(None, answer(&id).as_bytes())])
            .part(Part::Sleep(Duration::from_secs(30)))
    })
    .await;
    let t = HttpTransport::new(peer.url()).unwrap();
    let start = Instant::now();
    t.send(request(1, "ping", RetryClass::Safe)).await.unwrap();
    next(&t).await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn accept_falls_back_on_406_and_remembers() {
    let peer = HttpPeer::start(|req| match req.header("accept") {
        "*/*" => json_ok(req),
        _ => Reply::status(406),
    })
    .await;
    let t = HttpTransport::new(peer.url()).unwrap();
    t.send(request(1, "tools/list", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    assert_eq!(t.accept_profile(), AcceptProfile::Wildcard);
    t.send(request(2, "tools/list", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    let accepts: Vec<String> = peer
        .requests()
        .iter()
        .map(|r| r.header("accept").to_owned())
        .collect();
    assert_eq!(
        accepts,
        [
            "application/json, text/event-stream",
            "application/json",
            "*/*",
            "*/*"
        ]
    );

    // A server that refuses everything, even no Accept at all.
    let peer = HttpPeer::start(|_| Reply::status(406)).await;
    let t = HttpTransport::builder(peer.url())
        .accept_profile(AcceptProfile::JsonOnly)
        .build()
        .unwrap();
    t.send(request(1, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    let (_, cause, _) = failure(&t).await;
    assert_eq!(cause, HttpError::NotAcceptable.to_string());
    assert_eq!(peer.requests().len(), 3, "JsonOnly, Wildcard, Omit");
    assert_eq!(peer.requests()[2].header("accept"), "");
}

#[tokio::test]
async fn transient_statuses_are_retried_only_when_safe() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let peer = HttpPeer::start(move |req| {
        if c.fetch_add(1, Ordering::SeqCst) < 2 {
            Reply::status(503)
        } else {
            json_ok(req)
        }
    })
    .await;
    let t = HttpTransport::builder(peer.url())
        .retry_policy(fast_retries())
        .build()
        .unwrap();
    t.send(request(1, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    next(&t).await.unwrap();
    assert_eq!(peer.requests().len(), 3, "503, 503, then the answer");

    // Not retry-safe: the 503 goes to the caller after one attempt.
    count.store(0, Ordering::SeqCst);
    t.send(request(2, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let (status, _, _) = failure(&t).await;
    assert_eq!(status, Some(503));
    assert_eq!(peer.requests().len(), 4);

    // 500 is never retried, even when safe.
    let peer = HttpPeer::start(|_| Reply::json(500, "{\"oops\":1}")).await;
    let t = HttpTransport::builder(peer.url())
        .retry_policy(fast_retries())
        .build()
        .unwrap();
    t.send(request(1, "tools/call", RetryClass::Safe))
        .await
        .unwrap();
    let (status, cause, body) = failure(&t).await;
    assert_eq!(status, Some(500));
    assert!(cause.contains("oops"), "{cause}");
    assert_eq!(&body[..], b"{\"oops\":1}");
    assert_eq!(peer.requests().len(), 1);
}

#[tokio::test]
async fn retry_after_is_honoured_and_capped() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let peer = HttpPeer::start(move |req| {
        if c.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::status(429).header("retry-after", "1")
        } else {
            json_ok(req)
        }
    })
    .await;
    let t = HttpTransport::builder(peer.url())
        .retry_policy(fast_retries())
        .build()
        .unwrap();
    let start = Instant::now();
    t.send(request(1, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    next(&t).await.unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(950),
        "waited only {:?}",
        start.elapsed()
    );
    assert_eq!(peer.requests().len(), 2);

    // Asking for more than the cap: the 429 goes to the caller at once.
    let peer = HttpPeer::start(|_| Reply::status(429).header("retry-after", "3600")).await;
    let t = HttpTransport::builder(peer.url())
        .retry_policy(fast_retries().with_max_retry_after(Duration::from_secs(5)))
        .build()
        .unwrap();
    t.send(request(1, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    assert_eq!(failure(&t).await.0, Some(429));
    assert_eq!(peer.requests().len(), 1);
}

#[tokio::test]
async fn connection_failures_are_typed() {
    // A port nobody listens on: bind, note it, close.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let t = HttpTransport::builder(format!("http://127.0.0.1:{port}/mcp"))
        .retry_policy(fast_retries())
        .build()
        .unwrap();
    // Not retry-safe, yet resent: nothing left the client. Then reported, typed.
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let started = Instant::now();
    let failed = match next(&t).await {
        Err(TransportError::Request(f)) => f,
        other => panic!("expected a request failure, got {other:?}"),
    };
    assert_eq!(failed.status, None);
    assert!(
        failed
            .cause
            .to_string()
            .starts_with("no connection could be made"),
        "{}",
        failed.cause
    );
    let cause = failed.cause.downcast_ref::<HttpError>().unwrap();
    assert!(cause.nothing_sent());
    // Three resends, 10 ms doubling (with jitter): at least 10 + 20 + 40 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(60),
        "{:?}",
        started.elapsed()
    );
}

/// A legacy server whose sessions (`s1`, `s2`, …) expire when the test moves the counter:
/// a request with another session id gets a 404; no GET stream; DELETE succeeds.
async fn expiring_legacy_peer() -> (HttpPeer, Arc<AtomicUsize>) {
    let session = Arc::new(AtomicUsize::new(0));
    let s = session.clone();
    let peer = HttpPeer::start(move |req| {
        let method = req.rpc_method().unwrap_or_default();
        match (req.method.as_str(), method.as_str()) {
            ("GET", _) => Reply::status(405),
            ("DELETE", _) => Reply::status(200),
            (_, "initialize") => {
                let n = s.fetch_add(1, Ordering::SeqCst) + 1;
                json_ok(req).header("mcp-session-id", &format!("s{n}"))
            }
            _ if req.header("mcp-session-id") != format!("s{}", s.load(Ordering::SeqCst)) => {
                Reply::status(404)
            }
            _ => json_ok(req),
        }
    })
    .await;
    (peer, session)
}

/// A request with `params`.
fn request_with(id: i64, method: &'static str, params: Value) -> Outbound {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    Outbound::new(
        body.to_string(),
        MessageKind::Request {
            id: RequestId::Number(id),
            method,
        },
    )
}

/// A new legacy session starts without the old one's log level and subscriptions: after the
/// replayed handshake the last `logging/setLevel` and every subscription still held (not one
/// unsubscribed) go again, before the request that found the session gone.
#[tokio::test]
async fn a_replayed_legacy_session_gets_the_log_level_and_subscriptions_back() {
    let (peer, session) = expiring_legacy_peer().await;
    let t = HttpTransport::new(peer.url()).unwrap();
    t.send(request(1, "initialize", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    t.send(notification("notifications/initialized"))
        .await
        .unwrap();
    let state = [
        request_with(2, "logging/setLevel", json!({"level": "debug"})),
        request_with(3, "logging/setLevel", json!({"level": "error"})),
        request_with(4, "resources/subscribe", json!({"uri": "file:///a"})),
        request_with(5, "resources/subscribe", json!({"uri": "file:///b"})),
        request_with(6, "resources/unsubscribe", json!({"uri": "file:///a"})),
    ];
    for out in state {
        t.send(out).await.unwrap();
        next(&t).await.unwrap();
    }
    session.store(5, Ordering::SeqCst);
    t.send(request(7, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let got: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(got["id"], 7);
    let after: Vec<(String, Value)> = peer
        .requests()
        .iter()
        .filter(|r| r.method == http::Method::POST)
        // The first session's: the handshake, the five, the call that got the 404.
        .skip(8)
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            (r.rpc_method().unwrap_or_default(), body["params"].clone())
        })
        .collect();
    let methods: Vec<&str> = after.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "logging/setLevel",
            "resources/subscribe",
            "tools/call"
        ]
    );
    assert_eq!(after[2].1, json!({"level": "error"}));
    assert_eq!(after[3].1, json!({"uri": "file:///b"}));
}

#[tokio::test]
async fn legacy_session_is_captured_sent_and_replayed_after_404() {
    let (peer, session) = expiring_legacy_peer().await;
    let t = HttpTransport::new(peer.url()).unwrap();
    t.send(request(1, "initialize", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    assert_eq!(t.session_id().as_deref(), Some("s1"));
    let mut initialized = notification("notifications/initialized");
    initialized.headers.push((
        http::HeaderName::from_static("mcp-protocol-version"),
        http::HeaderValue::from_static("2025-11-25"),
    ));
    t.send(initialized).await.unwrap();
    t.send(request(2, "tools/list", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();

    // The server forgets the session: the next call replays the handshake and is resent.
    session.store(5, Ordering::SeqCst);
    t.send(request(3, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let got: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(got["id"], 3);
    assert_eq!(t.session_id().as_deref(), Some("s6"));

    let posts: Vec<(String, String)> = peer
        .requests()
        .iter()
        .filter(|r| r.method == http::Method::POST)
        .map(|r| {
            (
                r.rpc_method().unwrap_or_default(),
                r.header("mcp-session-id").to_owned(),
            )
        })
        .collect();
    let expect = [
        ("initialize", ""),
        ("notifications/initialized", "s1"),
        ("tools/list", "s1"),
        ("tools/call", "s1"),
        ("initialize", ""),
        ("notifications/initialized", "s6"),
        ("tools/call", "s6"),
    ];
    let expect: Vec<(String, String)> = expect
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    assert_eq!(posts, expect);
    // The GET stream was tried once per handshake (405: none) with the session and version.
    let gets: Vec<Recorded> = peer
        .requests()
        .into_iter()
        .filter(|r| r.method == http::Method::GET)
        .collect();
    assert!(!gets.is_empty() && gets.len() <= 2, "{} GETs", gets.len());
    assert_eq!(gets[0].header("accept"), "text/event-stream");
    assert_eq!(gets[0].header("mcp-session-id"), "s1");
    assert_eq!(gets[0].header("mcp-protocol-version"), "2025-11-25");

    // close sends DELETE with the live session.
    t.close().await.unwrap();
    let deletes: Vec<Recorded> = peer
        .requests()
        .into_iter()
        .filter(|r| r.method == http::Method::DELETE)
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].header("mcp-session-id"), "s6");
    assert!(matches!(
        t.send(request(9, "ping", RetryClass::Safe)).await,
        Err(TransportError::Closed)
    ));
}

#[tokio::test]
async fn legacy_stream_cut_mid_way_resumes_with_last_event_id_after_retry() {
    let peer = HttpPeer::start(|req| {
        let method = req.rpc_method().unwrap_or_default();
        match (req.method.as_str(), method.as_str()) {
            ("GET", _) if req.header("last-event-id") == "e1" => Reply::sse([sse_event(
                Some("e2"),
                answer(&json!(2)).as_bytes(),
            )]),
            ("GET", _) => Reply::status(405),
            ("DELETE", _) => Reply::status(405),
            (_, "initialize") => json_ok(req).header("mcp-session-id", "abc"),
            (_, "tools/call") => Reply::sse([
                "id: e0\nretry: 500\ndata:\n\n".to_owned(),
                sse_event(
                    Some("e1"),
                    br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"half"}}"#,
                ),
            ])
            .part(Part::Cut),
            _ => json_ok(req),
        }
    })
    .await;
    let t = HttpTransport::new(peer.url()).unwrap();
    t.send(request(1, "initialize", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    let start = Instant::now();
    t.send(request(2, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let log: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(log["method"], "notifications/message");
    let got: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(got["id"], 2);
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(450),
        "resumed after {waited:?}"
    );
    let resume = peer
        .requests()
        .into_iter()
        .find(|r| r.method == http::Method::GET && !r.header("last-event-id").is_empty())
        .expect("a resumption GET");
    assert_eq!(resume.header("mcp-session-id"), "abc");
    assert_eq!(peer.calls("tools/call").len(), 1, "never resent");
    // A 405 to DELETE is fine.
    t.close().await.unwrap();
}

#[tokio::test]
async fn modern_streams_are_never_resumed_and_stray_session_ids_ignored() {
    let peer = HttpPeer::start(|req| match req.rpc_method().as_deref() {
        Some("server/discover") => json_ok(req).header("mcp-session-id", "stray"),
        Some("tools/call") => {
            Reply::sse(["id: 1\nretry: 10\ndata:\n\n".to_owned()]).part(Part::Cut)
        }
        _ => json_ok(req),
    })
    .await;
    let t = HttpTransport::new(peer.url()).unwrap();
    t.send(request(1, "server/discover", RetryClass::Safe))
        .await
        .unwrap();
    next(&t).await.unwrap();
    assert_eq!(t.session_id(), None);
    t.send(request(2, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let (status, cause, _) = failure(&t).await;
    assert_eq!(status, None);
    assert!(
        cause.starts_with("the response stream ended before the answer"),
        "{cause}"
    );
    t.send(request(3, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    next(&t).await.unwrap();
    t.close().await.unwrap();
    for r in peer.requests() {
        assert_eq!(
            r.method,
            http::Method::POST,
            "no GET or DELETE in the modern era"
        );
        assert_eq!(r.header("mcp-session-id"), "");
    }
}

/// A peer whose SSE answer never comes: a priming event, then a comment every 100 ms for 5 s.
async fn ticking_sse_peer() -> HttpPeer {
    HttpPeer::start(|_| {
        let mut reply = Reply::sse(["id: 0\ndata:\n\n".to_owned()]);
        for _ in 0..50 {
            reply = reply
                .part(Part::Sleep(Duration::from_millis(100)))
                .part(Part::Data(Bytes::from_static(b": tick\n\n")));
        }
        reply
    })
    .await
}

#[tokio::test]
async fn cancel_closes_the_request_stream() {
    let peer = ticking_sse_peer().await;
    let t = HttpTransport::new(peer.url()).unwrap();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    // Requests run while a `recv` is pending.
    assert!(
        tokio::time::timeout(Duration::from_millis(150), t.recv())
            .await
            .is_err()
    );
    t.cancel(&RequestId::Number(1));
    let deadline = Instant::now() + Duration::from_secs(4);
    while peer.disconnects() == 0 && Instant::now() < deadline {
        let _ = tokio::time::timeout(Duration::from_millis(50), t.recv()).await;
    }
    assert_eq!(peer.disconnects(), 1, "the server saw the stream closed");
    // Nothing is reported for a cancelled request.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), t.recv())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn dropping_the_last_handle_ends_the_requests_in_flight() {
    let peer = ticking_sse_peer().await;
    let t = HttpTransport::new(peer.url()).unwrap();
    let other = t.clone();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(150), t.recv())
            .await
            .is_err()
    );
    drop(t);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.disconnects(), 0, "a clone still holds the transport");
    drop(other);
    let deadline = Instant::now() + Duration::from_secs(4);
    while peer.disconnects() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(peer.disconnects(), 1, "the request's stream was closed");
}

#[tokio::test]
async fn limits_and_content_types_are_typed_errors() {
    let peer = HttpPeer::start(|req| match req.rpc_method().as_deref() {
        Some("big") => Reply::json(200, vec![b' '; 4096]),
        Some("long_line") => Reply::sse([format!("data: {}\n\n", "x".repeat(4096))]),
        Some("html") => Reply::status(200)
            .header("content-type", "text/html")
            .part(Part::Data(Bytes::from_static(b"<html>"))),
        Some("empty") => Reply::status(202),
        Some("stall") => Reply::status(200)
            .header("content-type", "application/json")
            .part(Part::Sleep(Duration::from_secs(5))),
        _ => json_ok(req),
    })
    .await;
    let t = HttpTransport::builder(peer.url())
        .max_message_size(1024)
        .max_sse_line(1024)
        .read_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    for (method, expect) in [
        (
            "big",
            HttpError::ResponseTooLarge { limit: 1024 }.to_string(),
        ),
        (
            "long_line",
            toolwire_http::SseError::LineTooLong { limit: 1024 }.to_string(),
        ),
        (
            "html",
            HttpError::UnexpectedContentType("text/html".into()).to_string(),
        ),
        (
            "empty",
            HttpError::NoAnswer(http::StatusCode::ACCEPTED).to_string(),
        ),
        (
            "stall",
            HttpError::ReadTimeout(Duration::from_millis(300)).to_string(),
        ),
    ] {
        t.send(request(1, method, RetryClass::Never)).await.unwrap();
        let (_, cause, _) = failure(&t).await;
        assert_eq!(cause, expect, "{method}");
    }
}

#[tokio::test]
async fn a_401_challenge_reaches_the_hook_and_the_token_never_leaks() {
    let peer = HttpPeer::start(|_| {
        Reply::json(401, "{\"error\":\"invalid_token\"}").header(
            "www-authenticate",
            r#"Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource", scope="tools:call""#,
        )
    })
    .await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let t = HttpTransport::builder(peer.url())
        .bearer_token("super-secret-token")
        .on_auth_failed(move |f| {
            s.lock().unwrap().push((
                f.status.as_u16(),
                f.challenges[0]
                    .param("resource_metadata")
                    .map(str::to_owned),
                f.challenges[0].param("scope").map(str::to_owned),
            ))
        })
        .build()
        .unwrap();
    t.send(request(1, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    let (status, cause, _) = failure(&t).await;
    assert_eq!(status, Some(401));
    assert_eq!(
        *seen.lock().unwrap(),
        [(
            401,
            Some("http://127.0.0.1/.well-known/oauth-protected-resource".to_owned()),
            Some("tools:call".to_owned())
        )]
    );
    assert!(cause.contains("resource_metadata"), "{cause}");
    assert_eq!(peer.requests().len(), 1, "401 is not retried");
    for text in [cause, format!("{t:?}")] {
        assert!(!text.contains("super-secret-token"), "{text}");
    }
}

/// A new token is a new identity: the legacy session starts again under it, and the
/// transport's authorization context changes (the client drops private cached answers).
#[tokio::test]
async fn a_new_token_reinitialises_the_legacy_session() {
    let sessions = Arc::new(AtomicUsize::new(0));
    let s = sessions.clone();
    let peer = HttpPeer::start(move |req| match req.rpc_method().as_deref() {
        Some("initialize") => {
            let n = s.fetch_add(1, Ordering::SeqCst) + 1;
            json_ok(req).header("mcp-session-id", &format!("s{n}"))
        }
        None if req.method == http::Method::GET => Reply::status(405),
        _ => json_ok(req),
    })
    .await;
    let t = HttpTransport::builder(peer.url())
        .bearer_token("old")
        .get_stream(false)
        .build()
        .unwrap();
    t.send(request(1, "initialize", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    t.send(notification("notifications/initialized"))
        .await
        .unwrap();
    let before = t.authorization_context();
    t.set_bearer_token(Some("new".into()));
    assert_ne!(t.authorization_context(), before, "a new identity");
    t.send(request(2, "tools/list", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    let seen: Vec<(String, String, String)> = peer
        .requests()
        .iter()
        .map(|r| {
            (
                r.rpc_method().unwrap_or_default(),
                r.header("authorization").to_owned(),
                r.header("mcp-session-id").to_owned(),
            )
        })
        .collect();
    let expect: Vec<(String, String, String)> = [
        ("initialize", "Bearer old", ""),
        ("notifications/initialized", "Bearer old", "s1"),
        ("initialize", "Bearer new", ""),
        ("notifications/initialized", "Bearer new", "s2"),
        ("tools/list", "Bearer new", "s2"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
    .collect();
    assert_eq!(seen, expect);
    assert!(
        peer.requests()
            .iter()
            .all(|r| r.method != http::Method::GET),
        "GET stream opted out"
    );
}

#[tokio::test]
async fn sequential_requests_reuse_one_connection() {
    let peer = HttpPeer::start(json_ok).await;
    let t = HttpTransport::new(peer.url()).unwrap();
    for id in 1..=5 {
        t.send(request(id, "ping", RetryClass::Safe)).await.unwrap();
        next(&t).await.unwrap();
    }
    assert_eq!(peer.connections(), 1);
}

/// Counts the wake-ups of a hand-polled future.
struct CountWakes(AtomicUsize);

impl std::task::Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_pending_recv_is_woken_by_a_send_and_a_dropped_one_is_not() {
    use std::task::{Context, Waker};

    let peer = HttpPeer::start(json_ok).await;
    let t = HttpTransport::new(peer.url()).unwrap();
    let count = Arc::new(CountWakes(AtomicUsize::new(0)));
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let id_of = |got: Inbound| serde_json::from_slice::<Value>(&got.body).unwrap()["id"].clone();

    // A `select!` loop drops its `recv` to send: with no `recv` pending, its own send wakes
    // nobody (a task woken while it runs is rescheduled, and on a multi-threaded runtime
    // another worker is woken to steal it). The next `recv` drives the request.
    let mut dropped = t.recv();
    assert!(dropped.as_mut().poll(&mut cx).is_pending());
    drop(dropped);
    t.send(request(1, "ping", RetryClass::Safe)).await.unwrap();
    assert_eq!(count.0.load(Ordering::SeqCst), 0);
    assert_eq!(id_of(next(&t).await.unwrap()), 1);

    // A `recv` left pending (another task's) is woken to poll the new request.
    let mut pending = t.recv();
    assert!(pending.as_mut().poll(&mut cx).is_pending());
    t.send(request(2, "ping", RetryClass::Safe)).await.unwrap();
    assert_eq!(count.0.load(Ordering::SeqCst), 1);
    drop(pending);
    assert_eq!(id_of(next(&t).await.unwrap()), 2);
}

#[tokio::test]
async fn the_legacy_get_stream_delivers_server_messages_and_resumes() {
    let peer = HttpPeer::start(
        |req| match (req.method.as_str(), req.header("last-event-id")) {
            ("GET", "") => Reply::sse([
                "retry: 50\n\n".to_owned(),
                sse_event(
                    Some("g1"),
                    br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
                ),
            ]),
            ("GET", _) => Reply::status(405),
            _ if req.rpc_method().as_deref() == Some("initialize") => {
                json_ok(req).header("mcp-session-id", "s")
            }
            _ => json_ok(req),
        },
    )
    .await;
    let t = HttpTransport::new(peer.url()).unwrap();
    t.send(request(1, "initialize", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    t.send(notification("notifications/initialized"))
        .await
        .unwrap();
    let pushed: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(pushed["method"], "notifications/tools/list_changed");
    // The stream was open before the server heard `initialized`, so nothing the server
    // announces on `initialized` goes to a stream that is not there (server-everything).
    let order: Vec<String> = peer
        .requests()
        .iter()
        .take(3)
        .map(|r| match r.method {
            http::Method::GET => "GET".to_owned(),
            _ => r.rpc_method().unwrap_or_default(),
        })
        .collect();
    assert_eq!(order, ["initialize", "GET", "notifications/initialized"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let gets = loop {
        let gets: Vec<Recorded> = peer
            .requests()
            .into_iter()
            .filter(|r| r.method == http::Method::GET)
            .collect();
        if gets.len() >= 2 || Instant::now() > deadline {
            break gets;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(gets.len(), 2, "reconnected once, then 405 ended it");
    assert_eq!(gets[1].header("last-event-id"), "g1");
    assert_eq!(gets[1].header("mcp-session-id"), "s");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        peer.requests()
            .iter()
            .filter(|r| r.method == http::Method::GET)
            .count(),
        2,
        "405 means no stream: no more attempts"
    );
}

#[tokio::test]
async fn the_token_never_reaches_the_logs() {
    let (captured, _guard) = toolwire_test_support::logs::capture();

    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let peer = HttpPeer::start(move |req| match c.fetch_add(1, Ordering::SeqCst) {
        0 => Reply::status(503),
        1 => Reply::status(401).header("www-authenticate", r#"Bearer error="invalid_token""#),
        _ => json_ok(req),
    })
    .await;
    // Through a proxy with credentials: those must not reach the logs either.
    let proxy = ForwardProxy::start(Some("alice:proxy-secret")).await;
    let builder = HttpTransport::builder(peer.url())
        .bearer_token("tok-0123456789-secret")
        .retry_policy(fast_retries())
        .proxy(Proxy::Url(proxy.url(Some("alice:proxy-secret"))));
    tracing::info!(builder = ?builder, "building");
    let t = builder.build().unwrap();
    tracing::info!(transport = ?t, "built");
    t.send(request(1, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    let (status, cause, _) = failure(&t).await;
    assert_eq!(status, Some(401));
    tracing::warn!(%cause, "failed");
    t.set_bearer_token(Some("tok-new-secret".into()));
    t.send(request(2, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    next(&t).await.unwrap();
    assert_eq!(
        peer.requests()[2].header("authorization"),
        "Bearer tok-new-secret",
        "the token is sent"
    );

    let logs = captured.text();
    assert!(
        logs.contains("resending after a transient status"),
        "{logs}"
    );
    assert!(logs.contains("refused the credentials"), "{logs}");
    assert!(logs.contains("through a forwarding proxy"), "{logs}");
    assert_eq!(
        proxy.asked().len(),
        peer.requests().len(),
        "every request went through the proxy"
    );
    assert!(!logs.contains("secret"), "{logs}");
    // Not even base64-encoded.
    assert!(!logs.contains("YWxpY2U6cHJveHktc2VjcmV0"), "{logs}");
}

/// Sends request `id` and checks that the next thing received is its answer.
async fn round_trip(t: &HttpTransport, id: i64, method: &'static str, retry: RetryClass) {
    t.send(request(id, method, retry)).await.unwrap();
    let got = next(t).await.unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&got.body).unwrap()["id"],
        id
    );
}

/// The paths of every request a peer received, in order.
fn paths(peer: &HttpPeer) -> Vec<String> {
    peer.requests().into_iter().map(|r| r.path).collect()
}

/// Answers at `/v2/mcp`; `/mcp` redirects there with `status`.
fn moved(status: u16) -> impl Fn(&Recorded) -> Reply + Send + Sync {
    move |req| {
        if req.path == "/mcp" {
            Reply::status(status).header("location", "/v2/mcp")
        } else {
            json_ok(req)
        }
    }
}

#[tokio::test]
async fn a_same_origin_307_is_followed_for_each_message_with_method_body_and_token() {
    let peer = HttpPeer::start(moved(307)).await;
    let t = HttpTransport::builder(peer.url())
        .bearer_token("tok")
        .build()
        .unwrap();
    for id in 1..=2 {
        round_trip(&t, id, "tools/call", RetryClass::Never).await;
    }
    // Temporary: each message asks the endpoint first.
    assert_eq!(paths(&peer), ["/mcp", "/v2/mcp", "/mcp", "/v2/mcp"]);
    let reqs = peer.requests();
    assert_eq!(reqs[0].body, reqs[1].body, "the body was kept");
    for r in &reqs {
        assert_eq!(r.method, http::Method::POST);
        assert_eq!(r.header("authorization"), "Bearer tok");
    }
}

#[tokio::test]
async fn a_same_origin_308_moves_the_endpoint_for_good() {
    let peer = HttpPeer::start(moved(308)).await;
    let t = HttpTransport::builder(peer.url()).build().unwrap();
    for id in 1..=3 {
        round_trip(&t, id, "tools/list", RetryClass::Safe).await;
    }
    assert_eq!(paths(&peer), ["/mcp", "/v2/mcp", "/v2/mcp", "/v2/mcp"]);
}

#[tokio::test]
async fn a_cross_origin_redirect_is_refused_and_the_other_origin_gets_nothing() {
    let other = HttpPeer::start(json_ok).await;
    let target = format!("{}?token=in-the-query", other.url());
    let peer =
        HttpPeer::start(move |_: &Recorded| Reply::status(307).header("location", &target)).await;
    let t = HttpTransport::builder(peer.url())
        .bearer_token("secret-token")
        .build()
        .unwrap();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let (status, error, _) = failure(&t).await;
    assert_eq!(status, Some(307));
    assert!(error.contains("another origin"), "{error}");
    assert!(
        !error.contains("secret-token") && !error.contains("in-the-query"),
        "{error}"
    );
    assert_eq!(peer.requests().len(), 1);
    assert!(
        other.requests().is_empty(),
        "the other origin received {:?}",
        other.requests()
    );
    assert_eq!(other.connections(), 0, "not even a connection was opened");
}

#[tokio::test]
async fn redirect_loops_and_method_changing_redirects_are_refused() {
    let looping =
        HttpPeer::start(|_: &Recorded| Reply::status(307).header("location", "/mcp")).await;
    let t = HttpTransport::builder(looping.url()).build().unwrap();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let (_, error, _) = failure(&t).await;
    assert!(error.contains("more than five"), "{error}");
    assert_eq!(looping.requests().len(), 6, "the first and five redirects");

    let found = HttpPeer::start(moved(302)).await;
    let t = HttpTransport::builder(found.url()).build().unwrap();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let (status, error, _) = failure(&t).await;
    assert_eq!(status, Some(302));
    assert!(error.contains("GET"), "{error}");
    assert_eq!(paths(&found), ["/mcp"]);
}

#[tokio::test]
async fn http_requests_go_through_a_forwarding_proxy_with_its_credentials() {
    let peer = HttpPeer::start(json_ok).await;
    let proxy = ForwardProxy::start(Some("alice:s3cret")).await;
    let builder = HttpTransport::builder(peer.url())
        .bearer_token("tok")
        .proxy(Proxy::Url(proxy.url(Some("alice:s3cret"))));
    assert!(!format!("{builder:?}").contains("s3cret"), "{builder:?}");
    let t = builder.build().unwrap();
    for id in 1..=2 {
        round_trip(&t, id, "tools/call", RetryClass::Never).await;
    }
    let asked = proxy.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    for a in &asked {
        assert_eq!(
            a.line,
            format!("POST {} HTTP/1.1", peer.url()),
            "absolute form"
        );
        assert_eq!(a.authorization.as_deref(), Some("Basic YWxpY2U6czNjcmV0"));
    }
    for r in peer.requests() {
        assert_eq!(
            r.header("proxy-authorization"),
            "",
            "the proxy's credentials went on"
        );
        assert_eq!(r.header("authorization"), "Bearer tok");
    }
}

#[tokio::test]
async fn a_proxy_that_wants_credentials_refuses_requests_without_them() {
    let peer = HttpPeer::start(json_ok).await;
    let proxy = ForwardProxy::start(Some("alice:s3cret")).await;
    let t = HttpTransport::builder(peer.url())
        .proxy(Proxy::Url(proxy.url(None)))
        .build()
        .unwrap();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let (status, _, _) = failure(&t).await;
    assert_eq!(status, Some(407));
    assert!(peer.requests().is_empty());
}

#[tokio::test]
async fn a_disabled_proxy_goes_direct_and_unusable_proxies_are_refused() {
    let peer = HttpPeer::start(json_ok).await;
    let t = HttpTransport::builder(peer.url())
        .proxy(Proxy::Disabled)
        .build()
        .unwrap();
    t.send(request(1, "ping", RetryClass::Safe)).await.unwrap();
    next(&t).await.unwrap();
    assert_eq!(peer.requests().len(), 1);

    for (proxy, shown) in [
        (
            "socks5://bob:hunter2@127.0.0.1:1080",
            "socks5://127.0.0.1:1080",
        ),
        (
            "https://bob:hunter2@proxy.example:8443",
            "https://proxy.example:8443",
        ),
        ("not a url", "(not a URL)"),
    ] {
        let err = HttpTransport::builder(peer.url())
            .proxy(Proxy::Url(proxy.to_owned()))
            .build()
            .err()
            .unwrap_or_else(|| panic!("{proxy} was accepted"));
        let text = err.to_string();
        assert!(matches!(err, HttpError::InvalidProxy { .. }), "{text}");
        assert!(text.contains(shown), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}

/// Credentials given whole (an `mcpServers` entry's `Authorization` header): a `Bearer` value
/// is the bearer token, any other scheme goes out as written on every request; a refusal is
/// reported once, not resent; the value never reaches `Debug` or the logs, and one a header
/// cannot hold is the error of `build`.
#[tokio::test]
async fn an_authorization_value_of_any_scheme_is_sent_as_written_and_never_shown() {
    let (captured, _guard) = toolwire_test_support::logs::capture();
    let peer = HttpPeer::start(|req| {
        if req.header("authorization") == "Basic YWxpY2U6b3BlbnNlc2FtZQ==" {
            Reply::status(401).header("www-authenticate", r#"Basic realm="mcp""#)
        } else {
            json_ok(req)
        }
    })
    .await;
    for (given, sent) in [
        ("bearer  tok-secret-1 ", "Bearer tok-secret-1"),
        ("Token tok-secret-2", "Token tok-secret-2"),
        ("sk-secret-3", "sk-secret-3"),
    ] {
        let builder = HttpTransport::builder(peer.url())
            .bearer_token("replaced-secret")
            .authorization(given);
        assert!(builder.has_credentials());
        let t = builder.build().unwrap();
        tracing::info!(transport = ?t, "built");
        round_trip(&t, 1, "tools/list", RetryClass::Safe).await;
        assert_eq!(
            peer.requests().last().unwrap().header("authorization"),
            sent
        );
    }
    assert!(!HttpTransport::builder(peer.url()).has_credentials());

    let before = peer.requests().len();
    let t = HttpTransport::builder(peer.url())
        .authorization("Basic YWxpY2U6b3BlbnNlc2FtZQ==")
        .build()
        .unwrap();
    t.send(request(1, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    let (status, cause, _) = failure(&t).await;
    assert_eq!(status, Some(401));
    assert_eq!(
        peer.requests().len(),
        before + 1,
        "a fixed value is not resent"
    );
    tracing::warn!(%cause, transport = ?t, "failed");

    for bad in ["Basic a\r\nX-Evil: 1", "Bearer a\nb"] {
        let built = HttpTransport::builder(peer.url())
            .authorization(bad)
            .build();
        assert!(
            matches!(&built, Err(HttpError::InvalidHeader { name, .. }) if name == "Authorization"),
            "{bad:?}: {built:?}"
        );
    }

    let logs = captured.text();
    assert!(logs.contains("refused the credentials"), "{logs}");
    for secret in ["secret", "YWxpY2U6b3BlbnNlc2FtZQ"] {
        assert!(!logs.contains(secret), "{logs}");
    }
}

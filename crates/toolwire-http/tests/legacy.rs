//! The legacy session over HTTP against a scripted peer: the handshake replayed after a 404 with the log level and subscriptions, resumption with Last-Event-ID, stray session ids.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

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

//! The legacy session over HTTP against a scripted peer: a lost session reported as gone (the session above opens the next), resumption with Last-Event-ID, stray session ids.

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

/// A transport with session `s1` open on an [`expiring_legacy_peer`].
async fn opened() -> (HttpPeer, Arc<AtomicUsize>, HttpTransport) {
    opened_with(StaticAuthorization::none()).await
}

/// [`opened`] with `credentials`.
async fn opened_with(
    credentials: StaticAuthorization,
) -> (HttpPeer, Arc<AtomicUsize>, HttpTransport) {
    let (peer, session) = expiring_legacy_peer().await;
    let t = HttpTransport::builder(peer.url())
        .credentials(credentials)
        .build()
        .unwrap();
    t.send(request(1, "initialize", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    assert_eq!(t.session_id().as_deref(), Some("s1"));
    (peer, session, t)
}

/// The failure of the next item, whole.
async fn gone(t: &HttpTransport) -> toolwire_transport::RequestFailure {
    match next(t).await {
        Err(TransportError::Request(f)) => f,
        other => panic!("expected a request failure, got {other:?}"),
    }
}

/// The transport keeps the session id and nothing else of the session: a 404 to a request
/// that named it fails that request as `session_gone` (the server never processed it), every
/// later request is held back the same way without being sent, and the next request that
/// opens a session goes without an id and brings the new one.
#[tokio::test]
async fn a_lost_legacy_session_fails_its_requests_as_gone_until_a_new_one_opens() {
    let (peer, session, t) = opened().await;
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

    // The server forgets the session.
    session.store(5, Ordering::SeqCst);
    t.send(request(3, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let failure = gone(&t).await;
    assert_eq!(failure.id, RequestId::Number(3));
    assert_eq!(failure.status, Some(404));
    assert!(failure.session_gone);
    assert!(matches!(
        failure.cause.downcast_ref::<HttpError>(),
        Some(HttpError::SessionExpired)
    ));
    assert_eq!(t.session_id(), None);
    // Held back, unsent, until a new session opens.
    let posts_before = peer.requests().len();
    t.send(request(4, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    let held = gone(&t).await;
    assert!(held.session_gone && held.status.is_none(), "{held:?}");
    assert_eq!(peer.requests().len(), posts_before, "nothing was sent");
    t.send(request(5, "initialize", RetryClass::Never))
        .await
        .unwrap();
    next(&t).await.unwrap();
    assert_eq!(t.session_id().as_deref(), Some("s6"));
    t.send(request(6, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let got: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(got["id"], 6);

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
        ("tools/call", "s6"),
    ];
    let expect: Vec<(String, String)> = expect
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    assert_eq!(posts, expect);
    // The GET stream was tried once (405: none) with the session and version.
    let gets: Vec<Recorded> = peer
        .requests()
        .into_iter()
        .filter(|r| r.method == http::Method::GET)
        .collect();
    assert_eq!(gets.len(), 1);
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
    assert_eq!(t.session_id(), None, "a closed transport names no session");
    assert!(matches!(
        t.send(request(9, "ping", RetryClass::Safe)).await,
        Err(TransportError::Closed)
    ));
}

/// A new bearer token is a new identity, and servers bind sessions to who opened them: the
/// session ends as if the server had forgotten it, before anything goes with the new token.
#[tokio::test]
async fn a_new_bearer_token_ends_the_legacy_session_before_the_next_request() {
    let credentials = StaticAuthorization::bearer("first");
    let (peer, _session, t) = opened_with(credentials.clone()).await;
    assert_eq!(peer.requests()[0].header("authorization"), "Bearer first");
    let before = t.authorization_context();
    credentials.set_bearer(Some(toolwire_http::BearerToken::new("second")));
    assert_ne!(t.authorization_context(), before, "a new identity");
    assert_eq!(t.session_id(), None);
    let sent = peer.requests().len();
    t.send(request(2, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    assert!(gone(&t).await.session_gone);
    assert_eq!(
        peer.requests().len(),
        sent,
        "held back, not sent with the old session"
    );
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

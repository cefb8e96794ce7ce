//! The HTTP transport against scripted HTTP peers on loopback sockets.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

#[tokio::test]
async fn json_answers_carry_every_header_and_notifications_get_202() {
    let peer = HttpPeer::start(json_ok).await;
    let sent = Arc::new(Mutex::new(Vec::new()));
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let (s, r) = (sent.clone(), statuses.clone());
    let t = HttpTransport::builder(peer.url())
        .header("X-Tenant", "acme")
        .user_agent("agent/9")
        .credentials("tok")
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
    // Each request's stream is written when the test says.
    let (first, first_body) = Feed::new();
    let (second, second_body) = Feed::new();
    let peer = HttpPeer::start(move |req| {
        let body = match req.rpc_id() {
            Some(id) if id == 1 => first_body.clone(),
            _ => second_body.clone(),
        };
        Reply::sse(["id: 0\ndata:\n\n".to_owned()]).part(Part::Feed(body))
    })
    .await;
    let t = HttpTransport::new(peer.url()).unwrap();
    let other = t.clone();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    // Requests run while a `recv` is pending: until the server has this one open.
    drive_until(&t, || !peer.requests().is_empty()).await;
    drop(t);
    // A clone still holds the transport: the stream is read on, and its answer arrives.
    first
        .send(Bytes::from_static(
            b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
        ))
        .unwrap();
    let answered: Value = serde_json::from_slice(&next(&other).await.unwrap().body).unwrap();
    assert_eq!(answered["id"], 1);
    assert_eq!(peer.disconnects(), 0, "a clone still holds the transport");
    // A second request, left open; dropping the last handle closes its stream, which the
    // server learns at its next write.
    other
        .send(request(2, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    drive_until(&other, || peer.requests().len() == 2).await;
    drop(other);
    let deadline = Instant::now() + Duration::from_secs(5);
    while peer.disconnects() == 0 {
        assert!(
            Instant::now() < deadline,
            "the request's stream was never closed"
        );
        let _ = second.send(Bytes::from_static(b": tick\n\n"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(peer.disconnects(), 1, "the request's stream was closed");
}

/// Keeps a `recv` of `t` pending (which runs its requests) until `done` holds, up to 5 s;
/// nothing may arrive meanwhile.
async fn drive_until(t: &HttpTransport, done: impl Fn() -> bool) {
    let wait = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        got = t.recv() => panic!("nothing should arrive yet: {got:?}"),
        () = wait => {}
        () = tokio::time::sleep(Duration::from_secs(5)) => panic!("never happened"),
    }
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
async fn a_401_challenge_reaches_the_caller_in_the_failure_and_the_token_never_leaks() {
    let peer = HttpPeer::start(|_| {
        Reply::json(401, "{\"error\":\"invalid_token\"}").header(
            "www-authenticate",
            r#"Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource", scope="tools:call""#,
        )
    })
    .await;
    let t = HttpTransport::builder(peer.url())
        .credentials("super-secret-token")
        .build()
        .unwrap();
    t.send(request(1, "tools/list", RetryClass::Safe))
        .await
        .unwrap();
    let failed = match next(&t).await {
        Err(TransportError::Request(f)) => f,
        other => panic!("expected a request failure, got {other:?}"),
    };
    assert_eq!(failed.status, Some(401));
    let Some(HttpError::Status { challenges, .. }) = failed.cause.downcast_ref::<HttpError>()
    else {
        panic!("expected a status error, got {}", failed.cause);
    };
    assert_eq!(
        (
            challenges[0].param("resource_metadata"),
            challenges[0].param("scope")
        ),
        (
            Some("http://127.0.0.1/.well-known/oauth-protected-resource"),
            Some("tools:call")
        )
    );
    assert_eq!(
        peer.requests()[0].header("authorization"),
        "Bearer super-secret-token"
    );
    assert_eq!(peer.requests().len(), 1, "401 is not retried");
    let cause = failed.cause.to_string();
    assert!(cause.contains("resource_metadata"), "{cause}");
    for text in [cause, format!("{t:?}")] {
        assert!(!text.contains("super-secret-token"), "{text}");
    }
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
    // The 405 ends the stream's task: once it has, no GET can follow.
    let deadline = Instant::now() + Duration::from_secs(5);
    while t.holds_get_stream() {
        assert!(
            Instant::now() < deadline,
            "the GET stream was kept after a 405"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
    let credentials = StaticAuthorization::bearer("tok-0123456789-secret");
    let builder = HttpTransport::builder(peer.url())
        .credentials(credentials.clone())
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
    credentials.set_bearer(Some("tok-new-secret".into()));
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

/// A server answering every request with `padding` bytes of one extra header and a JSON
/// result of `body` bytes of text.
async fn padded_peer(padding: usize, body: usize) -> HttpPeer {
    HttpPeer::start(move |req| match req.rpc_id() {
        Some(id) => {
            let text = "x".repeat(body);
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"text": text}});
            Reply::json(200, answer.to_string()).header("x-padding", &"p".repeat(padding))
        }
        None => Reply::status(202),
    })
    .await
}

#[tokio::test]
async fn response_heads_up_to_the_limit_pass_and_longer_ones_fail_clearly() {
    // 12 KiB of headers: within the default 16 KiB.
    let peer = padded_peer(12 * 1024, 10).await;
    let t = HttpTransport::builder(peer.url()).build().unwrap();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let got: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(got["id"], 1);

    let peer = padded_peer(20 * 1024, 10).await;
    let t = HttpTransport::builder(peer.url()).build().unwrap();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    match next(&t).await {
        Err(TransportError::Request(f)) => {
            assert_eq!(f.status, None);
            assert!(
                matches!(
                    f.cause.downcast_ref::<HttpError>(),
                    Some(HttpError::ResponseHeadTooLarge { limit: 16384 })
                ),
                "{:?}",
                f.cause
            );
        }
        other => panic!("expected a request failure, got {other:?}"),
    }

    // Raised, the same head passes.
    let t = HttpTransport::builder(peer.url())
        .max_response_head(32 * 1024)
        .build()
        .unwrap();
    t.send(request(2, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let got: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(got["id"], 2);
}

/// An authorizer's own requests (metadata, tokens) go through the transport's client with
/// the same limit on a response's head, and are told of it the same way.
#[tokio::test]
async fn the_executor_refuses_a_head_over_the_limit_and_passes_it_raised() {
    let peer = HttpPeer::start(|_| {
        Reply::json(200, r#"{"issuer":"x"}"#).header("x-padding", &"p".repeat(20 * 1024))
    })
    .await;
    let url = format!("{}/.well-known/oauth-authorization-server", peer.url());
    let t = HttpTransport::builder(peer.url()).build().unwrap();
    let refused = t.executor().get(&url, http::HeaderMap::new()).await;
    assert!(
        matches!(
            refused,
            Err(HttpError::ResponseHeadTooLarge { limit: 16384 })
        ),
        "{refused:?}"
    );
    assert_eq!(
        peer.requests().len(),
        1,
        "the server was asked and answered"
    );

    let t = HttpTransport::builder(peer.url())
        .max_response_head(32 * 1024)
        .build()
        .unwrap();
    let response = t
        .executor()
        .get(&url, http::HeaderMap::new())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.body().as_ref(), br#"{"issuer":"x"}"#);
}

#[tokio::test]
async fn a_body_many_times_the_read_size_arrives_whole() {
    let peer = padded_peer(0, 1024 * 1024).await;
    let t = HttpTransport::builder(peer.url()).build().unwrap();
    t.send(request(1, "tools/call", RetryClass::Never))
        .await
        .unwrap();
    let got: Value = serde_json::from_slice(&next(&t).await.unwrap().body).unwrap();
    assert_eq!(
        got["result"]["text"].as_str().map(str::len),
        Some(1024 * 1024)
    );
}

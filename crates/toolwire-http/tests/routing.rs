//! Where requests go: same-origin redirects followed, others refused; forwarding proxies with their credentials; an Authorization value of any scheme.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

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
        .credentials("tok")
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
        .credentials("secret-token")
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
        .credentials("tok")
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
            .credentials("replaced-secret")
            .credentials(StaticAuthorization::header(given).unwrap());
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
        .credentials(StaticAuthorization::header("Basic YWxpY2U6b3BlbnNlc2FtZQ==").unwrap())
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
        let refused = StaticAuthorization::header(bad);
        assert!(
            matches!(&refused, Err(HttpError::InvalidHeader { name, .. }) if name == "Authorization"),
            "{bad:?}: {refused:?}"
        );
    }

    let logs = captured.text();
    assert!(logs.contains("refused the credentials"), "{logs}");
    for secret in ["secret", "YWxpY2U6b3BlbnNlc2FtZQ"] {
        assert!(!logs.contains(secret), "{logs}");
    }
}

//! The per-request credential seam ([`Authorizer`]) against scripted HTTP peers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue};
use serde_json::json;
use toolwire_http::{
    AuthRequest, Authorizer, AuthorizerError, BoxFuture, Credentials, HttpError, HttpTransport,
    MAX_AUTH_RESENDS, Refusal, Resend,
};
use toolwire_test_support::http::{HttpPeer, Reply};
use toolwire_transport::{
    Inbound, MessageKind, Outbound, RequestId, RetryClass, SessionStep, Transport, TransportError,
};

/// Hands out `Bearer t<generation>` plus a per-request proof number, and on a refusal moves
/// to the next generation (or says `resend` without changing anything).
#[derive(Debug, Default)]
struct Counting {
    generation: AtomicU64,
    proofs: AtomicU64,
    refusals: AtomicU32,
    /// Refusals answered with a new generation.
    repairs: AtomicU32,
    /// Who the credentials stand for ([`Authorizer::identity`]).
    identity: AtomicU64,
    /// Say "resend" without repairing.
    stubborn: bool,
    /// Fail instead.
    broken: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("the test authorizer gives up")]
struct GivesUp;

impl Authorizer for Counting {
    fn credentials<'a>(
        &'a self,
        _: &'a AuthRequest<'a>,
    ) -> BoxFuture<'a, Result<Credentials, AuthorizerError>> {
        Box::pin(async move {
            let generation = self.generation.load(Ordering::SeqCst);
            let proof = self.proofs.fetch_add(1, Ordering::SeqCst);
            let mut headers = HeaderMap::new();
            let mut token = HeaderValue::try_from(format!("Bearer t{generation}")).unwrap();
            token.set_sensitive(true);
            headers.insert(AUTHORIZATION, token);
            headers.insert("x-proof", HeaderValue::from(proof));
            Ok(Credentials::new(headers, generation))
        })
    }

    fn refused<'a>(
        &'a self,
        refusal: &'a Refusal<'a>,
    ) -> BoxFuture<'a, Result<Resend, AuthorizerError>> {
        Box::pin(async move {
            self.refusals.fetch_add(1, Ordering::SeqCst);
            if self.broken {
                return Err(Box::new(GivesUp) as AuthorizerError);
            }
            if self.stubborn {
                return Ok(Resend::Yes);
            }
            // Single flight in miniature: only a refusal of the current credentials repairs.
            if self
                .generation
                .compare_exchange(
                    refusal.generation,
                    refusal.generation + 1,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
            {
                self.repairs.fetch_add(1, Ordering::SeqCst);
            }
            Ok(Resend::Yes)
        })
    }

    fn identity(&self) -> u64 {
        self.identity.load(Ordering::SeqCst)
    }
}

fn request(id: i64, method: &'static str) -> Outbound {
    let mut out = Outbound::new(
        json!({"jsonrpc": "2.0", "id": id, "method": method}).to_string(),
        MessageKind::Request {
            id: RequestId::Number(id),
            method,
        },
    );
    out.retry = RetryClass::Never;
    if method == "initialize" {
        out.session = SessionStep::Opens;
    }
    out
}

async fn next(t: &HttpTransport) -> Result<Inbound, TransportError> {
    tokio::time::timeout(Duration::from_secs(10), t.recv())
        .await
        .expect("an item within 10 s")
        .expect("open")
}

/// 200 for `Bearer t<accepted>` and later generations, 401 before.
fn accepting_from(
    accepted: u64,
) -> impl Fn(&toolwire_test_support::http::Recorded) -> Reply + Send + Sync {
    move |req| {
        let generation: Option<u64> = req
            .header("authorization")
            .strip_prefix("Bearer t")
            .and_then(|g| g.parse().ok());
        if generation.is_none_or(|g| g < accepted) {
            return Reply::status(401)
                .header("www-authenticate", r#"Bearer error="invalid_token""#);
        }
        match (req.method.as_str(), req.rpc_id()) {
            ("POST", Some(id)) => {
                let reply = Reply::json(
                    200,
                    json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string(),
                );
                if req.rpc_method().as_deref() == Some("initialize") {
                    reply.header("mcp-session-id", "s1")
                } else {
                    reply
                }
            }
            ("GET", _) => Reply::status(405),
            _ => Reply::status(202),
        }
    }
}

#[tokio::test]
async fn a_refused_request_is_resent_with_repaired_credentials_and_the_session_is_not_replayed() {
    let peer = HttpPeer::start(accepting_from(1)).await;
    let auth = Arc::new(Counting::default());
    let t = HttpTransport::builder(peer.url())
        .authorizer(auth.clone())
        .build()
        .unwrap();
    t.send(request(1, "initialize")).await.unwrap();
    next(&t).await.unwrap();
    let mut initialized = Outbound::new(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        MessageKind::Notification {
            method: "notifications/initialized",
        },
    );
    initialized.session = SessionStep::Opened;
    t.send(initialized).await.unwrap();
    t.send(request(2, "tools/list")).await.unwrap();
    next(&t).await.unwrap();
    t.close().await.unwrap();
    let log: Vec<(String, Option<String>, String, String)> = peer
        .requests()
        .iter()
        .map(|r| {
            (
                r.method.to_string(),
                r.rpc_method(),
                r.header("authorization").to_owned(),
                r.header("x-proof").to_owned(),
            )
        })
        .collect();
    let methods: Vec<(&str, Option<&str>, &str)> = log
        .iter()
        .map(|(m, r, a, _)| (m.as_str(), r.as_deref(), a.as_str()))
        .collect();
    assert_eq!(
        methods,
        [
            ("POST", Some("initialize"), "Bearer t0"),
            ("POST", Some("initialize"), "Bearer t1"),
            ("GET", None, "Bearer t1"),
            ("POST", Some("notifications/initialized"), "Bearer t1"),
            ("POST", Some("tools/list"), "Bearer t1"),
            ("DELETE", None, "Bearer t1"),
        ],
        "credentials on every POST, GET and DELETE; a repaired token does not replay the session"
    );
    let proofs: std::collections::BTreeSet<&str> =
        log.iter().map(|(_, _, _, p)| p.as_str()).collect();
    assert_eq!(proofs.len(), log.len(), "asked afresh for every request");
    assert_eq!(auth.repairs.load(Ordering::SeqCst), 1);
    assert_eq!(
        peer.requests()
            .iter()
            .filter(|r| r.rpc_method().as_deref() == Some("initialize"))
            .count(),
        2,
        "the one refused initialize and its resend, nothing replayed"
    );
}

#[tokio::test]
async fn resends_after_refusals_are_bounded_per_message() {
    let peer = HttpPeer::start(accepting_from(u64::MAX)).await;
    let auth = Arc::new(Counting {
        stubborn: true,
        ..Counting::default()
    });
    let t = HttpTransport::builder(peer.url())
        .authorizer(auth.clone())
        .get_stream(false)
        .build()
        .unwrap();
    t.send(request(1, "tools/list")).await.unwrap();
    match next(&t).await {
        Err(TransportError::Request(f)) => assert_eq!(f.status, Some(401)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        peer.requests().len() as u32,
        MAX_AUTH_RESENDS + 1,
        "sent once, resent {MAX_AUTH_RESENDS} times"
    );
    assert_eq!(auth.refusals.load(Ordering::SeqCst), MAX_AUTH_RESENDS);
}

#[tokio::test]
async fn an_authorizer_failure_fails_the_request_with_its_error_as_the_source() {
    let peer = HttpPeer::start(accepting_from(u64::MAX)).await;
    let auth = Arc::new(Counting {
        broken: true,
        ..Counting::default()
    });
    let t = HttpTransport::builder(peer.url())
        .authorizer(auth)
        .get_stream(false)
        .build()
        .unwrap();
    t.send(request(1, "tools/list")).await.unwrap();
    let Err(TransportError::Request(f)) = next(&t).await else {
        panic!("expected a failure");
    };
    assert_eq!(f.status, Some(401));
    let http = f.cause.downcast_ref::<HttpError>().unwrap();
    let HttpError::Authorization(source) = http else {
        panic!("{http}");
    };
    assert!(source.downcast_ref::<GivesUp>().is_some());
    assert_eq!(peer.requests().len(), 1, "not resent");
}

/// Servers bind a legacy session to who opened it. New credentials for the same identity (a
/// refresh) keep the session; a new identity (another login, a logout) ends it before anything
/// goes with the old session's id, and the next session opens without it.
#[tokio::test]
async fn a_refresh_keeps_the_legacy_session_and_a_new_identity_ends_it_unsent() {
    let peer = HttpPeer::start(accepting_from(0)).await;
    let auth = Arc::new(Counting::default());
    let t = HttpTransport::builder(peer.url())
        .authorizer(auth.clone())
        .get_stream(false)
        .build()
        .unwrap();
    t.send(request(1, "initialize")).await.unwrap();
    next(&t).await.unwrap();
    assert_eq!(t.session_id().as_deref(), Some("s1"));
    let context = t.authorization_context();

    auth.generation.fetch_add(1, Ordering::SeqCst);
    t.send(request(2, "tools/list")).await.unwrap();
    next(&t).await.unwrap();
    let refreshed = peer.requests().last().cloned().unwrap();
    assert_eq!(refreshed.header("authorization"), "Bearer t1");
    assert_eq!(
        refreshed.header("mcp-session-id"),
        "s1",
        "a refresh keeps the session"
    );
    assert_eq!(t.authorization_context(), context, "and the identity");

    auth.identity.fetch_add(1, Ordering::SeqCst);
    assert_ne!(t.authorization_context(), context);
    let sent = peer.requests().len();
    t.send(request(3, "tools/list")).await.unwrap();
    match next(&t).await {
        Err(TransportError::Request(f)) => assert!(f.session_gone, "{f:?}"),
        other => panic!("expected the session gone, got {other:?}"),
    }
    assert_eq!(
        peer.requests().len(),
        sent,
        "held back, not sent as the old session"
    );

    t.send(request(4, "initialize")).await.unwrap();
    next(&t).await.unwrap();
    let opened = peer.requests().last().cloned().unwrap();
    assert_eq!(opened.rpc_method().as_deref(), Some("initialize"));
    assert_eq!(
        opened.header("mcp-session-id"),
        "",
        "the next session opens afresh"
    );
}

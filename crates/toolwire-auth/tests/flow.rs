//! OAuth flows end to end through the HTTP transport, against one scripted loopback peer that
//! is both the MCP server and its authorization server.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use toolwire_auth::{
    AuthError, Clock, CredentialStore, FetchRedirect, MemoryStore, OAuth, OAuthConfig, StoreKey,
};
use toolwire_http::{HttpError, HttpTransport};
use toolwire_test_support::http::HttpPeer;
use toolwire_test_support::oauth::{form, get, peer};
use toolwire_transport::{
    Inbound, MessageKind, Outbound, RequestId, RetryClass, Transport, TransportError,
};

fn config(store: &MemoryStore) -> OAuthConfig {
    OAuthConfig::new()
        .store(Arc::new(store.clone()))
        .handler(Arc::new(FetchRedirect::new("http://127.0.0.1:1/callback")))
}

/// A clock that moves only when the test moves it, from a fixed instant (2026-11-26).
#[derive(Clone)]
struct TestClock(Arc<AtomicU64>);

impl TestClock {
    fn new() -> Self {
        Self(Arc::new(AtomicU64::new(1_795_651_200)))
    }

    fn clock(&self) -> Clock {
        let t = self.0.clone();
        Clock::from_fn(move || t.load(Ordering::Relaxed))
    }

    fn advance(&self, secs: u64) {
        self.0.fetch_add(secs, Ordering::Relaxed);
    }
}

/// An hour-long token, as the peer gives with `expires_in = 3600`: refreshed in its last
/// minute (the default skew).
const HOUR: u64 = 3600;

fn transport(peer: &HttpPeer, oauth: &OAuth) -> HttpTransport {
    HttpTransport::builder(peer.url())
        .get_stream(false)
        .authorizer(Arc::new(oauth.clone()))
        .build()
        .unwrap()
}

fn request(id: i64) -> Outbound {
    let mut out = Outbound::new(
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string(),
        MessageKind::Request {
            id: RequestId::Number(id),
            method: "tools/list",
        },
    );
    out.retry = RetryClass::Safe;
    out
}

async fn next(t: &HttpTransport) -> Result<Inbound, TransportError> {
    tokio::time::timeout(Duration::from_secs(20), t.recv())
        .await
        .expect("an answer within 20 s")
        .expect("open")
}

/// The authorization error a failed request carries.
fn auth_error(item: Result<Inbound, TransportError>) -> AuthError {
    let Err(TransportError::Request(failure)) = item else {
        panic!("expected a failure, got {item:?}");
    };
    let http = failure
        .cause
        .downcast_ref::<HttpError>()
        .expect("an HTTP error");
    let HttpError::Authorization(e) = http else {
        panic!("expected an authorization failure, got {http}");
    };
    e.downcast_ref::<AuthError>()
        .expect("an OAuth error")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_refusals_cost_one_authorization_and_every_request_is_answered() {
    let (peer, state) = peer(|_| {}).await;
    let store = MemoryStore::new();
    let oauth = OAuth::new(peer.url(), config(&store));
    let t = transport(&peer, &oauth);
    for id in 0..64 {
        t.send(request(id)).await.unwrap();
    }
    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..64 {
        let inbound = next(&t).await.unwrap();
        let v: Value = serde_json::from_slice(&inbound.body).unwrap();
        answered.insert(v["id"].as_i64().unwrap());
    }
    assert_eq!(answered, (0..64).collect(), "every request answered once");
    let s = state.lock().unwrap();
    assert_eq!(
        (s.authorizations, s.registrations, s.issued),
        (1, 1, 1),
        "one flow for 64 refusals"
    );
    let refused = peer
        .requests()
        .iter()
        .filter(|r| r.path == "/mcp" && r.header("authorization").is_empty())
        .count();
    assert_eq!(
        refused, 64,
        "each request was refused once, then resent with the token"
    );
    let entry = store.list_now().pop().expect("saved");
    assert_eq!(entry.issuer, format!("http://{}", peer.addr));
}

trait ListNow {
    fn list_now(&self) -> Vec<toolwire_auth::StoredAuth>;
}

impl ListNow for MemoryStore {
    fn list_now(&self) -> Vec<toolwire_auth::StoredAuth> {
        ready_now(self.list())
    }
}

/// Runs a store future that completes at once (the memory store never waits).
fn ready_now<T>(f: toolwire_http::BoxFuture<'_, Result<T, AuthError>>) -> T {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut f = f;
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v.unwrap(),
        std::task::Poll::Pending => panic!("the memory store waited"),
    }
}

#[tokio::test]
async fn an_expiring_token_is_refreshed_before_use_with_the_same_resource_and_identity() {
    let (peer, state) = peer(|s| s.expires_in = HOUR).await;
    let store = MemoryStore::new();
    let time = TestClock::new();
    let oauth = OAuth::new(peer.url(), config(&store).clock(time.clock()));
    let t = transport(&peer, &oauth);
    let before = t.authorization_context();
    t.send(request(1)).await.unwrap();
    assert!(matches!(next(&t).await, Ok(Inbound { .. })));
    let authorized = t.authorization_context();
    assert_ne!(authorized, before, "an authorization may be someone else");
    // Used again at once: still fresh, not refreshed.
    t.send(request(2)).await.unwrap();
    assert!(matches!(next(&t).await, Ok(Inbound { .. })));
    assert_eq!(state.lock().unwrap().token_forms.len(), 1);
    // Within its last minute: refreshed before use.
    time.advance(HOUR - 30);
    t.send(request(3)).await.unwrap();
    assert!(matches!(next(&t).await, Ok(Inbound { .. })));
    assert_eq!(
        t.authorization_context(),
        authorized,
        "a refresh is the same identity"
    );
    let s = state.lock().unwrap();
    assert_eq!(s.authorizations, 1);
    let forms: Vec<Vec<(String, String)>> = s
        .token_forms
        .iter()
        .map(|b| form(&Bytes::from(b.clone())))
        .collect();
    assert_eq!(forms.len(), 2);
    assert_eq!(get(&forms[0], "grant_type"), Some("authorization_code"));
    assert_eq!(get(&forms[1], "grant_type"), Some("refresh_token"));
    assert_eq!(get(&forms[1], "refresh_token"), Some("refresh-token-1"));
    assert_eq!(get(&forms[0], "resource"), Some(peer.url().as_str()));
    assert_eq!(
        get(&forms[0], "resource"),
        get(&forms[1], "resource"),
        "the same resource each time"
    );
    assert_eq!(
        get(&forms[1], "client_secret"),
        Some("client-secret-x"),
        "the registered method (post)"
    );
    let entry = store.list_now().pop().unwrap();
    let tokens = entry.tokens.unwrap();
    assert_eq!(tokens.access_token.expose(), "access-token-2");
    assert_eq!(
        tokens.refresh_token.unwrap().expose(),
        "refresh-token-2",
        "the rotated refresh token is kept"
    );
}

#[tokio::test]
async fn a_revoked_refresh_token_leads_to_a_new_authorization_and_a_new_identity() {
    let (peer, state) = peer(|s| s.revoke_refresh = true).await;
    let store = MemoryStore::new();
    let oauth = OAuth::new(peer.url(), config(&store));
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    assert!(matches!(next(&t).await, Ok(Inbound { .. })));
    let first = t.authorization_context();
    // The server forgets the token: the next request is refused, the refresh is refused too.
    state.lock().unwrap().valid = Some("forgotten".into());
    t.send(request(2)).await.unwrap();
    assert!(matches!(next(&t).await, Ok(Inbound { .. })));
    assert_ne!(
        t.authorization_context(),
        first,
        "a new authorization: private cached answers go"
    );
    let s = state.lock().unwrap();
    assert_eq!(
        s.authorizations, 2,
        "refresh refused, so a new authorization"
    );
    let grants: Vec<String> = s
        .token_forms
        .iter()
        .map(|b| {
            get(&form(&Bytes::from(b.clone())), "grant_type")
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(
        grants,
        ["authorization_code", "refresh_token", "authorization_code"]
    );
    assert_eq!(s.registrations, 1, "the stored registration is used again");
}

/// A 403 `insufficient_scope` is a step-up: authorized again with the union of the scopes,
/// and the same identity (a step-up asks the same user for more).
#[tokio::test]
async fn a_step_up_asks_for_the_union_of_scopes_and_keeps_the_identity() {
    let (peer, state) = peer(|s| s.require_scope = Some("mcp:write".into())).await;
    let store = MemoryStore::new();
    let oauth = OAuth::new(peer.url(), config(&store));
    let t = transport(&peer, &oauth);
    let before = t.authorization_context();
    t.send(request(1)).await.unwrap();
    assert!(matches!(next(&t).await, Ok(Inbound { .. })));
    let s = state.lock().unwrap();
    assert_eq!(
        s.authorizations, 2,
        "the first authorization, then the step-up"
    );
    let asked: Vec<&str> = s.asked_scope.as_deref().unwrap_or("").split(' ').collect();
    assert!(asked.contains(&"mcp:write"), "{asked:?}");
    drop(s);
    assert_eq!(
        t.authorization_context(),
        before + 1,
        "one new identity (the first authorization); the step-up is the same one"
    );
}

#[tokio::test]
async fn metadata_naming_another_issuer_stop_the_flow_before_any_registration() {
    let (peer, state) =
        peer(|s| s.wrong_issuer = Some("https://attacker.example.com".into())).await;
    let oauth = OAuth::new(peer.url(), config(&MemoryStore::new()));
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    let e = auth_error(next(&t).await);
    assert!(
        matches!(&e, AuthError::IssuerMismatch { found, .. } if found == "https://attacker.example.com"),
        "{e}"
    );
    let s = state.lock().unwrap();
    assert_eq!(
        (s.registrations, s.authorizations, s.token_forms.len()),
        (0, 0, 0)
    );
}

#[tokio::test]
async fn resource_metadata_for_another_server_stop_the_flow_before_the_authorization_server() {
    let (peer, state) =
        peer(|s| s.wrong_resource = Some("https://evil.example.com/mcp".into())).await;
    let oauth = OAuth::new(peer.url(), config(&MemoryStore::new()));
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    let e = auth_error(next(&t).await);
    assert!(matches!(e, AuthError::ResourceMismatch { .. }), "{e}");
    assert!(
        !peer
            .requests()
            .iter()
            .any(|r| r.path.contains("oauth-authorization-server")),
        "the authorization server was never asked"
    );
    assert_eq!(state.lock().unwrap().authorizations, 0);
}

#[tokio::test]
async fn fresh_credentials_refused_again_fail_without_a_second_authorization() {
    let (peer, state) = peer(|s| s.refuse_all = true).await;
    let oauth = OAuth::new(peer.url(), config(&MemoryStore::new()));
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    let e = auth_error(next(&t).await);
    assert!(matches!(e, AuthError::Rejected { .. }), "{e}");
    assert_eq!(state.lock().unwrap().authorizations, 1);
    assert_eq!(
        peer.requests().iter().filter(|r| r.path == "/mcp").count(),
        2,
        "sent, refused, resent once"
    );
}

#[tokio::test]
async fn without_a_handler_or_with_one_that_cannot_interact_a_refusal_asks_for_a_login() {
    let (peer, state) = peer(|_| {}).await;
    let without = OAuthConfig::new();
    let cannot = OAuthConfig::new().handler(Arc::new(toolwire_auth::NoInteraction));
    for (id, config) in [(1, without), (2, cannot)] {
        let oauth = OAuth::new(peer.url(), config);
        let t = transport(&peer, &oauth);
        t.send(request(id)).await.unwrap();
        let e = auth_error(next(&t).await);
        assert!(matches!(e, AuthError::LoginRequired { .. }), "{id}: {e}");
    }
    let s = state.lock().unwrap();
    assert_eq!((s.registrations, s.authorizations), (0, 0));
}

#[tokio::test]
async fn a_stored_token_is_used_by_a_new_client_without_a_flow_and_keyed_by_issuer() {
    let (peer, state) = peer(|_| {}).await;
    let store = MemoryStore::new();
    let first = OAuth::new(peer.url(), config(&store));
    let t = transport(&peer, &first);
    t.send(request(1)).await.unwrap();
    assert!(matches!(next(&t).await, Ok(Inbound { .. })));
    // A second process: the same store, no handler.
    let second = OAuth::new(
        peer.url(),
        OAuthConfig::new().store(Arc::new(store.clone())),
    );
    let t2 = transport(&peer, &second);
    t2.send(request(2)).await.unwrap();
    assert!(matches!(next(&t2).await, Ok(Inbound { .. })));
    assert_eq!(state.lock().unwrap().authorizations, 1);
    let key = StoreKey {
        server: peer.url(),
        issuer: format!("http://{}", peer.addr),
    };
    assert!(ready_now(store.load(&key)).is_some());
    let status = second.status().await.unwrap();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].client_id.as_deref(), Some("cid"));
    assert!(
        !format!("{status:?}").contains("access-token"),
        "status never shows a token"
    );
    assert_eq!(second.logout(None).await.unwrap(), 1);
    assert!(store.list_now().is_empty());
}

/// Tokens, the refresh token, the client secret, the code and the PKCE verifier of a whole
/// flow (registration, authorization, token, refresh, a refused refresh, a second
/// authorization) never reach the logs at TRACE, nor `Debug` of what a caller can print.
#[tokio::test]
async fn no_secret_of_a_flow_reaches_the_logs_or_debug() {
    let (captured, _guard) = toolwire_test_support::logs::capture();

    let (peer, state) = peer(|s| s.expires_in = HOUR).await;
    let store = MemoryStore::new();
    let time = TestClock::new();
    let oauth = OAuth::new(peer.url(), config(&store).clock(time.clock()));
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    next(&t).await.unwrap();
    time.advance(HOUR - 30);
    t.send(request(2)).await.unwrap();
    next(&t).await.unwrap();
    {
        let mut s = state.lock().unwrap();
        s.revoke_refresh = true;
        s.valid = Some("forgotten".into());
    }
    t.send(request(3)).await.unwrap();
    next(&t).await.unwrap();
    tracing::info!(oauth = ?oauth, entries = ?store.list_now(), transport = ?t, "state");

    let s = state.lock().unwrap();
    assert_eq!(
        s.authorizations,
        2,
        "the whole path ran: {:?}",
        s.token_forms.len()
    );
    let verifiers: Vec<String> = s
        .token_forms
        .iter()
        .filter_map(|b| get(&form(&Bytes::from(b.clone())), "code_verifier").map(str::to_owned))
        .collect();
    assert_eq!(verifiers.len(), 2);
    let logs = captured.text();
    assert!(logs.contains("authorized"), "the flow logged: {logs}");
    for secret in [
        "access-token-",
        "refresh-token-",
        "client-secret-x",
        "the-code-x",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(verifiers)
    {
        assert!(!logs.contains(&secret), "{secret} leaked: {logs}");
    }
}

#[tokio::test]
async fn a_dpop_challenge_gets_bound_tokens_a_fresh_proof_per_request_and_the_servers_nonce() {
    let (peer, state) = peer(|s| s.dpop = true).await;
    let store = MemoryStore::new();
    let oauth = OAuth::new(peer.url(), config(&store));
    let t = transport(&peer, &oauth);
    for id in 1..=3 {
        t.send(request(id)).await.unwrap();
        assert!(next(&t).await.is_ok(), "request {id} answered");
    }
    let s = state.lock().unwrap();
    assert_eq!(s.authorizations, 1);
    // The first proof met the nonce challenge; every request after carried the nonce.
    assert_eq!(s.proofs.len(), 4, "{:?}", s.proofs);
    let unique: std::collections::BTreeSet<&String> = s.proofs.iter().collect();
    assert_eq!(unique.len(), s.proofs.len(), "a fresh jti per request");
    let token_request = peer
        .requests()
        .into_iter()
        .find(|r| r.path == "/token")
        .unwrap();
    assert!(
        !token_request.header("dpop").is_empty(),
        "the token request carries a proof"
    );
    let entry = store.list_now().pop().unwrap();
    assert!(
        entry.dpop_key.is_some(),
        "the key is kept with the tokens it binds"
    );
    assert!(!format!("{entry:?}").contains(entry.dpop_key.as_ref().unwrap().expose()));
}

#[tokio::test]
async fn a_configured_clients_tokens_are_refreshed_by_a_process_not_given_the_configuration() {
    let (peer, state) = peer(|s| s.expires_in = HOUR).await;
    let store = MemoryStore::new();
    let time = TestClock::new();
    let first = OAuth::new(
        peer.url(),
        config(&store).clock(time.clock()).static_client(
            toolwire_auth::StaticClient::new("configured-id")
                .secret("configured-secret-x")
                .persist_secret(true),
        ),
    );
    let t = transport(&peer, &first);
    t.send(request(1)).await.unwrap();
    assert!(next(&t).await.is_ok());
    // Another process: the same store, no client configured, nobody to approve.
    let second = OAuth::new(
        peer.url(),
        OAuthConfig::new()
            .store(Arc::new(store.clone()))
            .clock(time.clock()),
    );
    let t2 = transport(&peer, &second);
    time.advance(HOUR - 30);
    t2.send(request(2)).await.unwrap();
    assert!(next(&t2).await.is_ok(), "refreshed without a flow");
    let s = state.lock().unwrap();
    assert_eq!((s.registrations, s.authorizations), (0, 1));
    let refresh = form(&Bytes::from(s.token_forms.last().unwrap().clone()));
    assert_eq!(get(&refresh, "grant_type"), Some("refresh_token"));
    assert_eq!(get(&refresh, "client_id"), Some("configured-id"));
}

/// Whether any token request carried `needle`.
fn token_requests_carry(
    state: &std::sync::Mutex<toolwire_test_support::oauth::As>,
    needle: &str,
) -> bool {
    state
        .lock()
        .unwrap()
        .token_forms
        .iter()
        .any(|f| f.contains(needle))
}

#[tokio::test]
async fn a_configured_secret_is_kept_out_of_the_store_unless_asked() {
    let (peer, state) = peer(|_| {}).await;
    let store = MemoryStore::new();
    let client = toolwire_auth::StaticClient::new("configured-id").secret("configured-secret-x");
    let oauth = OAuth::new(peer.url(), config(&store).static_client(client.clone()));
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    assert!(next(&t).await.is_ok());
    assert!(
        token_requests_carry(&state, "configured-secret-x"),
        "the secret was used"
    );
    let kept = store.list().await.unwrap();
    let kept_client = kept[0].client.as_ref().unwrap();
    assert_eq!(kept_client.client_id, "configured-id");
    assert!(
        kept_client.client_secret.is_none(),
        "the secret was not stored"
    );
    // Configured again (from the environment, say), it refreshes the stored tokens.
    let again = OAuth::new(
        peer.url(),
        OAuthConfig::new()
            .store(Arc::new(store.clone()))
            .static_client(client),
    );
    state.lock().unwrap().valid = None;
    let t2 = transport(&peer, &again);
    t2.send(request(2)).await.unwrap();
    assert!(next(&t2).await.is_ok());
    let s = state.lock().unwrap();
    assert_eq!(s.authorizations, 1, "a refresh, not a new login");
}

#[tokio::test]
async fn a_configured_secret_stays_with_the_issuer_it_was_first_used_with() {
    let (peer, state) = peer(|_| {}).await;
    let store = MemoryStore::new();
    // The client was first used with another authorization server: the store says so.
    let first = StoreKey {
        server: "https://other.example/mcp".into(),
        issuer: "https://login.example".into(),
    };
    store
        .save(&toolwire_auth::StoredAuth {
            server: first.server.clone(),
            issuer: first.issuer.clone(),
            resource: first.server.clone(),
            token_endpoint: "https://login.example/token".into(),
            revocation_endpoint: None,
            client: Some(toolwire_auth::ClientRegistration {
                client_id: "configured-id".into(),
                client_secret: None,
                auth_method: toolwire_auth::TokenAuthMethod::ClientSecretPost,
                redirect_uri: None,
                kind: toolwire_auth::ClientKind::Static,
            }),
            tokens: None,
            dpop_key: None,
            saved_at: 1,
        })
        .await
        .unwrap();
    let oauth = OAuth::new(
        peer.url(),
        config(&store).static_client(
            toolwire_auth::StaticClient::new("configured-id").secret("configured-secret-x"),
        ),
    );
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    assert!(next(&t).await.is_ok(), "a registration of its own works");
    assert!(!token_requests_carry(&state, "configured-secret-x"));
    assert!(!token_requests_carry(&state, "configured-id"));
    assert_eq!(state.lock().unwrap().registrations, 1);
}

#[tokio::test]
async fn a_server_without_resource_metadata_cannot_claim_a_bound_issuer() {
    // 2025-03-26 discovery: the MCP server's origin is the authorization server, and its
    // metadata claim to be the issuer the client is bound to.
    let (peer, state) = peer(|s| {
        s.no_prm = true;
        s.wrong_issuer = Some("https://login.example".into());
    })
    .await;
    // A machine grant: nothing stands between the client and the token request.
    let oauth = OAuth::new(
        peer.url(),
        config(&MemoryStore::new())
            .grant(toolwire_auth::Grant::ClientCredentials)
            .static_client(
                toolwire_auth::StaticClient::new("configured-id")
                    .secret("configured-secret-x")
                    .issuer("https://login.example"),
            ),
    );
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    let e = auth_error(next(&t).await);
    assert!(matches!(e, AuthError::NoClient { .. }), "{e}");
    assert!(
        !token_requests_carry(&state, "configured-secret-x"),
        "the secret went to a server that only claimed the issuer"
    );
}

#[tokio::test]
async fn a_cleartext_issuer_is_refused_before_its_metadata_are_fetched() {
    let (peer, state) = peer(|s| s.prm_issuer = Some("http://login.example".into())).await;
    let oauth = OAuth::new(peer.url(), config(&MemoryStore::new()));
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    let e = auth_error(next(&t).await);
    assert!(matches!(e, AuthError::UnsafeServer { .. }), "{e}");
    assert_eq!(state.lock().unwrap().registrations, 0);
}

#[tokio::test]
async fn a_registration_names_every_scope_the_authorization_then_asks_for() {
    // The Python SDK's authorization server refuses a scope the client did not register;
    // offline_access is asked because the server lists it.
    let (peer, state) = peer(|s| s.strict_scopes = true).await;
    let oauth = OAuth::new(peer.url(), config(&MemoryStore::new()));
    let t = transport(&peer, &oauth);
    t.send(request(1)).await.unwrap();
    assert!(next(&t).await.is_ok(), "authorized");
    let s = state.lock().unwrap();
    assert_eq!(s.asked_scope.as_deref(), Some("mcp:read offline_access"));
    let registered = s.registered_scope.clone().unwrap_or_default();
    for scope in ["mcp:read", "offline_access"] {
        assert!(registered.split(' ').any(|r| r == scope), "{registered}");
    }
}

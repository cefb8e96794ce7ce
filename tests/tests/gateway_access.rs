//! The gateway as an OAuth resource server, with API keys and a policy: real sockets, a
//! scripted authorization server publishing a JWK set (two keys, rotated mid-run), the
//! reference servers behind counting proxies (so "nothing reached an upstream" is seen where
//! it would have arrived).

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
use toolwire::auth::DpopKey;
use toolwire::{Client, HttpTransport, ProtocolMode};
use toolwire_gateway::{Access, AccessConfig, Gateway};
use toolwire_host::Naming;
use toolwire_refserver::{Eras, Framing};
use toolwire_test_support::issuer::{Issuer, TestKey, now};
use toolwire_test_support::proxy::{Fault, FaultProxy, Rule};

/// The gateway's public endpoint: what tokens are for.
const RESOURCE: &str = "https://gw.example/mcp";
const API_KEY: &str = "tw-key-0123456789abcdef";

struct Guarded {
    issuer: Issuer,
    gateway: Arc<Gateway>,
    front: toolwire_server::HttpServer,
    /// In front of `new` and `old`: what each upstream received.
    proxies: [FaultProxy; 2],
    _upstreams: [toolwire_refserver::HttpServer; 2],
}

/// A gateway over `new` (2026-07-28) and `old` (legacy) that accepts the issuer's tokens and
/// the API key `ci`, with `extra` members in its `gateway` section.
async fn guarded(extra: Value) -> Guarded {
    let issuer = Issuer::start().await;
    let Proxied {
        host,
        proxies,
        upstreams,
    } = proxied().await;
    let mut section = json!({
        "resource": RESOURCE,
        "authorizationServers": [issuer.url()],
        "apiKeys": [{"name": "ci", "sha256": sha256_hex(API_KEY)}],
    });
    for (k, v) in extra.as_object().unwrap() {
        section[k] = v.clone();
    }
    let config = AccessConfig::from_json(&section).unwrap();
    let access = Access::new(&config, "http://unused/mcp").await.unwrap();
    let (gateway, front) = serve_guarded(host, access).await;
    Guarded {
        issuer,
        gateway,
        front,
        proxies,
        _upstreams: upstreams,
    }
}

impl Guarded {
    fn token(&self, subject: &str, extra: &Value) -> String {
        self.issuer.token("k1", RESOURCE, subject, extra)
    }

    fn client(&self, credential: &str, mode: ProtocolMode) -> Client {
        Client::builder("downstream", "0")
            .mode(mode)
            .connect_http(HttpTransport::builder(self.front.url()).credentials(credential))
            .unwrap()
    }

    /// `tools/call`s every upstream received.
    fn upstream_calls(&self) -> usize {
        self.proxies
            .iter()
            .map(|p| p.sent_count("\"tools/call\""))
            .sum()
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

fn legacy_call(tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": {"text": "hi"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_the_answer_is_401_naming_the_resource_metadata_which_is_served() {
    let g = guarded(json!({"scopesRequired": ["mcp"]})).await;
    let (status, head, body) = exchange_whole(g.front.addr(), &[], &initialize()).await;
    assert_eq!(status, 401);
    let challenge = header_of(&head, "www-authenticate").unwrap();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(
            r#"resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp""#
        ),
        "{challenge}"
    );
    assert!(challenge.contains(r#"scope="mcp""#), "{challenge}");
    assert!(
        !challenge.contains("error="),
        "no token, no error code: {challenge}"
    );
    assert_eq!(body["error"], "invalid_request");

    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let (status, page) = get(g.front.addr(), path).await;
        assert_eq!(status, 200, "{path}");
        let metadata: Value = serde_json::from_str(&page).unwrap();
        assert_eq!(metadata["resource"], RESOURCE);
        assert_eq!(metadata["authorization_servers"], json!([g.issuer.url()]));
        assert_eq!(metadata["scopes_supported"], json!(["mcp"]));
    }
    // Health stays open.
    assert_eq!(get(g.front.addr(), "/healthz").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_credential_is_refused_401_invalid_token_and_no_upstream_hears_of_it() {
    let g = guarded(json!({})).await;
    let claims = |extra: Value| g.issuer.claims(RESOURCE, "alice", &extra);
    let k1 = g.issuer.key("k1");
    let unsigned = {
        use base64::Engine as _;
        let b64 =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            b64(&json!({"alg": "none"})),
            b64(&claims(json!({})))
        )
    };
    let tampered = {
        let good = k1.token(&claims(json!({})));
        let other = k1.token(&claims(json!({"sub": "root"})));
        let (g1, o1) = (
            good.split('.').collect::<Vec<_>>(),
            other.split('.').collect::<Vec<_>>(),
        );
        format!("{}.{}.{}", g1[0], o1[1], g1[2])
    };
    let bad: Vec<(&str, String)> = vec![
        ("expired", k1.token(&claims(json!({"exp": now() - 3600})))),
        (
            "wrong audience",
            k1.token(&claims(json!({"aud": "https://other.example/mcp"}))),
        ),
        (
            "wrong issuer",
            k1.token(&claims(json!({"iss": "https://evil.example"}))),
        ),
        ("unsigned", unsigned),
        ("tampered", tampered),
        (
            "unpublished key",
            TestKey::es256("k1").token(&claims(json!({}))),
        ),
        ("unknown API key", "tw-key-not-this-one".to_owned()),
        // A DPoP-bound token presented as a plain bearer token.
        (
            "bound, as Bearer",
            k1.token(&claims(json!({"cnf": {"jkt": "abc"}}))),
        ),
    ];
    for (what, token) in &bad {
        for body in [initialize(), legacy_call("new__echo")] {
            let auth = format!("Bearer {token}");
            let (status, head, answer) =
                exchange_whole(g.front.addr(), &[("authorization", &auth)], &body).await;
            assert_eq!(status, 401, "{what}: {answer}");
            let challenge = header_of(&head, "www-authenticate").unwrap_or_default();
            assert!(
                challenge.contains(r#"error="invalid_token""#),
                "{what}: {challenge}"
            );
            assert!(
                challenge.contains("resource_metadata="),
                "{what}: {challenge}"
            );
            assert!(!head.contains(token.as_str()) && !answer.to_string().contains(token.as_str()));
        }
    }
    assert_eq!(g.upstream_calls(), 0, "a refused call reached an upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_dpop_proof_is_refused_and_a_fresh_one_is_served() {
    let g = guarded(json!({})).await;
    let key = DpopKey::generate().unwrap();
    let jkt = toolwire::auth::verify::PublicKey::from_jwk(&key.jwk())
        .unwrap()
        .thumbprint();
    let token = g.token("alice", &json!({"cnf": {"jkt": jkt}}));
    let auth = format!("DPoP {token}");
    let proof = key
        .proof("POST", RESOURCE, Some(&token), None, now())
        .unwrap();
    let headers = [("authorization", auth.as_str()), ("dpop", proof.as_str())];
    let (status, _, answer) = exchange_whole(g.front.addr(), &headers, &initialize()).await;
    assert_eq!(status, 200, "{answer}");
    let (status, head, _) = exchange_whole(g.front.addr(), &headers, &initialize()).await;
    assert_eq!(status, 401);
    let challenge = header_of(&head, "www-authenticate").unwrap();
    assert!(
        challenge.starts_with("DPoP ") && challenge.contains("invalid_dpop_proof"),
        "{challenge}"
    );
    // Without a proof, or with one for another URL.
    let bare = [("authorization", auth.as_str())];
    assert_eq!(
        exchange_whole(g.front.addr(), &bare, &initialize()).await.0,
        401
    );
    let elsewhere = key
        .proof(
            "POST",
            "https://other.example/mcp",
            Some(&token),
            None,
            now(),
        )
        .unwrap();
    let wrong = [
        ("authorization", auth.as_str()),
        ("dpop", elsewhere.as_str()),
    ];
    assert_eq!(
        exchange_whole(g.front.addr(), &wrong, &initialize())
            .await
            .0,
        401
    );
    let fresh = key
        .proof("POST", RESOURCE, Some(&token), None, now())
        .unwrap();
    let again = [("authorization", auth.as_str()), ("dpop", fresh.as_str())];
    assert_eq!(
        exchange_whole(g.front.addr(), &again, &initialize())
            .await
            .0,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_of_either_key_a_rotated_key_and_the_api_key_are_served_in_both_eras() {
    let g = guarded(json!({})).await;
    let rs256 = g.issuer.token("k2", RESOURCE, "bob", &json!({}));
    for credential in [g.token("alice", &json!({})), rs256, API_KEY.to_owned()] {
        for mode in [ProtocolMode::Auto, LEGACY] {
            let client = g.client(&credential, mode.clone());
            let tools = client.list_all_tools().await.unwrap();
            assert!(tools.iter().any(|t| t.name == "old__echo"), "{mode:?}");
            let said = client
                .call_tool("new__echo", json!({"text": "through"}))
                .await
                .unwrap();
            assert_eq!(text(&said), "through");
        }
    }
    assert_eq!(g.upstream_calls(), 6);
    // The issuer rotates mid-run: a token of the new key is accepted on first sight, once
    // the shortest interval between two fetches of the set has passed (a second).
    tokio::time::sleep(std::time::Duration::from_secs(
        toolwire::auth::verify::Jwks::MIN_INTERVAL,
    ))
    .await;
    let k3 = g.issuer.rotate(TestKey::ed25519("k3"));
    let rotated = k3.token(&g.issuer.claims(RESOURCE, "carol", &json!({})));
    let client = g.client(&rotated, ProtocolMode::Auto);
    assert!(!client.list_all_tools().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_the_required_scope_is_told_403_insufficient_scope() {
    let g = guarded(json!({"scopesRequired": ["mcp:tools"]})).await;
    let narrow = g.token("alice", &json!({"scope": "profile"}));
    let auth = format!("Bearer {narrow}");
    let (status, head, body) =
        exchange_whole(g.front.addr(), &[("authorization", &auth)], &initialize()).await;
    assert_eq!(status, 403);
    let challenge = header_of(&head, "www-authenticate").unwrap();
    assert!(
        challenge.contains(r#"error="insufficient_scope""#)
            && challenge.contains(r#"scope="mcp:tools""#),
        "{challenge}"
    );
    assert_eq!(body["error"], "insufficient_scope");
    // The API key has no scopes either.
    let key = format!("Bearer {API_KEY}");
    assert_eq!(
        exchange_whole(g.front.addr(), &[("authorization", &key)], &initialize())
            .await
            .0,
        403
    );
    let wide = g.token("alice", &json!({"scope": "profile mcp:tools"}));
    let client = g.client(&wide, ProtocolMode::Auto);
    assert!(!client.list_all_tools().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_sees_and_calls_only_what_the_policy_gives_it() {
    let g = guarded(json!({"policy": [
        {"callers": {"subject": "alice"}, "tools": ["new__*"]},
        {"callers": {"apiKey": "ci"}, "servers": ["old"], "deny": ["old__add"]}
    ]}))
    .await;
    let alice = g.client(&g.token("alice", &json!({})), ProtocolMode::Auto);
    let names = |tools: Vec<Arc<toolwire::Tool>>| -> Vec<String> {
        tools.iter().map(|t| t.name.clone()).collect()
    };
    let seen = names(alice.list_all_tools().await.unwrap());
    assert!(
        !seen.is_empty() && seen.iter().all(|n| n.starts_with("new__")),
        "{seen:?}"
    );
    let hidden = alice
        .call_tool("old__echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(hidden.to_string().contains("Unknown tool"), "{hidden}");
    assert_eq!(
        g.proxies[1].sent_count("\"tools/call\""),
        0,
        "old heard a hidden call"
    );
    alice
        .call_tool("new__echo", json!({"text": "x"}))
        .await
        .unwrap();

    let ci = g.client(API_KEY, LEGACY);
    let seen = names(ci.list_all_tools().await.unwrap());
    assert!(seen.contains(&"old__echo".to_owned()), "{seen:?}");
    assert!(!seen.contains(&"old__add".to_owned()), "denied: {seen:?}");
    assert!(seen.iter().all(|n| n.starts_with("old__")), "{seen:?}");
    assert!(
        ci.call_tool("old__add", json!({"a": 1, "b": 2}))
            .await
            .is_err()
    );
    assert!(
        ci.call_tool("new__echo", json!({"text": "x"}))
            .await
            .is_err()
    );
    ci.call_tool("old__echo", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(g.proxies[1].sent_count("\"tools/call\""), 1);
    assert_eq!(g.proxies[0].sent_count("\"tools/call\""), 1);

    // A caller no rule names sees nothing.
    let mallory = g.client(&g.token("mallory", &json!({})), ProtocolMode::Auto);
    assert!(mallory.list_all_tools().await.unwrap().is_empty());
    // Resources follow their server: only the API key's rule opens a server.
    let resources = ci.list_all_resources().await.unwrap();
    assert!(
        resources.iter().all(|r| r.uri.contains("old__")),
        "{resources:?}"
    );
    assert!(alice.list_all_resources().await.unwrap().is_empty());
    let _ = &g.gateway;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_answers_only_the_caller_that_began_it() {
    let g = guarded(json!({})).await;
    let alice = format!("Bearer {}", g.token("alice", &json!({})));
    let bob = format!("Bearer {}", g.token("bob", &json!({})));
    let (status, sid, _) =
        exchange(g.front.addr(), &[("authorization", &alice)], &initialize()).await;
    assert_eq!(status, 200);
    let sid = sid.unwrap();
    let as_bob = [
        ("authorization", bob.as_str()),
        ("mcp-session-id", sid.as_str()),
    ];
    assert_eq!(
        exchange(g.front.addr(), &as_bob, &legacy_call("new__echo"))
            .await
            .0,
        404
    );
    let as_alice = [
        ("authorization", alice.as_str()),
        ("mcp-session-id", sid.as_str()),
    ];
    let (status, _, answer) = exchange(g.front.addr(), &as_alice, &legacy_call("new__echo")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(g.upstream_calls(), 1, "only alice's call went through");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_tokens_are_introspected_once_a_minute_and_inactive_ones_refused() {
    use toolwire_test_support::issuer::GATEWAY_CLIENT;
    let issuer = Issuer::start().await;
    // A bucket of 20 introspections of new tokens, refilled at one every ten seconds.
    let section = json!({"introspection": {"issuer": issuer.url(),
        "endpoint": format!("{}/introspect", issuer.url()),
        "clientId": GATEWAY_CLIENT.0,
        "clientSecretEnv": "TOOLWIRE_TEST_UNSET_INTROSPECTION_SECRET",
        "burst": 20, "perSecond": 0.1}});
    let mut config = AccessConfig::from_json(&section).unwrap();
    // The secret's variable unset: a clear error at start that names it.
    let missing = Access::new(&config, RESOURCE).await.unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("TOOLWIRE_TEST_UNSET_INTROSPECTION_SECRET"),
        "{missing}"
    );
    config.introspection.as_mut().unwrap().client_secret =
        Some(toolwire::auth::Secret::new(GATEWAY_CLIENT.1));
    let new = reference(Eras::Modern, Framing::Json).await;
    let proxy = FaultProxy::start(new.addr(), Rule::connections(Fault::Pass, 0)).await;
    let host = host(
        json!({"new": {"url": proxy.url("/mcp")}}),
        Naming::Qualified,
    )
    .await;
    let access = Access::new(&config, RESOURCE).await.unwrap();
    let (_gateway, front) = serve_guarded(host, access).await;
    // The metadata names the introspecting issuer.
    let (_, page) = get(front.addr(), "/.well-known/oauth-protected-resource/mcp").await;
    assert!(page.contains(&issuer.url()), "{page}");

    let active = issuer.opaque(RESOURCE, "alice", &json!({}));
    let client = Client::builder("downstream", "0")
        .connect_http(HttpTransport::builder(front.url()).credentials(active.as_str()))
        .unwrap();
    for _ in 0..3 {
        client
            .call_tool("new__echo", json!({"text": "x"}))
            .await
            .unwrap();
    }
    assert_eq!(issuer.introspections(), 1, "asked once, then remembered");

    // Revoked before its first use, for another resource, or never issued: 401.
    let revoked = issuer.opaque(RESOURCE, "bob", &json!({}));
    issuer.revoke(&revoked);
    let elsewhere = issuer.opaque("https://other.example/mcp", "carol", &json!({}));
    for token in [revoked.as_str(), elsewhere.as_str(), "opaque-never-issued"] {
        let auth = format!("Bearer {token}");
        let (status, head, _) = exchange_whole(
            front.addr(),
            &[("authorization", &auth)],
            &legacy_call("new__echo"),
        )
        .await;
        assert_eq!(status, 401, "{token}");
        assert!(
            header_of(&head, "www-authenticate")
                .unwrap()
                .contains("invalid_token")
        );
    }
    assert_eq!(
        proxy.sent_count("\"tools/call\""),
        3,
        "only the active token's calls"
    );
    // Each refused token was asked about at most once.
    let asked_before = issuer.introspections();
    assert!(asked_before <= 4, "{asked_before}");
    // A refused token sent again and again is not asked about again (for a minute).
    for _ in 0..20 {
        let (status, _, _) = exchange_whole(
            front.addr(),
            &[("authorization", "Bearer opaque-never-issued")],
            &legacy_call("new__echo"),
        )
        .await;
        assert_eq!(status, 401);
    }
    assert_eq!(
        issuer.introspections(),
        asked_before,
        "refusals are remembered"
    );
    // A flood of invented tokens costs the issuer what is left of the burst (and one more at
    // most if the flood took ten seconds), the rest are answered 503.
    let mut unavailable = 0;
    for n in 0..150 {
        let auth = format!("Bearer opaque-invented-{n}");
        let (status, _, _) = exchange_whole(
            front.addr(),
            &[("authorization", &auth)],
            &legacy_call("new__echo"),
        )
        .await;
        assert!(status == 401 || status == 503, "{status}");
        unavailable += u32::from(status == 503);
    }
    let asked = issuer.introspections() - asked_before;
    let left = 20 - asked_before;
    assert!(
        (left..=left + 1).contains(&asked),
        "{asked} introspections for 150 invented tokens, {left} left in the burst"
    );
    assert_eq!(unavailable, 150 - asked);
    let _ = new;
}

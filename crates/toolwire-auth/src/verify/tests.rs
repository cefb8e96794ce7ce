#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;
use toolwire_http::HttpTransport;
use toolwire_test_support::issuer::{Issuer, TestKey, now};

use super::*;
use crate::DpopKey;

const AUD: &str = "https://gw.example/mcp";

fn http(url: &str) -> toolwire_http::HttpExecutor {
    HttpTransport::builder(url).build().unwrap().executor()
}

async fn verifier(issuer: &Issuer) -> JwtVerifier {
    let keys = Jwks::discover(&issuer.url(), http(&issuer.url()))
        .await
        .unwrap();
    JwtVerifier::new(issuer.url(), AUD, keys)
}

#[tokio::test]
async fn tokens_signed_by_each_published_key_verify_and_say_who_they_are_for() {
    let issuer = Issuer::start().await;
    let v = verifier(&issuer).await;
    for kid in ["k1", "k2"] {
        let token = issuer.token(
            kid,
            AUD,
            "alice",
            &json!({"scope": "tools:read tools:call"}),
        );
        let got = v.verify(&token).await.unwrap();
        assert_eq!(got.subject.as_deref(), Some("alice"));
        assert_eq!(got.client_id.as_deref(), Some("test-client"));
        assert_eq!(got.scopes, ["tools:read", "tools:call"]);
        assert_eq!(got.issuer, issuer.url());
    }
    // An audience given as a list, and scopes as `scp`.
    let token = issuer.token(
        "k1",
        "other",
        "bob",
        &json!({"aud": ["x", AUD], "scp": ["a"]}),
    );
    let got = v.verify(&token).await.unwrap();
    assert_eq!(got.scopes, ["a"]);
    // The set was fetched once for all of them.
    assert_eq!(issuer.jwks_fetches(), 1);
}

#[tokio::test]
async fn each_bad_token_is_refused_with_its_own_reason() {
    let issuer = Issuer::start().await;
    let v = verifier(&issuer).await;
    let key = issuer.key("k1");
    let claims = |extra: serde_json::Value| issuer.claims(AUD, "alice", &extra);
    let past = now() - 7200;

    let expired = key.token(&claims(json!({"exp": past})));
    assert_eq!(v.verify(&expired).await, Err(TokenError::Expired));
    let early = key.token(&claims(json!({"nbf": now() + 3600})));
    assert_eq!(v.verify(&early).await, Err(TokenError::NotYetValid));
    let no_exp = key.token(&json!({"iss": issuer.url(), "aud": AUD, "sub": "a"}));
    assert_eq!(v.verify(&no_exp).await, Err(TokenError::NoExpiry));
    let wrong_aud = key.token(&claims(json!({"aud": "https://elsewhere.example/mcp"})));
    assert_eq!(v.verify(&wrong_aud).await, Err(TokenError::Audience));
    let no_aud = key.token(&claims(json!({"aud": null})));
    assert_eq!(v.verify(&no_aud).await, Err(TokenError::Audience));
    let wrong_iss = key.token(&claims(json!({"iss": "https://evil.example"})));
    assert_eq!(v.verify(&wrong_iss).await, Err(TokenError::Issuer));

    // Unsigned: `alg: none` with an empty signature.
    let body = URL_SAFE_NO_PAD.encode(claims(json!({})).to_string());
    let none = format!("{}.{body}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#));
    assert!(matches!(
        v.verify(&none).await,
        Err(TokenError::Algorithm(_))
    ));
    // HMAC with the public key's bytes as the secret: the classic confusion, refused by name.
    let hs = format!(
        "{}.{body}.AAAA",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","kid":"k1"}"#)
    );
    assert!(matches!(v.verify(&hs).await, Err(TokenError::Algorithm(_))));

    // Tampered: the payload changed after signing.
    let good = key.token(&claims(json!({})));
    let mut parts: Vec<&str> = good.split('.').collect();
    let forged = URL_SAFE_NO_PAD.encode(claims(json!({"sub": "root"})).to_string());
    parts[1] = &forged;
    assert_eq!(v.verify(&parts.join(".")).await, Err(TokenError::Signature));

    // A key used with an algorithm its type does not allow (an EC key, an RSA header).
    let lying = key.sign_raw(&json!({"alg": "RS256", "kid": "k1"}), &claims(json!({})));
    assert!(matches!(
        v.verify(&lying).await,
        Err(TokenError::Algorithm(_))
    ));
    // A DPoP proof is not an access token.
    let proof_typed = key.sign_raw(
        &json!({"alg": "ES256", "kid": "k1", "typ": "dpop+jwt"}),
        &claims(json!({})),
    );
    assert!(matches!(
        v.verify(&proof_typed).await,
        Err(TokenError::Type(_))
    ));
    // A critical extension nobody here understands.
    let crit = key.sign_raw(
        &json!({"alg": "ES256", "kid": "k1", "crit": ["x"], "x": 1}),
        &claims(json!({})),
    );
    assert!(matches!(
        v.verify(&crit).await,
        Err(TokenError::Malformed(_))
    ));
    // Signed by a key the issuer never published.
    let stranger = TestKey::es256("k1").token(&claims(json!({})));
    assert_eq!(v.verify(&stranger).await, Err(TokenError::Signature));
    for garbage in ["", "a.b", "a.b.c.d", "!!.??.**"] {
        assert!(
            matches!(v.verify(garbage).await, Err(TokenError::Malformed(_))),
            "{garbage}"
        );
    }
    // None of the refusals leaks the token.
    let e = v.verify(&wrong_iss).await.unwrap_err();
    assert!(!format!("{e} {e:?}").contains(&wrong_iss[..20]));
}

#[tokio::test]
async fn a_rotated_key_is_fetched_on_first_sight_and_unknown_kids_do_not_hammer_the_issuer() {
    let issuer = Issuer::start().await;
    let t = Arc::new(AtomicU64::new(now()));
    let clock = Clock::from_fn({
        let t = t.clone();
        move || t.load(Ordering::Relaxed)
    });
    let v = verifier(&issuer).await.clock(clock);
    let first = issuer.token("k1", AUD, "alice", &json!({}));
    v.verify(&first).await.unwrap();
    assert_eq!(issuer.jwks_fetches(), 1);

    // The issuer rotates: k3 (EdDSA) in, k1 out.
    let k3 = issuer.rotate(TestKey::ed25519("k3"));
    t.fetch_add(Jwks::MIN_REFRESH, Ordering::Relaxed);
    let rotated = k3.token(&issuer.claims(AUD, "alice", &json!({})));
    assert_eq!(
        v.verify(&rotated).await.unwrap().subject.as_deref(),
        Some("alice")
    );
    assert_eq!(issuer.jwks_fetches(), 2);

    // Tokens naming a key nobody publishes: one fetch per MIN_REFRESH, however many arrive.
    t.fetch_add(Jwks::MIN_REFRESH, Ordering::Relaxed);
    let bogus = TestKey::es256("nope").token(&issuer.claims(AUD, "x", &json!({})));
    for _ in 0..5 {
        assert!(matches!(
            v.verify(&bogus).await,
            Err(TokenError::UnknownKey { kid: Some(k) }) if k == "nope"
        ));
    }
    assert_eq!(issuer.jwks_fetches(), 3);
    // Another unknown kid within MIN_INTERVAL of that fetch: none either; a second later, one.
    let other = TestKey::es256("nope2").token(&issuer.claims(AUD, "x", &json!({})));
    assert!(v.verify(&other).await.is_err());
    assert_eq!(issuer.jwks_fetches(), 3);
    t.fetch_add(Jwks::MIN_INTERVAL, Ordering::Relaxed);
    assert!(v.verify(&other).await.is_err());
    assert_eq!(issuer.jwks_fetches(), 4);
    // k1 was withdrawn: its tokens fail now that the set is fresh.
    assert!(matches!(
        v.verify(&first).await,
        Err(TokenError::UnknownKey { .. })
    ));
}

#[tokio::test]
async fn keys_that_cannot_be_fetched_are_a_typed_error_not_a_refusal_of_the_token() {
    let issuer = Issuer::start().await;
    let token = issuer.token("k1", AUD, "alice", &json!({}));
    let keys = Jwks::remote(format!("{}/missing", issuer.url()), http(&issuer.url()));
    let v = JwtVerifier::new(issuer.url(), AUD, keys);
    assert!(matches!(
        v.verify(&token).await,
        Err(TokenError::KeysUnavailable(_))
    ));
}

#[test]
fn a_fixed_set_without_a_usable_key_is_refused_at_once() {
    let set = json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}, {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}]});
    assert!(Jwks::fixed(&set).is_err());
    let enc_only = json!({"keys": [TestKey::es256("e").jwk().as_object().cloned().map(|mut k| {
        k.insert("use".into(), json!("enc"));
        k
    })]});
    assert!(Jwks::fixed(&enc_only).is_err());
}

fn dpop_setup() -> (DpopKey, String, DpopVerifier, Arc<AtomicU64>) {
    let key = DpopKey::generate().unwrap();
    let jkt = PublicKey::from_jwk(&key.jwk()).unwrap().thumbprint();
    let t = Arc::new(AtomicU64::new(now()));
    let clock = Clock::from_fn({
        let t = t.clone();
        move || t.load(Ordering::Relaxed)
    });
    (key, jkt, DpopVerifier::new(clock), t)
}

#[test]
fn a_dpop_proof_is_accepted_once_for_its_own_request_token_and_key() {
    let (key, jkt, v, t) = dpop_setup();
    let url = "https://gw.example/mcp";
    let now = t.load(Ordering::Relaxed);
    let proof = key.proof("POST", url, Some("tok"), None, now).unwrap();
    v.check(&proof, "POST", &format!("{url}?x=1"), "tok", &jkt)
        .unwrap();
    assert_eq!(
        v.check(&proof, "POST", url, "tok", &jkt),
        Err(TokenError::DpopReplay)
    );

    let fresh = || key.proof("POST", url, Some("tok"), None, now).unwrap();
    assert!(matches!(
        v.check(&fresh(), "GET", url, "tok", &jkt),
        Err(TokenError::Dpop(_))
    ));
    assert!(matches!(
        v.check(&fresh(), "POST", "https://gw.example/other", "tok", &jkt),
        Err(TokenError::Dpop(_))
    ));
    assert!(matches!(
        v.check(&fresh(), "POST", url, "another", &jkt),
        Err(TokenError::Dpop(_))
    ));
    let other = DpopKey::generate().unwrap();
    let foreign = other.proof("POST", url, Some("tok"), None, now).unwrap();
    assert!(matches!(
        v.check(&foreign, "POST", url, "tok", &jkt),
        Err(TokenError::Dpop(_))
    ));
    let old = key
        .proof("POST", url, Some("tok"), None, now - 600)
        .unwrap();
    assert!(matches!(
        v.check(&old, "POST", url, "tok", &jkt),
        Err(TokenError::Dpop(_))
    ));
    // A proof well formed in every way still passes after all these refusals.
    v.check(&fresh(), "POST", url, "tok", &jkt).unwrap();
    // Its jti is forgotten only once it could no longer be accepted anyway.
    t.fetch_add(700, Ordering::Relaxed);
    assert!(matches!(
        v.check(&proof, "POST", url, "tok", &jkt),
        Err(TokenError::Dpop(_))
    ));
}

#[test]
fn one_key_flooding_proofs_fills_its_own_share_and_never_refuses_another_key() {
    let (key, jkt, v, t) = dpop_setup();
    let v = v.with_share_per_key(20);
    let url = "https://gw.example/mcp";
    let now = t.load(Ordering::Relaxed);
    let proof = |key: &DpopKey| key.proof("POST", url, Some("tok"), None, now).unwrap();
    for _ in 0..20 {
        v.check(&proof(&key), "POST", url, "tok", &jkt).unwrap();
    }
    let full = v.check(&proof(&key), "POST", url, "tok", &jkt);
    assert!(
        matches!(full, Err(TokenError::Dpop(why)) if why.contains("from this key")),
        "{full:?}"
    );
    // Another caller's key is served meanwhile.
    let other = DpopKey::generate().unwrap();
    let other_jkt = PublicKey::from_jwk(&other.jwk()).unwrap().thumbprint();
    v.check(&proof(&other), "POST", url, "tok", &other_jkt)
        .unwrap();
    // Once the flood's proofs could no longer be accepted, the key has its share again.
    t.fetch_add(700, Ordering::Relaxed);
    let later = key
        .proof("POST", url, Some("tok"), None, now + 700)
        .unwrap();
    v.check(&later, "POST", url, "tok", &jkt).unwrap();
}

#[test]
fn the_thumbprint_of_a_jwk_is_rfc_7638s() {
    // RFC 7638 §3.1's example key and thumbprint.
    let jwk = json!({"kty": "RSA", "e": "AQAB", "alg": "RS256", "kid": "2011-04-29",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"});
    assert_eq!(
        PublicKey::from_jwk(&jwk).unwrap().thumbprint(),
        "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
    );
}

#[tokio::test]
async fn an_inactive_answer_is_inactive_whatever_its_status_and_a_broken_server_is_unavailable() {
    use toolwire_test_support::http::{HttpPeer, Reply};
    let peer = HttpPeer::start(|req| match req.path.as_str() {
        // As the TypeScript SDK's example answers an unknown token.
        "/401" => Reply::json(401, r#"{"active":false,"error":"Unauthorized"}"#),
        "/200" => Reply::json(200, r#"{"active":false}"#),
        _ => Reply::status(500),
    })
    .await;
    let base = format!("http://{}", peer.addr);
    let at = |path: &str| {
        Introspector::new(
            format!("{base}{path}"),
            "https://as.example",
            AUD,
            "gw",
            crate::Secret::new("s"),
            http(&base),
        )
    };
    assert_eq!(at("/401").check("t").await, Err(TokenError::Inactive));
    assert_eq!(at("/200").check("t").await, Err(TokenError::Inactive));
    assert!(matches!(
        at("/500").check("t").await,
        Err(TokenError::KeysUnavailable(_))
    ));
    // Every request authenticated the gateway as a client and named the token.
    let asked = peer.requests();
    assert_eq!(asked.len(), 3);
    assert!(
        asked
            .iter()
            .all(|r| r.header("authorization").starts_with("Basic ")
                && String::from_utf8_lossy(&r.body).contains("token=t"))
    );
}

#[tokio::test]
async fn what_a_token_says_of_itself_reaches_errors_as_printable_text_only() {
    let issuer = Issuer::start().await;
    let v = verifier(&issuer).await;
    let claims = URL_SAFE_NO_PAD.encode(issuer.claims(AUD, "a", &json!({})).to_string());
    for header in [
        json!({"alg": "RS256\r\nX-Injected: 1"}),
        json!({"alg": "ES256", "kid": "k1", "typ": "jwt\u{1b}[31m"}),
        json!({"alg": "ES256", "kid": "nope\nsecond line"}),
    ] {
        let token = format!(
            "{}.{claims}.AAAA",
            URL_SAFE_NO_PAD.encode(header.to_string())
        );
        let e = v.verify(&token).await.unwrap_err().to_string();
        assert!(e.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{e:?}");
    }
}

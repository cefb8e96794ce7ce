//! A scripted authorization server for tests of resource servers (the gateway): metadata
//! naming its `jwks_uri`, a JWK set that can rotate mid-run, and keys that mint access tokens
//! (ES256, RS256, EdDSA) with whatever claims and headers a test needs, valid or not.

#![allow(
    clippy::expect_used,
    reason = "test support: a key that cannot be made or used fails the test that asked for it"
)]

use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair};
use serde_json::{Map, Value, json};

use crate::http::{HttpPeer, Reply};

/// A 2048-bit RSA key made for these tests (PKCS#8), never used anywhere else.
const RSA_PEM: &str = include_str!("keys/rsa2048.pem");

enum Pair {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
    EdDsa(Ed25519KeyPair),
}

/// A signing key with its `kid`.
pub struct TestKey {
    kid: String,
    pair: Pair,
}

impl std::fmt::Debug for TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestKey({} {})", self.kid, self.alg())
    }
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl TestKey {
    /// A new P-256 key. Panics if the system has no randomness.
    pub fn es256(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("key");
        let pair = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            doc.as_ref(),
            &rng,
        )
        .expect("key");
        Self {
            kid: kid.into(),
            pair: Pair::Es256(pair),
        }
    }

    /// The test RSA key.
    pub fn rs256(kid: &str) -> Self {
        let body: String = RSA_PEM
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("pem");
        Self {
            kid: kid.into(),
            pair: Pair::Rs256(RsaKeyPair::from_pkcs8(&der).expect("rsa key")),
        }
    }

    /// A new Ed25519 key.
    pub fn ed25519(kid: &str) -> Self {
        let doc = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("key");
        Self {
            kid: kid.into(),
            pair: Pair::EdDsa(Ed25519KeyPair::from_pkcs8(doc.as_ref()).expect("key")),
        }
    }

    /// Its `kid`.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// `ES256`, `RS256` or `EdDSA`.
    pub fn alg(&self) -> &'static str {
        match self.pair {
            Pair::Es256(_) => "ES256",
            Pair::Rs256(_) => "RS256",
            Pair::EdDsa(_) => "EdDSA",
        }
    }

    /// The public key as a JWK, with `kid`, `alg` and `use`.
    pub fn jwk(&self) -> Value {
        let mut jwk = match &self.pair {
            Pair::Es256(p) => {
                let point = p.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Pair::Rs256(p) => {
                let public = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(p.public());
                json!({"kty": "RSA", "n": b64(&public.n), "e": b64(&public.e)})
            }
            Pair::EdDsa(p) => {
                json!({"kty": "OKP", "crv": "Ed25519", "x": b64(p.public_key().as_ref())})
            }
        };
        jwk["kid"] = json!(self.kid);
        jwk["alg"] = json!(self.alg());
        jwk["use"] = json!("sig");
        jwk
    }

    /// Signs `header` (as given: a test may lie in it) and `claims` into a compact JWS.
    pub fn sign_raw(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let sig = match &self.pair {
            Pair::Es256(p) => p
                .sign(&rng, input.as_bytes())
                .expect("sign")
                .as_ref()
                .to_vec(),
            Pair::Rs256(p) => {
                let mut sig = vec![0; p.public().modulus_len()];
                p.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut sig,
                )
                .expect("sign");
                sig
            }
            Pair::EdDsa(p) => p.sign(input.as_bytes()).as_ref().to_vec(),
        };
        format!("{input}.{}", b64(&sig))
    }

    /// An access token: header `{alg, kid, typ: at+jwt}`, these claims.
    pub fn token(&self, claims: &Value) -> String {
        self.sign_raw(
            &json!({"alg": self.alg(), "kid": self.kid, "typ": "at+jwt"}),
            claims,
        )
    }
}

/// The current time in seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What the scripted issuer publishes and saw.
#[derive(Debug, Default)]
struct State {
    keys: Vec<Arc<TestKey>>,
    jwks_fetches: u32,
    /// Opaque tokens issued, and what introspection says of each while it is active.
    opaque: std::collections::HashMap<String, Value>,
    /// Introspection requests answered (with the right client credentials).
    introspections: u32,
    /// Token exchanges granted: (the subject token's `sub`, `resource`, the token issued).
    exchanges: Vec<(String, String, String)>,
}

/// The client a resource server introspects and exchanges tokens as, and its secret.
pub const GATEWAY_CLIENT: (&str, &str) = ("gateway", "gw-secret");

/// `Authorization` of [`GATEWAY_CLIENT`] (`client_secret_basic`).
fn gateway_basic() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", GATEWAY_CLIENT.0, GATEWAY_CLIENT.1))
    )
}

/// The scripted authorization server: `/.well-known/oauth-authorization-server` and
/// `/.well-known/openid-configuration` naming `jwks_uri` `/jwks`, and the set of the keys it
/// publishes now. Two keys at start: `k1` (ES256) and `k2` (RS256).
pub struct Issuer {
    peer: HttpPeer,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer").field("url", &self.url()).finish()
    }
}

impl Issuer {
    /// Starts it on a loopback port.
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State {
            keys: vec![
                Arc::new(TestKey::es256("k1")),
                Arc::new(TestKey::rs256("k2")),
            ],
            ..State::default()
        }));
        let shared = state.clone();
        let peer = HttpPeer::start(move |req| {
            let base = format!("http://{}", req.header("host"));
            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
            match req.path.as_str() {
                "/.well-known/oauth-authorization-server" | "/.well-known/openid-configuration" => {
                    Reply::json(
                        200,
                        json!({"issuer": base, "jwks_uri": format!("{base}/jwks"),
                            "token_endpoint": format!("{base}/token"),
                            "authorization_endpoint": format!("{base}/authorize"),
                            "response_types_supported": ["code"],
                            "code_challenge_methods_supported": ["S256"]})
                        .to_string(),
                    )
                }
                "/token" => {
                    if req.header("authorization") != gateway_basic() {
                        return Reply::json(401, r#"{"error":"invalid_client"}"#);
                    }
                    let form = crate::oauth::form(&req.body);
                    let field = |name| crate::oauth::get(&form, name).unwrap_or("").to_owned();
                    if field("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" {
                        return Reply::json(400, r#"{"error":"unsupported_grant_type"}"#);
                    }
                    let subject_token = field("subject_token");
                    // A token this issuer made: one of its JWTs, or an opaque one it knows.
                    let subject = s.opaque.get(&subject_token).cloned().or_else(|| {
                        let claims = crate::oauth::claims(&subject_token);
                        (claims["iss"] == base.as_str()).then_some(claims)
                    });
                    let Some(subject) = subject else {
                        return Reply::json(400, r#"{"error":"invalid_grant"}"#);
                    };
                    let sub = subject["sub"].as_str().unwrap_or("").to_owned();
                    let token = format!("xchg-{}-{sub}", s.exchanges.len() + 1);
                    s.exchanges.push((sub, field("resource"), token.clone()));
                    Reply::json(
                        200,
                        json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
                        .to_string(),
                    )
                }
                "/introspect" => {
                    if req.header("authorization") != gateway_basic() {
                        return Reply::json(401, r#"{"error":"invalid_client"}"#);
                    }
                    s.introspections += 1;
                    let form = crate::oauth::form(&req.body);
                    let token = crate::oauth::get(&form, "token").unwrap_or("");
                    let answer = s
                        .opaque
                        .get(token)
                        .cloned()
                        .unwrap_or_else(|| json!({"active": false}));
                    Reply::json(200, answer.to_string())
                }
                "/jwks" => {
                    s.jwks_fetches += 1;
                    let keys: Vec<Value> = s.keys.iter().map(|k| k.jwk()).collect();
                    Reply::json(200, json!({"keys": keys}).to_string())
                }
                _ => Reply::status(404),
            }
        })
        .await;
        Self { peer, state }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The issuer identifier (`http://127.0.0.1:PORT`, no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.peer.addr)
    }

    /// The published key `kid`. Panics if there is none.
    pub fn key(&self, kid: &str) -> Arc<TestKey> {
        self.state()
            .keys
            .iter()
            .find(|k| k.kid == kid)
            .cloned()
            .expect("no such key")
    }

    /// Publishes `key` and withdraws the oldest key (a rotation); returns the new one.
    pub fn rotate(&self, key: TestKey) -> Arc<TestKey> {
        let key = Arc::new(key);
        let mut s = self.state();
        s.keys.push(key.clone());
        s.keys.remove(0);
        key
    }

    /// An opaque token that introspection describes with these claims (and `active: true`)
    /// until [`Issuer::revoke`].
    pub fn opaque(&self, audience: &str, subject: &str, extra: &Value) -> String {
        let mut claims = self.claims(audience, subject, extra);
        claims["active"] = json!(true);
        let mut s = self.state();
        let token = format!("opaque-{}", s.opaque.len() + 1);
        s.opaque.insert(token.clone(), claims);
        token
    }

    /// Revokes an opaque token: introspection says it is not active from now on.
    pub fn revoke(&self, token: &str) {
        self.state().opaque.remove(token);
    }

    /// The token exchanges granted: (the subject's `sub`, the `resource` asked for, the token
    /// issued).
    pub fn exchanges(&self) -> Vec<(String, String, String)> {
        self.state().exchanges.clone()
    }

    /// How many introspection requests were answered.
    pub fn introspections(&self) -> u32 {
        self.state().introspections
    }

    /// How many times the JWK set was fetched.
    pub fn jwks_fetches(&self) -> u32 {
        self.state().jwks_fetches
    }

    /// Claims of a token of this issuer for `audience` and `subject`, valid for an hour;
    /// `extra` members are added (or replace these).
    pub fn claims(&self, audience: &str, subject: &str, extra: &Value) -> Value {
        let now = now();
        let mut claims: Map<String, Value> = json!({"iss": self.url(), "aud": audience,
            "sub": subject, "iat": now, "exp": now + 3600, "client_id": "test-client"})
        .as_object()
        .cloned()
        .unwrap_or_default();
        if let Some(extra) = extra.as_object() {
            claims.extend(extra.clone());
        }
        Value::Object(claims)
    }

    /// A valid token of key `kid` for `audience` and `subject`, with `extra` claims.
    pub fn token(&self, kid: &str, audience: &str, subject: &str, extra: &Value) -> String {
        self.key(kid).token(&self.claims(audience, subject, extra))
    }
}

//! An issuer's signing keys (a JWK set, RFC 7517 §5): fixed, or fetched from its `jwks_uri`
//! and fetched again when a token names a key the set does not hold (the issuer rotated), and
//! when the set is older than [`Jwks::MAX_AGE`]. Tokens naming keys that do not exist cannot
//! make the gateway hammer the issuer: fetches are at least [`Jwks::MIN_INTERVAL`] apart, and
//! a `kid` still missing after a fetch is not fetched for again for [`Jwks::MIN_REFRESH`].

use std::sync::{Arc, Mutex, PoisonError};

use http::HeaderMap;
use http::header::{ACCEPT, HeaderValue};
use serde_json::Value;
use toolwire_http::HttpExecutor;

use super::TokenError;
use super::jws::{Alg, PublicKey};
use crate::{AuthError, ConfigProblem, discovery, metadata};

/// Where the keys come from.
enum Source {
    Fixed,
    Url {
        url: String,
        http: Box<HttpExecutor>,
    },
}

/// The keys held, and when they were fetched.
struct Held {
    keys: Arc<Vec<PublicKey>>,
    /// Seconds since the epoch of the last fetch (its outcome aside); None before the first.
    fetched: Option<u64>,
    /// `kid`s (`""` for none) a fresh set did not hold, and when.
    missing: std::collections::HashMap<String, u64>,
}

/// The most missing `kid`s remembered (past it, the memory starts again).
const MAX_MISSING: usize = 1024;

struct Inner {
    source: Source,
    held: Mutex<Held>,
    /// One fetch at a time; a request that waited for another's fetch uses its keys.
    fetching: tokio::sync::Mutex<()>,
}

/// An issuer's public keys. Cheap to clone (shared).
#[derive(Clone)]
pub struct Jwks(Arc<Inner>);

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = match &self.0.source {
            Source::Fixed => None,
            Source::Url { url, .. } => Some(url.as_str()),
        };
        f.debug_struct("Jwks")
            .field("url", &url)
            .field("keys", &self.held().keys.len())
            .finish()
    }
}

/// The keys of a JWK set document that this crate can verify with (others are skipped: a set
/// may also publish encryption keys, or algorithms not used here).
pub(crate) fn parse_set(document: &Value) -> Vec<PublicKey> {
    document["keys"]
        .as_array()
        .map(|keys| keys.iter().filter_map(PublicKey::from_jwk).collect())
        .unwrap_or_default()
}

impl Jwks {
    /// How long a `kid` the issuer's fresh set did not hold is not fetched for again.
    pub const MIN_REFRESH: u64 = 30;
    /// The shortest time between two fetches (seconds).
    pub const MIN_INTERVAL: u64 = 1;
    /// Keys older than this are fetched again before use (the old ones are kept if that fails).
    pub const MAX_AGE: u64 = 3600;

    /// A fixed set (a JWK set document), never fetched.
    pub fn fixed(document: &Value) -> Result<Self, AuthError> {
        let keys = parse_set(document);
        if keys.is_empty() {
            return Err(AuthError::Config(ConfigProblem::EmptyKeySet));
        }
        Ok(Self::new(Source::Fixed, keys, Some(u64::MAX)))
    }

    /// The set at `url`, fetched with `http` on first use and again as the issuer rotates.
    pub fn remote(url: impl Into<String>, http: HttpExecutor) -> Self {
        Self::new(
            Source::Url {
                url: url.into(),
                http: Box::new(http),
            },
            Vec::new(),
            None,
        )
    }

    /// The set of `issuer`, found through its authorization server metadata (RFC 8414, or
    /// OpenID Connect discovery) `jwks_uri`; the metadata must name `issuer` exactly.
    pub async fn discover(issuer: &str, http: HttpExecutor) -> Result<Self, AuthError> {
        for url in discovery::server_metadata_urls(issuer)? {
            let Some(found) = crate::flow::fetch_json(&http, &url).await? else {
                continue;
            };
            let named = found["issuer"].as_str().unwrap_or("");
            if !metadata::issuer_matches(issuer, named) {
                return Err(AuthError::IssuerMismatch {
                    url,
                    expected: issuer.to_owned(),
                    found: named.to_owned(),
                });
            }
            let Some(jwks) = found["jwks_uri"].as_str() else {
                return Err(AuthError::discovery(
                    url,
                    "the metadata names no jwks_uri",
                    None,
                ));
            };
            return Ok(Self::remote(jwks, http));
        }
        Err(AuthError::discovery(
            issuer.to_owned(),
            "no authorization server metadata found for this issuer",
            None,
        ))
    }

    fn new(source: Source, keys: Vec<PublicKey>, fetched: Option<u64>) -> Self {
        Self(Arc::new(Inner {
            source,
            held: Mutex::new(Held {
                keys: Arc::new(keys),
                fetched,
                missing: std::collections::HashMap::new(),
            }),
            fetching: tokio::sync::Mutex::new(()),
        }))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.0.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The key a token's header names (`kid`), or with no `kid` the only key that verifies
    /// `alg`; fetched again when missing or stale at `now` (seconds since the epoch), within
    /// the limits above.
    pub(crate) async fn key(
        &self,
        kid: Option<&str>,
        alg: Alg,
        now: u64,
    ) -> Result<PublicKey, TokenError> {
        let wanted = kid.unwrap_or("");
        let (keys, fetched, missed) = {
            let held = self.held();
            let missed = held
                .missing
                .get(wanted)
                .is_some_and(|at| now.saturating_sub(*at) < Self::MIN_REFRESH);
            (held.keys.clone(), held.fetched, missed)
        };
        let stale = fetched.is_none_or(|at| now.saturating_sub(at) >= Self::MAX_AGE);
        if !stale && let Some(key) = pick(&keys, kid, alg) {
            return Ok(key);
        }
        let may_fetch = stale
            || fetched.is_none_or(|at| now.saturating_sub(at) >= Self::MIN_INTERVAL) && !missed;
        // Whether the keys are as fresh as they can be for this request.
        let mut fresh = false;
        if may_fetch && let Source::Url { url, http } = &self.0.source {
            let _one = self.0.fetching.lock().await;
            fresh = true;
            // Another request may have fetched while this one waited.
            let again = self.held().fetched;
            if again == fetched {
                let outcome = fetch(http, url).await;
                let mut held = self.held();
                held.fetched = Some(now);
                match outcome {
                    Ok(keys) => held.keys = Arc::new(keys),
                    Err(e) if held.keys.is_empty() => return Err(e),
                    Err(e) => {
                        tracing::warn!(%url, error = %e, "the issuer's keys could not be fetched again; the ones held stay");
                    }
                }
            }
        }
        let mut held = self.held();
        let found = pick(&held.keys, kid, alg);
        if found.is_none() && fresh {
            if held.missing.len() >= MAX_MISSING {
                held.missing.clear();
            }
            held.missing.insert(wanted.chars().take(64).collect(), now);
        }
        found.ok_or_else(|| TokenError::UnknownKey {
            kid: kid.map(|k| super::shown(k, 64)),
        })
    }
}

/// The key `kid` names, or with none the only key that allows `alg`.
fn pick(keys: &[PublicKey], kid: Option<&str>, alg: Alg) -> Option<PublicKey> {
    match kid {
        Some(kid) => keys.iter().find(|k| k.kid() == Some(kid)).cloned(),
        None => {
            let mut fitting = keys.iter().filter(|k| k.fits(alg));
            let only = fitting.next()?;
            fitting.next().is_none().then(|| only.clone())
        }
    }
}

/// The set at `url`.
async fn fetch(http: &HttpExecutor, url: &str) -> Result<Vec<PublicKey>, TokenError> {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    let unavailable = |why: String| TokenError::KeysUnavailable(format!("{url}: {why}"));
    let response = http
        .get(url, headers)
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    if !response.status().is_success() {
        return Err(unavailable(format!("HTTP {}", response.status())));
    }
    let document: Value = serde_json::from_slice(response.body())
        .map_err(|_| unavailable("not a JSON document".into()))?;
    let keys = parse_set(&document);
    if keys.is_empty() {
        return Err(unavailable("no signing key this verifier can use".into()));
    }
    tracing::debug!(%url, keys = keys.len(), "fetched the issuer's keys");
    Ok(keys)
}

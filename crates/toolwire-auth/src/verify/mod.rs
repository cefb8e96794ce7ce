//! The resource server's side of OAuth: access tokens checked before a request is served, as
//! the MCP authorization spec asks of a server (and of a gateway in front of servers).
//!
//! - [`JwtVerifier`]: a JWT access token (RFC 9068) signed by the configured issuer with a
//!   key of its JWK set ([`Jwks`]: fetched from the issuer's metadata, fetched again on an
//!   unknown `kid`, at most every [`Jwks::MIN_REFRESH`] seconds), `iss` the issuer, `aud`
//!   this resource, `exp`/`nbf`/`iat` within a small skew. `none`, HMAC and critical header
//!   extensions are refused; a key verifies only the algorithms its type (and its `alg`)
//!   allows.
//! - [`Introspector`]: an opaque token, asked about at the authorization server (RFC 7662).
//! - [`DpopVerifier`]: the proof a DPoP-bound token (`cnf.jkt`) must come with (RFC 9449
//!   §4.3 and §7), with a `jti` replay window.
//!
//! Tokens never appear in errors, logs or `Debug`.

mod dpop;
mod introspect;
mod jwks;
mod jws;

use serde_json::{Map, Value};

pub use dpop::{DpopVerifier, MAX_SEEN_PER_KEY};
pub use introspect::Introspector;
pub use jwks::Jwks;
pub use jws::PublicKey;

use crate::Clock;

/// SHA-256 of `bytes`: how API keys are kept (never the key itself), and what a DPoP proof's
/// `ath` is made of.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
    out
}

/// Why an access token or its DPoP proof was refused. Holds nothing of the token itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a compact JWS of JSON objects, or a header this verifier does not understand.
    #[error("the token is malformed: {0}")]
    Malformed(&'static str),
    /// An algorithm that is never accepted (`none`, HMAC) or not known here.
    #[error("the token's algorithm is not accepted: {0}")]
    Algorithm(String),
    /// A `typ` other than an access token's (`at+jwt`, `JWT`).
    #[error("the token is not an access token (typ {0})")]
    Type(String),
    /// No key of the issuer's set is the one the token names, even after fetching the set
    /// again.
    #[error("the token is signed with a key the issuer does not publish (kid {kid:?})")]
    UnknownKey {
        /// The `kid` named (at most 64 characters of it).
        kid: Option<String>,
    },
    /// The signature does not verify.
    #[error("the token's signature does not verify")]
    Signature,
    /// `exp` has passed.
    #[error("the token has expired")]
    Expired,
    /// `nbf` or `iat` is in the future.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// `exp` is missing.
    #[error("the token has no expiry")]
    NoExpiry,
    /// `iss` is not the configured issuer.
    #[error("the token was issued by another issuer")]
    Issuer,
    /// `aud` does not name this resource.
    #[error("the token is not for this resource")]
    Audience,
    /// The token is DPoP-bound and its proof is missing or wrong.
    #[error("DPoP: {0}")]
    Dpop(&'static str),
    /// The authorization server says the token is not active (revoked, expired, unknown).
    #[error("the token is not active")]
    Inactive,
    /// The DPoP proof was presented before.
    #[error("DPoP: the proof was used before")]
    DpopReplay,
    /// The issuer's keys could not be had (nothing could be checked).
    #[error("the issuer's keys are unavailable: {0}")]
    KeysUnavailable(String),
}

/// What a verified access token says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessToken {
    /// `iss`.
    pub issuer: String,
    /// `sub`, when it has one.
    pub subject: Option<String>,
    /// `client_id` (RFC 9068), else `azp`.
    pub client_id: Option<String>,
    /// `scope` (space-separated) or `scp` (a list), in order.
    pub scopes: Vec<String>,
    /// `exp`, seconds since the epoch.
    pub expires_at: u64,
    /// `cnf.jkt`: the thumbprint of the DPoP key the token is bound to.
    pub dpop_jkt: Option<String>,
    /// Every claim, for policies that look at others (`groups`, `tid`, …).
    pub claims: Map<String, Value>,
}

/// Checks JWT access tokens of one issuer for one resource.
#[derive(Debug, Clone)]
pub struct JwtVerifier {
    issuer: String,
    audiences: Vec<String>,
    keys: Jwks,
    leeway: u64,
    clock: Clock,
}

/// At most `n` characters of `text` that a token chose, printable ASCII only: it goes into
/// errors, logs and challenges, where a line break or escape sequence must not.
pub(crate) fn shown(text: &str, n: usize) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(n)
        .collect()
}

/// `scope` (space-separated) or `scp` (a list, or space-separated), in order.
fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => {
            s.split_ascii_whitespace().map(str::to_owned).collect()
        }
        (None, Some(Value::Array(list))) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether the `aud` claim (a string or a list) names `resource`, a trailing `/` aside:
/// what a verified token's audience, an introspection answer's, and a gateway passing a token
/// on all check.
pub fn names_audience(claims: &Map<String, Value>, resource: &str) -> bool {
    let same = |aud: &str| aud.trim_end_matches('/') == resource.trim_end_matches('/');
    match claims.get("aud") {
        Some(Value::String(aud)) => same(aud),
        Some(Value::Array(auds)) => auds.iter().filter_map(Value::as_str).any(same),
        _ => false,
    }
}

impl JwtVerifier {
    /// Tokens whose `iss` is `issuer` (exactly) and whose `aud` names `audience`, signed by a
    /// key of `keys`; 60 seconds of clock skew allowed.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>, keys: Jwks) -> Self {
        Self {
            issuer: issuer.into(),
            audiences: vec![audience.into()],
            keys,
            leeway: 60,
            clock: Clock::system(),
        }
    }

    /// Also accept tokens for `audience`.
    #[must_use]
    pub fn also_audience(mut self, audience: impl Into<String>) -> Self {
        self.audiences.push(audience.into());
        self
    }

    /// The clock skew allowed on `exp`, `nbf` and `iat`, in seconds.
    #[must_use]
    pub fn leeway(mut self, seconds: u64) -> Self {
        self.leeway = seconds;
        self
    }

    /// Reads the time from `clock`.
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Whether `token` looks like a JWS at all (three base64url parts): what else a bearer
    /// value may be (an API key, an opaque token) is tried by the caller instead.
    pub fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    }

    /// Whether the token's unverified `iss` is this verifier's: which of several issuers to
    /// ask. Proves nothing; [`JwtVerifier::verify`] does.
    pub fn claims_issuer(&self, token: &str) -> bool {
        jws::Jws::parse(token).is_ok_and(|jws| {
            jws.payload.get("iss").and_then(Value::as_str) == Some(self.issuer.as_str())
        })
    }

    /// Checks `token`: the signature first, then the claims.
    pub async fn verify(&self, token: &str) -> Result<AccessToken, TokenError> {
        let jws = jws::Jws::parse(token)?;
        if let Some(typ) = jws.header_str("typ") {
            let typ = typ.to_ascii_lowercase();
            if !matches!(typ.as_str(), "jwt" | "at+jwt" | "application/at+jwt") {
                return Err(TokenError::Type(shown(&typ, 32)));
            }
        }
        let now = self.clock.now();
        let key = self.keys.key(jws.header_str("kid"), jws.alg, now).await?;
        jws.verify(&key)?;
        let claims = jws.payload;
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        if text("iss") != Some(self.issuer.as_str()) {
            return Err(TokenError::Issuer);
        }
        if !self.audiences.iter().any(|a| names_audience(&claims, a)) {
            return Err(TokenError::Audience);
        }
        let number = |name: &str| claims.get(name).and_then(Value::as_u64);
        let expires_at = number("exp").ok_or(TokenError::NoExpiry)?;
        if now >= expires_at.saturating_add(self.leeway) {
            return Err(TokenError::Expired);
        }
        if [number("nbf"), number("iat")]
            .into_iter()
            .flatten()
            .any(|t| t > now.saturating_add(self.leeway))
        {
            return Err(TokenError::NotYetValid);
        }
        let scopes = scopes_of(&claims);
        Ok(AccessToken {
            issuer: self.issuer.clone(),
            subject: text("sub").map(str::to_owned),
            client_id: text("client_id").or_else(|| text("azp")).map(str::to_owned),
            scopes,
            expires_at,
            dpop_jkt: claims
                .get("cnf")
                .and_then(|c| c.get("jkt"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            claims,
        })
    }
}

#[cfg(test)]
mod tests;

//! DPoP proofs (RFC 9449 §4.3) checked by a resource server: a DPoP-bound access token is
//! served only with a fresh proof, signed by the key the token is bound to, for this very
//! request, and never seen before.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::TokenError;
use super::jws::{Jws, PublicKey};
use crate::Clock;

/// Checks DPoP proofs and remembers their `jti`s for as long as a proof is accepted, so none
/// is accepted twice.
#[derive(Debug)]
pub struct DpopVerifier {
    /// How far a proof's `iat` may be from now, either way (seconds).
    window: u64,
    /// `jti` → when it may be forgotten.
    seen: Mutex<HashMap<String, u64>>,
    clock: Clock,
}

/// The most `jti`s remembered; past it, proofs are refused until old ones age out (a flood of
/// fresh proofs must not grow memory without bound).
const MAX_SEEN: usize = 100_000;

impl Default for DpopVerifier {
    fn default() -> Self {
        Self::new(Clock::system())
    }
}

impl DpopVerifier {
    /// A verifier that accepts proofs made within five minutes of `clock`'s now.
    pub fn new(clock: Clock) -> Self {
        Self {
            window: 300,
            seen: Mutex::new(HashMap::new()),
            clock,
        }
    }

    /// Checks `proof` (the `DPoP` header) for a request `method url` presenting `token`
    /// bound to the key with thumbprint `jkt`: `typ` `dpop+jwt`, an asymmetric signature by
    /// the public key in its header (and that key's thumbprint is `jkt`), `htm` and `htu`
    /// this request (the URL without query and fragment), `iat` within the window, `ath` the
    /// token's hash, and a `jti` not seen before.
    pub fn check(
        &self,
        proof: &str,
        method: &str,
        url: &str,
        token: &str,
        jkt: &str,
    ) -> Result<(), TokenError> {
        let jws = Jws::parse(proof)?;
        if jws.header_str("typ") != Some("dpop+jwt") {
            return Err(TokenError::Dpop("the proof's typ is not dpop+jwt"));
        }
        let jwk = jws
            .header
            .get("jwk")
            .ok_or(TokenError::Dpop("the proof carries no jwk"))?;
        if jwk.get("d").is_some() {
            return Err(TokenError::Dpop("the proof's jwk holds a private key"));
        }
        let key =
            PublicKey::from_jwk(jwk).ok_or(TokenError::Dpop("the proof's jwk is not usable"))?;
        jws.verify(&key)?;
        if key.thumbprint() != jkt {
            return Err(TokenError::Dpop(
                "the proof is signed by another key than the token's",
            ));
        }
        let claims = &jws.payload;
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        if text("htm") != Some(method) {
            return Err(TokenError::Dpop("the proof is for another HTTP method"));
        }
        let target = url.split(['?', '#']).next().unwrap_or(url);
        if text("htu").map(|u| u.split(['?', '#']).next().unwrap_or(u)) != Some(target) {
            return Err(TokenError::Dpop("the proof is for another URL"));
        }
        if text("ath")
            != Some(
                URL_SAFE_NO_PAD
                    .encode(super::sha256(token.as_bytes()))
                    .as_str(),
            )
        {
            return Err(TokenError::Dpop("the proof is for another access token"));
        }
        let now = self.clock.now();
        let iat = claims
            .get("iat")
            .and_then(Value::as_u64)
            .ok_or(TokenError::Dpop("the proof has no iat"))?;
        if iat.abs_diff(now) > self.window {
            return Err(TokenError::Dpop("the proof is too old or from the future"));
        }
        let jti = text("jti")
            .filter(|j| !j.is_empty() && j.len() <= 256)
            .ok_or(TokenError::Dpop("the proof has no usable jti"))?;
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.retain(|_, until| *until > now);
        if seen.contains_key(jti) {
            return Err(TokenError::DpopReplay);
        }
        if seen.len() >= MAX_SEEN {
            return Err(TokenError::Dpop("too many proofs in flight; try again"));
        }
        seen.insert(jti.to_owned(), iat.max(now) + self.window + 1);
        Ok(())
    }
}

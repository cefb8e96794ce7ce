//! DPoP proofs (RFC 9449 §4.3) checked by a resource server: a DPoP-bound access token is
//! served only with a fresh proof, signed by the key the token is bound to, for this very
//! request, and never seen before.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Mutex, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::TokenError;
use super::jws::{Jws, PublicKey};
use crate::Clock;

/// Checks DPoP proofs and remembers their `jti`s, per key, for as long as a proof is
/// accepted, so none is accepted twice.
#[derive(Debug)]
pub struct DpopVerifier {
    /// How far a proof's `iat` may be from now, either way (seconds).
    window: u64,
    seen: Mutex<Seen>,
    /// The most `jti`s one key may have remembered ([`MAX_SEEN_PER_KEY`] by default).
    per_key: usize,
    clock: Clock,
}

/// The `jti`s seen, by the key (its thumbprint) that signed them: each key has its own share,
/// so one key's flood of proofs never refuses another's.
#[derive(Debug, Default)]
struct Seen {
    /// (key, `jti`) → when it may be forgotten.
    jtis: HashMap<(String, String), u64>,
    /// How many each key has remembered.
    per_key: HashMap<String, usize>,
    /// Every remembered (when it may be forgotten, key, `jti`), soonest first: forgetting
    /// looks only at what is due, never the whole table.
    due: BinaryHeap<Reverse<(u64, String, String)>>,
}

impl Seen {
    /// Forgets what is due by `now`.
    fn age(&mut self, now: u64) {
        while let Some(Reverse((until, _, _))) = self.due.peek() {
            if *until > now {
                break;
            }
            let Some(Reverse((_, key, jti))) = self.due.pop() else {
                break;
            };
            if self.jtis.remove(&(key.clone(), jti)).is_some()
                && let Some(n) = self.per_key.get_mut(&key)
            {
                *n -= 1;
                if *n == 0 {
                    self.per_key.remove(&key);
                }
            }
        }
    }
}

/// The most `jti`s one key may have remembered at once (a proof a request, 100 a second
/// through the five-minute window); past it that key's proofs are refused until old ones age
/// out, and no other key's.
pub const MAX_SEEN_PER_KEY: usize = 30_000;

/// The most `jti`s remembered in all: a backstop (many keys, each within its share) so memory
/// stays bounded.
const MAX_SEEN: usize = 1_000_000;

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
            seen: Mutex::new(Seen::default()),
            per_key: MAX_SEEN_PER_KEY,
            clock,
        }
    }

    /// The same, remembering at most `share` `jti`s per key at once.
    #[must_use]
    pub fn with_share_per_key(mut self, share: usize) -> Self {
        self.per_key = share.max(1);
        self
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
        seen.age(now);
        let entry = (jkt.to_owned(), jti.to_owned());
        if seen.jtis.contains_key(&entry) {
            return Err(TokenError::DpopReplay);
        }
        if seen.per_key.get(jkt).copied().unwrap_or(0) >= self.per_key {
            return Err(TokenError::Dpop(
                "too many proofs from this key in flight; try again",
            ));
        }
        if seen.jtis.len() >= MAX_SEEN {
            return Err(TokenError::Dpop("too many proofs in flight; try again"));
        }
        let until = iat.max(now) + self.window + 1;
        *seen.per_key.entry(jkt.to_owned()).or_insert(0) += 1;
        seen.due
            .push(Reverse((until, entry.0.clone(), entry.1.clone())));
        seen.jtis.insert(entry, until);
        Ok(())
    }
}

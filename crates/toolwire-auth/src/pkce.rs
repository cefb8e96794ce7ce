//! PKCE (RFC 7636, S256 only), `state`, and the randomness behind them (ring's system RNG).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom, SystemRandom};

use crate::secret::Secret;
use crate::{AuthError, ConfigProblem};

/// `n` random bytes as base64url (no padding).
pub(crate) fn random(n: usize) -> Result<String, AuthError> {
    let mut bytes = vec![0u8; n];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| AuthError::Config(ConfigProblem::Random))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// A code verifier and its S256 challenge.
#[derive(Debug, Clone)]
pub(crate) struct Pkce {
    /// The verifier (43 characters: 32 random bytes), sent with the token request.
    pub verifier: Secret,
    /// `BASE64URL(SHA256(verifier))`, sent with the authorization request.
    pub challenge: String,
}

impl Pkce {
    /// A fresh pair.
    pub(crate) fn new() -> Result<Self, AuthError> {
        Ok(Self::from_verifier(Secret::new(random(32)?)))
    }

    /// The pair for a given verifier.
    pub(crate) fn from_verifier(verifier: Secret) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, verifier.expose().as_bytes());
        Self {
            challenge: URL_SAFE_NO_PAD.encode(digest.as_ref()),
            verifier,
        }
    }
}

/// Compares two strings in time that does not depend on where they differ.
pub(crate) fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s256_matches_the_rfc_7636_example() {
        let p = Pkce::from_verifier(Secret::new("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"));
        assert_eq!(p.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        let fresh = Pkce::new().expect("rng");
        assert_eq!(fresh.verifier.expose().len(), 43);
        assert_ne!(
            fresh.verifier.expose(),
            Pkce::new().expect("rng").verifier.expose()
        );
    }

    #[test]
    fn constant_time_eq_compares_whole_strings() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "ab"));
    }
}

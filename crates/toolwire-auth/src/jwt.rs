//! Compact JWS signing (RFC 7515) for client assertions (`private_key_jwt`, RFC 7523): ES256
//! and RS256 over ring, keys from PKCS#8 PEM. About forty lines, against `jsonwebtoken`, which
//! has no ring backend (aws-lc, or RustCrypto's `rsa` with an open timing advisory).

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};

use crate::AuthError;
use crate::pkce::random;

/// A private key that signs JWTs. `Debug` shows the algorithm only.
pub struct SigningKey {
    kind: Kind,
    rng: SystemRandom,
}

enum Kind {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({})", self.algorithm())
    }
}

impl SigningKey {
    /// A P-256 (ES256) or RSA (RS256) key from a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    pub fn from_pem(pem: &str) -> Result<Self, AuthError> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
            .map_err(|_| AuthError::Config("the private key is not a PKCS#8 PEM".into()))?;
        let rng = SystemRandom::new();
        let bytes = der.secret_pkcs8_der();
        let kind = if let Ok(k) =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, bytes, &rng)
        {
            Kind::Es256(k)
        } else if let Ok(k) = RsaKeyPair::from_pkcs8(bytes) {
            Kind::Rs256(k)
        } else {
            return Err(AuthError::Config(
                "the private key is neither P-256 nor RSA".into(),
            ));
        };
        Ok(Self { kind, rng })
    }

    /// `ES256` or `RS256`.
    pub fn algorithm(&self) -> &'static str {
        match self.kind {
            Kind::Es256(_) => "ES256",
            Kind::Rs256(_) => "RS256",
        }
    }

    /// `header.claims.signature`, the header being `{"alg": …, "typ": "JWT"}`.
    pub fn sign(&self, claims: &Value) -> Result<String, AuthError> {
        let header = json!({"alg": self.algorithm(), "typ": "JWT"});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let failed = || AuthError::Config("signing failed".into());
        let signature = match &self.kind {
            Kind::Es256(k) => k
                .sign(&self.rng, input.as_bytes())
                .map_err(|_| failed())?
                .as_ref()
                .to_vec(),
            Kind::Rs256(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &self.rng,
                    input.as_bytes(),
                    &mut sig,
                )
                .map_err(|_| failed())?;
                sig
            }
        };
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }

    /// A client assertion (RFC 7523 §3): `iss` = `sub` = the client id, `aud` = the
    /// authorization server's issuer, valid five minutes, a fresh `jti`.
    pub fn client_assertion(
        &self,
        client_id: &str,
        audience: &str,
        now: u64,
    ) -> Result<String, AuthError> {
        self.sign(&json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "jti": random(16)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 key made for this test (ring's `generate_pkcs8`, PEM-wrapped).
    fn pem() -> String {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("generate");
        let b64 = base64::engine::general_purpose::STANDARD.encode(doc.as_ref());
        format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n")
    }

    #[test]
    fn es256_assertions_verify_with_the_public_key_and_carry_the_claims() {
        let rng = SystemRandom::new();
        let pem = pem();
        let key = SigningKey::from_pem(&pem).expect("key");
        assert_eq!(key.algorithm(), "ES256");
        assert_eq!(format!("{key:?}"), "SigningKey(ES256)");
        let jwt = key
            .client_assertion("client", "https://as.example", 1000)
            .expect("sign");
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("json");
        assert_eq!(claims["iss"], "client");
        assert_eq!(claims["sub"], "client");
        assert_eq!(claims["aud"], "https://as.example");
        assert_eq!(claims["exp"], 1300);
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).expect("pem");
        let pair = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der.secret_pkcs8_der(),
            &rng,
        )
        .expect("pair");
        use ring::signature::KeyPair;
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            pair.public_key().as_ref(),
        );
        let signed = format!("{}.{}", parts[0], parts[1]);
        public
            .verify(
                signed.as_bytes(),
                &URL_SAFE_NO_PAD.decode(parts[2]).expect("b64"),
            )
            .expect("the signature verifies");
        assert!(SigningKey::from_pem("not a key").is_err());
    }
}

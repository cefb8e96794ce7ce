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

use crate::pkce::random;
use crate::{AuthError, ConfigProblem};

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
            .map_err(|_| AuthError::Config(ConfigProblem::KeyNotPem))?;
        let rng = SystemRandom::new();
        let bytes = der.secret_pkcs8_der();
        let kind = if let Ok(k) =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, bytes, &rng)
        {
            Kind::Es256(k)
        } else if let Ok(k) = RsaKeyPair::from_pkcs8(bytes) {
            Kind::Rs256(k)
        } else {
            return Err(AuthError::Config(ConfigProblem::KeyAlgorithm));
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
        let failed = || AuthError::Config(ConfigProblem::Signing("a JWT"));
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

/// A DPoP key (RFC 9449): an ES256 key pair whose public half travels in every proof, so
/// tokens bound to it are worthless without it. Made once per client and kept with its
/// tokens. `Debug` shows nothing of it.
pub struct DpopKey {
    pair: EcdsaKeyPair,
    pkcs8: crate::secret::Secret,
    rng: SystemRandom,
}

impl fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DpopKey(ES256)")
    }
}

impl DpopKey {
    /// A new P-256 key.
    pub fn generate() -> Result<Self, AuthError> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| AuthError::Config(ConfigProblem::DpopKey))?;
        Self::from_pkcs8(&crate::secret::Secret::new(
            URL_SAFE_NO_PAD.encode(doc.as_ref()),
        ))
    }

    /// The key kept as base64url PKCS#8.
    pub fn from_pkcs8(pkcs8: &crate::secret::Secret) -> Result<Self, AuthError> {
        let der = URL_SAFE_NO_PAD
            .decode(pkcs8.expose())
            .map_err(|_| AuthError::Config(ConfigProblem::StoredDpopKey("base64url")))?;
        let rng = SystemRandom::new();
        let pair =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
                .map_err(|_| AuthError::Config(ConfigProblem::StoredDpopKey("a P-256 key")))?;
        Ok(Self {
            pair,
            pkcs8: pkcs8.clone(),
            rng,
        })
    }

    /// The key as kept (base64url PKCS#8).
    pub fn pkcs8(&self) -> &crate::secret::Secret {
        &self.pkcs8
    }

    /// The public key as a JWK (`kty`, `crv`, `x`, `y`).
    pub fn jwk(&self) -> Value {
        use ring::signature::KeyPair;
        // An uncompressed point: 0x04, then x and y, 32 bytes each.
        let point = self.pair.public_key().as_ref();
        let (x, y) = point
            .get(1..)
            .unwrap_or_default()
            .split_at(point.len().saturating_sub(1) / 2);
        json!({"kty": "EC", "crv": "P-256", "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)})
    }

    /// A proof for one request: `htm` and `htu` (the URL without query or fragment), a fresh
    /// `jti`, `iat`; `ath` (the token's SHA-256) when presenting an access token, and the
    /// server's `nonce` when it asked for one.
    pub fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        nonce: Option<&str>,
        now: u64,
    ) -> Result<String, AuthError> {
        let htu = url.split(['?', '#']).next().unwrap_or(url);
        let mut claims = json!({"jti": random(16)?, "htm": method, "htu": htu, "iat": now});
        if let Some(token) = access_token {
            let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
            claims["ath"] = Value::String(URL_SAFE_NO_PAD.encode(digest.as_ref()));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = Value::String(nonce.to_owned());
        }
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk()});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| AuthError::Config(ConfigProblem::Signing("a DPoP proof")))?;
        Ok(format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
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

    #[test]
    fn dpop_proofs_carry_the_public_key_a_fresh_jti_and_the_token_hash_and_verify() {
        let key = DpopKey::generate().expect("key");
        let again = DpopKey::from_pkcs8(key.pkcs8()).expect("kept key");
        assert_eq!(key.jwk(), again.jwk(), "the kept key is the same key");
        assert_eq!(format!("{key:?}"), "DpopKey(ES256)");
        let a = key
            .proof(
                "POST",
                "https://rs.example/mcp?x=1#f",
                Some("tok"),
                Some("n1"),
                1000,
            )
            .expect("proof");
        let b = key
            .proof("POST", "https://rs.example/mcp", Some("tok"), None, 1000)
            .expect("proof");
        let decode = |jwt: &str, i: usize| -> Value {
            serde_json::from_slice(
                &URL_SAFE_NO_PAD
                    .decode(jwt.split('.').nth(i).expect("part"))
                    .expect("b64"),
            )
            .expect("json")
        };
        let (header, claims) = (decode(&a, 0), decode(&a, 1));
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"], key.jwk());
        assert!(header["jwk"].get("d").is_none(), "no private part");
        assert_eq!(
            claims["htu"], "https://rs.example/mcp",
            "no query or fragment"
        );
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["nonce"], "n1");
        let digest = ring::digest::digest(&ring::digest::SHA256, b"tok");
        assert_eq!(claims["ath"], URL_SAFE_NO_PAD.encode(digest.as_ref()));
        assert_ne!(claims["jti"], decode(&b, 1)["jti"], "a fresh jti per proof");
        assert!(decode(&b, 1).get("nonce").is_none());
        // The signature verifies with the key in the header.
        let jwk = &header["jwk"];
        let mut point = vec![4u8];
        point.extend(
            URL_SAFE_NO_PAD
                .decode(jwk["x"].as_str().expect("x"))
                .expect("b64"),
        );
        point.extend(
            URL_SAFE_NO_PAD
                .decode(jwk["y"].as_str().expect("y"))
                .expect("b64"),
        );
        let parts: Vec<&str> = a.split('.').collect();
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &point)
            .verify(
                format!("{}.{}", parts[0], parts[1]).as_bytes(),
                &URL_SAFE_NO_PAD.decode(parts[2]).expect("b64"),
            )
            .expect("verifies with the header's key");
    }
}

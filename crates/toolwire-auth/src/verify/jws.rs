//! Compact JWS (RFC 7515) checked against a public key from a JWK (RFC 7517, RFC 8037): the
//! asymmetric algorithms authorization servers sign access tokens with, over ring.
//!
//! Never accepted: `none`, and the HMAC algorithms (a key set publishes public keys; a
//! symmetric "key" in it would let anyone who read the set mint tokens). A key is used only
//! with the algorithm its type allows, and only with the one its `alg` names when it names
//! one, so a token cannot pick how its key is read.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

use super::TokenError;

/// A signature algorithm this module verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alg {
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
    EdDsa,
}

impl Alg {
    pub(crate) fn parse(name: &str) -> Result<Self, TokenError> {
        Ok(match name {
            "RS256" => Self::Rs256,
            "RS384" => Self::Rs384,
            "RS512" => Self::Rs512,
            "PS256" => Self::Ps256,
            "PS384" => Self::Ps384,
            "PS512" => Self::Ps512,
            "ES256" => Self::Es256,
            "ES384" => Self::Es384,
            "EdDSA" | "Ed25519" => Self::EdDsa,
            other => return Err(TokenError::Algorithm(super::shown(other, 32))),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Rs256 => "RS256",
            Self::Rs384 => "RS384",
            Self::Rs512 => "RS512",
            Self::Ps256 => "PS256",
            Self::Ps384 => "PS384",
            Self::Ps512 => "PS512",
            Self::Es256 => "ES256",
            Self::Es384 => "ES384",
            Self::EdDsa => "EdDSA",
        }
    }
}

/// A public key's material.
#[derive(Clone, PartialEq, Eq)]
enum Material {
    /// Modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An uncompressed point (0x04 ‖ x ‖ y) on P-256.
    P256(Vec<u8>),
    /// The same on P-384.
    P384(Vec<u8>),
    /// 32 bytes.
    Ed25519(Vec<u8>),
}

/// One public key of a key set, or the one a DPoP proof carries.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    kid: Option<String>,
    /// The algorithm the key is published for, when it names one.
    alg: Option<String>,
    material: Material,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.material {
            Material::Rsa { .. } => "RSA",
            Material::P256(_) => "P-256",
            Material::P384(_) => "P-384",
            Material::Ed25519(_) => "Ed25519",
        };
        f.debug_struct("PublicKey")
            .field("kid", &self.kid)
            .field("kind", &kind)
            .finish()
    }
}

fn member<'a>(jwk: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    jwk.get(name).and_then(Value::as_str)
}

fn bytes(jwk: &Map<String, Value>, name: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(member(jwk, name)?).ok()
}

impl PublicKey {
    /// The key a JWK describes; None for a key this module cannot use to verify (another
    /// type or curve, a symmetric or encryption key, missing members).
    pub fn from_jwk(jwk: &Value) -> Option<Self> {
        let jwk = jwk.as_object()?;
        if member(jwk, "use").is_some_and(|u| u != "sig") {
            return None;
        }
        let material = match (member(jwk, "kty")?, member(jwk, "crv")) {
            ("RSA", _) => {
                let n = bytes(jwk, "n")?;
                let e = bytes(jwk, "e")?;
                // ring wants at least 2048 bits; smaller keys would fail every check anyway.
                if n.is_empty() || e.is_empty() {
                    return None;
                }
                Material::Rsa { n, e }
            }
            ("EC", Some(crv @ ("P-256" | "P-384"))) => {
                let (x, y) = (bytes(jwk, "x")?, bytes(jwk, "y")?);
                let size = if crv == "P-256" { 32 } else { 48 };
                if x.len() != size || y.len() != size {
                    return None;
                }
                let mut point = Vec::with_capacity(1 + 2 * size);
                point.push(4);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                if crv == "P-256" {
                    Material::P256(point)
                } else {
                    Material::P384(point)
                }
            }
            ("OKP", Some("Ed25519")) => {
                let x = bytes(jwk, "x")?;
                if x.len() != 32 {
                    return None;
                }
                Material::Ed25519(x)
            }
            _ => return None,
        };
        Some(Self {
            kid: member(jwk, "kid").map(str::to_owned),
            alg: member(jwk, "alg").map(str::to_owned),
            material,
        })
    }

    /// Its `kid`, when it has one.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// Whether `alg` may be verified with this key.
    pub(crate) fn fits(&self, alg: Alg) -> bool {
        if self.alg.as_deref().is_some_and(|named| named != alg.name()) {
            return false;
        }
        matches!(
            (&self.material, alg),
            (
                Material::Rsa { .. },
                Alg::Rs256 | Alg::Rs384 | Alg::Rs512 | Alg::Ps256 | Alg::Ps384 | Alg::Ps512
            ) | (Material::P256(_), Alg::Es256)
                | (Material::P384(_), Alg::Es384)
                | (Material::Ed25519(_), Alg::EdDsa)
        )
    }

    /// Checks `signature` over `message` under `alg`.
    pub(crate) fn verify(
        &self,
        alg: Alg,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), TokenError> {
        if !self.fits(alg) {
            return Err(TokenError::Algorithm(format!(
                "{} with this key",
                alg.name()
            )));
        }
        let verified = match &self.material {
            Material::Rsa { n, e } => {
                let params: &signature::RsaParameters = match alg {
                    Alg::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                    Alg::Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                    Alg::Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
                    Alg::Ps256 => &signature::RSA_PSS_2048_8192_SHA256,
                    Alg::Ps384 => &signature::RSA_PSS_2048_8192_SHA384,
                    _ => &signature::RSA_PSS_2048_8192_SHA512,
                };
                RsaPublicKeyComponents { n, e }.verify(params, message, signature)
            }
            Material::P256(point) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, signature)
            }
            Material::P384(point) => {
                UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, point)
                    .verify(message, signature)
            }
            Material::Ed25519(x) => {
                UnparsedPublicKey::new(&signature::ED25519, x).verify(message, signature)
            }
        };
        verified.map_err(|_| TokenError::Signature)
    }

    /// The RFC 7638 thumbprint (SHA-256, base64url): what a DPoP-bound token's `cnf.jkt`
    /// names.
    pub fn thumbprint(&self) -> String {
        let b64 = |b: &[u8]| URL_SAFE_NO_PAD.encode(b);
        // Required members only, in lexicographic order, no whitespace.
        let canonical = match &self.material {
            Material::Rsa { n, e } => {
                format!(r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#, b64(e), b64(n))
            }
            Material::P256(p) | Material::P384(p) => {
                let crv = if matches!(self.material, Material::P256(_)) {
                    "P-256"
                } else {
                    "P-384"
                };
                let (x, y) = p
                    .get(1..)
                    .unwrap_or_default()
                    .split_at((p.len().saturating_sub(1)) / 2);
                format!(
                    r#"{{"crv":"{crv}","kty":"EC","x":"{}","y":"{}"}}"#,
                    b64(x),
                    b64(y)
                )
            }
            Material::Ed25519(x) => format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#, b64(x)),
        };
        b64(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()).as_ref())
    }
}

/// A compact JWS taken apart; nothing in it is trusted until [`Jws::verify`] passed.
#[derive(Debug)]
pub(crate) struct Jws<'a> {
    pub(crate) header: Map<String, Value>,
    pub(crate) alg: Alg,
    pub(crate) payload: Map<String, Value>,
    signing_input: &'a str,
    signature: Vec<u8>,
}

impl<'a> Jws<'a> {
    /// `header.payload.signature`, each base64url without padding, header and payload JSON
    /// objects; the algorithm one of ours (`none` and HMAC are refused here), and no
    /// critical extension (RFC 7515 §4.1.11: none is understood here).
    pub(crate) fn parse(token: &'a str) -> Result<Self, TokenError> {
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed("not three dot-separated parts"));
        };
        let object = |part: &str, what| -> Result<Map<String, Value>, TokenError> {
            let raw = URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| TokenError::Malformed(what))?;
            match serde_json::from_slice(&raw) {
                Ok(Value::Object(o)) => Ok(o),
                _ => Err(TokenError::Malformed(what)),
            }
        };
        let header = object(h, "the header is not base64url JSON")?;
        let payload = object(p, "the payload is not base64url JSON")?;
        let signature = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| TokenError::Malformed("the signature is not base64url"))?;
        let alg = Alg::parse(
            header
                .get("alg")
                .and_then(Value::as_str)
                .ok_or(TokenError::Malformed("the header names no alg"))?,
        )?;
        if header.contains_key("crit") {
            return Err(TokenError::Malformed("a critical header extension"));
        }
        let signing_input = token.get(..h.len() + 1 + p.len()).unwrap_or_default();
        Ok(Self {
            header,
            alg,
            payload,
            signing_input,
            signature,
        })
    }

    /// A header member, as text.
    pub(crate) fn header_str(&self, name: &str) -> Option<&str> {
        self.header.get(name).and_then(Value::as_str)
    }

    /// Checks the signature with `key`.
    pub(crate) fn verify(&self, key: &PublicKey) -> Result<(), TokenError> {
        key.verify(self.alg, self.signing_input.as_bytes(), &self.signature)
    }
}

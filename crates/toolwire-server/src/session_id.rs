//! Legacy `Mcp-Session-Id`s: random, or self-contained tokens any replica holding the same key
//! accepts.
//!
//! With [`SessionKeys`], an id is `base64url(nonce ‖ ChaCha20-Poly1305(issued-at ‖ 16 random
//! bytes ‖ owner))`, the owner being 16 bytes of SHA-256 of the caller's principal (zeros
//! when callers are not authenticated): a replica that did not mint it opens it, checks its
//! age and its owner, and serves the session, with no shared store. Rotation: the first key
//! seals, every key opens, so a fleet moves to a
//! new key by adding it first and dropping the old one a session lifetime later.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// How long a sealed session id stays valid after it was minted.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// Bound into every sealed id, so a token of another purpose sealed with the same key never
/// opens as a session.
const AAD: &[u8] = b"toolwire-session-v1";

/// The keys session ids are sealed and opened with: the first seals, all open. Never shown:
/// `Debug` says how many there are.
#[derive(Clone)]
pub struct SessionKeys {
    keys: Vec<LessSafeKey>,
    /// Derives the nonce of a [`SessionKeys::seal_for`] token from what it seals (from the
    /// first key): the same text sealed twice is the same token, so an id handed out again
    /// (a task's, on every `tasks/get`) stays the same id.
    nonces: ring::hmac::Key,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionKeys({} keys, redacted)", self.keys.len())
    }
}

/// Why keys could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionKeyError {
    /// No key at all.
    #[error("no session key given")]
    Empty,
    /// The `n`-th key (from 1) is not base64 of exactly 32 bytes.
    #[error("session key {0} is not base64 of 32 bytes")]
    Malformed(usize),
}

impl SessionKeys {
    /// Keys from 32 bytes each; the first seals.
    pub fn new(keys: impl IntoIterator<Item = [u8; 32]>) -> Result<Self, SessionKeyError> {
        let raw: Vec<[u8; 32]> = keys.into_iter().collect();
        let first = raw.first().ok_or(SessionKeyError::Empty)?;
        // Its own key, derived from the first: never the AEAD key itself.
        let derived = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, first),
            b"toolwire-sealed-nonce-key-v1",
        );
        let nonces = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, derived.as_ref());
        let keys: Vec<LessSafeKey> = raw
            .iter()
            .filter_map(|k| UnboundKey::new(&CHACHA20_POLY1305, k).ok())
            .map(LessSafeKey::new)
            .collect();
        if keys.is_empty() {
            return Err(SessionKeyError::Empty);
        }
        Ok(Self { keys, nonces })
    }

    /// Keys written as base64 (standard or URL-safe, padded or not), separated by whitespace or
    /// commas (one per line in a key file); the first seals. The text is never echoed in an
    /// error.
    pub fn parse(text: &str) -> Result<Self, SessionKeyError> {
        let mut keys = Vec::new();
        for (i, word) in text
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .enumerate()
        {
            let trimmed = word.trim_end_matches('=');
            let bytes = URL_SAFE_NO_PAD
                .decode(trimmed.replace('+', "-").replace('/', "_"))
                .map_err(|_| SessionKeyError::Malformed(i + 1))?;
            let key: [u8; 32] = bytes
                .try_into()
                .map_err(|_| SessionKeyError::Malformed(i + 1))?;
            keys.push(key);
        }
        Self::new(keys)
    }

    /// A new session id sealed with the first key, for the caller whose tag is `owner`.
    pub(crate) fn seal(&self, now: SystemTime, owner: [u8; 16]) -> Option<String> {
        let rng = SystemRandom::new();
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill(&mut nonce).ok()?;
        let issued = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
        let mut body = issued.to_be_bytes().to_vec();
        let mut unique = [0u8; 16];
        rng.fill(&mut unique).ok()?;
        body.extend_from_slice(&unique);
        body.extend_from_slice(&owner);
        self.sealed(nonce, AAD, body)
    }

    /// `body` sealed with the first key under `nonce` and `aad`: `base64url(nonce ‖ sealed)`.
    fn sealed(&self, nonce: [u8; NONCE_LEN], aad: &[u8], mut body: Vec<u8>) -> Option<String> {
        self.keys
            .first()?
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut body,
            )
            .ok()?;
        let mut token = nonce.to_vec();
        token.extend_from_slice(&body);
        Some(URL_SAFE_NO_PAD.encode(token))
    }

    /// What one of the keys opens of `token` (made by [`SessionKeys::sealed`]) under `aad`,
    /// as `read` takes it (the first key whose opening `read` accepts).
    fn opened<T>(&self, token: &str, aad: &[u8], read: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        let token = URL_SAFE_NO_PAD.decode(token).ok()?;
        if token.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = token.split_at(NONCE_LEN);
        self.keys.iter().find_map(|key| {
            let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
            let mut sealed = sealed.to_vec();
            let body = key.open_in_place(nonce, Aad::from(aad), &mut sealed).ok()?;
            read(body)
        })
    }

    /// Keys made now from the system's random source: what a single process seals with when
    /// no keys were given (only it opens what it sealed).
    pub fn random() -> Result<Self, SessionKeyError> {
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|_| SessionKeyError::Empty)?;
        Self::new([key])
    }

    /// `text` sealed with the first key for `purpose` and the caller `principal`, as
    /// URL-safe base64: it opens ([`SessionKeys::open_for`]) only with these keys, for the same
    /// purpose and principal; nobody else can read or change it. For ids a server hands one
    /// caller that every replica must resolve (a gateway's task ids). Deterministic (the nonce
    /// is a keyed digest of the purpose, principal and text, as in SIV): the same text for the
    /// same caller is the same token, which tells an observer only that it is the same.
    pub fn seal_for(&self, purpose: &str, principal: &str, text: &[u8]) -> Option<String> {
        let aad = bound(purpose, principal);
        let mut context = ring::hmac::Context::with_key(&self.nonces);
        context.update(&(aad.len() as u64).to_be_bytes());
        context.update(&aad);
        context.update(text);
        let digest = context.sign();
        let nonce: [u8; NONCE_LEN] = digest.as_ref().get(..NONCE_LEN)?.try_into().ok()?;
        self.sealed(nonce, &aad, text.to_vec())
    }

    /// The text [`SessionKeys::seal_for`] sealed in `token` for `purpose` and `principal`;
    /// None for any other token, purpose or principal.
    pub fn open_for(&self, purpose: &str, principal: &str, token: &str) -> Option<Vec<u8>> {
        self.opened(token, &bound(purpose, principal), |body| {
            Some(body.to_vec())
        })
    }

    /// The owner tag of `id` when it is a session id one of the keys sealed, no older than
    /// [`SESSION_LIFETIME`] at `now` (an id sealed before owners were, all zeros).
    pub(crate) fn opens(&self, id: &str, now: SystemTime) -> Option<[u8; 16]> {
        self.opened(id, AAD, |body| {
            let issued = body.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok())?;
            let issued = UNIX_EPOCH + Duration::from_secs(u64::from_be_bytes(issued));
            let fresh = now
                .duration_since(issued)
                .is_ok_and(|age| age <= SESSION_LIFETIME);
            let owner = body
                .get(24..40)
                .and_then(|b| <[u8; 16]>::try_from(b).ok())
                .unwrap_or([0; 16]);
            fresh.then_some(owner)
        })
    }
}

/// What a [`SessionKeys::seal_for`] token is bound to: its purpose and its caller's tag
/// (never a session id's [`AAD`]: the purpose is prefixed).
fn bound(purpose: &str, principal: &str) -> Vec<u8> {
    let mut aad = b"toolwire-sealed-v1:".to_vec();
    aad.extend_from_slice(purpose.as_bytes());
    aad.push(0);
    aad.extend_from_slice(&crate::Caller::tag_of(principal));
    aad
}

/// A random session id (32 hexadecimal digits) for a server without keys: unguessable, known
/// only to the replica that minted it.
pub(crate) fn random() -> String {
    let mut bytes = [0u8; 16];
    if SystemRandom::new().fill(&mut bytes).is_err() {
        // The system's random source failed; the id must still be unique on this process.
        static FALLBACK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = FALLBACK.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        bytes[..8].copy_from_slice(&n.to_be_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod sealed_for_tests {
    use super::*;

    #[test]
    fn a_sealed_text_opens_only_for_its_purpose_and_principal_and_with_a_key_of_the_set() {
        let keys = SessionKeys::new([[7; 32]]).unwrap();
        let token = keys.seal_for("task", "iss#alice", b"ref\0task-1").unwrap();
        assert_eq!(
            keys.open_for("task", "iss#alice", &token).as_deref(),
            Some(&b"ref\0task-1"[..])
        );
        assert!(keys.open_for("task", "iss#bob", &token).is_none());
        assert!(keys.open_for("other", "iss#alice", &token).is_none());
        // Another replica with the same key opens it; one with another key does not.
        let replica = SessionKeys::new([[9; 32], [7; 32]]).unwrap();
        assert!(replica.open_for("task", "iss#alice", &token).is_some());
        assert!(
            SessionKeys::random()
                .unwrap()
                .open_for("task", "iss#alice", &token)
                .is_none()
        );
        // Nor does a session id open as one, or one of these as a session id.
        let sid = keys.seal(SystemTime::now(), [0; 16]).unwrap();
        assert!(keys.open_for("task", "-", &sid).is_none());
        assert!(keys.opens(&token, SystemTime::now()).is_none());
        // The same text for the same caller is the same token (a task's id stays its id);
        // another text, or another caller, another token.
        let again = keys.seal_for("task", "iss#alice", b"ref\0task-1").unwrap();
        assert_eq!(again, token);
        assert_ne!(
            keys.seal_for("task", "iss#alice", b"ref\0task-2").unwrap(),
            token
        );
        assert_ne!(
            keys.seal_for("task", "iss#bob", b"ref\0task-1").unwrap(),
            token
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(seeds: &[u8]) -> SessionKeys {
        SessionKeys::new(seeds.iter().map(|&s| [s; 32])).unwrap()
    }

    #[test]
    fn a_sealed_id_opens_with_its_key_until_it_is_a_day_old() {
        // A whole second: ids carry their minting time in seconds.
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let a = keys(&[1]);
        let id = a.seal(now, [0; 16]).unwrap();
        assert!(a.opens(&id, now).is_some());
        assert!(a.opens(&id, now + SESSION_LIFETIME).is_some());
        assert!(
            a.opens(&id, now + SESSION_LIFETIME + Duration::from_secs(1))
                .is_none()
        );
        // Two ids are never the same.
        assert_ne!(id, a.seal(now, [0; 16]).unwrap());
    }

    #[test]
    fn another_key_a_changed_byte_or_junk_does_not_open() {
        let now = SystemTime::now();
        let id = keys(&[1]).seal(now, [0; 16]).unwrap();
        assert!(keys(&[2]).opens(&id, now).is_none());
        let mut bytes = URL_SAFE_NO_PAD.decode(&id).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(
            keys(&[1])
                .opens(&URL_SAFE_NO_PAD.encode(bytes), now)
                .is_none()
        );
        for junk in ["", "abc", "not base64!", &random()] {
            assert!(keys(&[1]).opens(junk, now).is_none(), "{junk}");
        }
    }

    #[test]
    fn a_sealed_id_carries_its_owner_and_an_id_sealed_without_one_opens_as_ownerless() {
        let now = SystemTime::now();
        let k = keys(&[1]);
        let owned = k.seal(now, [9; 16]).unwrap();
        assert_eq!(k.opens(&owned, now), Some([9; 16]));
        // An id of the earlier form (no owner bytes) still opens, owned by nobody.
        let mut nonce = [0u8; NONCE_LEN];
        nonce[0] = 1;
        let issued = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let mut body = issued.to_be_bytes().to_vec();
        body.extend_from_slice(&[5; 16]);
        k.keys[0]
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(AAD),
                &mut body,
            )
            .unwrap();
        let mut token = nonce.to_vec();
        token.extend_from_slice(&body);
        assert_eq!(k.opens(&URL_SAFE_NO_PAD.encode(token), now), Some([0; 16]));
    }

    #[test]
    fn rotation_seals_with_the_first_key_and_opens_with_every_key() {
        let now = SystemTime::now();
        let (old, rotated) = (keys(&[1]), keys(&[2, 1]));
        assert!(
            rotated
                .opens(&old.seal(now, [0; 16]).unwrap(), now)
                .is_some()
        );
        let new_id = rotated.seal(now, [0; 16]).unwrap();
        assert!(rotated.opens(&new_id, now).is_some());
        assert!(old.opens(&new_id, now).is_none(), "sealed with the old key");
    }

    #[test]
    fn keys_are_read_as_base64_and_never_shown() {
        let text = format!(
            "{}\n{},",
            base64::engine::general_purpose::STANDARD.encode([7u8; 32]),
            URL_SAFE_NO_PAD.encode([8u8; 32])
        );
        let parsed = SessionKeys::parse(&text).unwrap();
        let now = SystemTime::now();
        assert!(
            keys(&[7, 8])
                .opens(&parsed.seal(now, [0; 16]).unwrap(), now)
                .is_some()
        );
        assert!(parsed.keys.len() == 2);
        let shown = format!("{parsed:?}");
        assert!(!shown.contains("Bwc"), "{shown}");
        assert_eq!(
            SessionKeys::parse(" \n").map(drop),
            Err(SessionKeyError::Empty)
        );
        assert_eq!(
            SessionKeys::parse("c2hvcnQ=").map(drop),
            Err(SessionKeyError::Malformed(1))
        );
    }
}

//! Who is calling: what a service's [`Edge::authenticate`](crate::Edge::authenticate)
//! establishes from an HTTP request's credentials before anything else of it is read, and
//! the refusal it answers with otherwise (401 or 403 with `WWW-Authenticate`, as the MCP
//! authorization spec asks of a protected server).
//!
//! The protocol layer binds a legacy session to the caller that began it: a request bearing
//! another caller's credentials on that `Mcp-Session-Id` is answered 404, as an unknown
//! session is (on every replica, when session ids are sealed).

use http::StatusCode;
use serde_json::{Map, Value, json};

/// Who sent a request, as the service's authentication established it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caller {
    /// A stable name for who it is (for a token, its issuer and subject; for an API key, the
    /// key's name): what sessions are bound to and decisions are logged under.
    pub principal: String,
    /// The token's subject, if any.
    pub subject: Option<String>,
    /// The OAuth client it came through, if known.
    pub client_id: Option<String>,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// The name of the API key it presented, if that is how it authenticated.
    pub api_key: Option<String>,
    /// The token's other claims (empty for an API key), for policies that look at them.
    pub claims: Map<String, Value>,
    /// The access token it presented, for a service that calls on its behalf (passed on or
    /// exchanged); never for an API key.
    pub credential: Option<Credential>,
}

/// A caller's access token: `Debug` shows nothing of it, and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(std::sync::Arc<str>);

impl Credential {
    /// Wraps a token.
    pub fn new(token: &str) -> Self {
        Self(token.into())
    }

    /// The token itself, at the point it is sent.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Caller {
    /// A caller known by `principal` alone.
    pub fn new(principal: impl Into<String>) -> Self {
        Self {
            principal: principal.into(),
            subject: None,
            client_id: None,
            scopes: Vec::new(),
            api_key: None,
            claims: Map::new(),
            credential: None,
        }
    }

    /// Whether every scope of `needed` was granted.
    pub fn has_scopes<'a>(&self, needed: impl IntoIterator<Item = &'a str>) -> bool {
        needed
            .into_iter()
            .all(|scope| self.scopes.iter().any(|s| s == scope))
    }

    /// 16 bytes that stand for the principal inside a sealed session id (zeros for nobody).
    pub(crate) fn tag(caller: Option<&Self>) -> [u8; 16] {
        caller.map_or([0; 16], |c| Self::tag_of(&c.principal))
    }

    /// The tag of `principal`.
    pub(crate) fn tag_of(principal: &str) -> [u8; 16] {
        let mut tag = [0u8; 16];
        let digest = ring::digest::digest(&ring::digest::SHA256, principal.as_bytes());
        tag.copy_from_slice(digest.as_ref().get(..16).unwrap_or(&[0; 16]));
        tag
    }
}

/// Why a request is not served: its status, the `WWW-Authenticate` challenge that tells the
/// client what to do, and a description (never a credential).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Denial {
    /// 401, 403, 429 or 503.
    pub status: u16,
    /// The `WWW-Authenticate` value, if any.
    pub challenge: Option<String>,
    /// The OAuth error code for the body (`invalid_token`, `insufficient_scope`, …).
    pub error: String,
    /// One line for a person.
    pub description: String,
    /// Seconds until the request may be made again (`Retry-After`), when the refusal says.
    pub retry_after: Option<u64>,
}

impl Denial {
    /// 401: no credentials, or ones that do not hold (`error` `invalid_token`, or
    /// `invalid_request` when none were given).
    pub fn unauthorized(
        challenge: impl Into<String>,
        error: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Self {
            status: 401,
            challenge: Some(challenge.into()),
            error: error.into(),
            description: description.into(),
            retry_after: None,
        }
    }

    /// 403: valid credentials without the scope needed (`insufficient_scope`, a step-up).
    pub fn forbidden(challenge: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            status: 403,
            challenge: Some(challenge.into()),
            error: "insufficient_scope".into(),
            description: description.into(),
            retry_after: None,
        }
    }

    /// 503: the credentials could not be checked now (the issuer's keys are unreachable).
    pub fn unavailable(description: impl Into<String>) -> Self {
        Self {
            status: 503,
            challenge: None,
            error: "temporarily_unavailable".into(),
            description: description.into(),
            retry_after: None,
        }
    }

    /// 429: the caller is past a rate limit, and may try again in `retry_after` seconds
    /// (`Retry-After`).
    pub fn too_many_requests(retry_after: u64, description: impl Into<String>) -> Self {
        Self {
            status: 429,
            challenge: None,
            error: "rate_limited".into(),
            description: description.into(),
            retry_after: Some(retry_after),
        }
    }

    /// The HTTP status.
    pub(crate) fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::UNAUTHORIZED)
    }

    /// The JSON body (RFC 6750's error members).
    pub(crate) fn body(&self) -> Value {
        json!({"error": self.error, "error_description": self.description})
    }
}

//! Token responses (RFC 6749 §5), read leniently where servers differ: `token_type` in any
//! case, `expires_in` as a number or a numeric string, a missing `scope` meaning what was
//! asked.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::AuthError;
use crate::secret::Secret;

/// Tokens as kept: the access token, its type, refresh token, expiry, and scopes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// The access token.
    pub access_token: Secret,
    /// `Bearer` or `DPoP` (normalised case).
    pub token_type: String,
    /// The refresh token, if one was issued.
    #[serde(default)]
    pub refresh_token: Option<Secret>,
    /// When the access token expires, in seconds since the Unix epoch.
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// When it was issued, in seconds since the Unix epoch (0: unknown).
    #[serde(default)]
    pub issued_at: u64,
    /// The scope granted.
    #[serde(default)]
    pub scope: Option<String>,
    /// The scope asked for.
    #[serde(default)]
    pub requested_scope: Option<String>,
}

impl Tokens {
    /// Whether the access token expires within `skew` seconds of `now`; the skew is at most
    /// half the token's lifetime, so a short-lived token is not refreshed before every use.
    pub fn expires_within(&self, now: u64, skew: u64) -> bool {
        self.expires_at.is_some_and(|at| {
            let skew = match at.checked_sub(self.issued_at) {
                Some(lifetime) if self.issued_at > 0 => skew.min(lifetime / 2),
                _ => skew,
            };
            at <= now.saturating_add(skew)
        })
    }
}

/// An OAuth error body (`{"error": …, "error_description": …}`), or the status alone.
pub(crate) fn refusal(step: &'static str, status: u16, body: &[u8]) -> AuthError {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    AuthError::Refused {
        step,
        status: Some(status),
        error: value["error"]
            .as_str()
            .map_or_else(|| "no OAuth error in the answer".to_owned(), str::to_owned),
        description: value["error_description"].as_str().map(str::to_owned),
    }
}

/// Reads a token response. `requested` is the scope asked for (granted when the answer names
/// none); `previous_refresh` is kept when a refresh answer issues no new one; `now` is seconds
/// since the epoch.
pub(crate) fn parse(
    step: &'static str,
    status: u16,
    body: &[u8],
    requested: Option<&str>,
    previous_refresh: Option<&Secret>,
    now: u64,
) -> Result<Tokens, AuthError> {
    if !(200..300).contains(&status) {
        return Err(refusal(step, status, body));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| AuthError::Refused {
        step,
        status: Some(status),
        error: "invalid_response".into(),
        description: Some(format!("the answer is not JSON: {e}")),
    })?;
    if value.get("error").is_some() {
        return Err(refusal(step, status, body));
    }
    let invalid = |what: &str| AuthError::Refused {
        step,
        status: Some(status),
        error: "invalid_response".into(),
        description: Some(what.to_owned()),
    };
    let access = value["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| invalid("the answer has no access_token"))?;
    let token_type = match value["token_type"].as_str() {
        Some(t) if t.eq_ignore_ascii_case("bearer") => "Bearer".to_owned(),
        Some(t) if t.eq_ignore_ascii_case("dpop") => "DPoP".to_owned(),
        Some(t) => t.to_owned(),
        None => "Bearer".to_owned(),
    };
    let expires_in = match &value["expires_in"] {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    Ok(Tokens {
        access_token: Secret::new(access),
        token_type,
        refresh_token: value["refresh_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(Secret::new)
            .or_else(|| previous_refresh.cloned()),
        expires_at: expires_in.map(|s| now.saturating_add(s)),
        issued_at: now,
        scope: value["scope"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| requested.map(str::to_owned)),
        requested_scope: requested.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_answers_are_read_leniently() {
        let t = parse(
            "token request",
            200,
            br#"{"access_token":"a","token_type":"bearer","expires_in":"3600"}"#,
            Some("x y"),
            None,
            100,
        )
        .expect("tokens");
        assert_eq!(t.token_type, "Bearer");
        assert_eq!(t.expires_at, Some(3700));
        assert_eq!(
            t.scope.as_deref(),
            Some("x y"),
            "no scope in the answer: what was asked"
        );
        assert!(!format!("{t:?}").contains("\"a\""));
        let t = parse(
            "refresh",
            200,
            br#"{"access_token":"a2","token_type":"DPOP","expires_in":60,"scope":"x"}"#,
            Some("x y"),
            Some(&Secret::new("r1")),
            0,
        )
        .expect("tokens");
        assert_eq!(t.token_type, "DPoP");
        assert_eq!(t.scope.as_deref(), Some("x"));
        assert_eq!(
            t.refresh_token.as_ref().map(Secret::expose),
            Some("r1"),
            "kept when not rotated"
        );
        let t = parse(
            "refresh",
            200,
            br#"{"access_token":"a3","refresh_token":"r2"}"#,
            None,
            Some(&Secret::new("r1")),
            0,
        )
        .expect("tokens");
        assert_eq!(
            t.refresh_token.as_ref().map(Secret::expose),
            Some("r2"),
            "rotated"
        );
        assert_eq!(t.expires_at, None);
    }

    #[test]
    fn errors_carry_the_servers_code_and_description() {
        let e = parse(
            "refresh",
            400,
            br#"{"error":"invalid_grant","error_description":"revoked"}"#,
            None,
            None,
            0,
        );
        assert!(
            matches!(
                &e,
                Err(AuthError::Refused {
                    step: "refresh",
                    status: Some(400),
                    error,
                    description: Some(description),
                }) if error == "invalid_grant" && description == "revoked"
            ),
            "{e:?}"
        );
        assert!(parse("token request", 200, b"{}", None, None, 0).is_err());
        assert!(parse("token request", 200, b"<html>", None, None, 0).is_err());
        assert!(matches!(
            parse("token request", 500, b"oops", None, None, 0),
            Err(AuthError::Refused {
                status: Some(500),
                ..
            })
        ));
    }

    #[test]
    fn expiry_is_checked_with_a_skew() {
        let t = Tokens {
            access_token: Secret::new("a"),
            token_type: "Bearer".into(),
            refresh_token: None,
            expires_at: Some(1000),
            issued_at: 0,
            scope: None,
            requested_scope: None,
        };
        assert!(!t.expires_within(900, 60));
        assert!(t.expires_within(940, 60));
        assert!(t.expires_within(2000, 0));
        // A 30-second token is refreshed in its second half, not before every use.
        let short = Tokens {
            issued_at: 970,
            ..t.clone()
        };
        assert!(!short.expires_within(975, 60));
        assert!(short.expires_within(985, 60));
        assert!(
            !Tokens {
                expires_at: None,
                ..t
            }
            .expires_within(u64::MAX, 60)
        );
    }
}

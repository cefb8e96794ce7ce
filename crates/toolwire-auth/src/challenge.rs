//! The OAuth parts of a `WWW-Authenticate` header (RFC 6750 §3, RFC 9728 §5.1, SEP-1932).

use toolwire_http::Challenge;

/// The scheme a resource server challenged with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `Bearer`.
    Bearer,
    /// `DPoP` (RFC 9449).
    DPoP,
}

/// What an OAuth challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthChallenge {
    /// `Bearer` or `DPoP`; `None` when the server sent neither.
    pub scheme: Option<Scheme>,
    /// `resource_metadata`: where the protected resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: what the request needs.
    pub scope: Option<String>,
    /// `error` (`invalid_token`, `insufficient_scope`, `use_dpop_nonce`).
    pub error: Option<String>,
    /// `error_description`.
    pub description: Option<String>,
}

impl AuthChallenge {
    /// The first `Bearer` or `DPoP` challenge of a response (a `Bearer` one preferred when
    /// both carry the same parameters; the first with `resource_metadata` otherwise).
    pub fn from_challenges(challenges: &[Challenge]) -> Self {
        let oauth = |c: &&Challenge| {
            c.scheme.eq_ignore_ascii_case("bearer") || c.scheme.eq_ignore_ascii_case("dpop")
        };
        let Some(c) = challenges
            .iter()
            .filter(oauth)
            .find(|c| c.param("resource_metadata").is_some())
            .or_else(|| challenges.iter().find(oauth))
        else {
            return Self::default();
        };
        let owned = |name| c.param(name).map(str::to_owned);
        Self {
            scheme: Some(if c.scheme.eq_ignore_ascii_case("dpop") {
                Scheme::DPoP
            } else {
                Scheme::Bearer
            }),
            resource_metadata: owned("resource_metadata"),
            scope: owned("scope").filter(|s| !s.trim().is_empty()),
            error: owned("error"),
            description: owned("error_description"),
        }
    }

    /// Whether the server says the token lacks scope.
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolwire_http::parse_challenges;

    #[test]
    fn bearer_and_dpop_challenges_are_read_and_others_ignored() {
        let h = br#"Basic realm="x", Bearer error="insufficient_scope", scope="mcp:write", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#;
        let c = AuthChallenge::from_challenges(&parse_challenges([&h[..]]));
        assert_eq!(c.scheme, Some(Scheme::Bearer));
        assert_eq!(c.scope.as_deref(), Some("mcp:write"));
        assert!(c.insufficient_scope());
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        let d = AuthChallenge::from_challenges(&parse_challenges([
            &br#"DPoP error="use_dpop_nonce""#[..],
        ]));
        assert_eq!(d.scheme, Some(Scheme::DPoP));
        assert_eq!(d.error.as_deref(), Some("use_dpop_nonce"));
        let none = AuthChallenge::from_challenges(&parse_challenges([&b"Basic realm=x"[..]]));
        assert_eq!(none, AuthChallenge::default());
        let empty = AuthChallenge::from_challenges(&parse_challenges([&br#"Bearer scope="""#[..]]));
        assert_eq!(empty.scope, None);
    }
}

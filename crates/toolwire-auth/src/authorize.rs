//! The authorization request (RFC 6749 §4.1.1 with PKCE, RFC 8707 `resource`) and the checks
//! on its response (`state`, RFC 9207 `iss`) made before any token is requested.

use url::Url;

use crate::pkce::constant_time_eq;
use crate::secret::Secret;
use crate::{AuthError, CallbackRefusal};

/// What goes into an authorization URL.
#[derive(Debug, Clone)]
pub struct AuthorizationRequest<'a> {
    /// The server's authorization endpoint.
    pub endpoint: &'a str,
    /// The client id.
    pub client_id: &'a str,
    /// Where the user agent comes back.
    pub redirect_uri: &'a str,
    /// This flow's `state`.
    pub state: &'a str,
    /// The PKCE S256 challenge.
    pub code_challenge: &'a str,
    /// The scope, omitted when `None`.
    pub scope: Option<&'a str>,
    /// The RFC 8707 resource.
    pub resource: &'a str,
    /// `prompt=consent` (asked with `offline_access`).
    pub consent: bool,
}

/// The URL the user agent is sent to; parameters already in the endpoint's query are kept.
pub fn authorization_url(request: &AuthorizationRequest<'_>) -> Result<String, AuthError> {
    let mut url = Url::parse(request.endpoint).map_err(|e| {
        AuthError::discovery(
            request.endpoint.to_owned(),
            "not a valid URL",
            Some(Box::new(e)),
        )
    })?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code");
        q.append_pair("client_id", request.client_id);
        q.append_pair("redirect_uri", request.redirect_uri);
        q.append_pair("state", request.state);
        q.append_pair("code_challenge", request.code_challenge);
        q.append_pair("code_challenge_method", "S256");
        if let Some(scope) = request.scope {
            q.append_pair("scope", scope);
        }
        q.append_pair("resource", request.resource);
        if request.consent {
            q.append_pair("prompt", "consent");
        }
    }
    Ok(url.into())
}

/// The parameters the authorization server sent back to the redirect URI.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CallbackParams {
    /// The authorization code.
    pub code: Option<Secret>,
    /// The `state` echoed.
    pub state: Option<String>,
    /// RFC 9207: who issued the response.
    pub iss: Option<String>,
    /// An OAuth error code.
    pub error: Option<String>,
    /// Its description.
    pub error_description: Option<String>,
}

impl CallbackParams {
    /// The parameters of a redirect URL's query (`http://127.0.0.1:1/callback?code=…`).
    pub fn from_url(url: &str) -> Result<Self, AuthError> {
        let url = Url::parse(url)
            .map_err(|e| AuthError::Callback(CallbackRefusal::NotAUrl(e.to_string())))?;
        Ok(Self::from_query(url.query().unwrap_or("")))
    }

    /// The parameters of a query string.
    pub fn from_query(query: &str) -> Self {
        let mut out = Self::default();
        for (name, value) in url::form_urlencoded::parse(query.trim_start_matches('?').as_bytes()) {
            let value = value.into_owned();
            match &*name {
                "code" => out.code = Some(Secret::new(value)),
                "state" => out.state = Some(value),
                "iss" => out.iss = Some(value),
                "error" => out.error = Some(value),
                "error_description" => out.error_description = Some(value),
                _ => {}
            }
        }
        out
    }

    /// Whether it carries `state` (compared in constant time): a callback without the flow's
    /// `state` is not this flow's, whatever else it says.
    pub fn carries_state(&self, state: &str) -> bool {
        self.state
            .as_deref()
            .is_some_and(|s| crate::pkce::constant_time_eq(s, state))
    }
}

/// Checks a callback, in the order that keeps a forged one harmless: `state` (this flow's),
/// then `iss` (RFC 9207: when present it must equal the issuer, as a string; when the server
/// advertises it, it must be present), and only then the `error` or the `code`.
pub fn check_callback(
    params: &CallbackParams,
    state: &str,
    issuer: Option<&str>,
    iss_advertised: bool,
) -> Result<Secret, AuthError> {
    match &params.state {
        Some(s) if constant_time_eq(s, state) => {}
        Some(_) => return Err(AuthError::Callback(CallbackRefusal::ForeignState)),
        None => return Err(AuthError::Callback(CallbackRefusal::NoState)),
    }
    match (&params.iss, issuer) {
        (Some(iss), Some(issuer)) if iss != issuer => {
            return Err(AuthError::Callback(CallbackRefusal::WrongIssuer {
                issued_by: iss.clone(),
                expected: issuer.to_owned(),
            }));
        }
        (None, Some(_)) if iss_advertised => {
            return Err(AuthError::Callback(CallbackRefusal::NoIssuer));
        }
        _ => {}
    }
    if let Some(error) = &params.error {
        return Err(AuthError::Refused {
            step: "authorization",
            status: None,
            error: error.clone(),
            description: params.error_description.clone(),
        });
    }
    params
        .code
        .clone()
        .ok_or(AuthError::Callback(CallbackRefusal::NoCode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_carries_pkce_resource_and_scope_only_when_there_is_one() {
        let base = AuthorizationRequest {
            endpoint: "https://as.example/authorize?tenant=a",
            client_id: "id",
            redirect_uri: "http://127.0.0.1:9/callback",
            state: "st",
            code_challenge: "ch",
            scope: None,
            resource: "https://mcp.example/mcp",
            consent: false,
        };
        let url = authorization_url(&base).expect("url");
        let p = CallbackParams::from_url(&url).expect("parse");
        assert_eq!(p.state.as_deref(), Some("st"));
        let parsed = Url::parse(&url).expect("url");
        let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
        let get = |n: &str| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("tenant"), Some("a"));
        assert_eq!(get("code_challenge_method"), Some("S256"));
        assert_eq!(get("resource"), Some("https://mcp.example/mcp"));
        assert_eq!(get("scope"), None, "no empty scope");
        assert_eq!(get("prompt"), None);
        let scoped = authorization_url(&AuthorizationRequest {
            scope: Some("a b"),
            consent: true,
            ..base
        })
        .expect("url");
        assert!(
            scoped.contains("scope=a+b") && scoped.contains("prompt=consent"),
            "{scoped}"
        );
    }

    /// RFC 9207 and `state`, every row of the conformance suite's `iss` matrix.
    #[test]
    fn callbacks_are_checked_state_then_iss_then_error() {
        let issuer = "http://localhost:1";
        let cb = |state: Option<&str>,
                  iss: Option<&str>,
                  code: Option<&str>,
                  error: Option<&str>| CallbackParams {
            code: code.map(Secret::new),
            state: state.map(str::to_owned),
            iss: iss.map(str::to_owned),
            error: error.map(str::to_owned),
            error_description: None,
        };
        let wrong = |iss: &str| {
            Some(CallbackRefusal::WrongIssuer {
                issued_by: iss.to_owned(),
                expected: issuer.to_owned(),
            })
        };
        // (params, advertised) -> refused for (None: accepted)
        let table = [
            (cb(Some("s"), Some(issuer), Some("c"), None), true, None),
            (cb(Some("s"), None, Some("c"), None), false, None),
            (
                cb(Some("s"), None, Some("c"), None),
                true,
                Some(CallbackRefusal::NoIssuer),
            ),
            (
                cb(Some("s"), Some("https://evil.example.com"), Some("c"), None),
                true,
                wrong("https://evil.example.com"),
            ),
            (
                cb(Some("s"), Some("https://evil.example.com"), Some("c"), None),
                false,
                wrong("https://evil.example.com"),
            ),
            (
                cb(Some("s"), Some("http://localhost:1/"), Some("c"), None),
                true,
                wrong("http://localhost:1/"),
            ),
            (
                cb(Some("x"), Some(issuer), Some("c"), None),
                true,
                Some(CallbackRefusal::ForeignState),
            ),
            (
                cb(None, Some(issuer), Some("c"), None),
                true,
                Some(CallbackRefusal::NoState),
            ),
            (
                cb(Some("s"), Some(issuer), None, None),
                true,
                Some(CallbackRefusal::NoCode),
            ),
        ];
        for (i, (params, advertised, refused)) in table.into_iter().enumerate() {
            let got = match check_callback(&params, "s", Some(issuer), advertised) {
                Ok(_) => None,
                Err(AuthError::Callback(why)) => Some(why),
                Err(other) => panic!("row {i}: {other}"),
            };
            assert_eq!(got, refused, "row {i}");
        }
        // A forged error with the wrong state is reported as the state, not as the error.
        let forged = check_callback(
            &cb(Some("x"), None, None, Some("access_denied")),
            "s",
            Some(issuer),
            false,
        );
        assert!(matches!(
            forged,
            Err(AuthError::Callback(CallbackRefusal::ForeignState))
        ));
        let denied = check_callback(
            &cb(Some("s"), None, None, Some("access_denied")),
            "s",
            Some(issuer),
            false,
        );
        assert!(
            matches!(denied, Err(AuthError::Refused { ref error, .. }) if error == "access_denied")
        );
    }
}

//! The authorization request (RFC 6749 §4.1.1 with PKCE, RFC 8707 `resource`) and the checks
//! on its response (`state`, RFC 9207 `iss`) made before any token is requested.

use url::Url;

use crate::AuthError;
use crate::pkce::constant_time_eq;
use crate::secret::Secret;

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
            .map_err(|e| AuthError::Callback(format!("the redirect is not a URL: {e}")))?;
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
        Some(_) => return Err(AuthError::Callback("its state is not this flow's".into())),
        None => return Err(AuthError::Callback("it carries no state".into())),
    }
    match (&params.iss, issuer) {
        (Some(iss), Some(issuer)) if iss != issuer => {
            return Err(AuthError::Callback(format!(
                "it was issued by {iss}, not by {issuer}"
            )));
        }
        (None, Some(_)) if iss_advertised => {
            return Err(AuthError::Callback(
                "the server advertises the iss parameter and the response has none".into(),
            ));
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
        .ok_or_else(|| AuthError::Callback("it carries no code".into()))
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
        // (params, advertised) -> accepted
        let table = [
            (cb(Some("s"), Some(issuer), Some("c"), None), true, true),
            (cb(Some("s"), None, Some("c"), None), false, true),
            (cb(Some("s"), None, Some("c"), None), true, false),
            (
                cb(Some("s"), Some("https://evil.example.com"), Some("c"), None),
                true,
                false,
            ),
            (
                cb(Some("s"), Some("https://evil.example.com"), Some("c"), None),
                false,
                false,
            ),
            (
                cb(Some("s"), Some("http://localhost:1/"), Some("c"), None),
                true,
                false,
            ),
            (cb(Some("x"), Some(issuer), Some("c"), None), true, false),
            (cb(None, Some(issuer), Some("c"), None), true, false),
            (cb(Some("s"), Some(issuer), None, None), true, false),
        ];
        for (i, (params, advertised, ok)) in table.iter().enumerate() {
            assert_eq!(
                check_callback(params, "s", Some(issuer), *advertised).is_ok(),
                *ok,
                "row {i}"
            );
        }
        // A forged error with the wrong state is reported as the state, not as the error.
        let forged = check_callback(
            &cb(Some("x"), None, None, Some("access_denied")),
            "s",
            Some(issuer),
            false,
        );
        assert!(matches!(forged, Err(AuthError::Callback(_))));
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

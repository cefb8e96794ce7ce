//! How the user agent reaches the authorization endpoint and the callback comes back: the
//! [`AuthorizationHandler`] trait, and [`FetchRedirect`], which follows an authorization
//! server that approves at once (test servers, the conformance suite) without a browser.
//! A browser with a loopback listener is the CLI's (`toolwire login`).

use std::fmt;

use http::header::LOCATION;
use toolwire_http::{BoxFuture, HttpExecutor};

use crate::AuthError;
use crate::authorize::CallbackParams;

/// Sends the user agent to the authorization URL and brings back the callback's parameters.
pub trait AuthorizationHandler: Send + Sync + fmt::Debug + 'static {
    /// The redirect URI for this flow. `previous` is the one the stored registration was made
    /// with: a loopback listener binds the same port again when it can, since servers compare
    /// redirect URIs exactly (a different one costs a new registration).
    fn redirect_uri<'a>(
        &'a self,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, AuthError>>;

    /// Sends the user agent to `url` and waits for the callback.
    fn authorize<'a>(
        &'a self,
        url: &'a str,
        http: &'a HttpExecutor,
    ) -> BoxFuture<'a, Result<CallbackParams, AuthError>>;

    /// Whether this handler can run an authorization at all. One that cannot
    /// ([`NoInteraction`]) makes a flow fail with [`AuthError::LoginRequired`] before anything
    /// is registered, as having no handler does. Default: it can.
    fn interactive(&self) -> bool {
        true
    }
}

/// Fetches the authorization URL itself and reads the redirect's `Location`: for servers
/// that approve without a person (the conformance suite's, test servers). The redirect URI is
/// never contacted.
#[derive(Debug, Clone)]
pub struct FetchRedirect {
    redirect_uri: String,
}

impl FetchRedirect {
    /// Registers `redirect_uri` (any loopback URL; it is never contacted).
    pub fn new(redirect_uri: impl Into<String>) -> Self {
        Self {
            redirect_uri: redirect_uri.into(),
        }
    }
}

impl AuthorizationHandler for FetchRedirect {
    fn redirect_uri<'a>(&'a self, _: Option<&'a str>) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move { Ok(self.redirect_uri.clone()) })
    }

    fn authorize<'a>(
        &'a self,
        url: &'a str,
        http: &'a HttpExecutor,
    ) -> BoxFuture<'a, Result<CallbackParams, AuthError>> {
        Box::pin(async move {
            let response = http.get(url, http::HeaderMap::new()).await.map_err(|e| {
                AuthError::handler(
                    "the authorization URL could not be fetched",
                    Some(Box::new(e)),
                )
            })?;
            if !response.status().is_redirection() {
                return Err(AuthError::handler(
                    format!(
                        "the authorization server answered HTTP {} instead of redirecting (it needs a person: use a browser)",
                        response.status()
                    ),
                    None,
                ));
            }
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| AuthError::handler("the redirect has no Location", None))?;
            CallbackParams::from_url(location)
        })
    }
}

/// Never runs a flow: authorization needs a person, and there is none (a CI job, a pipe).
/// Stored tokens are still used and refreshed.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoInteraction;

impl AuthorizationHandler for NoInteraction {
    fn redirect_uri<'a>(
        &'a self,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, AuthError>> {
        let uri = previous.map(str::to_owned);
        Box::pin(
            async move { uri.ok_or_else(|| AuthError::handler("no interactive login here", None)) },
        )
    }

    fn authorize<'a>(
        &'a self,
        _: &'a str,
        _: &'a HttpExecutor,
    ) -> BoxFuture<'a, Result<CallbackParams, AuthError>> {
        Box::pin(async { Err(AuthError::handler("no interactive login here", None)) })
    }

    fn interactive(&self) -> bool {
        false
    }
}

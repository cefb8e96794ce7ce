//! The per-request credential seam: an [`Authorizer`] is asked for headers before every HTTP
//! request the transport makes, and asked what to do when the server refuses them (401, 403).
//! OAuth (`toolwire-auth`) is one implementation; credentials given whole
//! ([`StaticAuthorization`]) are the simplest one, applied without the trait's boxed future.
//!
//! [`HttpExecutor`] is the transport's own pooled client offered to an authorizer for its
//! traffic (metadata, registration, token requests): the same TLS roots, proxy and timeouts,
//! no second HTTP stack.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, PROXY_AUTHORIZATION, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use toolwire_transport::BoxFuture;

use crate::auth::Challenge;
use crate::quickack::QuickAckConnector;
use crate::{BearerToken, HttpError};

/// What an authorizer may fail with; it reaches the caller as the source of
/// [`HttpError::Authorization`], so its type can be recovered by downcasting.
pub type AuthorizerError = Box<dyn std::error::Error + Send + Sync>;

/// How often one message is sent again after its credentials were refused: an authorizer that
/// keeps saying "resend" cannot loop.
pub const MAX_AUTH_RESENDS: u32 = 3;

/// Supplies credentials per HTTP request and repairs them when refused. Called for every POST,
/// the legacy GET stream and the session's DELETE, so per-request proofs (DPoP) are fresh.
pub trait Authorizer: Send + Sync + fmt::Debug + 'static {
    /// The headers to send with one request (`Authorization`, `DPoP`, …), tagged with the
    /// generation of the credentials they come from. Empty headers send it unauthenticated.
    fn credentials<'a>(
        &'a self,
        request: &'a AuthRequest<'a>,
    ) -> BoxFuture<'a, Result<Credentials, AuthorizerError>>;

    /// The server refused a request (401, or 403): fix the credentials and say
    /// [`Resend::Yes`], or [`Resend::No`] to report the refusal as it is, or an error. A
    /// refusal of credentials older than the current ones should just resend: that is how many
    /// concurrent refusals cost one authorization.
    fn refused<'a>(
        &'a self,
        refusal: &'a Refusal<'a>,
    ) -> BoxFuture<'a, Result<Resend, AuthorizerError>>;

    /// A count that changes when the credentials may stand for someone else (a new
    /// authorization, a logout), not when they are refreshed or stepped up. The transport
    /// adds it to its [`authorization_context`](toolwire_transport::Transport::authorization_context),
    /// so the client drops the answers it kept that a server did not mark `cacheScope: public`,
    /// and a legacy session opened as the identity before ends (servers bind sessions to who
    /// opened them): its next request fails as [`HttpError::SessionExpired`], unsent, and the
    /// session above opens a new one. The default, 0, never changes.
    fn identity(&self) -> u64 {
        0
    }
}

/// The request credentials are asked for.
#[derive(Debug)]
#[non_exhaustive]
pub struct AuthRequest<'a> {
    /// `POST`, `GET` or `DELETE`.
    pub method: &'a Method,
    /// Where it goes.
    pub uri: &'a Uri,
    /// The JSON-RPC method it carries, if any.
    pub mcp_method: Option<&'a str>,
    /// The transport's HTTP client, for the authorizer's own requests.
    pub http: &'a HttpExecutor,
}

/// Headers for one request and the generation of the credentials in them.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct Credentials {
    /// Marked sensitive by whoever makes them.
    pub headers: HeaderMap,
    /// Changes whenever the credentials change.
    pub generation: u64,
}

impl Credentials {
    /// `headers` of credentials generation `generation`.
    pub fn new(headers: HeaderMap, generation: u64) -> Self {
        Self {
            headers,
            generation,
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("generation", &self.generation)
            .finish()
    }
}

/// A refusal, as the authorizer sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Refusal<'a> {
    /// 401 or 403.
    pub status: StatusCode,
    /// The parsed `WWW-Authenticate` challenges.
    pub challenges: &'a [Challenge],
    /// The response's headers (`DPoP-Nonce` and the like).
    pub headers: &'a HeaderMap,
    /// The request that was refused.
    pub request: AuthRequest<'a>,
    /// The generation of the credentials it carried.
    pub generation: u64,
    /// How many times this message was already resent after a refusal.
    pub attempt: u32,
}

/// What to do after a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resend {
    /// Send the message again with new credentials.
    Yes,
    /// Report the refusal.
    No,
}

/// The transport's pooled HTTP client, for an authorizer's own requests. Redirects are not
/// followed (the caller sees them), bodies are limited, and the proxy's credentials and the
/// transport's `User-Agent` are added.
#[derive(Clone)]
pub struct HttpExecutor {
    pub(crate) client: Client<QuickAckConnector, Full<Bytes>>,
    pub(crate) user_agent: HeaderValue,
    /// Each request's own hop: an authorization server elsewhere is not reached the way the
    /// MCP server is.
    pub(crate) router: Arc<crate::route::Router>,
    pub(crate) timeout: Duration,
    /// The client's limit on a response head, named in the error when one is longer.
    pub(crate) max_response_head: usize,
}

impl fmt::Debug for HttpExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpExecutor")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HttpExecutor {
    /// The largest body [`Self::execute`] reads.
    pub const MAX_BODY: usize = 1024 * 1024;

    /// Sends `request` and reads the whole response, within the timeout (30 s unless the
    /// transport's read timeout says otherwise). A body over [`Self::MAX_BODY`] is
    /// [`HttpError::ResponseTooLarge`].
    pub async fn execute(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (mut parts, body) = request.into_parts();
        if !parts.headers.contains_key(USER_AGENT) {
            parts.headers.insert(USER_AGENT, self.user_agent.clone());
        }
        // Forwarded in absolute form only for `http://` destinations the proxy rules name;
        // `https://` ones go through a tunnel whose credentials are on its `CONNECT`.
        if let Some(auth) = self.router.hop(&parts.uri)?.request_auth() {
            parts.headers.insert(PROXY_AUTHORIZATION, auth.clone());
        }
        let request = Request::from_parts(parts, Full::new(body));
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| crate::error::request_failed(e, self.max_response_head))?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, Self::MAX_BODY)
                .collect()
                .await
                .map_err(|e| {
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        HttpError::ResponseTooLarge {
                            limit: Self::MAX_BODY,
                        }
                    } else {
                        HttpError::Body(e)
                    }
                })?
                .to_bytes();
            Ok(Response::from_parts(parts, body))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| HttpError::ReadTimeout(self.timeout))?
    }

    /// `GET url` with `headers`.
    pub async fn get(&self, url: &str, headers: HeaderMap) -> Result<Response<Bytes>, HttpError> {
        let mut request = Request::new(Bytes::new());
        *request.uri_mut() = parse_url(url)?;
        *request.headers_mut() = headers;
        self.execute(request).await
    }
}

/// Credentials given whole: a bearer token or an `Authorization` value of any scheme (`Basic
/// …`, `Token …`, a bare API key), or none, sent with every request as they are. A refusal is
/// reported as it is (nothing here can repair it). What a transport is given with
/// [`HttpTransportBuilder::credentials`](crate::HttpTransportBuilder::credentials); without
/// one it sends none.
///
/// A handle: clones share the credentials, so whoever keeps one can change them while the
/// transport runs ([`Self::set`], [`Self::set_bearer`]). Each change is a new identity: the
/// client drops the answers it kept that a server did not mark `cacheScope: public`, and a
/// legacy session opened with the old credentials ends (servers bind sessions to who opened
/// them): the next request fails as [`HttpError::SessionExpired`], unsent, and the session
/// above opens a new one. Never shown in `Debug`, logs or errors.
///
/// It is an [`Authorizer`] like any other; the transport applies it without the trait's
/// boxed future, since every request of most transports goes through it.
#[derive(Clone)]
pub struct StaticAuthorization(Arc<StaticShared>);

struct StaticShared {
    value: std::sync::Mutex<Option<HeaderValue>>,
    identity: std::sync::atomic::AtomicU64,
}

impl StaticAuthorization {
    /// No credentials: requests go unauthenticated.
    pub fn none() -> Self {
        Self(Arc::new(StaticShared {
            value: std::sync::Mutex::new(None),
            identity: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    /// `Authorization: Bearer <token>`.
    pub fn bearer(token: impl Into<BearerToken>) -> Self {
        let this = Self::none();
        this.replace(token.into().header_value());
        this
    }

    /// An `Authorization` value given whole, the way the `headers` of an `mcpServers` entry
    /// carry it: `Bearer …` is [`Self::bearer`] with its token; any other value is sent as it
    /// is. A value a header cannot hold is [`HttpError::InvalidHeader`] (naming the header,
    /// never the value).
    pub fn header(value: &str) -> Result<Self, HttpError> {
        let this = Self::none();
        this.replace(Some(header_value(value)?));
        Ok(this)
    }

    /// Replaces the credentials with an `Authorization` value given whole (as
    /// [`Self::header`]): a new identity. On an invalid value nothing changes.
    pub fn set(&self, value: &str) -> Result<(), HttpError> {
        self.replace(Some(header_value(value)?));
        self.turn();
        Ok(())
    }

    /// Sets or clears the bearer token: a new identity.
    pub fn set_bearer(&self, token: Option<BearerToken>) {
        self.replace(token.as_ref().and_then(BearerToken::header_value));
        self.turn();
    }

    /// Whether credentials are set.
    pub fn is_set(&self) -> bool {
        crate::lock(&self.0.value).is_some()
    }

    /// The identity count: it turns with every change of the credentials.
    pub fn identity(&self) -> u64 {
        self.0.identity.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Puts the credentials on `headers`; their generation (the identity count). What
    /// [`Authorizer::credentials`] hands out, without a future or a copied map.
    pub(crate) fn apply(&self, headers: &mut HeaderMap) -> u64 {
        if let Some(value) = crate::lock(&self.0.value).as_ref() {
            headers.insert(AUTHORIZATION, value.clone());
        }
        self.identity()
    }

    fn turn(&self) {
        self.0
            .identity
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    fn replace(&self, value: Option<HeaderValue>) {
        *crate::lock(&self.0.value) = value.map(|mut value| {
            value.set_sensitive(true);
            value
        });
    }
}

/// An `Authorization` value given whole; `Bearer …` keeps only its trimmed token.
fn header_value(value: &str) -> Result<HeaderValue, HttpError> {
    let value = value.trim();
    let refused = || HttpError::InvalidHeader {
        name: "Authorization".to_owned(),
        reason: "the value holds characters a header cannot",
    };
    if let Some((scheme, token)) = value.split_once(' ')
        && scheme.eq_ignore_ascii_case("bearer")
        && !token.trim().is_empty()
    {
        return BearerToken::new(token.trim())
            .header_value()
            .ok_or_else(refused);
    }
    HeaderValue::try_from(value).map_err(|_| refused())
}

impl From<BearerToken> for StaticAuthorization {
    fn from(token: BearerToken) -> Self {
        Self::bearer(token)
    }
}

impl From<&str> for StaticAuthorization {
    /// A bearer token.
    fn from(token: &str) -> Self {
        Self::bearer(token)
    }
}

impl From<String> for StaticAuthorization {
    /// A bearer token.
    fn from(token: String) -> Self {
        Self::bearer(token)
    }
}

impl Authorizer for StaticAuthorization {
    fn credentials<'a>(
        &'a self,
        _request: &'a AuthRequest<'a>,
    ) -> BoxFuture<'a, Result<Credentials, AuthorizerError>> {
        let mut headers = HeaderMap::new();
        let generation = self.apply(&mut headers);
        Box::pin(std::future::ready(Ok(Credentials::new(
            headers, generation,
        ))))
    }

    fn refused<'a>(
        &'a self,
        _refusal: &'a Refusal<'a>,
    ) -> BoxFuture<'a, Result<Resend, AuthorizerError>> {
        Box::pin(std::future::ready(Ok(Resend::No)))
    }

    fn identity(&self) -> u64 {
        StaticAuthorization::identity(self)
    }
}

impl fmt::Debug for StaticAuthorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_set() {
            "StaticAuthorization(<redacted>)"
        } else {
            "StaticAuthorization(none)"
        })
    }
}

/// Where a transport's credentials come from: its own, given whole (applied without a
/// future), or an authorizer's.
#[derive(Clone, Debug)]
pub(crate) enum Auth {
    Static(StaticAuthorization),
    Custom(Arc<dyn Authorizer>),
}

impl Auth {
    /// The identity presented (see [`Authorizer::identity`]).
    pub(crate) fn identity(&self) -> u64 {
        match self {
            Self::Static(own) => own.identity(),
            Self::Custom(authorizer) => authorizer.identity(),
        }
    }
}

/// An absolute http(s) URL as a `Uri`.
fn parse_url(url: &str) -> Result<Uri, HttpError> {
    let uri: Uri = url.parse().map_err(|_| HttpError::InvalidUrl {
        url: toolwire_types::redacted_url(url).into_owned(),
    })?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        return Err(HttpError::InvalidUrl {
            url: toolwire_types::redacted_url(url).into_owned(),
        });
    }
    Ok(uri)
}

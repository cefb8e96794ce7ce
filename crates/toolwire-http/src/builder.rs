//! Setting up a transport: [`HttpTransportBuilder`] and what it takes ([`AcceptProfile`],
//! [`RetryPolicy`], [`TlsRoots`], the hooks and what they are shown).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioExecutor;

use crate::authorizer::{Auth, StaticAuthorization};
use crate::fallback::HttpOrSseTransport;
use crate::route::{Hop, Router};
use crate::{
    Authorizer, Config, HttpError, HttpExecutor, HttpTransport, InFlight, Inner, MIN_RESPONSE_HEAD,
    Mailbox, Owner, QuickAckConnector, SseTransport, State,
};

/// Which HTTP proxy, if any, requests go through.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Proxy {
    /// The environment's, as curl reads it (the default): `HTTPS_PROXY` for `https://`
    /// servers, `HTTP_PROXY` for `http://` ones, `ALL_PROXY` for both (each also in lower
    /// case), and none for hosts `NO_PROXY` names (domains, `.suffix`es, IPs, CIDR ranges,
    /// `*`).
    #[default]
    Environment,
    /// None, whatever the environment says.
    Disabled,
    /// This one for every request: `http://[user:password@]host:port` (the credentials are
    /// sent as basic `Proxy-Authorization`, and never shown).
    Url(String),
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Environment => f.write_str("Environment"),
            Self::Disabled => f.write_str("Disabled"),
            Self::Url(url) => write!(f, "Url({})", without_credentials(url)),
        }
    }
}

/// A proxy URL as it may be shown: `scheme://host:port`, without `user:password@` or a path.
pub(crate) fn without_credentials(url: &str) -> String {
    match url.parse::<Uri>() {
        Ok(uri) if uri.host().is_some() => crate::redirect::origin(&uri),
        _ => "(not a URL)".to_owned(),
    }
}

/// The `Accept` header a POST carries; stepped down on 406.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AcceptProfile {
    /// `application/json, text/event-stream`, as the spec asks.
    #[default]
    JsonOrEventStream,
    /// `application/json`.
    JsonOnly,
    /// `*/*`.
    Wildcard,
    /// No `Accept` header.
    Omit,
}

impl AcceptProfile {
    pub(crate) fn header(self) -> Option<HeaderValue> {
        match self {
            Self::JsonOrEventStream => Some(HeaderValue::from_static(
                "application/json, text/event-stream",
            )),
            Self::JsonOnly => Some(HeaderValue::from_static("application/json")),
            Self::Wildcard => Some(HeaderValue::from_static("*/*")),
            Self::Omit => None,
        }
    }

    /// The next profile to try after a 406.
    pub fn fallback(self) -> Option<Self> {
        match self {
            Self::JsonOrEventStream => Some(Self::JsonOnly),
            Self::JsonOnly => Some(Self::Wildcard),
            Self::Wildcard => Some(Self::Omit),
            Self::Omit => None,
        }
    }
}

/// When and how often retry-safe messages are resent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Resends after the first attempt (default 3).
    pub max_retries: u32,
    /// First backoff delay (default 100 ms); doubles each time, with jitter.
    pub min_delay: Duration,
    /// Longest backoff delay (default 2 s).
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured (default 30 s); a server asking for more gets its
    /// status passed to the caller instead of a client that hangs.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// Never resend.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// Resend up to `max_retries` times with backoff from `min_delay` to `max_delay`.
    pub fn new(max_retries: u32, min_delay: Duration, max_delay: Duration) -> Self {
        Self {
            max_retries,
            min_delay,
            max_delay,
            ..Self::default()
        }
    }

    /// Caps the `Retry-After` honoured.
    pub fn with_max_retry_after(mut self, cap: Duration) -> Self {
        self.max_retry_after = cap;
        self
    }

    /// The delays between resends: the shared [`Backoff`](toolwire_transport::Backoff), with
    /// jitter.
    pub(crate) fn delays(&self) -> toolwire_transport::Delays {
        toolwire_transport::Backoff {
            min: self.min_delay,
            max: self.max_delay,
            attempts: Some(self.max_retries),
            jitter: true,
        }
        .delays()
    }
}

/// Where trusted TLS roots come from.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum TlsRoots {
    /// Mozilla's roots, compiled in (`webpki-roots`).
    #[default]
    WebPki,
    /// The platform's certificate store (`rustls-native-certs`).
    Native,
    /// A complete rustls configuration of your own (client certificates, private roots).
    /// Its ALPN protocols are replaced with `h2` and `http/1.1`.
    Config(Arc<rustls::ClientConfig>),
}

impl TlsRoots {
    /// The environment's choice, as OpenSSL-based tools (curl, Python, git) make it:
    /// [`TlsRoots::Native`] when `SSL_CERT_FILE` or `SSL_CERT_DIR` is set (the platform
    /// loader then reads exactly the bundle or directory named, which is how a private
    /// certificate authority is trusted), [`TlsRoots::WebPki`] otherwise. The CLI and
    /// `mcpServers` entries use it, so Toolwire trusts what the stdio children it starts are
    /// told to trust.
    pub fn from_env() -> Self {
        Self::choose(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
    }

    fn choose(set: impl Fn(&str) -> bool) -> Self {
        if set("SSL_CERT_FILE") || set("SSL_CERT_DIR") {
            Self::Native
        } else {
            Self::WebPki
        }
    }
}

impl fmt::Debug for TlsRoots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::WebPki => "WebPki",
            Self::Native => "Native",
            Self::Config(_) => "Config(..)",
        })
    }
}

/// What the on-received hook sees of one response.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Received<'a> {
    /// The JSON-RPC method of the message sent (`None` for a response to the server, or the
    /// GET stream).
    pub method: Option<&'a str>,
    /// The HTTP status.
    pub status: StatusCode,
    /// The start of the body (at most 256 bytes, lossy UTF-8); empty for event streams.
    pub snippet: &'a str,
}

pub(crate) type SendingHook = Arc<dyn Fn(&str) + Send + Sync>;

pub(crate) type ReceivedHook = Arc<dyn Fn(&Received<'_>) + Send + Sync>;

/// Builds an [`HttpTransport`]: `HttpTransport::builder("http://127.0.0.1:8080/mcp")`.
#[must_use]
#[derive(Clone)]
pub struct HttpTransportBuilder {
    url: String,
    accept: AcceptProfile,
    tls: TlsRoots,
    proxy: Proxy,
    /// What the transport keeps as it is.
    config: Config,
    /// The first header or user agent refused, for `build` to report.
    refused: Option<(String, &'static str)>,
    /// The Unix socket the MCP endpoint is reached over, instead of TCP.
    unix_socket: Option<std::path::PathBuf>,
    /// The count of credential repairs to share with another transport (the HTTP+SSE
    /// fallback shares the Streamable HTTP one's); absent, a transport has its own.
    pub(crate) authorizing: Option<toolwire_transport::Authorizing>,
}

impl fmt::Debug for HttpTransportBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransportBuilder")
            .field("url", &toolwire_types::redacted_url(&self.url))
            .field("accept", &self.accept)
            .field("retry", &self.config.retry)
            .field("tls", &self.tls)
            .field("proxy", &self.proxy)
            .field("unix_socket", &self.unix_socket)
            .field("credentials", &self.config.auth)
            .finish_non_exhaustive()
    }
}

/// Header names the transport owns: set them through their own builder methods.
pub(crate) fn reserved(name: &HeaderName) -> Option<&'static str> {
    let n = name.as_str();
    if n.starts_with("mcp-") {
        Some("Mcp-* headers are computed per message by the session")
    } else if [
        "authorization",
        "accept",
        "content-type",
        "content-length",
        "host",
        "last-event-id",
        "transfer-encoding",
        "connection",
        "proxy-authorization",
    ]
    .contains(&n)
    {
        Some("the transport sets this header itself (use credentials, accept_profile, proxy)")
    } else {
        None
    }
}

impl HttpTransportBuilder {
    pub(crate) fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            authorizing: None,
            accept: AcceptProfile::default(),
            tls: TlsRoots::default(),
            proxy: Proxy::default(),
            config: Config {
                headers: HeaderMap::new(),
                user_agent: HeaderValue::from_static(concat!(
                    "toolwire/",
                    env!("CARGO_PKG_VERSION")
                )),
                connect_timeout: Duration::from_secs(10),
                read_timeout: None,
                max_message_size: 16 * 1024 * 1024,
                max_sse_line: 16 * 1024 * 1024,
                max_response_head: 16 * 1024,
                retry: RetryPolicy::default(),
                get_stream: true,
                delete_timeout: Duration::from_secs(2),
                on_sending: None,
                on_received: None,
                proxy_auth: None,
                auth: None,
            },
            refused: None,
            unix_socket: None,
        }
    }

    /// Adds a static header sent with every request. Refuses `Mcp-*` names (computed per
    /// message) and the headers the transport sets itself: the first refusal is the error of
    /// [`Self::build`] (and of `connect_http`), so the chain of settings stays unbroken.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        let checked = HeaderName::try_from(name)
            .map_err(|_| "not a valid header name")
            .and_then(|header| match reserved(&header) {
                Some(reason) => Err(reason),
                None => Ok(header),
            })
            .and_then(|header| {
                HeaderValue::try_from(value)
                    .map(|value| (header, value))
                    .map_err(|_| "the value holds characters a header cannot")
            });
        match checked {
            Ok((header, value)) => {
                self.config.headers.append(header, value);
            }
            Err(reason) => self.refuse(name, reason),
        }
        self
    }

    /// Keeps the first refused setting for [`Self::build`] to report.
    pub(crate) fn refuse(&mut self, name: &str, reason: &'static str) {
        self.refused
            .get_or_insert_with(|| (name.to_owned(), reason));
    }

    /// The endpoint's URL, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The transport's own credentials, sent with every request: a bearer token (`"…"`,
    /// [`StaticAuthorization::bearer`]) or an `Authorization` value of any scheme
    /// ([`StaticAuthorization::header`]). Keep a clone of the handle to change them later.
    /// Replaces an authorizer set before.
    pub fn credentials(mut self, credentials: impl Into<StaticAuthorization>) -> Self {
        self.config.auth = Some(Auth::Static(credentials.into()));
        self
    }

    /// Asks `authorizer` for credentials before every request and on every 401/403 (see
    /// [`Authorizer`]) instead of credentials given whole; a refusal it does not repair is
    /// reported as it is. OAuth is one: `toolwire_auth::OAuth`. Replaces credentials set
    /// before.
    pub fn authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.config.auth = Some(Auth::Custom(authorizer));
        self
    }

    /// Whether credentials were given ([`Self::credentials`] or [`Self::authorizer`]). OAuth
    /// set up on a client leaves such a transport alone.
    pub fn has_credentials(&self) -> bool {
        self.config.auth.is_some()
    }

    /// Which HTTP proxy requests go through (default: the environment's,
    /// [`Proxy::Environment`]). `https://` servers are reached through a `CONNECT` tunnel
    /// (TLS end to end), `http://` ones by absolute-form requests to the proxy. Only
    /// `http://` proxies are supported; another kind is the error of [`Self::build`].
    pub fn proxy(mut self, proxy: Proxy) -> Self {
        self.proxy = proxy;
        self
    }

    /// The first `Accept` profile tried (default: JSON or event stream).
    pub fn accept_profile(mut self, profile: AcceptProfile) -> Self {
        self.accept = profile;
        self
    }

    /// The `User-Agent` (default `toolwire/<version>`). One that is not a valid header value
    /// is the error of [`Self::build`].
    pub fn user_agent(mut self, user_agent: &str) -> Self {
        match HeaderValue::try_from(user_agent) {
            Ok(value) => self.config.user_agent = value,
            Err(_) => self.refuse("user-agent", "the value holds characters a header cannot"),
        }
        self
    }

    /// How long a connection may take to open (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// How long to wait for a response head, and between body chunks (default: no limit; the
    /// session's request deadlines apply). Servers that keep quiet streams alive with SSE
    /// comments work with any value above their keep-alive period.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.config.read_timeout = Some(timeout);
        self
    }

    /// The largest JSON body or SSE event accepted (default 16 MiB).
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.config.max_message_size = bytes;
        self
    }

    /// The longest response head (status line and headers) accepted, at least 8 KiB (default
    /// 16 KiB: what Node's HTTP client, and so the TypeScript SDK, and Python's `httpx`, and so
    /// the Python SDK, accept). It is also the size of each read from the connection: a larger
    /// value lets through heads a proxy swelled with cookies, at the cost of a larger buffer
    /// kept by every open connection.
    pub fn max_response_head(mut self, bytes: usize) -> Self {
        self.config.max_response_head = bytes.max(MIN_RESPONSE_HEAD);
        self
    }

    /// The longest SSE line accepted (default 16 MiB).
    pub fn max_sse_line(mut self, bytes: usize) -> Self {
        self.config.max_sse_line = bytes;
        self
    }

    /// When to resend retry-safe messages.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.config.retry = policy;
        self
    }

    /// Reaches the MCP endpoint over the Unix domain socket at `path` instead of TCP, as
    /// `curl --unix-socket` does: the URL (`http://localhost/mcp`) still gives the `Host`
    /// header and the path of every request. Only what goes to the URL's own host and port
    /// takes the socket, never through a proxy; anything else (an authorization server) goes
    /// over the network as usual. `http://` URLs only; on a platform without Unix sockets,
    /// `build` fails ([`HttpError::UnixSocket`]).
    pub fn unix_socket(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.unix_socket = Some(path.into());
        self
    }

    /// The Unix socket set with [`Self::unix_socket`], if any.
    pub fn unix_socket_path(&self) -> Option<&std::path::Path> {
        self.unix_socket.as_deref()
    }

    /// Whether to open the legacy GET stream for server messages (default on).
    pub fn get_stream(mut self, open: bool) -> Self {
        self.config.get_stream = open;
        self
    }

    /// How long `close` waits for the legacy `DELETE` (default 2 s).
    pub fn delete_timeout(mut self, timeout: Duration) -> Self {
        self.config.delete_timeout = timeout;
        self
    }

    /// Where trusted TLS roots come from (default: webpki roots).
    pub fn tls_roots(mut self, roots: TlsRoots) -> Self {
        self.tls = roots;
        self
    }

    /// Called with the JSON-RPC method just before each POST.
    pub fn on_sending(mut self, hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.config.on_sending = Some(Arc::new(hook));
        self
    }

    /// Called after each response head (or body, for JSON) arrives.
    pub fn on_received(mut self, hook: impl Fn(&Received<'_>) + Send + Sync + 'static) -> Self {
        self.config.on_received = Some(Arc::new(hook));
        self
    }

    /// The proxy rules, `None` for no proxy at all.
    fn matcher(&self) -> Result<Option<Matcher>, HttpError> {
        Ok(match &self.proxy {
            Proxy::Disabled => None,
            Proxy::Environment => Some(Matcher::from_env()),
            Proxy::Url(url) => {
                let refused = |reason| HttpError::InvalidProxy {
                    proxy: without_credentials(url),
                    reason,
                };
                let parsed: Uri = url.parse().map_err(|_| refused("not a URL"))?;
                if parsed.host().is_none() {
                    return Err(refused("no host"));
                }
                Some(Matcher::builder().all(url.clone()).build())
            }
        })
    }

    /// Builds the transport (no connection is made yet). Needs no runtime; using it needs
    /// tokio.
    pub fn build(self) -> Result<HttpTransport, HttpError> {
        let inner = self.build_inner()?;
        Ok(HttpTransport {
            _owner: Arc::new(Owner(inner.clone())),
            inner,
        })
    }

    /// Builds the 2024-11-05 HTTP+SSE transport instead, with the same settings: the URL is
    /// the server's SSE endpoint (often `…/sse`). See [`SseTransport`].
    pub fn build_sse(self) -> Result<SseTransport, HttpError> {
        let url = self.url.clone();
        Ok(SseTransport::new(self.build_inner()?, url))
    }

    /// Builds Streamable HTTP with the spec's fallback to the 2024-11-05 HTTP+SSE transport
    /// (see [`HttpOrSseTransport`]).
    pub fn build_with_sse_fallback(self) -> Result<HttpOrSseTransport, HttpError> {
        let http = self.clone().build()?;
        Ok(HttpOrSseTransport::new(http, self))
    }

    fn build_inner(mut self) -> Result<Arc<Inner>, HttpError> {
        if let Some((name, reason)) = self.refused {
            return Err(HttpError::InvalidHeader { name, reason });
        }
        let uri: Uri = self.url.parse().map_err(|_| HttpError::InvalidUrl {
            url: toolwire_types::redacted_url(&self.url).into_owned(),
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
            return Err(HttpError::InvalidUrl {
                url: toolwire_types::redacted_url(&self.url).into_owned(),
            });
        }
        let tls = crate::tls::client_config(&self.tls)?;
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_connect_timeout(Some(self.config.connect_timeout));
        let mut router = Router::new(self.matcher()?, http, tls);
        if let Some(path) = &self.unix_socket {
            let unusable = |reason| HttpError::UnixSocket {
                path: path.display().to_string(),
                reason,
            };
            if !cfg!(unix) {
                return Err(unusable("this platform has no Unix sockets"));
            }
            if uri.scheme_str() != Some("http") {
                return Err(unusable("only http:// URLs go over a Unix socket"));
            }
            if let Some(authority) = uri.authority().cloned() {
                router = router.with_unix_socket(authority, Arc::from(path.as_path()));
            }
        }
        let router = Arc::new(router);
        // The MCP server's own hop, checked now (a proxy we cannot use is a build error);
        // every other destination (an authorization server) takes its own at connect time.
        let hop = router.hop(&uri)?;
        self.config.proxy_auth = hop.request_auth().cloned();
        let mut client = Client::builder(TokioExecutor::new());
        if matches!(hop, Hop::Forward { .. }) {
            // A forwarding proxy may close a kept-alive connection just as a request goes out
            // on it (tinyproxy does), and a request written on a closing connection may have
            // been forwarded: it could not be sent again. A connection per request through
            // the proxy removes the race; tunnels are end to end and keep theirs.
            client.pool_max_idle_per_host(0);
        }
        // Reads of a fixed size instead of hyper's adaptive ones, which double a connection's
        // buffer while a response's chunks are still held and keep what they grew to for as
        // long as the connection stays open: ~130 KB for each server of a host once it has
        // listed two hundred tools. hyper makes the same size the limit of a response head.
        client.http1_read_buf_exact_size(self.config.max_response_head);
        let client = client.build(QuickAckConnector(router.clone()));
        let executor = HttpExecutor {
            client: client.clone(),
            user_agent: self.config.user_agent.clone(),
            router,
            timeout: self.config.read_timeout.unwrap_or(Duration::from_secs(30)),
            max_response_head: self.config.max_response_head,
        };
        let state = State {
            accept: self.accept,
            ..State::default()
        };
        let auth = self
            .config
            .auth
            .take()
            .unwrap_or_else(|| Auth::Static(StaticAuthorization::none()));
        let read_ahead = toolwire_transport::ReadAhead::new(self.config.max_message_size);
        let inner = Arc::new(Inner {
            uri,
            client,
            executor,
            config: self.config,
            state: Mutex::new(state),
            mailbox: Mutex::new(Mailbox::default()),
            authorizing: self.authorizing.unwrap_or_default(),
            read_ahead,
            receiving: tokio::sync::Mutex::new(()),
            tasks: Mutex::new(HashMap::default()),
            inflight: Mutex::new(InFlight::default()),
            auth,
        });
        Ok(inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_profiles_fall_back_in_order() {
        let mut p = AcceptProfile::default();
        let mut seen = vec![p];
        while let Some(next) = p.fallback() {
            seen.push(next);
            p = next;
        }
        assert_eq!(
            seen,
            [
                AcceptProfile::JsonOrEventStream,
                AcceptProfile::JsonOnly,
                AcceptProfile::Wildcard,
                AcceptProfile::Omit
            ]
        );
        assert_eq!(AcceptProfile::Omit.header(), None);
    }

    #[test]
    fn a_ca_bundle_named_by_the_environment_selects_the_platform_loader() {
        let with =
            |names: &'static [&'static str]| TlsRoots::choose(move |name| names.contains(&name));
        assert!(matches!(with(&[]), TlsRoots::WebPki));
        assert!(matches!(with(&["SSL_CERT_FILE"]), TlsRoots::Native));
        assert!(matches!(with(&["SSL_CERT_DIR"]), TlsRoots::Native));
        assert!(matches!(with(&["REQUESTS_CA_BUNDLE"]), TlsRoots::WebPki));
    }

    #[test]
    fn credentials_and_tokens_in_urls_stay_out_of_debug_and_errors() {
        let builder =
            HttpTransport::builder("https://alice:pw-secret@mcp.example/mcp?api_key=key-secret");
        let shown = format!("{builder:?}");
        let built = builder
            .build()
            .map(|t| format!("{t:?}"))
            .unwrap_or_default();
        let refused = HttpTransport::new("ftp://mcp.example/?token=tok-secret")
            .err()
            .map(|e| format!("{e} {e:?}"))
            .unwrap_or_default();
        for text in [&shown, &built, &refused] {
            for secret in ["pw-secret", "key-secret", "tok-secret"] {
                assert!(!text.contains(secret), "{text}");
            }
        }
        assert!(shown.contains("mcp.example/mcp?api_key=…"), "{shown}");
        assert!(refused.contains("token=…"), "{refused}");
    }

    #[test]
    fn reserved_and_invalid_headers_are_refused_when_built() {
        for name in [
            "Mcp-Session-Id",
            "MCP-Protocol-Version",
            "mcp-param-x",
            "Authorization",
            "Accept",
        ] {
            let built = HttpTransport::builder("http://x/mcp")
                .header(name, "v")
                .build();
            assert!(
                matches!(&built, Err(HttpError::InvalidHeader { name: n, .. }) if n == name),
                "{name}"
            );
        }
        // The first refusal is the one reported, whatever follows it in the chain.
        let built = HttpTransport::builder("http://x/mcp")
            .header("X-Ok", "a\r\nb")
            .user_agent("bad\nagent")
            .header("X-Tenant", "acme")
            .build();
        assert!(
            matches!(&built, Err(HttpError::InvalidHeader { name, .. }) if name == "X-Ok"),
            "{built:?}"
        );
        let built = HttpTransport::builder("http://x/mcp")
            .user_agent("bad\nagent")
            .build();
        assert!(
            matches!(&built, Err(HttpError::InvalidHeader { name, .. }) if name == "user-agent"),
            "{built:?}"
        );
        assert!(
            HttpTransport::builder("http://x/mcp")
                .header("X-Tenant", "acme")
                .user_agent("agent/1")
                .build()
                .is_ok()
        );
    }

    #[test]
    fn urls_must_be_absolute_http() {
        for bad in ["localhost:8080/mcp", "ftp://x/y", "/mcp", "http//x"] {
            assert!(
                matches!(HttpTransport::new(bad), Err(HttpError::InvalidUrl { .. })),
                "{bad}"
            );
        }
        assert!(HttpTransport::new("https://example.com/mcp").is_ok());
    }
}

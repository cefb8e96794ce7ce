//! Streamable HTTP for the Toolwire MCP client, in both protocol eras, on hyper.
//!
//! [`HttpTransport`] implements [`toolwire_transport::Transport`]. Each message is a POST of the
//! bytes the session serialised, with the headers it computed (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`). Answers come back as `application/json` or as a
//! `text/event-stream`; SSE answers complete as soon as the response event arrives (never
//! waiting for the body's tail, which is what stalls clients on servers that write with Nagle
//! on).
//!
//! What it does for you:
//! - **Legacy era** (`initialize`; 2025-03-26 … 2025-11-25): captures `Mcp-Session-Id` from the
//!   `initialize` answer (header, or `result.sessionId` in the payload) and sends it on every
//!   later request; opens the GET stream for server messages once `initialize` is answered and
//!   before `initialized` is sent, so nothing the server announces on `initialized` is lost (405:
//!   none; opt out with [`HttpTransportBuilder::get_stream`]); resumes a broken SSE stream with
//!   `Last-Event-ID` after the server's `retry:` delay; on a 404 to a request that carried the
//!   session id, replays the handshake once and resends (the server never processed it); sends
//!   `DELETE` on close, bounded in time, 405 ignored.
//! - **Modern era** (2026-07-28): no session, no GET, no DELETE, no resumption. Cancelling a
//!   request ([`Transport::cancel`]) closes its stream, which is how cancellation is spelled
//!   over HTTP; a stream that breaks fails its request with [`HttpError::StreamEnded`] so the
//!   caller can reissue it with a new id. A stray `Mcp-Session-Id` is ignored (only an
//!   `initialize` answer can set one).
//! - **Accept fallback** on 406: `application/json, text/event-stream` → `application/json` →
//!   `*/*` → no `Accept`, remembered for the transport ([`AcceptProfile`]).
//! - **Retries** on 408, 429, 502, 503, 504 and on failures before any response byte, with
//!   exponential backoff and jitter, honouring `Retry-After` (seconds or an HTTP date) up to
//!   [`RetryPolicy::max_retry_after`], only for messages whose [`RetryClass`] is `Safe`. Each
//!   retry is a `tracing` event with its reason.
//! - **Bearer auth**: set at build time or later ([`HttpTransport::set_bearer_token`]; a new
//!   token re-initialises a legacy session); 401/403 call the auth-failed hook with the parsed
//!   `WWW-Authenticate` challenges. The token never appears in `Debug`, logs or errors.
//! - **Hooks** (on-sending, on-received with a bounded body snippet, auth-failed), a
//!   configurable `User-Agent`, and a `tracing` span per request.
//! - **Limits**: message size (JSON body or SSE event), SSE line length, connect and read
//!   timeouts, each a typed [`HttpError`].
//! - **TLS** through rustls (ring), webpki roots by default, the platform's on request, or your
//!   own `rustls::ClientConfig`; HTTP/2 when ALPN offers it; `TCP_NODELAY` always.
//!
//! Requests run inside [`Transport::recv`]: the futures of the requests in flight are polled by
//! whoever awaits `recv` (the client's driver always does), so a call costs no task spawn and
//! its answer no hop between tasks. A user of the transport keeps a `recv` pending for requests
//! to make progress; notifications and responses are sent within `send` itself.
//!
//! A request that gets no answer is reported through `recv` as
//! [`TransportError::Request`] (with the HTTP status and body), failing that request only; the
//! session decides what it means (a 400/404/405 to `server/discover` marks a legacy server).
//!
//! # Dependencies
//! - `hyper`, `hyper-util` (pooled client, tokio I/O), `http-body-util`: HTTP/1.1 and HTTP/2,
//!   connection reuse, without reqwest (the project card puts hyper under this transport).
//! - `hyper-rustls`, `rustls` (ring provider: builds with `cc` alone), `webpki-roots`,
//!   `rustls-native-certs`: TLS, with the roots the caller chooses.
//! - `backon`: the exponential backoff with jitter between retries.
//! - `httpdate`: `Retry-After` given as an HTTP date.
//! - `futures-util`: `FuturesUnordered` and `abortable`, for the requests `recv` polls.
//! - `socket2`, `tower-service`: `TCP_QUICKACK` after every read, through a wrapping connector
//!   (see `quickack.rs`: the Nagle/delayed-ACK stall on kept-alive connections).
//! - `serde_json`: finding the answer among SSE events (its id) and a session id in a payload.
//! - `foldhash` (already under the tool cache): the map of requests in flight.
//! - The SSE parser is our own ([`SseParser`]): the SSE crates buffer without bounds.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use backon::BackoffBuilder;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use futures_util::future::{AbortHandle as RequestHandle, Abortable};
use futures_util::stream::FuturesUnordered;
use http::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, USER_AGENT, WWW_AUTHENTICATE,
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::task::AbortHandle;
use toolwire_transport::{
    BoxFuture, Inbound, MessageKind, Outbound, RequestFailure, RequestId, RetryClass, Transport,
    TransportError,
};
use tracing::Instrument;

mod auth;
mod error;
mod quickack;
mod sse;

use quickack::QuickAckConnector;

pub use auth::{BearerToken, Challenge, parse_challenges};
pub use error::HttpError;
pub use sse::{SseError, SseEvent, SseParser};

/// `Mcp-Session-Id`.
const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Last-Event-ID`.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// How much of a body hooks and errors see.
const SNIPPET: usize = 256;
/// How much of an error body is read (the rest is dropped, not an error).
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// How long to keep reading a response stream after its answer, so the connection can go back
/// to the pool; the answer was delivered already.
const DRAIN: Duration = Duration::from_secs(1);
/// SSE reconnection delay when the server named none.
const DEFAULT_SSE_RETRY: Duration = Duration::from_secs(1);
/// Resumption attempts of one response stream (legacy).
const MAX_RESUMES: u32 = 5;
/// Consecutive failures after which the GET stream is given up.
const MAX_LISTEN_FAILURES: u32 = 5;

/// The `Accept` header a POST carries; stepped down on 406 (seed 002).
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
    fn header(self) -> Option<HeaderValue> {
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

    fn delays(&self) -> backon::ExponentialBackoff {
        backon::ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_retries as usize)
            .with_jitter()
            .build()
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

/// What the auth-failed hook sees of a 401 or 403.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AuthFailure<'a> {
    /// The JSON-RPC method of the message sent, if any.
    pub method: Option<&'a str>,
    /// 401 or 403.
    pub status: StatusCode,
    /// The parsed `WWW-Authenticate` challenges (`resource_metadata`, `scope`, `error`).
    pub challenges: &'a [Challenge],
}

type SendingHook = Arc<dyn Fn(&str) + Send + Sync>;
type ReceivedHook = Arc<dyn Fn(&Received<'_>) + Send + Sync>;
type AuthHook = Arc<dyn Fn(&AuthFailure<'_>) + Send + Sync>;

/// Builds an [`HttpTransport`]: `HttpTransport::builder("http://127.0.0.1:8080/mcp")`.
#[must_use]
#[derive(Clone)]
pub struct HttpTransportBuilder {
    url: String,
    headers: HeaderMap,
    bearer: Option<BearerToken>,
    accept: AcceptProfile,
    user_agent: HeaderValue,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
    max_message_size: usize,
    max_sse_line: usize,
    retry: RetryPolicy,
    get_stream: bool,
    delete_timeout: Duration,
    tls: TlsRoots,
    on_sending: Option<SendingHook>,
    on_received: Option<ReceivedHook>,
    on_auth_failed: Option<AuthHook>,
    /// The first header or user agent refused, for `build` to report.
    refused: Option<(String, &'static str)>,
}

impl fmt::Debug for HttpTransportBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransportBuilder")
            .field("url", &self.url)
            .field("bearer", &self.bearer)
            .field("accept", &self.accept)
            .field("retry", &self.retry)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// Header names the transport owns: set them through their own builder methods.
fn reserved(name: &HeaderName) -> Option<&'static str> {
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
    ]
    .contains(&n)
    {
        Some("the transport sets this header itself (use bearer_token, accept_profile)")
    } else {
        None
    }
}

impl HttpTransportBuilder {
    fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: HeaderMap::new(),
            bearer: None,
            accept: AcceptProfile::default(),
            user_agent: HeaderValue::from_static(concat!("toolwire/", env!("CARGO_PKG_VERSION"))),
            connect_timeout: Duration::from_secs(10),
            read_timeout: None,
            max_message_size: 16 * 1024 * 1024,
            max_sse_line: 16 * 1024 * 1024,
            retry: RetryPolicy::default(),
            get_stream: true,
            delete_timeout: Duration::from_secs(2),
            tls: TlsRoots::default(),
            on_sending: None,
            on_received: None,
            on_auth_failed: None,
            refused: None,
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
                self.headers.append(header, value);
            }
            Err(reason) => self.refuse(name, reason),
        }
        self
    }

    /// Keeps the first refused setting for [`Self::build`] to report.
    fn refuse(&mut self, name: &str, reason: &'static str) {
        self.refused
            .get_or_insert_with(|| (name.to_owned(), reason));
    }

    /// The bearer token sent as `Authorization: Bearer …`.
    pub fn bearer_token(mut self, token: impl Into<BearerToken>) -> Self {
        self.bearer = Some(token.into());
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
            Ok(value) => self.user_agent = value,
            Err(_) => self.refuse("user-agent", "the value holds characters a header cannot"),
        }
        self
    }

    /// How long a connection may take to open (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long to wait for a response head, and between body chunks (default: no limit; the
    /// session's request deadlines apply). Servers that keep quiet streams alive with SSE
    /// comments work with any value above their keep-alive period.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = Some(timeout);
        self
    }

    /// The largest JSON body or SSE event accepted (default 16 MiB).
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// The longest SSE line accepted (default 16 MiB).
    pub fn max_sse_line(mut self, bytes: usize) -> Self {
        self.max_sse_line = bytes;
        self
    }

    /// When to resend retry-safe messages.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Whether to open the legacy GET stream for server messages (default on).
    pub fn get_stream(mut self, open: bool) -> Self {
        self.get_stream = open;
        self
    }

    /// How long `close` waits for the legacy `DELETE` (default 2 s).
    pub fn delete_timeout(mut self, timeout: Duration) -> Self {
        self.delete_timeout = timeout;
        self
    }

    /// Where trusted TLS roots come from (default: webpki roots).
    pub fn tls_roots(mut self, roots: TlsRoots) -> Self {
        self.tls = roots;
        self
    }

    /// Called with the JSON-RPC method just before each POST.
    pub fn on_sending(mut self, hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_sending = Some(Arc::new(hook));
        self
    }

    /// Called after each response head (or body, for JSON) arrives.
    pub fn on_received(mut self, hook: impl Fn(&Received<'_>) + Send + Sync + 'static) -> Self {
        self.on_received = Some(Arc::new(hook));
        self
    }

    /// Called on 401 and 403 with the parsed `WWW-Authenticate` challenges.
    pub fn on_auth_failed(
        mut self,
        hook: impl Fn(&AuthFailure<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.on_auth_failed = Some(Arc::new(hook));
        self
    }

    fn tls_config(&self) -> Result<rustls::ClientConfig, HttpError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = match &self.tls {
            TlsRoots::Config(config) => (**config).clone(),
            roots => {
                let mut store = rustls::RootCertStore::empty();
                if matches!(roots, TlsRoots::Native) {
                    let found = rustls_native_certs::load_native_certs();
                    for e in &found.errors {
                        tracing::debug!(error = %e, "a native root certificate could not be loaded");
                    }
                    let (added, _) = store.add_parsable_certificates(found.certs);
                    if added == 0 {
                        return Err(HttpError::NoNativeRoots);
                    }
                } else {
                    store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                }
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(HttpError::Tls)?
                    .with_root_certificates(store)
                    .with_no_client_auth()
            }
        };
        // hyper-rustls offers `h2` and `http/1.1` itself (and refuses a config that already
        // names protocols).
        config.alpn_protocols.clear();
        Ok(config)
    }

    /// Builds the transport (no connection is made yet). Needs no runtime; using it needs
    /// tokio.
    pub fn build(self) -> Result<HttpTransport, HttpError> {
        if let Some((name, reason)) = self.refused {
            return Err(HttpError::InvalidHeader { name, reason });
        }
        let uri: Uri = self.url.parse().map_err(|_| HttpError::InvalidUrl {
            url: self.url.clone(),
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
            return Err(HttpError::InvalidUrl { url: self.url });
        }
        let tls = self.tls_config()?;
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_connect_timeout(Some(self.connect_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(QuickAckConnector(connector));
        let state = State {
            accept: self.accept,
            token: self.bearer,
            ..State::default()
        };
        let inner = Arc::new(Inner {
            uri,
            client,
            config: Config {
                headers: self.headers,
                user_agent: self.user_agent,
                connect_timeout: self.connect_timeout,
                read_timeout: self.read_timeout,
                max_message_size: self.max_message_size,
                max_sse_line: self.max_sse_line,
                retry: self.retry,
                get_stream: self.get_stream,
                delete_timeout: self.delete_timeout,
                on_sending: self.on_sending,
                on_received: self.on_received,
                on_auth_failed: self.on_auth_failed,
            },
            state: Mutex::new(state),
            mailbox: Mutex::new(Mailbox::default()),
            receiving: tokio::sync::Mutex::new(()),
            tasks: Mutex::new(HashMap::default()),
            inflight: Mutex::new(InFlight::default()),
            handshake: tokio::sync::Mutex::new(()),
        });
        Ok(HttpTransport {
            _owner: Arc::new(Owner(inner.clone())),
            inner,
        })
    }
}

struct Config {
    headers: HeaderMap,
    user_agent: HeaderValue,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
    max_message_size: usize,
    max_sse_line: usize,
    retry: RetryPolicy,
    get_stream: bool,
    delete_timeout: Duration,
    on_sending: Option<SendingHook>,
    on_received: Option<ReceivedHook>,
    on_auth_failed: Option<AuthHook>,
}

/// A message as sent, to replay the legacy handshake.
#[derive(Clone)]
struct Replay {
    body: Bytes,
    headers: Vec<(HeaderName, HeaderValue)>,
}

#[derive(Default)]
struct State {
    accept: AcceptProfile,
    token: Option<BearerToken>,
    session_id: Option<HeaderValue>,
    /// The negotiated `MCP-Protocol-Version` header, for the GET stream and DELETE.
    version: Option<HeaderValue>,
    /// The legacy handshake as sent (set once `initialize` succeeded: this is legacy HTTP).
    initialize: Option<Replay>,
    initialized: Option<Replay>,
    /// Replay the handshake before the next request (the session expired, or the token
    /// changed).
    stale: bool,
    listener: Option<AbortHandle>,
    /// A replayed handshake wants the GET stream reopened.
    relisten: bool,
    closed: bool,
}

struct Inner {
    uri: Uri,
    client: Client<QuickAckConnector, Full<Bytes>>,
    config: Config,
    state: Mutex<State>,
    /// What requests and the GET stream received, for `recv`.
    mailbox: Mutex<Mailbox>,
    /// One `recv` at a time.
    receiving: tokio::sync::Mutex<()>,
    /// Requests in flight, to close their streams on cancel or close.
    tasks: Mutex<HashMap<RequestId, RequestHandle, foldhash::fast::RandomState>>,
    /// The futures of the requests in flight, polled by `recv`.
    inflight: Mutex<InFlight>,
    /// One handshake replay at a time.
    handshake: tokio::sync::Mutex<()>,
}

/// Locks a mutex whose data stays consistent even if a holder panicked (every critical
/// section here is a few assignments), so poisoning is ignored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The Streamable HTTP transport. Cheap to clone: clones share one connection pool and one
/// session, so keep a clone to change the token later. See the crate docs.
#[derive(Clone)]
pub struct HttpTransport {
    inner: Arc<Inner>,
    _owner: Arc<Owner>,
}

/// Shared by the handles of one transport and dropped with the last: it ends the requests in
/// flight and the GET stream, which hold the shared state and would otherwise keep it (and
/// each other) alive with nobody left to poll them.
struct Owner(Arc<Inner>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// A request's whole life: POST, answer, retries; it pushes what it gets into the mailbox.
type RequestFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The requests in flight and the waker of the `recv` that polls them.
#[derive(Default)]
struct InFlight {
    requests: FuturesUnordered<Abortable<RequestFuture>>,
    waker: Option<Waker>,
}

/// What the requests and the GET stream received, waiting for `recv`.
///
/// Not a channel: a request polled inside `recv` pushes its answer while that very `recv` is
/// being polled, and a channel would wake the polling task, which the runtime then schedules
/// again (and on a multi-threaded runtime, wakes another worker to steal it). `recv` takes the
/// waker out while it drives the requests and reads the mailbox afterwards, so only pushes from
/// elsewhere (the GET stream's task) wake it.
#[derive(Default)]
struct Mailbox {
    items: std::collections::VecDeque<Result<Inbound, TransportError>>,
    waker: Option<Waker>,
    /// The transport was closed: `recv` ends once the items are read.
    closed: bool,
}

impl Mailbox {
    /// The next item, or the end, if there is either.
    fn take(&mut self) -> Option<Option<Result<Inbound, TransportError>>> {
        match self.items.pop_front() {
            Some(item) => Some(Some(item)),
            None if self.closed => Some(None),
            None => None,
        }
    }
}

/// Forgets the wakers of a `recv` that ended or was dropped: with no `recv` pending, a `send`
/// or a push has no one to wake (the next `recv` drives and reads everything first). A task
/// that drops its `recv` to `send` (a `select!` loop) so does not wake itself.
struct Receiving<'a>(&'a Inner);

impl Drop for Receiving<'_> {
    fn drop(&mut self) {
        lock(&self.0.inflight).waker = None;
        lock(&self.0.mailbox).waker = None;
    }
}

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.inner.state);
        f.debug_struct("HttpTransport")
            .field("url", &self.inner.uri)
            .field("session_id", &state.session_id)
            .field("accept", &state.accept)
            .field("bearer", &state.token)
            .finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// Starts building a transport to the MCP endpoint at `url`.
    pub fn builder(url: impl Into<String>) -> HttpTransportBuilder {
        HttpTransportBuilder::new(url)
    }

    /// A transport with the defaults.
    pub fn new(url: impl Into<String>) -> Result<Self, HttpError> {
        Self::builder(url).build()
    }

    /// Sets or clears the bearer token. A legacy session is invalidated: the next request
    /// first replays the handshake with the new credentials (seed 002).
    pub fn set_bearer_token(&self, token: Option<BearerToken>) {
        let mut state = lock(&self.inner.state);
        state.token = token;
        if state.initialize.is_some() {
            state.stale = true;
        }
    }

    /// The legacy session id, if the server assigned one.
    pub fn session_id(&self) -> Option<String> {
        lock(&self.inner.state)
            .session_id
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// The `Accept` profile now in use (after any 406 fallback).
    pub fn accept_profile(&self) -> AcceptProfile {
        lock(&self.inner.state).accept
    }
}

/// What a failed exchange reports.
struct Failure {
    status: Option<StatusCode>,
    body: Bytes,
    error: HttpError,
}

impl From<HttpError> for Failure {
    fn from(error: HttpError) -> Self {
        Self {
            status: None,
            body: Bytes::new(),
            error,
        }
    }
}

fn snippet(body: &[u8]) -> String {
    let cut = body.len().min(SNIPPET);
    String::from_utf8_lossy(&body[..cut]).into_owned()
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// `Retry-After` as a delay: delta-seconds or an HTTP date.
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A session id is visible ASCII (0x21–0x7E).
fn valid_session_id(value: &HeaderValue) -> bool {
    !value.is_empty() && value.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b))
}

/// Whether `data` is a JSON-RPC response to `id`.
fn answers(data: &[u8], id: &RequestId) -> bool {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        id: Option<RequestId>,
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_slice::<Envelope>(data) {
        Ok(e) => e.method.is_none() && e.id.as_ref() == Some(id),
        Err(_) => false,
    }
}

/// `result.sessionId` of an initialize answer, for servers that put it in the payload.
fn payload_session_id(data: &[u8]) -> Option<HeaderValue> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<WithSession>,
    }
    #[derive(serde::Deserialize)]
    struct WithSession {
        #[serde(rename = "sessionId")]
        session_id: Option<String>,
    }
    let id = serde_json::from_slice::<Answer>(data)
        .ok()?
        .result?
        .session_id?;
    HeaderValue::try_from(id).ok().filter(valid_session_id)
}

impl Inner {
    /// Drops the requests in flight and stops the GET stream (the last handle is gone).
    fn abandon(&self) {
        for (_, task) in lock(&self.tasks).drain() {
            task.abort();
        }
        let requests = std::mem::take(&mut lock(&self.inflight).requests);
        drop(requests);
        if let Some(listener) = lock(&self.state).listener.take() {
            listener.abort();
        }
    }

    /// Polls the requests in flight until none is ready, and leaves `cx`'s waker for a request
    /// that `send` adds meanwhile.
    fn drive(&self, cx: &mut Context<'_>) {
        let mut inflight = lock(&self.inflight);
        match &inflight.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => inflight.waker = Some(cx.waker().clone()),
        }
        // Each item is a request that ended (or was aborted); what it got is in the mailbox.
        while let Poll::Ready(Some(_)) = inflight.requests.poll_next_unpin(cx) {}
    }

    fn push(&self, item: Result<Inbound, TransportError>) {
        let waker = {
            let mut mailbox = lock(&self.mailbox);
            if mailbox.closed {
                return;
            }
            mailbox.items.push_back(item);
            mailbox.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Calls the on-received hook (the body's snippet is made only for a hook).
    fn received(&self, method: Option<&str>, status: StatusCode, body: &[u8]) {
        if let Some(hook) = &self.config.on_received {
            hook(&Received {
                method,
                status,
                snippet: &snippet(body),
            });
        }
    }

    /// A request with everything but the per-message headers; `None` for the session id if
    /// it must not be sent.
    fn request(
        &self,
        method: Method,
        body: Bytes,
        with_session: bool,
    ) -> (Request<Full<Bytes>>, Option<HeaderValue>, AcceptProfile) {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = self.uri.clone();
        let headers = req.headers_mut();
        // The common headers below plus the few every POST adds (Mcp-*, content type, accept).
        headers.reserve(self.config.headers.len() + 12);
        for (name, value) in &self.config.headers {
            headers.append(name, value.clone());
        }
        headers.insert(USER_AGENT, self.config.user_agent.clone());
        let state = lock(&self.state);
        if let Some(value) = state.token.as_ref().and_then(BearerToken::header_value) {
            headers.insert(AUTHORIZATION, value);
        }
        let session = if with_session {
            state.session_id.clone()
        } else {
            None
        };
        if let Some(id) = &session {
            headers.insert(SESSION_ID, id.clone());
        }
        (req, session, state.accept)
    }

    /// Sends one request and waits for its response head, within the read timeout.
    async fn roundtrip(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, HttpError> {
        let sent = self.client.request(req);
        let result = match self.config.read_timeout {
            Some(t) => tokio::time::timeout(t, sent)
                .await
                .map_err(|_| HttpError::ReadTimeout(t))?,
            None => sent.await,
        };
        result.map_err(|e| {
            let timed_out = e.is_connect() && {
                let mut source = std::error::Error::source(&e);
                let mut found = false;
                while let Some(s) = source {
                    if s.downcast_ref::<std::io::Error>()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
                    {
                        found = true;
                        break;
                    }
                    source = s.source();
                }
                found
            };
            if timed_out {
                HttpError::ConnectTimeout(self.config.connect_timeout)
            } else {
                HttpError::Connect(Box::new(e))
            }
        })
    }

    /// The next chunk of body data (`None` at the end), within the read timeout.
    async fn chunk(&self, body: &mut Incoming) -> Result<Option<Bytes>, HttpError> {
        loop {
            let next = body.frame();
            let frame = match self.config.read_timeout {
                Some(t) => tokio::time::timeout(t, next)
                    .await
                    .map_err(|_| HttpError::ReadTimeout(t))?,
                None => next.await,
            };
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(HttpError::Body(Box::new(e))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// A whole body, refusing more than `limit` bytes.
    async fn read_body(&self, body: &mut Incoming, limit: usize) -> Result<Bytes, HttpError> {
        let mut buf = BytesMut::new();
        while let Some(data) = self.chunk(body).await? {
            if buf.len() + data.len() > limit {
                return Err(HttpError::ResponseTooLarge { limit });
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf.freeze())
    }

    /// The start of an error body: up to [`ERROR_BODY_LIMIT`], the rest dropped.
    async fn read_error_body(&self, body: &mut Incoming) -> Bytes {
        let mut buf = BytesMut::new();
        let read = async {
            while let Ok(Some(data)) = self.chunk(body).await {
                let room = ERROR_BODY_LIMIT - buf.len();
                buf.extend_from_slice(&data[..data.len().min(room)]);
                if buf.len() >= ERROR_BODY_LIMIT {
                    break;
                }
            }
        };
        // An error body is advice; never wait long for it.
        let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
        buf.freeze()
    }

    /// Turns a final non-success response into a failure (calling the auth hook on 401/403).
    async fn status_failure(&self, resp: Response<Incoming>, method: Option<&str>) -> Failure {
        let status = resp.status();
        let challenges = parse_challenges(
            resp.headers()
                .get_all(WWW_AUTHENTICATE)
                .iter()
                .map(HeaderValue::as_bytes),
        );
        let mut body = resp.into_body();
        let body = self.read_error_body(&mut body).await;
        self.received(method, status, &body);
        let snippet = snippet(&body);
        if matches!(status.as_u16(), 401 | 403) {
            tracing::warn!(%status, ?challenges, "the server refused the credentials");
            if let Some(hook) = &self.config.on_auth_failed {
                hook(&AuthFailure {
                    method,
                    status,
                    challenges: &challenges,
                });
            }
        }
        Failure {
            status: Some(status),
            body,
            error: HttpError::Status {
                status,
                snippet,
                challenges,
            },
        }
    }

    /// POSTs `out` until it has a final response: steps the Accept profile down on 406,
    /// replays a lost legacy session once, and resends retry-safe messages on transient
    /// failures. Returns 2xx responses; everything else is a failure.
    async fn post(&self, out: &Outbound, handshake: bool) -> Result<Response<Incoming>, Failure> {
        let method = out.kind.method();
        let is_initialize = method == Some("initialize");
        let safe = out.retry == RetryClass::Safe;
        let policy = &self.config.retry;
        let mut delays = policy.delays();
        let mut retries = 0;
        let mut replayed = false;
        loop {
            if !is_initialize && !handshake {
                self.ensure_session().await?;
            }
            let (mut req, sent_session, accept) =
                self.request(Method::POST, out.body.clone(), !is_initialize);
            let headers = req.headers_mut();
            // Room for the message's own headers and the two below: one allocation, no rehash.
            headers.reserve(out.headers.len() + 2);
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Some(value) = accept.header() {
                headers.insert(ACCEPT, value);
            }
            for (name, value) in &out.headers {
                headers.insert(name, value.clone());
            }
            if let Some(hook) = &self.config.on_sending {
                hook(method.unwrap_or("(response)"));
            }
            let resp = match self.roundtrip(req).await {
                Ok(resp) => resp,
                Err(e) => {
                    if safe && retries < policy.max_retries {
                        let delay = delays.next().unwrap_or(policy.max_delay);
                        retries += 1;
                        tracing::info!(retry = retries, ?delay, reason = %e, "resending after a failure before any response");
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    return Err(e.into());
                }
            };
            let status = resp.status();
            if status.is_success() {
                return Ok(resp);
            }
            match status.as_u16() {
                406 => {
                    let next = {
                        let mut state = lock(&self.state);
                        if state.accept == accept {
                            state.accept = accept.fallback().unwrap_or(accept);
                        }
                        (state.accept != accept).then_some(state.accept)
                    };
                    match next {
                        Some(next) => {
                            tracing::info!(from = ?accept, to = ?next, "406 Not Acceptable; trying the next Accept profile");
                            continue;
                        }
                        None => return Err(HttpError::NotAcceptable.into()),
                    }
                }
                404 if sent_session.is_some() && !replayed && !handshake => {
                    replayed = true;
                    {
                        let mut state = lock(&self.state);
                        if state.session_id == sent_session {
                            state.stale = true;
                        }
                    }
                    tracing::warn!(
                        "the server no longer knows the session (404); re-initialising and resending"
                    );
                    continue;
                }
                408 | 429 | 502 | 503 | 504 if safe && retries < policy.max_retries => {
                    let delay = match retry_after(resp.headers(), SystemTime::now()) {
                        Some(d) if d > policy.max_retry_after => {
                            tracing::info!(%status, retry_after = ?d, "Retry-After beyond the cap; not retrying");
                            return Err(self.status_failure(resp, method).await);
                        }
                        Some(d) => d,
                        None => delays.next().unwrap_or(policy.max_delay),
                    };
                    retries += 1;
                    tracing::info!(retry = retries, %status, ?delay, "resending after a transient status");
                    drop(resp);
                    tokio::time::sleep(delay).await;
                }
                _ => return Err(self.status_failure(resp, method).await),
            }
        }
    }

    /// Replays the legacy handshake if the session expired or the token changed.
    /// Boxed: it calls [`Inner::post`], which calls it.
    fn ensure_session(&self) -> BoxFuture<'_, Result<(), HttpError>> {
        Box::pin(self.replay_handshake())
    }

    async fn replay_handshake(&self) -> Result<(), HttpError> {
        if !lock(&self.state).stale {
            return Ok(());
        }
        let _one = self.handshake.lock().await;
        let (initialize, initialized) = {
            let mut state = lock(&self.state);
            if !state.stale {
                return Ok(());
            }
            if let Some(listener) = state.listener.take() {
                listener.abort();
            }
            state.session_id = None;
            (state.initialize.clone(), state.initialized.clone())
        };
        let Some(initialize) = initialize else {
            lock(&self.state).stale = false;
            return Ok(());
        };
        tracing::info!("replaying the initialize handshake for a new session");
        let mut out = Outbound::new(
            initialize.body.clone(),
            MessageKind::Request {
                id: RequestId::Number(0),
                method: "initialize",
            },
        );
        out.headers = initialize.headers;
        let lost = |why: HttpError| HttpError::SessionLost(Box::new(why));
        let resp = self.post(&out, true).await.map_err(|f| lost(f.error))?;
        let session = resp.headers().get(SESSION_ID).cloned();
        let mut body = resp.into_body();
        let answer = self
            .read_body(&mut body, self.config.max_message_size)
            .await
            .map_err(lost)?;
        let session = session
            .filter(valid_session_id)
            .or_else(|| payload_session_id(sse_answer(&answer).unwrap_or(&answer)));
        {
            let mut state = lock(&self.state);
            state.session_id = session;
            state.stale = false;
            state.relisten = initialized.is_some();
        }
        if let Some(initialized) = initialized {
            let mut out = Outbound::new(
                initialized.body,
                MessageKind::Notification {
                    method: "notifications/initialized",
                },
            );
            out.headers = initialized.headers;
            self.post(&out, true).await.map_err(|f| lost(f.error))?;
        }
        Ok(())
    }

    /// Reads a 2xx answer to request `id`, pushing every message it carries.
    async fn deliver(
        self: &Arc<Self>,
        resp: Response<Incoming>,
        id: &RequestId,
        method: &str,
    ) -> Result<(), Failure> {
        let status = resp.status();
        let content_type = content_type(resp.headers());
        let header_session = resp.headers().get(SESSION_ID).cloned();
        let legacy = lock(&self.state).initialize.is_some() || method == "initialize";
        if method == "initialize"
            && let Some(h) = header_session.as_ref().filter(|h| valid_session_id(h))
        {
            // At once, not after the answer: resuming a cut answer stream needs the session.
            lock(&self.state).session_id = Some(h.clone());
        }
        let mut body = resp.into_body();
        match content_type.as_str() {
            "application/json" => {
                let data = self
                    .read_body(&mut body, self.config.max_message_size)
                    .await?;
                self.received(Some(method), status, &data);
                if data.iter().all(u8::is_ascii_whitespace) {
                    return Err(HttpError::NoAnswer(status).into());
                }
                if method == "initialize" {
                    self.capture_session(header_session, &data);
                }
                self.push(Ok(Inbound::new(data)));
                Ok(())
            }
            "text/event-stream" => {
                self.received(Some(method), status, b"");
                self.read_stream(body, id, method, legacy, header_session)
                    .await
                    .map_err(Failure::from)
            }
            _ => {
                let data = self.read_error_body(&mut body).await;
                self.received(Some(method), status, &data);
                if data.is_empty() {
                    Err(HttpError::NoAnswer(status).into())
                } else {
                    Err(HttpError::UnexpectedContentType(content_type).into())
                }
            }
        }
    }

    fn capture_session(&self, header: Option<HeaderValue>, answer: &[u8]) {
        let session = match header {
            Some(h) if valid_session_id(&h) => Some(h),
            Some(_) => {
                tracing::warn!("ignoring an Mcp-Session-Id with characters outside 0x21-0x7E");
                None
            }
            None => payload_session_id(answer),
        };
        if session.is_some() {
            lock(&self.state).session_id = session;
        }
    }

    /// Reads an SSE answer to `id`, resuming it with `Last-Event-ID` (legacy) when it breaks.
    async fn read_stream(
        self: &Arc<Self>,
        mut body: Incoming,
        id: &RequestId,
        method: &str,
        legacy: bool,
        header_session: Option<HeaderValue>,
    ) -> Result<(), HttpError> {
        let mut cursor = Cursor {
            initialize: method == "initialize",
            header_session,
            ..Cursor::default()
        };
        let mut resumes = 0;
        loop {
            let ended = self.pump(&mut body, Some(id), &mut cursor).await;
            if cursor.answer.is_some() {
                return Ok(());
            }
            if let Err(e @ HttpError::Sse(_)) = ended {
                return Err(e);
            }
            if !legacy || cursor.last_id.is_none() || resumes >= MAX_RESUMES {
                tracing::debug!(?ended, resumes, "response stream ended before its answer");
                return Err(HttpError::StreamEnded { resumes });
            }
            resumes += 1;
            let delay = cursor.retry.unwrap_or(DEFAULT_SSE_RETRY);
            tracing::info!(?delay, last_event_id = ?cursor.last_id, "response stream broke; resuming");
            tokio::time::sleep(delay).await;
            match self.get(cursor.last_id.as_deref()).await {
                Ok(resp)
                    if resp.status().is_success()
                        && content_type(resp.headers()) == "text/event-stream" =>
                {
                    body = resp.into_body();
                }
                Ok(resp) => {
                    tracing::debug!(status = %resp.status(), "resumption refused");
                }
                Err(e) => tracing::debug!(error = %e, "resumption failed"),
            }
        }
    }

    /// Reads events from `body` until it ends (or, once the answer to `id` came, for a short
    /// drain), pushing messages. `Ok` at the end of the body.
    async fn pump(
        &self,
        body: &mut Incoming,
        id: Option<&RequestId>,
        cursor: &mut Cursor,
    ) -> Result<(), HttpError> {
        let mut parser = SseParser::new(self.config.max_sse_line, self.config.max_message_size);
        let mut events = Vec::new();
        let mut drain_until = None;
        loop {
            let next = match drain_until {
                Some(at) => match tokio::time::timeout_at(at, self.chunk(body)).await {
                    Ok(next) => next,
                    Err(_) => return Ok(()),
                },
                None => self.chunk(body).await,
            };
            let Some(data) = next? else {
                return Ok(());
            };
            parser.feed(&data, &mut events)?;
            for event in events.drain(..) {
                if let Some(last) = event.id {
                    cursor.last_id = Some(last);
                }
                if let Some(retry) = event.retry {
                    cursor.retry = Some(retry);
                }
                if !(event.data.is_empty()
                    || matches!(event.event.as_deref(), None | Some("message")))
                {
                    continue;
                }
                if event.data.is_empty() {
                    continue;
                }
                if let Some(id) = id
                    && cursor.answer.is_none()
                    && answers(&event.data, id)
                {
                    cursor.answer = Some(event.data.clone());
                    drain_until = Some(tokio::time::Instant::now() + DRAIN);
                    if cursor.initialize {
                        // Before the answer is handed on: the next request needs the session.
                        self.capture_session(cursor.header_session.take(), &event.data);
                    }
                }
                tracing::trace!(bytes = event.data.len(), "SSE message");
                self.push(Ok(Inbound::new(event.data)));
            }
        }
    }

    /// A GET for the event stream (`Last-Event-ID` to resume).
    async fn get(&self, last_event_id: Option<&str>) -> Result<Response<Incoming>, HttpError> {
        let (mut req, _, _) = self.request(Method::GET, Bytes::new(), true);
        let headers = req.headers_mut();
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(version) = lock(&self.state).version.clone() {
            headers.insert(PROTOCOL_VERSION, version);
        }
        if let Some(id) = last_event_id.and_then(|id| HeaderValue::try_from(id).ok()) {
            headers.insert(LAST_EVENT_ID, id);
        }
        self.roundtrip(req).await
    }

    /// The legacy GET stream: server requests and notifications, reconnected while it works.
    async fn listen(self: Arc<Self>, mut opened: Option<tokio::sync::oneshot::Sender<()>>) {
        let mut cursor = Cursor::default();
        let mut failures = 0;
        let mut delays = self.config.retry.delays();
        loop {
            let response = self.get(cursor.last_id.as_deref()).await;
            if let Some(opened) = opened.take() {
                let _ = opened.send(());
            }
            let failed = match response {
                Ok(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                    tracing::debug!("the server offers no GET stream (405)");
                    return;
                }
                Ok(resp) if resp.status() == StatusCode::NOT_FOUND => {
                    tracing::debug!("GET stream: the session is gone (404)");
                    lock(&self.state).stale = true;
                    return;
                }
                Ok(resp)
                    if resp.status().is_success()
                        && content_type(resp.headers()) == "text/event-stream" =>
                {
                    self.received(None, resp.status(), b"");
                    let before = cursor.last_id.clone();
                    let mut body = resp.into_body();
                    let ended = self.pump(&mut body, None, &mut cursor).await;
                    tracing::debug!(?ended, "GET stream ended");
                    cursor.last_id == before
                }
                Ok(resp) => {
                    tracing::debug!(status = %resp.status(), "GET stream refused");
                    true
                }
                Err(e) => {
                    tracing::debug!(error = %e, "GET stream failed");
                    true
                }
            };
            failures = if failed { failures + 1 } else { 0 };
            if failures > MAX_LISTEN_FAILURES {
                tracing::warn!(
                    "giving up the GET stream after {MAX_LISTEN_FAILURES} failures; server messages outside responses will be missed"
                );
                return;
            }
            let delay = match (failed, cursor.retry) {
                (false, Some(retry)) => retry,
                (false, None) => DEFAULT_SSE_RETRY,
                (true, _) => delays.next().unwrap_or(self.config.retry.max_delay),
            };
            tokio::time::sleep(delay).await;
        }
    }

    /// Runs one request to its end, reporting a failure through `recv`.
    async fn run_request(self: Arc<Self>, out: Outbound, id: RequestId, method: &'static str) {
        let outcome = match self.post(&out, false).await {
            Ok(resp) => {
                self.relisten();
                if method == "initialize" {
                    // Before the answer is delivered: from then on this is legacy HTTP.
                    lock(&self.state).initialize = Some(Replay {
                        body: out.body.clone(),
                        headers: out.headers.clone(),
                    });
                }
                self.deliver(resp, &id, method).await
            }
            Err(f) => Err(f),
        };
        match outcome {
            Ok(()) => {}
            Err(f) => {
                tracing::debug!(error = %f.error, "request failed");
                self.push(Err(TransportError::Request(RequestFailure {
                    id: id.clone(),
                    status: f.status.map(|s| s.as_u16()),
                    body: f.body,
                    cause: Arc::new(f.error),
                })));
            }
        }
        lock(&self.tasks).remove(&id);
    }

    /// Sends a notification or response and waits for its acknowledgement.
    async fn notify(self: &Arc<Self>, out: Outbound) {
        let method = out.kind.method();
        if method == Some("notifications/initialized")
            && let Some(opened) = self.handshake_done(&out)
        {
            // The GET stream opens before the server hears `initialized`, and this waits
            // (briefly) until the server answered it: servers drop what they route to a GET
            // stream that is not there yet. server-everything announces at once the tools
            // `initialized` unlocks; the TypeScript SDK routes requests made during a tool
            // call there.
            let _ = tokio::time::timeout(Duration::from_secs(2), opened).await;
        }
        match self.post(&out, false).await {
            Ok(resp) => {
                let status = resp.status();
                let mut body = resp.into_body();
                let data = self.read_error_body(&mut body).await;
                self.received(method, status, &data);
            }
            Err(f) => {
                tracing::warn!(method, error = %f.error, "the server did not accept a message")
            }
        }
    }

    /// Reopens the GET stream after a replayed handshake.
    fn relisten(self: &Arc<Self>) {
        let mut state = lock(&self.state);
        if std::mem::take(&mut state.relisten) && self.config.get_stream && !state.closed {
            let listener = tokio::spawn(self.clone().listen(None));
            if let Some(old) = state.listener.replace(listener.abort_handle()) {
                old.abort();
            }
        }
    }

    /// The legacy handshake is finishing (`initialized` is about to be sent): remember it for
    /// replays, open the GET stream; the receiver fires once the server answered the GET (or
    /// it failed).
    fn handshake_done(
        self: &Arc<Self>,
        initialized: &Outbound,
    ) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let version = initialized
            .headers
            .iter()
            .find(|(n, _)| *n == PROTOCOL_VERSION)
            .map(|(_, v)| v.clone());
        let mut state = lock(&self.state);
        state.version = version;
        state.initialized = Some(Replay {
            body: initialized.body.clone(),
            headers: initialized.headers.clone(),
        });
        // The GET stream belongs to a legacy session: only after an `initialize` went through.
        if !self.config.get_stream || state.closed || state.initialize.is_none() {
            return None;
        }
        if let Some(old) = state.listener.take() {
            old.abort();
        }
        let (opened, answered) = tokio::sync::oneshot::channel();
        let listener = tokio::spawn(self.clone().listen(Some(opened)));
        state.listener = Some(listener.abort_handle());
        Some(answered)
    }

    async fn delete_session(&self) {
        let (session, version) = {
            let state = lock(&self.state);
            (state.session_id.clone(), state.version.clone())
        };
        if session.is_none() {
            return;
        }
        let (mut req, _, _) = self.request(Method::DELETE, Bytes::new(), true);
        if let Some(version) = version {
            req.headers_mut().insert(PROTOCOL_VERSION, version);
        }
        match tokio::time::timeout(self.config.delete_timeout, self.roundtrip(req)).await {
            Ok(Ok(resp)) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!("the server does not let clients end sessions (405)")
            }
            Ok(Ok(resp)) => tracing::debug!(status = %resp.status(), "session ended"),
            Ok(Err(e)) => tracing::debug!(error = %e, "DELETE failed"),
            Err(_) => tracing::debug!("DELETE timed out"),
        }
    }
}

/// What a response stream has shown so far.
#[derive(Default)]
struct Cursor {
    last_id: Option<String>,
    retry: Option<Duration>,
    answer: Option<Bytes>,
    /// Reading an `initialize` answer: capture the session id when it comes.
    initialize: bool,
    header_session: Option<HeaderValue>,
}

/// The first JSON-RPC message of an SSE body that was read whole (handshake replays).
fn sse_answer(body: &[u8]) -> Option<&[u8]> {
    let start = body.windows(5).position(|w| w == b"data:")?;
    let rest = &body[start + 5..];
    let end = rest
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .unwrap_or(rest.len());
    Some(rest[..end].trim_ascii())
}

impl Transport for HttpTransport {
    fn carries_headers(&self) -> bool {
        true
    }

    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            if lock(&self.inner.state).closed {
                return Err(TransportError::Closed);
            }
            match message.kind.clone() {
                MessageKind::Request { id, method } => {
                    let span = tracing::debug_span!("mcp_http", method, id = %id);
                    let inner = self.inner.clone();
                    let request: RequestFuture = Box::pin(
                        inner
                            .run_request(message, id.clone(), method)
                            .instrument(span),
                    );
                    let (request, handle) = futures_util::future::abortable(request);
                    lock(&self.inner.tasks).insert(id, handle);
                    let waker = {
                        let mut inflight = lock(&self.inner.inflight);
                        inflight.requests.push(request);
                        inflight.waker.take()
                    };
                    // A `recv` already pending elsewhere polls the new request from now on.
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                }
                kind => {
                    let span = tracing::debug_span!("mcp_http", method = kind.method());
                    self.inner.notify(message).instrument(span).await;
                }
            }
            Ok(())
        })
    }

    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
        Box::pin(async move {
            let _one = self.inner.receiving.lock().await;
            let _forget = Receiving(&self.inner);
            std::future::poll_fn(|cx| {
                {
                    let mut mailbox = lock(&self.inner.mailbox);
                    if let Some(item) = mailbox.take() {
                        return Poll::Ready(item);
                    }
                    // Pushes made while the requests are driven below are read below.
                    mailbox.waker = None;
                }
                // Requests push what they get into the mailbox as they are polled.
                self.inner.drive(cx);
                let mut mailbox = lock(&self.inner.mailbox);
                match mailbox.take() {
                    Some(item) => Poll::Ready(item),
                    None => {
                        mailbox.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                }
            })
            .await
        })
    }

    fn cancel(&self, id: &RequestId) {
        if let Some(task) = lock(&self.inner.tasks).remove(id) {
            tracing::debug!(%id, "closing the stream of a cancelled request");
            task.abort();
        }
    }

    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            {
                let mut state = lock(&self.inner.state);
                if state.closed {
                    return Ok(());
                }
                state.closed = true;
            }
            self.inner.abandon();
            self.inner.delete_session().await;
            let waker = {
                let mut mailbox = lock(&self.inner.mailbox);
                mailbox.closed = true;
                mailbox.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
            Ok(())
        })
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
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(3)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        h.insert(
            RETRY_AFTER,
            HeaderValue::try_from(later).unwrap_or(HeaderValue::from_static("x")),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        h.insert(
            RETRY_AFTER,
            HeaderValue::try_from(past).unwrap_or(HeaderValue::from_static("x")),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
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

    #[test]
    fn finds_the_answer_and_session_ids() {
        let id = RequestId::Number(7);
        assert!(answers(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#, &id));
        assert!(!answers(br#"{"jsonrpc":"2.0","id":7,"method":"x"}"#, &id));
        assert!(!answers(br#"{"jsonrpc":"2.0","id":8,"result":{}}"#, &id));
        assert!(!answers(b"not json", &id));
        assert_eq!(
            payload_session_id(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"abc-1"}}"#),
            Some(HeaderValue::from_static("abc-1"))
        );
        assert_eq!(
            payload_session_id(br#"{"result":{"sessionId":"a b"}}"#),
            None
        );
        assert!(!valid_session_id(&HeaderValue::from_static("")));
    }
}

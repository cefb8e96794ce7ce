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
//!   answer to the request that opens a session (header, or `result.sessionId` in the payload) and sends it on every
//!   later request; opens the GET stream for server messages once `initialize` is answered and
//!   before `initialized` is sent, so nothing the server announces on `initialized` is lost (405:
//!   none; opt out with [`HttpTransportBuilder::get_stream`]); resumes a broken SSE stream with
//!   `Last-Event-ID` after the server's `retry:` delay; on a 404 to a request that carried the
//!   session id, fails it as [`HttpError::SessionExpired`] with
//!   [`RequestFailure::session_gone`](toolwire_transport::RequestFailure::session_gone) set, and
//!   holds back every later request the same way until one opens a new session (the session
//!   above re-initialises, restores what it knows and resends: the server never processed
//!   them); sends `DELETE` on close, bounded in time, 405 ignored. Which message opens a
//!   session and which ends the handshake it learns from [`SessionStep`], never from a
//!   method name.
//! - **Modern era** (2026-07-28): no session, no GET, no DELETE, no resumption. Cancelling a
//!   request ([`Transport::cancel`]) closes its stream, which is how cancellation is spelled
//!   over HTTP; a stream that breaks fails its request with [`HttpError::StreamEnded`] so the
//!   caller can reissue it with a new id. A stray `Mcp-Session-Id` is ignored (only an
//!   `initialize` answer can set one).
//! - **Redirects**: 307 and 308 within the endpoint's origin are followed with the method, body
//!   and headers kept (a 308 moves the endpoint for later requests), at most five in a row; a
//!   redirect to another origin is refused ([`HttpError::CrossOriginRedirect`]: the token and
//!   session id never leave the origin), and so are 301/302/303, which would turn the POST into
//!   a GET ([`HttpError::RedirectRefused`]).
//! - **The 2024-11-05 HTTP+SSE transport** ([`SseTransport`], from
//!   [`HttpTransportBuilder::build_sse`]) and the spec's fallback to it
//!   ([`HttpOrSseTransport`]): Streamable HTTP until the server refuses the `initialize` POST
//!   with 400/404/405 and a GET of the same URL opens an SSE stream naming its endpoint.
//! - **Proxies**: the environment's by default (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`,
//!   `NO_PROXY`, as curl reads them), or one given ([`Proxy`]): a `CONNECT` tunnel for
//!   `https://` servers (TLS end to end), absolute-form requests for `http://` ones, basic
//!   credentials from the proxy URL, never shown.
//! - **Unix sockets** ([`HttpTransportBuilder::unix_socket`], Unix only): the endpoint's host
//!   and port reached over a local socket instead of TCP, as `curl --unix-socket`; plain
//!   `http://`, no proxy; other hosts (an authorization server) over the network.
//! - **Accept fallback** on 406: `application/json, text/event-stream` → `application/json` →
//!   `*/*` → no `Accept`, remembered for the transport ([`AcceptProfile`]).
//! - **Retries** on 408, 429, 502, 503, 504 and on failures before any response byte, with
//!   exponential backoff and jitter, honouring `Retry-After` (seconds or an HTTP date) up to
//!   [`RetryPolicy::max_retry_after`], only for messages whose [`RetryClass`](toolwire_transport::RetryClass) is `Safe`. Each
//!   retry is a `tracing` event with its reason.
//! - **Credentials through one step** (`Inner::authorize`, before every POST, GET and
//!   DELETE), from one of two places: credentials given whole
//!   ([`HttpTransportBuilder::credentials`]: a [`StaticAuthorization`], a bearer token or an
//!   `Authorization` value of any scheme, which its holder may change later), or an
//!   [`Authorizer`] ([`HttpTransportBuilder::authorizer`]), which is also asked about every
//!   401/403 with the parsed `WWW-Authenticate` challenges. A new identity (new credentials
//!   given whole, a new authorization, a logout; not a refresh or a step-up) ends a legacy
//!   session as a 404 would. Credentials never appear in `Debug`, logs or errors.
//! - **Hooks** (on-sending, on-received with a bounded body snippet), a configurable
//!   `User-Agent`, and a `tracing` span per request.
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
//!   connection reuse, without reqwest (a user who brings their own HTTP stack implements
//!   `Transport` instead).
//! - `hyper-rustls`, `rustls` (ring provider: builds with `cc` alone), `webpki-roots`,
//!   `rustls-native-certs`: TLS, with the roots the caller chooses.
//! - The backoff between retries and GET reconnects is the shared `toolwire_wire::Backoff`
//!   (on `backon`).
//! - `httpdate`: `Retry-After` given as an HTTP date.
//! - `hyper-util`'s `client-proxy` feature: the environment's proxy rules (curl's `NO_PROXY`
//!   matching) and the `CONNECT` tunnel, rather than our own.
//! - `url` (already in the tree): resolving a redirect's relative `Location` by RFC 3986.
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
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::{AbortHandle as RequestHandle, Abortable};
use futures_util::stream::FuturesUnordered;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use tokio::task::AbortHandle;
use toolwire_transport::{
    Inbound, MessageKind, Outbound, RequestId, SessionStep, Transport, TransportError,
};
use tracing::Instrument;

mod auth;
mod authorizer;
mod builder;
mod error;
mod fallback;
mod legacy;
mod post;
mod quickack;
mod redirect;
mod response;
mod route;
mod sse;
mod sse_transport;
mod tls;

use quickack::QuickAckConnector;

pub use auth::{BearerToken, Challenge, parse_challenges};
pub use authorizer::{
    AuthRequest, Authorizer, AuthorizerError, Credentials, HttpExecutor, MAX_AUTH_RESENDS, Refusal,
    Resend, StaticAuthorization,
};
pub use builder::{AcceptProfile, HttpTransportBuilder, Proxy, Received, RetryPolicy, TlsRoots};
/// The boxed future the traits here return (the transport crate's).
pub use toolwire_transport::BoxFuture;

use builder::{ReceivedHook, SendingHook};
pub use error::HttpError;
pub use fallback::HttpOrSseTransport;
use legacy::valid_session_id;
use post::{Failure, snippet};
use response::{Cursor, content_type};
pub use sse::{MAX_SSE_RETRY, SseError, SseEvent, SseParser};
pub use sse_transport::SseTransport;

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
/// The smallest limit on a response head, and so the smallest read: the size hyper gives a
/// connection's read buffer to begin with.
const MIN_RESPONSE_HEAD: usize = 8 * 1024;

/// Consecutive failures after which the GET stream is given up.
const MAX_LISTEN_FAILURES: u32 = 5;

/// The settings a transport keeps from its builder, as they are.
#[derive(Clone)]
struct Config {
    headers: HeaderMap,
    user_agent: HeaderValue,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
    max_message_size: usize,
    max_sse_line: usize,
    /// Also the size of each read (see `HttpTransportBuilder::max_response_head`).
    max_response_head: usize,
    retry: RetryPolicy,
    get_stream: bool,
    delete_timeout: Duration,
    on_sending: Option<SendingHook>,
    on_received: Option<ReceivedHook>,
    /// `Proxy-Authorization` for every request, when they go through a forwarding proxy
    /// (marked sensitive; never shown).
    proxy_auth: Option<HeaderValue>,
    /// The credentials given to the builder (taken into `Inner::auth` when built).
    auth: Option<authorizer::Auth>,
}

#[derive(Default)]
struct State {
    accept: AcceptProfile,
    session_id: Option<HeaderValue>,
    /// The negotiated `MCP-Protocol-Version` header, for the GET stream and DELETE.
    version: Option<HeaderValue>,
    /// A request that opens a session was answered: this is legacy HTTP (the GET stream,
    /// resumption, DELETE).
    legacy: bool,
    /// The server no longer knows the session, or the identity changed: requests fail as
    /// [`HttpError::SessionExpired`] until one opens a new session.
    session_ended: bool,
    /// The identity the credentials stood for when the session opened
    /// ([`Authorizer::identity`]): once it changes, the session is over.
    opened_as: u64,
    listener: Option<AbortHandle>,
    /// Where a 308 moved the endpoint (same origin); every request goes there from then on.
    moved: Option<Uri>,
    closed: bool,
}

struct Inner {
    uri: Uri,
    client: Client<QuickAckConnector, Full<Bytes>>,
    /// The same client, for the authorizer's own requests.
    executor: HttpExecutor,
    config: Config,
    state: Mutex<State>,
    /// What requests and the GET stream received, for `recv`.
    mailbox: Mutex<Mailbox>,
    /// Authorizer flows under way ([`Transport::authorizing`]).
    authorizing: toolwire_transport::Authorizing,
    /// What stream messages waiting in the mailbox may hold ([`Inner::push_streamed`]).
    read_ahead: toolwire_transport::ReadAhead,
    /// One `recv` at a time.
    receiving: tokio::sync::Mutex<()>,
    /// Requests in flight, to close their streams on cancel or close.
    tasks: Mutex<HashMap<RequestId, RequestHandle, foldhash::fast::RandomState>>,
    /// The futures of the requests in flight, polled by `recv`.
    inflight: Mutex<InFlight>,
    /// Where credentials come from: those given whole (none, when the builder was given
    /// nothing), or an authorizer.
    auth: authorizer::Auth,
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
    /// Each item with its share of the stream budget, if it came from a stream.
    items: std::collections::VecDeque<(
        Result<Inbound, TransportError>,
        Option<tokio::sync::OwnedSemaphorePermit>,
    )>,
    waker: Option<Waker>,
    /// The transport was closed: `recv` ends once the items are read.
    closed: bool,
}

impl Mailbox {
    /// The next item, or the end, if there is either.
    fn take(&mut self) -> Option<Option<Result<Inbound, TransportError>>> {
        match self.items.pop_front() {
            // The share of the budget is given back as the item is handed out.
            Some((item, _share)) => Some(Some(item)),
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
            .field(
                "url",
                &toolwire_types::redacted_url(&self.inner.uri.to_string()),
            )
            .field("session_id", &state.session_id)
            .field("accept", &state.accept)
            .field("credentials", &self.inner.auth)
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

    /// The legacy session id, if the server assigned one (and it still holds: not after the
    /// credentials changed).
    pub fn session_id(&self) -> Option<String> {
        if self.inner.session_over() {
            return None;
        }
        lock(&self.inner.state)
            .session_id
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// Whether the legacy GET stream for the server's own messages is held (open, or waiting
    /// to reopen after a drop): `false` before a legacy session's handshake ends, and once
    /// the server refused the stream (405, or 404 without a session), the session ended or
    /// the stream was given up after repeated failures. Server messages outside responses
    /// arrive only while it is held.
    pub fn holds_get_stream(&self) -> bool {
        lock(&self.inner.state)
            .listener
            .as_ref()
            .is_some_and(|l| !l.is_finished())
    }

    /// The `Accept` profile now in use (after any 406 fallback).
    pub fn accept_profile(&self) -> AcceptProfile {
        lock(&self.inner.state).accept
    }

    /// The transport's HTTP client, for requests beside MCP (an OAuth flow run before any
    /// message): same TLS roots, proxy and `User-Agent`.
    pub fn executor(&self) -> HttpExecutor {
        self.inner.executor.clone()
    }

    /// The endpoint's URL as given.
    pub fn url(&self) -> String {
        self.inner.uri.to_string()
    }
}

impl Inner {
    /// The identity presented ([`Authorizer::identity`]).
    fn authorization_context(&self) -> u64 {
        self.auth.identity()
    }
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
        self.push_with(item, None);
    }

    fn push_with(
        &self,
        item: Result<Inbound, TransportError>,
        share: Option<tokio::sync::OwnedSemaphorePermit>,
    ) {
        let waker = {
            let mut mailbox = lock(&self.mailbox);
            if mailbox.closed {
                return;
            }
            mailbox.items.push_back((item, share));
            mailbox.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Pushes a message a server stream carried, once the stream budget has room for it: a
    /// server that sends faster than the client reads is read no further until `recv` takes
    /// what is waiting (TCP then holds the server back), instead of filling memory.
    /// `related` is the request whose response stream carried it, if any.
    async fn push_streamed(&self, data: Bytes, related: Option<&RequestId>) {
        let Some(share) = self.read_ahead.reserve(data.len()).await else {
            return;
        };
        let inbound = match related {
            Some(id) => Inbound::on_stream_of(data, id.clone()),
            None => Inbound::new(data),
        };
        self.push_with(Ok(inbound), Some(share));
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

    /// Runs one request to its end, reporting a failure through `recv`.
    async fn run_request(self: Arc<Self>, out: Outbound, id: RequestId, method: &'static str) {
        let opens = out.session == SessionStep::Opens;
        if opens {
            lock(&self.state).open_session();
        }
        let outcome = match self.post(&out).await {
            Ok(resp) => {
                if opens {
                    // Before the answer is delivered: from then on this is legacy HTTP.
                    lock(&self.state).legacy = true;
                }
                self.deliver(resp, &id, method, opens).await
            }
            Err(f) => Err(f),
        };
        match outcome {
            Ok(()) => {}
            Err(f) => {
                tracing::debug!(error = %f.error, "request failed");
                self.push(Err(TransportError::Request(
                    f.into_request_failure(id.clone()),
                )));
            }
        }
        lock(&self.tasks).remove(&id);
    }

    /// Sends a notification or response and waits for its acknowledgement.
    async fn notify(self: &Arc<Self>, out: Outbound) {
        let method = out.kind.method();
        if out.session == SessionStep::Opened
            && let Some(opened) = self.handshake_done(&out)
        {
            // The GET stream opens before the server hears `initialized`, and this waits
            // (briefly) until the server answered it: servers drop what they route to a GET
            // stream that is not there yet. server-everything announces at once the tools
            // `initialized` unlocks; the TypeScript SDK routes requests made during a tool
            // call there.
            let _ = tokio::time::timeout(Duration::from_secs(2), opened).await;
        }
        match self.post(&out).await {
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
}

impl Inner {
    /// What `recv` yields: the next item of the mailbox, driving the requests in flight while
    /// it waits; `None` once closed and emptied.
    async fn next_item(&self) -> Option<Result<Inbound, TransportError>> {
        let _one = self.receiving.lock().await;
        let _forget = Receiving(self);
        std::future::poll_fn(|cx| {
            {
                let mut mailbox = lock(&self.mailbox);
                if let Some(item) = mailbox.take() {
                    return Poll::Ready(item);
                }
                // Pushes made while the requests are driven below are read below.
                mailbox.waker = None;
            }
            // Requests push what they get into the mailbox as they are polled.
            self.drive(cx);
            let mut mailbox = lock(&self.mailbox);
            match mailbox.take() {
                Some(item) => Poll::Ready(item),
                None => {
                    mailbox.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Closes the transport: requests and streams end, a legacy session is deleted (and no
    /// longer named by `mcp_session_id`), `recv` ends once what was received is read.
    async fn close(&self) -> Result<(), TransportError> {
        {
            let mut state = lock(&self.state);
            if state.closed {
                return Ok(());
            }
            state.closed = true;
        }
        self.abandon();
        self.delete_session().await;
        lock(&self.state).end_session();
        self.end_mailbox();
        Ok(())
    }

    /// Marks the mailbox closed and wakes its reader.
    fn end_mailbox(&self) {
        let waker = {
            let mut mailbox = lock(&self.mailbox);
            mailbox.closed = true;
            mailbox.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
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
        Box::pin(self.inner.next_item())
    }

    fn authorization_context(&self) -> u64 {
        self.inner.authorization_context()
    }

    fn authorizing(&self) -> Option<toolwire_transport::Authorizing> {
        Some(self.inner.authorizing.clone())
    }

    fn mcp_session_id(&self) -> Option<String> {
        self.session_id()
    }

    fn cancel(&self, id: &RequestId) {
        if let Some(task) = lock(&self.inner.tasks).remove(id) {
            tracing::debug!(%id, "closing the stream of a cancelled request");
            task.abort();
        }
    }

    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.inner.close())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_server_stream_faster_than_the_reader_waits_for_room_in_the_mailbox() {
        let t = HttpTransport::builder("http://127.0.0.1:1/mcp")
            .max_message_size(64 * 1024)
            .build()
            .unwrap_or_else(|e| unreachable!("{e}"));
        let inner = t.inner.clone();
        let pushed = Arc::new(AtomicU64::new(0));
        let progress = pushed.clone();
        tokio::spawn(async move {
            for _ in 0..100 {
                inner
                    .push_streamed(Bytes::from(vec![b'x'; 64 * 1024]), None)
                    .await;
                progress.fetch_add(1, Ordering::SeqCst);
            }
        });
        // On a paused clock this returns once every task is idle: the stream is held.
        tokio::time::sleep(Duration::from_secs(1)).await;
        // The budget is twice the largest message.
        assert_eq!(pushed.load(Ordering::SeqCst), 2);
        assert_eq!(lock(&t.inner.mailbox).items.len(), 2);
        // Reading makes room, and the stream goes on to the end.
        for _ in 0..100 {
            let item = t.recv().await;
            assert!(matches!(item, Some(Ok(_))));
        }
        assert_eq!(pushed.load(Ordering::SeqCst), 100);
    }
}

//! The server side of MCP, shared by Toolwire's reference server and its gateway: a
//! [`Service`] says what the server offers; this crate speaks the protocol around it.
//!
//! - **Eras**: stateless 2026-07-28 (`server/discover`, the `_meta` envelope, listen streams,
//!   `resultType`, `ttlMs`/`cacheScope` on cacheable results) and `initialize` with sessions
//!   (2024-11-05 … 2025-11-25); [`Eras`] restricts a server to one. An unsupported modern
//!   version is `-32022` naming the supported one.
//! - **Streamable HTTP** ([`serve_http`], [`serve_http_unix`]): JSON or SSE answers
//!   ([`Framing`]); legacy sessions (`Mcp-Session-Id`: 400 without, 404 unknown, DELETE), the
//!   GET stream for changes, SSE event ids with resumption (`Last-Event-ID` replays what a
//!   stream sent, or would have, after that event; a replica that did not write the stream
//!   opens a new GET stream, or refuses an answer's with `503` for the next replica to
//!   replay); modern listen streams; SEP-2243 headers
//!   checked against the body with `toolwire-headers` (HTTP 400 with `-32020` on a mismatch).
//! - **HTTP+SSE** (2024-11-05, with [`Options::sse`]): the stream at `{path}/sse` with its
//!   `endpoint` event, messages POSTed to `{path}/messages?session_id=…`.
//! - **Any replica**: with [`Options::session_keys`], a legacy session id is a sealed token
//!   (ChaCha20-Poly1305) any replica holding the key accepts, for [`SESSION_LIFETIME`].
//! - **Callers** ([`Edge::authenticate`]): a server that checks credentials says who
//!   sent each HTTP request ([`Caller`]) or how it is refused ([`Denial`]: 401/403 with
//!   `WWW-Authenticate`); a legacy session is bound to the caller that began it.
//! - **DNS rebinding**: on a loopback address, a request whose `Host` or `Origin` names
//!   another host ([`Options::allowed_hosts`] aside) is refused with 403, as the transport
//!   spec asks of local servers.
//! - **stdio** ([`serve_stdio`]): one message per line, requests run concurrently, changes
//!   sent as they happen.
//! - **Interception** ([`Edge::intercept`], [`Edge::cut_answer_stream`]): a server may answer
//!   a request at its edge instead of serving it, or close a legacy answer stream early for
//!   its client to resume; the reference server injects the faults its clients are tested
//!   against this way, so nothing of them is in the protocol layer.
//!
//! # Dependencies
//! hyper + hyper-util (the HTTP server), tokio, `http-body-util` (streamed bodies),
//! `toolwire-headers` (the SEP-2243 check), `toolwire-types` (codes and `_meta` keys),
//! `ring` (session ids: the AEAD that seals them and the random source; already the client's
//! choice), `base64` (their text form), `thiserror`, `foldhash` (already the session's and
//! the client's: the maps by session id, looked up several times a request; its seed is the
//! process's own, so keys a client chooses cannot be made to collide ahead of time), `serde_json` (messages are handled as JSON values: a server that relays them, as the
//! gateway does, keeps every member it does not know), `serde` (reading a message, the
//! client's declarations in its `_meta` are taken out as text, decoded once each; `incoming.rs`).

mod asks;
mod core;
mod cursor;
mod drain;
mod edge;
mod frame;
mod guard;
mod http;
mod incoming;
mod limits;
mod repair;
mod respond;
mod service;
mod session_id;
mod sessions;
mod slots;
mod sse;
mod stdio;
mod streamed;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use drain::Drained;
pub use guard::{Caller, Credential, Denial};
pub use repair::Repair;
pub use service::{
    Answer, Change, Edge, Era, Listener, Notifier, Page, Reply, Request, RpcError, ServerInfo,
    Service, legacy_notification,
};
pub use session_id::{SESSION_LIFETIME, SessionKeyError, SessionKeys};

use crate::core::Core;

/// 128 bits from the system's random source, as 32 hexadecimal digits: for ids a client must
/// not be able to guess (session ids, a gateway's `requestState`).
pub fn random_id() -> String {
    session_id::random()
}
pub(crate) use crate::core::{list_changed, resource_updated};

/// Which eras the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Eras {
    /// Both (default): `server/discover` and `initialize`.
    #[default]
    Both,
    /// 2026-07-28 only.
    Modern,
    /// `initialize` only (2024-11-05 … 2025-11-25).
    Legacy,
}

/// How HTTP answers are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// One `application/json` body (notifications made while a request runs are not sent).
    Json,
    /// A `text/event-stream`: notifications, then the answer (default).
    #[default]
    Sse,
}

/// How the protocol is served.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Which eras.
    pub eras: Eras,
    /// JSON or SSE answers over HTTP.
    pub framing: Framing,
    /// The endpoint path (default `/mcp`).
    pub path: String,
    /// Legacy sessions over HTTP (default on).
    pub sessions: bool,
    /// Check SEP-2243 headers (default on).
    pub validate_headers: bool,
    /// Set `TCP_NODELAY` on accepted connections (default on: an answer goes out as soon as
    /// it is written; off lets Nagle's algorithm hold small writes back).
    pub nodelay: bool,
    /// Also serve the 2024-11-05 HTTP+SSE transport: `GET {path}/sse` and
    /// `POST {path}/messages` (default off).
    pub sse: bool,
    /// Host names, beyond loopback ones, that a server listening on a loopback address accepts
    /// in `Host` and `Origin` (DNS-rebinding protection: a web page that resolves its own name
    /// to 127.0.0.1 sends that name, and is refused with 403).
    pub allowed_hosts: Vec<String>,
    /// Seal legacy `Mcp-Session-Id`s with these keys, so that every replica given the same
    /// keys accepts a session another one started (no shared store, no affinity at the
    /// balancer). Without keys, ids are random and known only to this process.
    pub session_keys: Option<SessionKeys>,
    /// What one client can hold or grow ([`Limits`]; defaults fit a public deployment).
    pub limits: Limits,
    /// Overlook the client quirks [`Repair`] names instead of refusing them (default off:
    /// strict, as the spec says). Each repair is reported to [`Service::repaired`] and logged
    /// once per caller and kind.
    pub era_repair: bool,
}

/// Bounds on everything a client can hold open or make the server keep: each is a default
/// fit for a server open to the internet, and each can be set. Together they bound what the
/// legacy sessions of every caller can make a server keep to about
/// `events_total + max_sessions × (max_declaration + 2 KiB)` (about 440 MiB with the defaults),
/// whatever the callers do.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Limits {
    /// The longest a client may take to send a request's head from its first byte (a client
    /// that trickles headers is cut off; a kept-alive connection waiting for its next request
    /// is the idle timeout's): 10 s.
    pub header_timeout: Duration,
    /// The longest a request's body may take to arrive (408 after it): 30 s.
    pub body_timeout: Duration,
    /// A connection with no request in flight and no bytes either way for this long is
    /// closed (an SSE stream sends a comment every 15 s, so one open stream keeps its
    /// connection): 120 s.
    pub idle_timeout: Duration,
    /// Connections served at once: past it, new ones wait in the listen backlog until one
    /// ends (a flood of idle sockets cannot exhaust the process's file descriptors): 4096.
    pub max_connections: usize,
    /// A legacy session with no request and no stream open for this long ends (404
    /// afterwards, as the transport says of an expired session): 30 min.
    pub session_idle: Duration,
    /// Live legacy sessions per caller (principal, or every unauthenticated client together):
    /// a new one past it ends that caller's longest-idle session: 64. As many 2024-11-05
    /// streams ([`Options::sse`]) per caller, past which a new one is refused (429).
    pub sessions_per_caller: usize,
    /// GET streams open at once per legacy session: a new one past it ends the session's
    /// oldest (the newest carries the session's messages, an older one only keep-alives, so
    /// one caller cannot hold connections with streams that never time out): 4.
    pub get_streams_per_session: usize,
    /// `subscriptions/listen` streams open at once per caller (principal, or every
    /// unauthenticated client together) over HTTP: past it, a new one is refused (429 with
    /// `Retry-After` and a JSON-RPC error) until one ends: 64.
    pub listens_per_caller: usize,
    /// Live legacy sessions in all: past it (once expired ones are gone) `initialize` is
    /// answered 503 with `Retry-After`: 10,000.
    pub max_sessions: usize,
    /// Bytes of events a legacy session keeps for resumption (`Last-Event-ID`): the oldest go
    /// first; an event larger than this is sent but not kept: 1 MiB.
    pub events_per_session: usize,
    /// Bytes of events every session together keeps for resumption: past it, an event is sent
    /// but not kept: 256 MiB.
    pub events_total: usize,
    /// The largest `capabilities` object (as JSON text) an `initialize` may declare; a larger
    /// one is refused (`-32602`): 16 KiB.
    pub max_declaration: usize,
    /// Requests in flight at once over stdio; the next line is read once one ends: 256.
    pub stdio_in_flight: usize,
    /// A quiet SSE stream (a GET stream, a listen stream, an answer still being worked on)
    /// gets a comment this often: proxies do not close it, and a 2026-07-28 call whose client
    /// went away is found out and dropped, which cancels it upstream: 15 s.
    pub sse_keep_alive: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            max_connections: 4096,
            session_idle: Duration::from_secs(30 * 60),
            sessions_per_caller: 64,
            get_streams_per_session: 4,
            listens_per_caller: 64,
            max_sessions: 10_000,
            events_per_session: 1024 * 1024,
            events_total: 256 * 1024 * 1024,
            max_declaration: 16 * 1024,
            stdio_in_flight: 256,
            sse_keep_alive: Duration::from_secs(15),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            eras: Eras::Both,
            framing: Framing::Sse,
            path: "/mcp".into(),
            sessions: true,
            validate_headers: true,
            nodelay: true,
            sse: false,
            allowed_hosts: Vec::new(),
            session_keys: None,
            limits: Limits::default(),
            era_repair: false,
        }
    }
}

/// A running HTTP server; stops when dropped.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    path: String,
    /// The Unix socket it listens on instead of TCP, removed when the server is dropped.
    unix_socket: Option<std::path::PathBuf>,
    task: Option<tokio::task::JoinHandle<()>>,
    drain: Arc<drain::Drain>,
}

/// How long a draining server's connections get to finish writing once nothing is in flight
/// (a legacy GET stream, which never ends by itself, is cut after it).
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

impl HttpServer {
    /// The address it listens on (`0.0.0.0:0` on a Unix socket).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint URL; on a Unix socket, `http://localhost` and the path (reach it with
    /// [`Self::unix_socket`]).
    pub fn url(&self) -> String {
        match self.unix_socket {
            Some(_) => format!("http://localhost{}", self.path),
            None => format!("http://{}{}", self.addr, self.path),
        }
    }

    /// The Unix socket it listens on, if it was started with [`serve_http_unix`].
    pub fn unix_socket(&self) -> Option<&std::path::Path> {
        self.unix_socket.as_deref()
    }

    /// Requests being answered now (over every connection and session).
    pub fn in_flight(&self) -> usize {
        self.drain.in_flight()
    }

    /// Stops gracefully. From now on a new request is refused with 503 and `Retry-After: 1`
    /// (a client retries it; behind a balancer, on another replica), while answers the server
    /// is waiting for (an elicitation's, a sampling's) and notifications (a cancellation) are
    /// still taken. The requests being answered go on until each is answered or `deadline`
    /// passes. Then every connection closes once the answer it is writing is written (a
    /// stream that does not end by itself, a legacy GET stream, is cut after
    /// [`CLOSE_GRACE`]) and the server stops. Says how many requests the deadline cut short.
    pub async fn drain(mut self, deadline: Duration) -> Drained {
        self.drain.begin();
        let drained = self.drain.settle(deadline).await;
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(CLOSE_GRACE * 2, task).await.is_err() {
                abort.abort();
            }
        }
        drained
    }

    /// Serves until the process ends.
    pub async fn wait(mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        if let Some(path) = &self.unix_socket {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Serves `service` over Streamable HTTP on `addr` (port 0 picks one) inside the current
/// tokio runtime.
pub async fn serve_http<S: Service + Edge>(
    addr: SocketAddr,
    options: Options,
    service: Arc<S>,
) -> std::io::Result<HttpServer> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    Ok(start(
        edge::Listener::Tcp(listener),
        addr,
        None,
        options,
        service,
    ))
}

/// Serves `service` over Streamable HTTP on the Unix domain socket at `socket` inside the
/// current tokio runtime. A socket file left by a server that is gone (nothing accepts on it)
/// is replaced; one a live server holds is `AddrInUse`. The file is removed when the server is
/// dropped.
#[cfg(unix)]
pub async fn serve_http_unix<S: Service + Edge>(
    socket: impl AsRef<std::path::Path>,
    options: Options,
    service: Arc<S>,
) -> std::io::Result<HttpServer> {
    let socket = socket.as_ref();
    let listener = match tokio::net::UnixListener::bind(socket) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            if tokio::net::UnixStream::connect(socket).await.is_ok() {
                return Err(e);
            }
            std::fs::remove_file(socket)?;
            tokio::net::UnixListener::bind(socket)?
        }
        other => other?,
    };
    let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
    Ok(start(
        edge::Listener::Unix(listener),
        unspecified,
        Some(socket.to_owned()),
        options,
        service,
    ))
}

fn start<S: Service + Edge>(
    listener: edge::Listener,
    addr: SocketAddr,
    unix_socket: Option<std::path::PathBuf>,
    options: Options,
    service: Arc<S>,
) -> HttpServer {
    let path = options.path.clone();
    let front = http::Front::new(Core::new(options, service), addr.ip().is_loopback());
    let drain = front.core.drain.clone();
    let task = tokio::spawn(front.run(listener));
    HttpServer {
        addr,
        path,
        unix_socket,
        task: Some(task),
        drain,
    }
}

/// Serves `service` on stdin/stdout until stdin ends.
pub async fn serve_stdio<S: Service>(options: Options, service: Arc<S>) -> std::io::Result<()> {
    serve_stdio_until(options, service, std::future::pending()).await
}

/// [`serve_stdio`] until stdin ends or `stop` resolves and drains. On `stop` a new request
/// is refused (`-32000`, the server is shutting down) while answers (to the server's own
/// requests: an elicitation a call in flight waits for) and notifications are still taken;
/// the requests being answered go on, and this returns once each has written its answer: a
/// process that exits then loses no answer it owed.
pub async fn serve_stdio_until<S: Service>(
    options: Options,
    service: Arc<S>,
    stop: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    stdio::serve(Core::new(options, service), stop).await
}

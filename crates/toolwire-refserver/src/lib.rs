//! Toolwire's reference MCP server: a real server on hyper (HTTP) and on stdin/stdout, in both
//! protocol eras, for the quickstart, the tests and the benchmarks (not published).
//!
//! - **Eras**: `server/discover` and the `_meta` envelope (2026-07-28), and `initialize` with
//!   sessions (2024-11-05 … 2025-11-25); [`Eras`] restricts it to one.
//! - **HTTP+SSE** (2024-11-05, with [`Options::sse`]): the stream at `{path}/sse` with its
//!   `endpoint` event, messages POSTed to `{path}/messages?session_id=…`.
//! - **HTTP**: JSON or SSE answers ([`Framing`]); legacy sessions (`Mcp-Session-Id`, 400 without,
//!   404 unknown, DELETE), the GET stream for list changes, SSE event ids with resumption
//!   (`Last-Event-ID` replays what a stream sent, or would have, after that event); modern
//!   listen streams; SEP-2243 headers validated with `toolwire-headers` exactly as the spec
//!   prescribes (HTTP 400 with `-32020` on a mismatch).
//! - **Tools**: `echo`, `add` (structured output), `execute_sql` (`x-mcp-header` Region), `deploy` (nested `x-mcp-header` arguments), `sample_content` (every content type),
//!   `fail` (`isError`), `protocol_error`, `slow` (progress), `log` (`notifications/message` at
//!   four levels, filtered by `logging/setLevel` or the request's `_meta` log level), `unlock_files` (registers
//!   `read_file` and `write_file` a moment after it answers and announces them),
//!   `ephemeral` (removes itself), `link_account` (needs a URL elicitation completed: `-32042`
//!   in the legacy era, an input request in 2026-07-28) and `finish_link` (completes it and
//!   says so with `notifications/elicitation/complete`), `show_clock` (an MCP Apps view,
//!   `ui://toolwire/clock.html`, with its CSP and permissions).
//! - **Resources, prompts, completions**: `toolwire://readme`, the template
//!   `toolwire://files/{path}` (the files `write_file` made), the prompt `greet` (`who`), and
//!   completions for both; not found is `-32602` (modern) or `-32002` (legacy).
//! - **Knobs** ([`Options`], [`Faults`]): latency, registration delay, 406 on a given `Accept`,
//!   429 with `Retry-After`, 503 n times, session expiry, SSE streams cut before their answer,
//!   Nagle on (for the stall benchmark), broken tool definitions in `tools/list`.
//!
//! # Dependencies
//! hyper + hyper-util (server), tokio, `http-body-util` (streamed bodies), `base64` (media
//! content), `ring` (the SHA-256 digests of the skill's manifest; the client's own choice, so
//! no second hash crate), `toolwire-headers` (the SEP-2243 check), `toolwire-types` (names and
//! codes).

mod core;
mod http;
mod sse;
mod stdio;
mod tasks;
mod tools;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::core::Core;

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
    /// One `application/json` body (progress notifications are not sent).
    Json,
    /// A `text/event-stream`: notifications, then the answer (default).
    #[default]
    Sse,
}

/// Faults to inject (all off by default).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Faults {
    /// Answer 406 to POSTs whose `Accept` is exactly this.
    pub reject_accept: Option<String>,
    /// Answer the first n POSTs 429 with `Retry-After: 1`.
    pub fail_429: u64,
    /// Answer the next n POSTs 503.
    pub fail_503: u64,
    /// Answer every n-th POST 503 (for load under faults).
    pub fail_503_every: Option<u64>,
    /// A legacy session expires (404) after this many requests.
    pub session_expiry: Option<u64>,
    /// Cut every n-th legacy SSE answer before its answer event (the client resumes it).
    pub cut_sse_every: Option<u64>,
    /// Leave Nagle's algorithm on (the stall benchmark).
    pub nagle: bool,
    /// Append two broken definitions to `tools/list`: one that does not decode as a tool
    /// (`inputSchema` missing) and one whose `x-mcp-header` breaks the rules. A client should
    /// reject both and keep the rest.
    pub broken_tools: bool,
    /// stdio: exit after answering this many `tools/call`s (a server that dies between calls).
    pub exit_after_calls: Option<u64>,
}

/// How the server behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Which eras.
    pub eras: Eras,
    /// JSON or SSE answers over HTTP.
    pub framing: Framing,
    /// The endpoint path (default `/mcp`).
    pub path: String,
    /// Added before every HTTP answer.
    pub latency: Duration,
    /// How long after `unlock_files`/`ephemeral` answer the tool list changes (default 200 ms).
    pub register_delay: Duration,
    /// Legacy sessions over HTTP (default on).
    pub sessions: bool,
    /// Check SEP-2243 headers (default on).
    pub validate_headers: bool,
    /// Injected faults.
    pub faults: Faults,
    /// Also serve the 2024-11-05 HTTP+SSE transport: `GET {path}/sse` and
    /// `POST {path}/messages` (default off).
    pub sse: bool,
    /// Also serve the tools the conformance suite's tasks scenarios call (`greet`,
    /// `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input`,
    /// `test_tool_with_task`; default off).
    pub task_fixtures: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            eras: Eras::Both,
            framing: Framing::Sse,
            path: "/mcp".into(),
            latency: Duration::ZERO,
            register_delay: Duration::from_millis(200),
            sessions: true,
            validate_headers: true,
            faults: Faults::default(),
            sse: false,
            task_fixtures: false,
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
    faults: Arc<AtomicU64>,
    tasks_cancelled: Arc<AtomicU64>,
}

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

    /// How many faults of [`Options::faults`] it has injected so far (every kind counts: an
    /// error status, a refused `Accept`, an expired session, a cut stream).
    pub fn faults_injected(&self) -> u64 {
        self.faults.load(Ordering::SeqCst)
    }

    /// How many `tasks/cancel` requests it has received.
    pub fn tasks_cancelled(&self) -> u64 {
        self.tasks_cancelled.load(Ordering::SeqCst)
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

/// [`serve_http`] on the `addr` of a server just stopped (dropped): its task lets go of the
/// port a moment later, so this tries for up to 5 s while the address is in use.
pub async fn serve_http_again(addr: SocketAddr, options: Options) -> std::io::Result<HttpServer> {
    let give_up = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match serve_http(addr, options.clone()).await {
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < give_up =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

/// Serves HTTP on `addr` (port 0 picks one) inside the current tokio runtime.
pub async fn serve_http(addr: SocketAddr, options: Options) -> std::io::Result<HttpServer> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    Ok(start(http::Listener::Tcp(listener), addr, None, options))
}

/// Serves HTTP on the Unix domain socket at `socket` inside the current tokio runtime. A
/// socket file left by a server that is gone (nothing accepts on it) is replaced; one a live
/// server holds is `AddrInUse`. The file is removed when the server is dropped.
#[cfg(unix)]
pub async fn serve_http_unix(
    socket: impl AsRef<std::path::Path>,
    options: Options,
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
        http::Listener::Unix(listener),
        unspecified,
        Some(socket.to_owned()),
        options,
    ))
}

fn start(
    listener: http::Listener,
    addr: SocketAddr,
    unix_socket: Option<std::path::PathBuf>,
    options: Options,
) -> HttpServer {
    let path = options.path.clone();
    let front = http::Front::new(Core::new(options));
    let faults = front.faults.clone();
    let tasks_cancelled = front.core.tasks.cancelled.clone();
    let task = tokio::spawn(front.run(listener));
    HttpServer {
        addr,
        path,
        unix_socket,
        task: Some(task),
        faults,
        tasks_cancelled,
    }
}

/// Serves on stdin/stdout until stdin ends.
pub async fn serve_stdio(options: Options) -> std::io::Result<()> {
    stdio::serve(Core::new(options)).await
}

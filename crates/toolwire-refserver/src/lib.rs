//! Toolwire's reference MCP server: a real server on hyper (HTTP) and on stdin/stdout, in both
//! protocol eras, for the quickstart, the tests and the benchmarks (not published).
//!
//! The protocol (both eras, Streamable HTTP with sessions and resumption, HTTP+SSE, stdio,
//! SEP-2243 header checks, fault knobs) is `toolwire-server`'s; this crate is what the server
//! offers:
//! - **Tools**: `echo`, `add` (structured output), `execute_sql` (`x-mcp-header` Region), `deploy` (nested `x-mcp-header` arguments), `sample_content` (every content type),
//!   `fail` (`isError`), `protocol_error`, `slow` (progress), `log` (`notifications/message` at
//!   four levels, filtered by `logging/setLevel` or the request's `_meta` log level), `unlock_files` (registers
//!   `read_file` and `write_file` a moment after it answers and announces them),
//!   `ephemeral` (removes itself), `redefine_echo` (changes `echo`'s description and announces
//!   it: a server changing a tool under its users), `link_account` (needs a URL elicitation completed: `-32042`
//!   in the legacy era, an input request in 2026-07-28) and `finish_link` (completes it and
//!   says so with `notifications/elicitation/complete`), `show_clock` (an MCP Apps view,
//!   `ui://toolwire/clock.html`, with its CSP and permissions), and with [`Options::tally`]
//!   `tally` (records each call's id in a file: which calls ran, none twice).
//! - **Resources, prompts, completions**: `toolwire://readme`, the template
//!   `toolwire://files/{path}` (the files `write_file` made, each linked from its result), the prompt `greet` (`who`), and
//!   completions for both; not found is `-32602` (modern) or `-32002` (legacy).
//! - **Knobs** ([`Options`]): the registration delay, broken tool definitions in `tools/list`,
//!   and the protocol's faults ([`Faults`], injected at the protocol layer's edge hooks:
//!   latency, 406 on a given `Accept`, 429 with `Retry-After`, 503 n times, session expiry,
//!   SSE streams cut before their answer, a stdio server exiting after n calls).
//!
//! # Dependencies
//! `toolwire-server` (the protocol: eras, HTTP, stdio, sessions, header checks; this crate is
//! its [`toolwire_server::Service`] and [`toolwire_server::Edge`]), `http` (the request heads
//! its faults look at; the protocol layer's own), tokio, `base64` (media content), `ring` (the SHA-256
//! digests of the skill's manifest; the client's own choice, so no second hash crate),
//! `toolwire-headers` (the tools' header plans), `toolwire-types` (names and codes).

mod core;
mod faults;
mod tasks;
mod tools;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use faults::Faults;
pub use toolwire_server::{Eras, Framing};

use crate::core::Core;

/// How the server behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// How the protocol is served: eras, framing, path, sessions, header checks.
    pub server: toolwire_server::Options,
    /// The faults it injects (none by default).
    pub faults: Faults,
    /// How long after `unlock_files`/`ephemeral` answer the tool list changes (default 200 ms).
    pub register_delay: Duration,
    /// Append two broken definitions to `tools/list`: one that does not decode as a tool
    /// (`inputSchema` missing) and one whose `x-mcp-header` breaks the rules. A client should
    /// reject both and keep the rest.
    pub broken_tools: bool,
    /// Also serve the tools the conformance suite's tasks scenarios call (`greet`,
    /// `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input`,
    /// `test_tool_with_task`; default off).
    pub task_fixtures: bool,
    /// Also serve this many synthetic tools (`synthetic_0000`, …), each with a description and
    /// a schema of the size real servers' tools have, answering with their arguments (for
    /// load and memory measurements; default 0).
    pub synthetic_tools: usize,
    /// Also serve `tally`, which appends each call's `id` to this file, one line each (for
    /// soaks that prove which calls ran and that none ran twice; default none).
    pub tally: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            server: toolwire_server::Options::default(),
            faults: Faults::default(),
            register_delay: Duration::from_millis(200),
            broken_tools: false,
            task_fixtures: false,
            synthetic_tools: 0,
            tally: None,
        }
    }
}

/// A running HTTP server; stops when dropped.
#[derive(Debug)]
pub struct HttpServer {
    server: toolwire_server::HttpServer,
    faults: Arc<AtomicU64>,
    tasks_cancelled: Arc<AtomicU64>,
    cancellations: Arc<AtomicU64>,
}

impl HttpServer {
    /// The address it listens on (`0.0.0.0:0` on a Unix socket).
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The endpoint URL; on a Unix socket, `http://localhost` and the path (reach it with
    /// [`Self::unix_socket`]).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The Unix socket it listens on, if it was started with [`serve_http_unix`].
    pub fn unix_socket(&self) -> Option<&std::path::Path> {
        self.server.unix_socket()
    }

    /// How many faults of [`Options::faults`] it has injected so far (every kind counts: an
    /// error status, a refused `Accept`, an expired session, a cut stream).
    pub fn faults_injected(&self) -> u64 {
        self.faults.load(Ordering::SeqCst)
    }

    /// Requests it is answering now.
    pub fn in_flight(&self) -> usize {
        self.server.in_flight()
    }

    /// How many `tasks/cancel` requests it has received.
    pub fn tasks_cancelled(&self) -> u64 {
        self.tasks_cancelled.load(Ordering::SeqCst)
    }

    /// How many `notifications/cancelled` it has received.
    pub fn cancellations(&self) -> u64 {
        self.cancellations.load(Ordering::SeqCst)
    }

    /// Serves until the process ends.
    pub async fn wait(self) {
        self.server.wait().await;
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
    let core = Core::new(options.clone());
    let (faults, tasks_cancelled, cancellations) = counters(&core);
    let server = toolwire_server::serve_http(addr, options.server, core).await?;
    Ok(HttpServer {
        server,
        faults,
        tasks_cancelled,
        cancellations,
    })
}

/// Serves HTTP on the Unix domain socket at `socket` inside the current tokio runtime. A
/// socket file left by a server that is gone (nothing accepts on it) is replaced; one a live
/// server holds is `AddrInUse`. The file is removed when the server is dropped.
#[cfg(unix)]
pub async fn serve_http_unix(
    socket: impl AsRef<std::path::Path>,
    options: Options,
) -> std::io::Result<HttpServer> {
    let core = Core::new(options.clone());
    let (faults, tasks_cancelled, cancellations) = counters(&core);
    let server = toolwire_server::serve_http_unix(socket, options.server, core).await?;
    Ok(HttpServer {
        server,
        faults,
        tasks_cancelled,
        cancellations,
    })
}

/// What a test reads of a running server: faults injected, `tasks/cancel`s and
/// cancellations received.
fn counters(core: &Core) -> (Arc<AtomicU64>, Arc<AtomicU64>, Arc<AtomicU64>) {
    (
        core.faults.injected.clone(),
        core.tasks.cancelled.clone(),
        core.cancellations.clone(),
    )
}

/// Serves on stdin/stdout until stdin ends (or, with [`Faults::exit_after_calls`], until
/// that many `tools/call`s are answered).
pub async fn serve_stdio(options: Options) -> std::io::Result<()> {
    let server = options.server.clone();
    let core = Core::new(options);
    let exit = core.clone();
    toolwire_server::serve_stdio_until(server, core, async move {
        exit.faults.exit.notified().await;
    })
    .await
}

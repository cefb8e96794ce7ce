//! How the Toolwire MCP client moves bytes: the [`Transport`] trait that every transport
//! implements (yours too), the errors a transport reports ([`TransportError`]), and the
//! read-ahead budget ([`ReadAhead`]) they share.
//!
//! A transport carries whole JSON-RPC messages as bytes. It does not decode them, does not
//! read the tool cache and makes no protocol decisions: the session above it serialises each
//! message once into an [`Outbound`] (with the HTTP headers it computed from the tool cache, in
//! their final form), and decodes each [`Inbound`]. Transports that are not HTTP ignore the
//! headers. Both types, and [`RequestFailure`], are `toolwire-wire`'s, re-exported here: the
//! session emits and takes exactly what a transport sends and reports.
//!
//! The transports themselves live in crates of their own: stdio in `toolwire-stdio`,
//! Streamable HTTP in `toolwire-http`.
//!
//! # Writing a transport
//!
//! ```
//! use std::sync::Mutex;
//! use std::collections::VecDeque;
//! use toolwire_transport::{BoxFuture, Inbound, Outbound, Transport, TransportError};
//!
//! /// A transport that answers every message with itself (for tests).
//! #[derive(Debug, Default)]
//! struct Loopback(Mutex<VecDeque<Inbound>>);
//!
//! impl Transport for Loopback {
//!     fn carries_headers(&self) -> bool {
//!         false
//!     }
//!     fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
//!         // A real transport would route on `message.kind` (request, notification, response).
//!         self.0.lock().unwrap().push_back(Inbound::new(message.body));
//!         Box::pin(async { Ok(()) })
//!     }
//!     fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
//!         let next = self.0.lock().unwrap().pop_front();
//!         Box::pin(async move { next.map(Ok) })
//!     }
//!     fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
//!         Box::pin(async { Ok(()) })
//!     }
//! }
//! ```
//!
//! # Dependencies
//! - `tokio` (sync only: a semaphore for [`ReadAhead`], a watch for [`Authorizing`]); no
//!   runtime, no I/O.
//! - `toolwire-wire`: the message types shared with the session.
//! - `bytes`: message bodies are serialised once and shared, never copied.

use std::future::Future;
use std::pin::Pin;

mod authorizing;
mod error;
mod read_ahead;

pub use authorizing::{Authorizing, AuthorizingGuard};
pub use error::{ExitDescription, TransportError};
pub use read_ahead::ReadAhead;
pub use toolwire_wire::{
    Backoff, Delays, Inbound, MessageKind, Outbound, RequestFailure, RequestId, RetryClass,
    SessionStep,
};

/// A boxed future, so that [`Transport`] can be used as `dyn Transport`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A way to exchange JSON-RPC messages with one MCP server.
///
/// Methods take `&self` so one driver can send and receive at once; implementations
/// synchronise inside. Every method must be cancel-safe in the sense that dropping its future
/// loses at most the message being sent.
///
/// A user keeps a `recv` pending whenever it waits for anything (the client's driver always
/// does): a transport may do the work of its requests inside `recv` rather than on tasks of
/// its own (the HTTP transport does, to save a task and a hop between tasks per call).
pub trait Transport: Send + Sync + 'static {
    /// Whether messages travel with HTTP headers. Only for such transports does the session
    /// build headers (`MCP-Protocol-Version`, the SEP-2243 ones) and warn about a `tools/call`
    /// that would silently lack `Mcp-Param-*` headers; over the others every
    /// [`Outbound::headers`] is empty.
    fn carries_headers(&self) -> bool;

    /// Sends one message.
    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>>;

    /// The next message from the server; `None` once the transport is closed and everything
    /// received has been handed out. An error is followed by more messages or by `None`;
    /// [`TransportError::Request`] fails one request and nothing else.
    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>>;

    /// The caller gave up on request `id`. A transport that holds a stream for it closes it
    /// (in the 2026-07-28 era over HTTP, closing the response stream *is* the cancellation);
    /// the default does nothing.
    fn cancel(&self, id: &RequestId) {
        let _ = id;
    }

    /// Which identity the transport presents to the server, as a count that changes whenever
    /// it does (a new bearer token set by hand, a new OAuth authorization). Answers a server did not mark
    /// `cacheScope: public` are kept within one authorization context: when this changes,
    /// the client drops them. Transports without credentials keep the default, 0.
    fn authorization_context(&self) -> u64 {
        0
    }

    /// The requests a peer that died never read (their bytes were still waiting for it): they
    /// never reached it, so they can go out again after a reconnect whatever they are. Known
    /// once the transport reported the death; empty by default (nothing is known).
    fn unread(&self) -> Vec<RequestId> {
        Vec::new()
    }

    /// The transport's count of credential repairs under way (a refusal being repaired: a
    /// refresh, or a person logging in): the time they take is not the server's, and the
    /// client, woken by each change, does not count it against the requests waiting on them.
    /// `None` (the default): the transport never repairs credentials.
    fn authorizing(&self) -> Option<Authorizing> {
        None
    }

    /// What the transport can say about a peer that has not answered, for the error that
    /// reports it: a child process says whether it still runs, whether it wrote anything to
    /// stdout, and its last stderr lines. `None` (the default) when there is nothing to add.
    fn peer_state(&self) -> Option<String> {
        None
    }

    /// The `Mcp-Session-Id` the server assigned (legacy Streamable HTTP), for display and
    /// debugging; `None` (the default) for transports without one. This is the transport's
    /// session identifier, not the client's MCP session, which every transport has.
    fn mcp_session_id(&self) -> Option<String> {
        None
    }

    /// Closes the transport gracefully (bounded in time).
    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>>;
}

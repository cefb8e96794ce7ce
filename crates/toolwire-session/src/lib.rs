//! The MCP client protocol as a deterministic, sans-IO state machine.
//!
//! A [`Session`] never touches a socket, a process or the clock: the caller feeds it bytes
//! ([`Session::handle_inbound`]) and the time ([`Session::handle_timeout`]), and drains what it
//! wants sent ([`Session::poll_transmit`]) and what happened ([`Session::poll_event`]), in the
//! style of `quinn-proto`. The async facade shuttles bytes, wakes timers and keeps what
//! outlives one session; what to send and when is decided here.
//!
//! What it does:
//! - era negotiation ([`ProtocolMode`]): `server/discover` first (modern, `2026-07-28`); a
//!   `-32022` answer is retried once with a version from `data.supported`; other modern errors
//!   (`-32020`, `-32021`) fail without fallback; any other error, or no answer within the probe
//!   timeout, falls back to `initialize` at the newest legacy version, then
//!   `notifications/initialized`. Pinned modes skip the probe or the fallback.
//! - request ids, the pending table and per-request deadlines; late responses are dropped.
//! - the modern `_meta` envelope on every request, and the headers every request carries over
//!   HTTP (`MCP-Protocol-Version`; `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*` from `2026-07-28`).
//! - `tools/list` walked page by page into the [`ToolCache`] as one listing (page cap, repeated
//!   cursors detected), invalid tools logged.
//! - `tools/call` with headers from the cached tool's plan or a per-call tool or header map,
//!   the retry class (safe only for read-only or idempotent tools, or on opt-in), and a
//!   `warn!` when a call over a header-carrying transport would silently lack its
//!   `Mcp-Param-*` headers (a proxy routing on them would otherwise misroute it).
//! - progress: a call that asks for it carries a progress token; `notifications/progress`
//!   reaches its operation ([`Event::Progress`]) and pushes its deadline forward, never past
//!   [`SessionConfig::max_request_time`].
//! - cancellation ([`Session::cancel`]): the operation completes as cancelled, a late answer
//!   is dropped, and `notifications/cancelled` goes out where the era and transport call for
//!   it (legacy, or modern over stdio); over modern HTTP the request id is returned so the
//!   transport can close its stream.
//! - server requests: `ping` answered; `sampling/createMessage`, `elicitation/create` and
//!   `roots/list` refused with `-32601` when the capability was not declared, else handed up
//!   ([`Event::ServerRequest`]) and answered with [`Session::respond`]; notifications handed
//!   up; `notifications/tools/list_changed` marks the cache stale.
//!
//! - the settle barrier: a `tools/call` result that announces tool changes is held until the
//!   cache shows them ([`SettleMode`]), and a call answered with a header mismatch (`-32020`)
//!   is reissued once after a re-list.
//! - MRTR retries: the caller sends a call again with the answers
//!   ([`Session::call_tool_with_input`]); the arguments stay shared, never copied.
//!
//! It emits [`Outbound`](toolwire_wire::Outbound) messages exactly as a transport sends them
//! (bytes, final HTTP headers, retry class, kind) and takes a transport's
//! [`RequestFailure`](toolwire_wire::RequestFailure) as it is: nothing converts between them.
//!
//! - the end of a connection or of a legacy session ([`Session::interrupt`]): each operation
//!   under way is sent again on the next session (a call safe to repeat by the rule the HTTP
//!   resend follows, or one the server never read; any request whose method is safe to
//!   repeat), listed again, or lost; a request that found the legacy session gone
//!   ([`RequestFailure::session_gone`](toolwire_wire::RequestFailure::session_gone)) counts as
//!   never read and says [`Event::SessionGone`]; the next session ([`Session::successor`])
//!   carries the subscriptions and the log level, and its ids go on from this one's.
//! - what is asked before the session is ready ([`Session::is_ready`]): held in order, each up
//!   to its caller's deadline, and sent once [`Event::Ready`] is said; what a spent session
//!   carries ([`Session::carry`]) or is asked goes to its successor under the same ids.
//!
//! It does not: do I/O, read the clock, or validate structured output (the facade does, where
//! the caller decodes the result).
//!
//! # Dependencies
//! - `toolwire-wire`, `bytes`: the message types shared with the transports.
//! - `tracing`: the warnings the spec asks a client to log (rejected tools, missing headers).
//! - `foldhash` (already under the tool cache): the maps of requests in flight, looked up on
//!   every answer; SipHash cost ~1 k instructions per call there.
//! - `web-time`: the `Instant` every deadline is kept in. It is `std::time::Instant` itself on
//!   native targets; on `wasm32-unknown-unknown`, where std's has no clock, the browser's
//!   (`performance.now()`), so a page can drive a session (`cargo xtask wasm` checks the core
//!   builds there).

mod config;
mod error;
mod event;
mod session;

pub use config::{CacheMode, CallOptions, InputResponses, ProtocolMode, SessionConfig, SettleMode};
pub use error::{RequestError, SessionError};
pub use event::{Event, Negotiated, OpId, TOOLS_STALE_META};
pub use session::{
    Again, CallRequest, Interrupted, Session, Succession, call_headers_at, tool_call_headers,
};

pub use toolwire_cache::ToolCache;

/// `now + d`, or a far future when that cannot be represented: a caller's
/// `Duration::MAX` timeout or a server's huge `ttlMs` means "never", not a panic.
pub fn later(now: web_time::Instant, d: std::time::Duration) -> web_time::Instant {
    /// About a century: further than any process lives.
    const FAR: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 24 * 3600);
    now.checked_add(d)
        .or_else(|| now.checked_add(FAR))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    #[test]
    fn later_saturates_instead_of_panicking() {
        let now = Instant::now();
        assert_eq!(
            super::later(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        assert!(super::later(now, Duration::MAX) > now + Duration::from_secs(365 * 24 * 3600));
        assert!(super::later(now, Duration::from_millis(u64::MAX)) > now);
    }
}

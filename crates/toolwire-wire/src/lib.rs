//! The types that cross the line between the sans-IO session and the transports, one type per
//! thing: [`Outbound`] (a message to send), [`Inbound`] (a message received) and
//! [`RequestFailure`] (a request that got no answer); and [`Backoff`], the one retry schedule
//! the session, the transports and the facade share. The session emits [`Outbound`] exactly as
//! a transport sends it, and takes a [`RequestFailure`] exactly as a transport reports it:
//! nothing converts between them, in the facade or anywhere else.
//!
//! Plain data: no I/O, no clock, no decisions. Headers are `http`'s types, built once by
//! `toolwire-headers` in the form hyper sends; transports that are not HTTP ignore them.
//!
//! # Dependencies
//! - `bytes`: a message body is serialised once and shared, never copied.
//! - `http`: header names and values in the form hyper takes them (plain data).
//! - `thiserror`: [`RequestFailure`]'s `Display` and `source`.
//! - `backon` (no runtime features): the exponential schedule with jitter behind [`Backoff`],
//!   the one every retry loop of Toolwire follows.

use std::sync::Arc;
use std::time::Duration;

use backon::BackoffBuilder;
use bytes::Bytes;

pub use toolwire_types::{MessageKind, RequestId};

/// Whether repeating a message is safe, as the session judged it. HTTP transports retry only
/// [`RetryClass::Safe`] messages; others ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryClass {
    /// Never resend: the server may already have acted on it.
    #[default]
    Never,
    /// Resending cannot do harm (`ping`, lists, reads, idempotent or read-only tools, or the
    /// caller opted in).
    Safe,
}

impl RetryClass {
    /// [`RetryClass::Safe`] when `safe`.
    pub fn from_safe(safe: bool) -> Self {
        if safe { Self::Safe } else { Self::Never }
    }
}

/// What a message does to a legacy HTTP session (`Mcp-Session-Id`), as the session knows it:
/// a transport that keeps such a session follows this, never the message's method. Others
/// ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionStep {
    /// Nothing: it goes within the session as it stands.
    #[default]
    Within,
    /// It opens a new session (`initialize`): it goes without a session id, and the id its
    /// answer carries is the session's from then on.
    Opens,
    /// The handshake is over (`notifications/initialized`): the server's own stream (HTTP:
    /// the GET) belongs to the session from now on.
    Opened,
}

/// One message to send: the JSON-RPC bytes, serialised once, and what travels with them.
#[derive(Debug, Clone)]
pub struct Outbound {
    /// One compact JSON-RPC message (no embedded newline).
    pub body: Bytes,
    /// HTTP headers for this message (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`,
    /// `Mcp-Param-*`), in their final form; empty over a transport that carries none.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Whether it may be resent.
    pub retry: RetryClass,
    /// Request (with its id and method), notification or response, so that a transport routes
    /// it without decoding it.
    pub kind: MessageKind,
    /// What it does to a legacy session.
    pub session: SessionStep,
}

impl Outbound {
    /// A message of `kind` with no headers that must not be resent.
    pub fn new(body: impl Into<Bytes>, kind: MessageKind) -> Self {
        Self {
            body: body.into(),
            headers: Vec::new(),
            retry: RetryClass::Never,
            kind,
            session: SessionStep::Within,
        }
    }
}

/// One message received: the JSON-RPC bytes, undecoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// One JSON-RPC message (or batch), as received.
    pub body: Bytes,
    /// The request whose response stream carried it, when the transport knows (Streamable
    /// HTTP: an SSE answer to a POST). A server sends its requests about a call there, so this
    /// says which call they belong to; `None` over stdio and the standalone GET stream.
    pub related: Option<RequestId>,
}

impl Inbound {
    /// Wraps received bytes.
    pub fn new(body: impl Into<Bytes>) -> Self {
        Self {
            body: body.into(),
            related: None,
        }
    }

    /// Wraps bytes that came on the response stream of request `id`.
    pub fn on_stream_of(body: impl Into<Bytes>, id: RequestId) -> Self {
        Self {
            body: body.into(),
            related: Some(id),
        }
    }
}

/// One request that got no JSON-RPC answer through the transport: an HTTP error status (with
/// whatever body came with it, which may hold a JSON-RPC error), a connection that failed, a
/// response stream that broke. The transport reports it; the session decides what it means.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", match status {
    Some(status) => format!("request {id} failed with HTTP {status}"),
    None => format!("request {id} got no answer"),
})]
pub struct RequestFailure {
    /// The request.
    pub id: RequestId,
    /// The HTTP status, when the server answered with one.
    pub status: Option<u16>,
    /// The body that came with an error status; empty if none.
    pub body: Bytes,
    /// What went wrong, as the transport saw it (for HTTP, a `toolwire_http::HttpError`).
    #[source]
    pub cause: Arc<dyn std::error::Error + Send + Sync>,
    /// The server no longer knows the legacy session the request named (HTTP: a 404 to a
    /// request that carried `Mcp-Session-Id`, or a request held back because such a 404, or a
    /// new identity, already ended it). The server never processed the request: the session
    /// opens a new one and sends it again.
    pub session_gone: bool,
}

/// How a retry loop waits between attempts: from `min` doubling up to `max`, with jitter (a
/// random part up to the delay itself, so that many clients do not retry in step) or without
/// (the same delays every time, as a sans-IO machine on a fake clock needs), for at most
/// `attempts` attempts (`None`: no limit). The one schedule of HTTP resends, the legacy GET
/// stream, reconnects and the listen stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay.
    pub min: Duration,
    /// The longest delay.
    pub max: Duration,
    /// How many delays there are at most.
    pub attempts: Option<u32>,
    /// Whether a random part is added.
    pub jitter: bool,
}

impl Backoff {
    /// The delays of one run of attempts, from the first.
    pub fn delays(&self) -> Delays {
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(self.min)
            .with_max_delay(self.max);
        let builder = match self.attempts {
            Some(n) => builder.with_max_times(usize::try_from(n).unwrap_or(usize::MAX)),
            None => builder.without_max_times(),
        };
        let builder = if self.jitter {
            builder.with_jitter()
        } else {
            builder
        };
        Delays {
            inner: builder.build(),
            attempt: 0,
        }
    }
}

/// One run of [`Backoff`] delays, counted: `None` once its attempts ran out.
#[derive(Debug)]
pub struct Delays {
    inner: backon::ExponentialBackoff,
    attempt: u32,
}

impl Delays {
    /// How many delays were handed out (the attempt the last one waited for).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.inner.next()?;
        self.attempt += 1;
        Some(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_prints_its_own_level_and_keeps_the_cause_as_source() {
        let failure = RequestFailure {
            id: RequestId::Number(7),
            status: Some(503),
            body: Bytes::new(),
            cause: Arc::new(std::io::Error::other("connection reset")),
            session_gone: false,
        };
        assert_eq!(failure.to_string(), "request 7 failed with HTTP 503");
        let source = std::error::Error::source(&failure).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("connection reset"));
        let no_status = RequestFailure {
            status: None,
            ..failure
        };
        assert_eq!(no_status.to_string(), "request 7 got no answer");
    }

    #[test]
    fn a_backoff_doubles_from_min_to_max_and_ends_after_its_attempts() {
        let plain = Backoff {
            min: Duration::from_secs(1),
            max: Duration::from_secs(30),
            attempts: Some(7),
            jitter: false,
        };
        let delays: Vec<u64> = plain.delays().map(|d| d.as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        let mut endless = Backoff {
            attempts: None,
            ..plain
        }
        .delays();
        assert_eq!(endless.nth(99), Some(Duration::from_secs(30)));
        assert_eq!(endless.attempt(), 100);
        let jittered = Backoff {
            jitter: true,
            ..plain
        };
        for (delay, base) in jittered.delays().zip(plain.delays()) {
            assert!(delay >= base && delay <= base * 2, "{delay:?} for {base:?}");
        }
    }

    #[test]
    fn retry_class_from_the_sessions_judgement() {
        assert_eq!(RetryClass::from_safe(true), RetryClass::Safe);
        assert_eq!(RetryClass::from_safe(false), RetryClass::Never);
    }
}

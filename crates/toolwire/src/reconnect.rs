//! Connections that heal: the [`ReconnectPolicy`] a client is given and the
//! [`ConnectionState`] it shows (what follows a death, and the delays between attempts, are
//! `recovery.rs`'s).

use std::sync::Arc;
use std::time::Duration;

use toolwire_session::Negotiated;

use crate::Error;

/// When a connection dies (the child process exited, the transport failed, the server closed
/// it), start a new one through the client's connector, with exponential backoff and jitter
/// between attempts; off by default ([`crate::ClientBuilder::reconnect`]).
///
/// On a new connection the era is negotiated again, the tools are listed again if they were
/// listed before (known tools stay throughout) and the `2026-07-28` listen stream reopens.
/// Calls in flight when it died fail with [`ConnectionError::Lost`](crate::ConnectionError::Lost) saying whether they may
/// have run, except those safe to repeat (see [`crate::CallOptions::retry_safe`]) and tool
/// listings, which are sent again on the new connection; calls made meanwhile wait for it up
/// to their deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReconnectPolicy {
    /// Attempts in a row before giving up (default 8); after that the state is
    /// [`ConnectionState::Failed`] and the next call starts over with one fresh attempt.
    pub max_attempts: u32,
    /// The delay before the first attempt (default 250 ms); it doubles with each failed one,
    /// with jitter.
    pub min_delay: Duration,
    /// The longest delay between attempts before jitter, which adds up to as much again
    /// (default 30 s).
    pub max_delay: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            min_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl ReconnectPolicy {
    /// Up to `max_attempts` in a row, waiting from `min_delay` up to `max_delay` between them.
    pub fn new(max_attempts: u32, min_delay: Duration, max_delay: Duration) -> Self {
        Self {
            max_attempts,
            min_delay,
            max_delay,
        }
    }
}

/// Where a client's connection is; [`crate::Client::connection_state`] reads it and
/// [`crate::Client::watch_connection`] follows it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConnectionState {
    /// No connection is in use: before the first call, or after
    /// [`crate::Client::disconnect`]. The next call connects.
    Idle,
    /// Negotiating a connection.
    Connecting,
    /// Negotiated (what was agreed); calls go out at once.
    Ready(Arc<Negotiated>),
    /// The connection died; attempt `attempt` of the [`ReconnectPolicy`] is under way or
    /// waiting for its delay. Calls wait.
    Reconnecting {
        /// 1 for the first attempt after the death.
        attempt: u32,
    },
    /// The connection ended and will not come back by itself: no reconnect policy, the
    /// attempts ran out, or negotiation was refused. With a policy (or after
    /// [`crate::Client::disconnect`]) the next call tries again.
    Failed {
        /// Why.
        reason: Error,
    },
    /// [`crate::Client::close`] ended the client.
    Closed,
}

impl ConnectionState {
    /// Whether calls go out at once.
    pub fn is_ready(&self) -> bool {
        matches!(self, Self::Ready(_))
    }
}

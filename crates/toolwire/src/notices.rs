//! What a server says besides answers: every notification it sends (log messages, resource
//! updates, list changes, `elicitation/complete`, task status, and any other verbatim), as a
//! bounded stream per subscriber ([`crate::Client::notifications`]).

use std::sync::Arc;

use serde_json::value::RawValue;
use tokio::sync::broadcast;
use toolwire_types::ServerNotification;

/// One notification from the server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Notice {
    /// Decoded; a method this client does not know, or params that do not decode, is
    /// [`ServerNotification::Other`] (the params are still in [`Notice::params`]).
    pub notification: ServerNotification,
    /// The method, as received.
    pub method: String,
    /// The params, as received.
    pub params: Option<Box<RawValue>>,
}

impl Notice {
    pub(crate) fn new(raw: toolwire_types::Notification) -> Self {
        let notification = ServerNotification::decode(&raw.method, raw.params.as_deref())
            .unwrap_or_else(|e| {
                tracing::debug!(method = %raw.method, error = %e, "a notification whose params do not decode");
                ServerNotification::Other {
                    method: raw.method.clone(),
                }
            });
        Self {
            notification,
            method: raw.method,
            params: raw.params,
        }
    }
}

/// A subscriber's stream of notifications. Bounded: a subscriber that falls more than the
/// buffer behind (see [`crate::ClientBuilder::notification_buffer`]) loses the oldest, counted
/// in [`Notifications::lost`] and logged as a warning; the connection never waits for it.
#[derive(Debug)]
pub struct Notifications {
    rx: broadcast::Receiver<Arc<Notice>>,
    lost: u64,
}

impl Notifications {
    pub(crate) fn new(rx: broadcast::Receiver<Arc<Notice>>) -> Self {
        Self { rx, lost: 0 }
    }

    /// The next notification; `None` once the client is gone.
    pub async fn recv(&mut self) -> Option<Arc<Notice>> {
        loop {
            match self.rx.recv().await {
                Ok(notice) => return Some(notice),
                Err(broadcast::error::RecvError::Lagged(n)) => self.lagged(n),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next notification if one is waiting, without waiting.
    pub fn try_recv(&mut self) -> Option<Arc<Notice>> {
        loop {
            match self.rx.try_recv() {
                Ok(notice) => return Some(notice),
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.lagged(n),
                Err(_) => return None,
            }
        }
    }

    /// How many notifications this subscriber lost by falling behind.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    fn lagged(&mut self, n: u64) {
        self.lost += n;
        tracing::warn!(
            lost = n,
            total = self.lost,
            "a slow consumer of notifications fell behind and lost the oldest"
        );
    }
}

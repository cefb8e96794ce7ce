//! What every driver of a client shares: the session's terms (the client-wide legacy pin
//! among them), the connector, and the one place each driver publishes what the client reads
//! (the connection's state, the transport in use, whether it listens), heard only from the
//! client's current driver.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::{broadcast, watch};
use toolwire_cache::{Commit, ToolCache};
use toolwire_session::{ProtocolMode, Session, SessionConfig};
use toolwire_transport::Transport;
use toolwire_types::{Notification, ProtocolVersion};

use crate::Connector;
use crate::reconnect::{ConnectionState, ReconnectPolicy};
use crate::recovery::Recovery;

/// What every driver of a client shares: how it makes its sessions and, with a connector,
/// new transports, and where it publishes what the client reads.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) session: SessionConfig,
    pub(crate) cache: Arc<ToolCache>,
    /// Absent: a transport given once; when it dies, the driver ends.
    pub(crate) connector: Option<Connector>,
    /// Absent: no reconnecting after a death (the legacy fallback still restarts once).
    pub(crate) reconnect: Option<ReconnectPolicy>,
    /// Set once a server died during the probe: later sessions go straight to `initialize`.
    pub(crate) legacy_only: Arc<AtomicBool>,
    /// Where the connection's state is published (shared by every driver of a client), and
    /// which driver may publish there and in `transport` and `listening` ([`Link::if_current`]).
    pub(crate) connection: watch::Sender<ConnectionState>,
    pub(crate) current: Arc<AtomicU64>,
    /// The transport in use (shared by every driver of a client), for what the client asks
    /// of it directly ([`crate::Client::mcp_session_id`]).
    pub(crate) transport: watch::Sender<Option<Arc<dyn Transport>>>,
    /// Where the server's notifications go (shared by every driver of a client).
    pub(crate) notices: broadcast::Sender<Arc<crate::Notice>>,
    /// Every change of the tool cache made through the client or its drivers.
    pub(crate) changes: broadcast::Sender<Commit>,
    /// Whether the server's announcements can reach the client now
    /// ([`toolwire_session::Session::is_listening`]; shared by every driver of a client).
    pub(crate) listening: watch::Sender<bool>,
}

impl Link {
    /// A client's link, before any connection.
    pub(crate) fn new(
        session: SessionConfig,
        cache: Arc<ToolCache>,
        connector: Option<Connector>,
        reconnect: Option<ReconnectPolicy>,
        notification_buffer: usize,
    ) -> Self {
        Self {
            session,
            cache,
            connector,
            reconnect,
            legacy_only: Arc::default(),
            connection: watch::channel(ConnectionState::Idle).0,
            current: Arc::default(),
            transport: watch::channel(None).0,
            notices: broadcast::channel(notification_buffer).0,
            changes: broadcast::channel(64).0,
            listening: watch::channel(false).0,
        }
    }

    /// The configuration of a new session (pinned to the legacy era once a server died
    /// during the probe).
    pub(crate) fn config(&self) -> SessionConfig {
        let config = self.session.clone();
        if self.legacy_only.load(Ordering::SeqCst) {
            return config.with_mode(ProtocolMode::Pinned(ProtocolVersion::LATEST_LEGACY));
        }
        config
    }

    /// The first session over a transport.
    pub(crate) fn session(&self, carries_headers: bool) -> Session {
        Session::new(self.config(), self.cache.clone(), carries_headers)
    }

    /// What a new driver does when its transport dies: the client's policy, with its
    /// connector, and the client-wide legacy pin.
    pub(crate) fn recovery(&self) -> Recovery {
        Recovery::new(
            self.reconnect.clone(),
            self.connector.is_some(),
            self.legacy_only.clone(),
        )
    }

    /// The driver that publishes now (a new driver is the current one from its start).
    pub(crate) fn epoch(&self) -> u64 {
        self.current.load(Ordering::SeqCst)
    }

    /// The client moves on to another driver (a new connection, a disconnect): the one
    /// before is no longer heard. Under the state's lock, like every publication.
    pub(crate) fn move_on(&self) {
        self.connection.send_if_modified(|_| {
            self.current.fetch_add(1, Ordering::SeqCst);
            false
        });
    }

    /// Runs `update` on the connection's state while driver `epoch` is the client's current
    /// one, under the state's lock, which the client holds as it moves on: nothing a driver
    /// left behind publishes lands after that. `update` says whether the state changed.
    fn if_current(&self, epoch: u64, update: impl FnOnce(&mut ConnectionState) -> bool) {
        self.connection.send_if_modified(|state| {
            self.current.load(Ordering::SeqCst) == epoch && update(state)
        });
    }

    /// Publishes the connection's state from driver `epoch`.
    pub(crate) fn publish(&self, epoch: u64, state: ConnectionState) {
        self.if_current(epoch, |now| {
            *now = state;
            true
        });
    }

    /// Publishes whether the server's announcements can reach the client, from driver `epoch`.
    pub(crate) fn publish_listening(&self, epoch: u64, listening: bool) {
        if *self.listening.borrow() != listening {
            self.if_current(epoch, |_| {
                self.listening.send_replace(listening);
                false
            });
        }
    }

    /// A notification for whoever listens ([`crate::Client::notifications`]), from any driver.
    pub(crate) fn notice(&self, n: Notification) {
        tracing::debug!(method = %n.method, "notification");
        // Decoded only for someone who listens.
        if self.notices.receiver_count() > 0 {
            let _ = self.notices.send(Arc::new(crate::Notice::new(n)));
        }
    }

    /// Tells subscribers of a commit that changed something.
    pub(crate) fn announce(&self, commit: &Commit) {
        if !commit.diff.is_empty() {
            // No subscriber is not an error.
            let _ = self.changes.send(commit.clone());
        }
    }

    /// Publishes the transport in use, from driver `epoch`.
    pub(crate) fn publish_transport(&self, epoch: u64, transport: Arc<dyn Transport>) {
        self.if_current(epoch, |_| {
            self.transport.send_replace(Some(transport));
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolwire_types::Implementation;

    use super::*;
    use crate::test_peer::Peer;

    /// A driver the client has left behind (a disconnect, a new connection) may still run for a
    /// moment, even reconnect: none of what it publishes reaches the client, neither the state,
    /// nor whether it listens, nor its transport; the current driver's does.
    #[tokio::test]
    async fn a_driver_the_client_left_behind_publishes_nothing() {
        let link = Link::new(
            SessionConfig::new(Implementation::new("left-behind", "0")),
            Arc::new(ToolCache::new(toolwire_cache::CacheConfig::default())),
            None,
            None,
            1,
        );
        let left_behind = link.epoch();
        link.move_on();
        let current = link.epoch();
        assert_ne!(left_behind, current);

        let (peer, _) = Peer::new(|_, _| json!({}));
        let transport: Arc<dyn Transport> = Arc::new(peer);
        link.publish(left_behind, ConnectionState::Connecting);
        link.publish_listening(left_behind, true);
        link.publish_transport(left_behind, transport.clone());
        assert!(matches!(*link.connection.borrow(), ConnectionState::Idle));
        assert!(!*link.listening.borrow());
        assert!(link.transport.borrow().is_none());

        link.publish(current, ConnectionState::Connecting);
        link.publish_listening(current, true);
        link.publish_transport(current, transport);
        assert!(matches!(
            *link.connection.borrow(),
            ConnectionState::Connecting
        ));
        assert!(*link.listening.borrow());
        assert!(link.transport.borrow().is_some());
    }
}

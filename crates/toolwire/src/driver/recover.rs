//! When the transport dies: what it still holds is read, what was in flight the session
//! carries to the next or fails, and the next session is started over a new transport after
//! the policy's backoff.

use super::*;

impl Driver {
    /// The transport died: what was in flight is held for the next connection or failed,
    /// and the next connection is due, as [`Recovery`] decides; the error that ends the
    /// driver instead.
    pub(super) async fn recover(&mut self) -> Result<(), Error> {
        self.drain().await;
        if let Err(e) = self.transport.close().await {
            tracing::debug!(error = %e, "closing the dead transport");
        }
        let after = self
            .recovery
            .died(self.session.falls_back_on_death(), Instant::now());
        self.interrupt(after.holds());
        match after {
            AfterDeath::Fallback { .. } => {
                tracing::info!(
                    "the server ended during the server/discover probe; starting it again with initialize"
                );
                self.publish(ConnectionState::Connecting);
                Ok(())
            }
            AfterDeath::EndedBeforeHandshake => {
                // The server's own last words say why, when it has them.
                let peer = self.transport.peer_state();
                let cause = self.last_transport_error.clone().filter(|_| peer.is_none());
                let ended = crate::ConnectionError::EndedBeforeHandshake { peer, cause };
                Err(self.end_with(ended.into()))
            }
            AfterDeath::Reconnect { attempt } => {
                tracing::warn!(cause = %self.cause(), "the connection to the MCP server died; reconnecting");
                self.reconnecting(attempt);
                Ok(())
            }
            AfterDeath::GiveUp => {
                tracing::warn!(cause = %self.cause(), "the connection to the MCP server ended");
                Err(self.give_up())
            }
        }
    }

    /// What the transport last said went wrong.
    fn cause(&self) -> String {
        self.last_transport_error
            .as_ref()
            .map_or_else(|| "the transport closed".to_owned(), ToString::to_string)
    }

    /// Attempt `attempt` waits for its delay (meanwhile the spent session holds what is asked).
    fn reconnecting(&self, attempt: u32) {
        self.publish(ConnectionState::Reconnecting { attempt });
        tracing::info!(attempt, "reconnecting to the MCP server");
    }

    /// The next connection is due: a new transport from the connector, and the session's
    /// successor over it; when the connector fails, the next attempt after the backoff.
    pub(super) fn reconnect(&mut self) -> Result<(), Error> {
        let Some(connector) = self.link.connector.clone() else {
            return Err(self.give_up());
        };
        match connector() {
            Ok(transport) => {
                self.identity = transport.authorization_context();
                self.authorizing = transport.authorizing().map(|a| a.subscribe());
                self.link.publish_transport(self.epoch, transport.clone());
                self.transport = transport;
                self.last_transport_error = None;
                self.next_session(Succession::Reconnect);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not start a new connection");
                self.last_transport_error = Some(Arc::new(e));
                match self.recovery.connect_failed(Instant::now()) {
                    Some(attempt) => {
                        self.reconnecting(attempt);
                        Ok(())
                    }
                    None => {
                        tracing::warn!(cause = %self.cause(), "giving up reconnecting to the MCP server");
                        Err(self.give_up())
                    }
                }
            }
        }
    }

    /// The server no longer knows the legacy session: what was under way is sent again or
    /// failed as the session decides (the requests that found the session gone were never
    /// processed), and a new session opens over the same transport.
    pub(super) fn renew_session(&mut self) {
        tracing::warn!("the MCP server no longer knows the session; opening a new one");
        self.interrupt(true);
        self.next_session(Succession::SessionGone);
    }

    /// Starts the session that follows the current one over `self.transport`, on the terms
    /// the session sets for `why` ([`Session::successor`]).
    fn next_session(&mut self, why: Succession) {
        self.refused = None;
        self.session =
            self.session
                .successor(why, self.link.config(), self.transport.carries_headers());
        self.publish(ConnectionState::Connecting);
        self.session.start(Instant::now());
    }

    /// Reads what a dead transport still holds (briefly): answers that arrived before the
    /// death reach their callers, and a failed send learns why the peer went away (a stdio
    /// child's exit status says more than a broken pipe).
    pub(super) async fn drain(&mut self) {
        let transport = self.transport.clone();
        let drain = async {
            while let Some(item) = transport.recv().await {
                self.receive(item);
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(3), drain).await;
        self.handle_events();
    }

    /// The connection is over for good: says so and fails everything still waiting as never
    /// sent; the error that ends the driver.
    pub(super) fn give_up(&mut self) -> Error {
        let error = self.lost(false);
        self.end_with(error)
    }

    /// The connection is over for good, for `error`: the state says so (before anyone
    /// waiting hears it, so that a caller who calls again finds it over), then everything
    /// still waiting fails with it.
    pub(super) fn end_with(&mut self, error: Error) -> Error {
        self.publish(ConnectionState::Failed {
            reason: error.clone(),
        });
        self.waiters.fail_all(&error);
        error
    }

    /// The operations under way on a dead connection, as the session decides
    /// ([`Session::lose_connection`]): when `reconnecting`, what may go again the session
    /// holds for the next one; every other one fails, saying whether it may have run.
    pub(super) fn interrupt(&mut self, reconnecting: bool) {
        let unread = self.transport.unread();
        self.session
            .lose_connection(&unread, reconnecting, Instant::now());
        self.handle_events();
    }
}

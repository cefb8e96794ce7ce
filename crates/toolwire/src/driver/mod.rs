//! The driver: the task that owns one connection's sans-IO [`Session`] and its transport.
//!
//! Callers send it [`Command`]s over a channel and wait on a oneshot each; it issues them on
//! the session at once (the session holds what comes before it is ready), sends what the
//! session emits exactly as emitted, feeds what the transport receives back in, fires the
//! session's timer, and hands each finished operation to its waiter. The loop: drain events →
//! flush messages → `select!` over commands, `transport.recv()` and one timer (the session's
//! next deadline, or the next reconnect).
//!
//! When the transport dies, [`Recovery`] decides what follows (`recover.rs`); a legacy session
//! the server no longer knows ([`Event::SessionGone`]) is followed by a new one over the same
//! transport, on the same terms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use tokio::sync::{mpsc, watch};
use toolwire_session::{Event, OpId, RequestError, Session, Succession};
use toolwire_transport::{Inbound, Transport, TransportError};
use toolwire_types::{RequestId, ServerRequest};

use crate::command::Command;
use crate::link::Link;
use crate::reconnect::ConnectionState;
use crate::recovery::{AfterDeath, Recovery};
use crate::waiters::Waiters;
use crate::{Error, ServerRequestHandler};

mod events;
mod issue;
mod recover;
#[cfg(test)]
mod tests;

/// The task that owns the session and the transport.
pub(crate) struct Driver {
    session: Session,
    transport: Arc<dyn Transport>,
    /// Which of the client's drivers this is: it publishes the connection's state only while
    /// the client has not moved on to another (`Link::current`).
    epoch: u64,
    /// Every operation someone waits for.
    waiters: Waiters,
    handler: Option<ServerRequestHandler>,
    /// To post handler answers back to this driver without keeping the channel open.
    own_commands: mpsc::WeakUnboundedSender<Command>,
    /// The transport's count of credential repairs under way (woken by its changes).
    authorizing: Option<watch::Receiver<u32>>,
    last_transport_error: Option<Arc<TransportError>>,
    link: Link,
    /// What follows a death: the fallback, the end, or the next connection and when.
    recovery: Recovery,
    /// The transport's authorization context as last seen.
    identity: u64,
    /// The server no longer knows the legacy session: open a new one over the transport.
    renew: bool,
    /// Negotiation failed on this connection: the loop ends with it.
    refused: Option<Error>,
}

impl Driver {
    pub(crate) fn new(
        session: Session,
        transport: Arc<dyn Transport>,
        handler: Option<ServerRequestHandler>,
        own_commands: mpsc::WeakUnboundedSender<Command>,
        link: Link,
    ) -> Self {
        Self {
            session,
            epoch: link.epoch(),
            waiters: Waiters::default(),
            handler,
            own_commands,
            authorizing: transport.authorizing().map(|a| a.subscribe()),
            last_transport_error: None,
            recovery: link.recovery(),
            link,
            identity: transport.authorization_context(),
            transport,
            renew: false,
            refused: None,
        }
    }

    /// The transport now presents another identity (a new bearer token): the session drops
    /// what it kept for the one before. Checked before each command and each answer.
    fn note_identity(&mut self) {
        let identity = self.transport.authorization_context();
        if identity != self.identity {
            self.identity = identity;
            tracing::debug!("the authorization context changed: private cached answers dropped");
            self.session.authorization_changed();
        }
    }

    /// Feeds what the transport received to the session.
    fn receive(&mut self, item: Result<Inbound, TransportError>) {
        match item {
            Ok(message) => {
                self.note_identity();
                let related = message.related.as_ref();
                self.session
                    .handle_inbound_on(&message.body, related, Instant::now());
            }
            Err(TransportError::Request(failure)) => {
                tracing::debug!(id = %failure.id, error = %failure.cause, "request got no answer");
                self.session.handle_undelivered(failure, Instant::now());
            }
            Err(e) => {
                tracing::debug!(error = %e, "transport error");
                self.last_transport_error = Some(Arc::new(e));
            }
        }
    }

    /// Why the connection ended, for whoever still waits.
    fn lost(&self, may_have_run: bool) -> Error {
        Error::Connection(crate::ConnectionError::Lost {
            may_have_run,
            cause: self.last_transport_error.clone(),
        })
    }

    /// Sends everything the session queued; `false` if the transport failed.
    async fn flush(&mut self) -> bool {
        while let Some(message) = self.session.poll_transmit() {
            if let Err(e) = self.transport.send(message).await {
                // What follows (a reconnect, or the end) says it with this cause.
                tracing::debug!(error = %e, "sending failed");
                self.last_transport_error = Some(Arc::new(e));
                return false;
            }
        }
        true
    }

    pub(crate) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let error = self.pump(&mut commands).await;
        // Commands that arrived as it ended: nobody will issue them.
        commands.close();
        while let Ok(command) = commands.try_recv() {
            command.fail(error.clone());
        }
    }

    /// Runs the connection and those after it until the driver ends; the error whoever still
    /// waits gets.
    async fn pump(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) -> Error {
        // One timer for the session's deadlines and the next reconnect, moved when the next
        // one changes (not a new timer per turn of the loop).
        let mut timer = std::pin::pin!(tokio::time::sleep_until(tokio::time::Instant::now()));
        let mut armed: Option<Instant> = None;
        loop {
            self.handle_events();
            if let Some(error) = self.refused.take() {
                self.shutdown(error.clone()).await;
                return error;
            }
            if std::mem::take(&mut self.renew) {
                self.renew_session();
            }
            if !self.flush().await {
                if let Err(error) = self.recover().await {
                    return error;
                }
                continue;
            }
            self.handle_events();
            // Deadlines wait for an authorization, whose end wakes the loop.
            self.note_authorizing();
            let wake = self
                .session
                .poll_timeout()
                .into_iter()
                .chain(self.recovery.deadline())
                .min();
            if wake != armed {
                if let Some(at) = wake {
                    timer.as_mut().reset(at.into());
                }
                armed = wake;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    None | Some(Command::Close { .. }) => {
                        self.shutdown(Error::Closed).await;
                        // Whoever closed hears it once the transport is closed.
                        if let Some(close) = command {
                            close.fail(Error::Closed);
                        }
                        return Error::Closed;
                    }
                    // (The client said `Connecting` as it sent this.) The handshake carries
                    // the starting caller's context.
                    Some(Command::Start { trace }) => self.session.start_traced(trace, Instant::now()),
                    Some(command) => self.issue(command),
                },
                // A dead transport is not read while the next one waits.
                inbound = self.transport.recv(), if self.recovery.deadline().is_none() => match inbound {
                    Some(item) => self.receive(item),
                    None => {
                        if let Err(error) = self.recover().await {
                            return error;
                        }
                    }
                },
                // Noted at the top of the loop.
                () = repaired(&mut self.authorizing) => {}
                () = &mut timer, if armed.is_some() => {
                    // Re-armed next turn, for whatever deadline comes next.
                    armed = None;
                    let now = Instant::now();
                    if self.recovery.due(now)
                        && let Err(error) = self.reconnect()
                    {
                        return error;
                    }
                    self.note_authorizing();
                    self.session.handle_timeout(now);
                }
            }
        }
    }

    /// Follows the transport's authorizing: while a refusal is being repaired (a person may be
    /// logging in for minutes), the session's deadlines wait ([`Session::pause`]).
    fn note_authorizing(&mut self) {
        let authorizing = self
            .authorizing
            .as_mut()
            .is_some_and(|count| *count.borrow_and_update() > 0);
        self.session.pause(authorizing, Instant::now());
    }

    /// Ends the driver: everything waiting fails with `error`, the transport closes. (Whoever
    /// ended it says what the state is now: the client after a close, the driver itself
    /// after a failure.)
    async fn shutdown(&mut self, error: Error) {
        self.waiters.fail_all(&error);
        if let Err(e) = self.transport.close().await {
            tracing::debug!(error = %e, "closing the transport");
        }
    }

    /// Publishes the connection's state, while this driver is still the client's: one that
    /// the client left behind (a disconnect, a new connection) is no longer heard.
    fn publish(&self, state: ConnectionState) {
        self.link.publish(self.epoch, state);
    }
}

/// Waits until the transport's count of credential repairs changes (for ever when it has
/// none, or once the transport is gone).
async fn repaired(count: &mut Option<watch::Receiver<u32>>) {
    if let Some(count) = count
        && count.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

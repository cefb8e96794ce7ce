//! What the session says, dispatched: each finished operation to its waiter, server requests
//! to the handler on a task of their own, notifications to subscribers, progress to its
//! callback, the negotiation's state to whoever watches it.

use super::*;

impl Driver {
    /// Hands a server request the session let through to its handler, on a task of its own;
    /// its answer comes back as a `Respond` command. (The session refused the rest itself:
    /// unknown, undecodable, undeclared, past
    /// [`MAX_SERVER_REQUESTS`](crate::client::MAX_SERVER_REQUESTS), or with no client
    /// handler.) The handler is the call's own ([`crate::CallHooks::on_server_request`])
    /// when the session names the call it is about (`related`), else the client's.
    pub(super) fn serve(&mut self, id: RequestId, request: ServerRequest, related: Option<OpId>) {
        // A client without a handler never gets here: its session refuses every request
        // (`max_server_requests` 0, `Client::new`).
        let own = related.and_then(|op| self.waiters.hooks(op)?.requests.clone());
        let Some(handler) = own.or_else(|| self.handler.clone()) else {
            return;
        };
        let commands = self.own_commands.clone();
        tokio::spawn(async move {
            let result = handler(request).await;
            if let Some(commands) = commands.upgrade() {
                let _ = commands.send(Command::Respond { id, result });
            }
        });
    }

    /// Dispatches everything the session said, then publishes whether it listens.
    pub(super) fn handle_events(&mut self) {
        while let Some(event) = self.session.poll_event() {
            match event {
                Event::Ready(n) => {
                    self.recovery.ready();
                    tracing::debug!(version = %n.version, "connection ready");
                    // Legacy: the session reports ready once the level asked is in force.
                    self.publish(ConnectionState::Ready(Arc::new(*n)));
                }
                Event::Failed(e) => {
                    // The connection is over (with a policy, the next call makes a new one).
                    let error = Error::handshake(e, self.transport.peer_state());
                    self.refused = Some(self.end_with(error));
                }
                // A walk ends as `ToolsListed`, everything else as `Completed`.
                Event::Completed { op, result } => {
                    let result = result.map_err(|e| self.describe(e));
                    self.waiters.complete(op, result);
                }
                Event::ToolsListed { op, result } => {
                    if let Ok(outcome) = &result {
                        self.link.announce(&outcome.commit);
                    }
                    let result = result.map_err(|e| self.describe(e));
                    self.waiters.listed(op, result);
                }
                Event::ToolsRefreshed(Ok(outcome)) => {
                    let generation = outcome.commit.generation;
                    tracing::debug!(generation, "tool list refreshed");
                    self.link.announce(&outcome.commit);
                }
                Event::ToolsRefreshed(Err(e)) => {
                    tracing::debug!(error = %e, "tool list refresh failed");
                }
                Event::ServerRequest {
                    id,
                    request,
                    related,
                } => self.serve(id, request, related),
                Event::Progress { op, params } => {
                    if let Some(callback) = self.waiters.hooks(op).and_then(|h| h.progress.as_ref())
                    {
                        callback(&params);
                    }
                }
                Event::CallLog { op, notification } => {
                    match self.waiters.hooks(op).and_then(|h| h.log.as_ref()) {
                        Some(on_log) => on_log(&notification),
                        None => self.link.notice(notification),
                    }
                }
                Event::Notification(n) => self.link.notice(n),
                Event::Malformed(e) => {
                    tracing::warn!(error = %e, "malformed message from the server")
                }
                Event::CloseStream(id) => self.transport.cancel(&id),
                Event::SessionGone => self.renew = true,
                // The session holds what is asked until the probe's `Ready`.
                Event::Renegotiating => self.publish(ConnectionState::Connecting),
                _ => {}
            }
        }
        let listening = self.session.is_listening();
        self.link.publish_listening(self.epoch, listening);
    }

    /// A failed operation, for its caller. One the connection's death ended says the
    /// transport's cause; one held for a handshake that never finished says what the
    /// transport saw of the server instead (a child still installing itself, or waiting on
    /// the network).
    fn describe(&self, error: RequestError) -> Error {
        if let RequestError::Lost { may_have_run } = error {
            return self.lost(may_have_run);
        }
        if let RequestError::Unnegotiated(_) = error
            && !self.recovery.ever_ready()
            && let Some(peer) = self.transport.peer_state()
        {
            return Error::Connection(crate::ConnectionError::Unanswered {
                method: "the handshake",
                peer,
            });
        }
        Error::from(error)
    }
}

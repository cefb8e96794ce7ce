//! What the session says, dispatched: each finished operation to its waiter, server requests
//! to the handler on a task of their own, notifications to subscribers, progress to its
//! callback, the negotiation's state to whoever watches it.

use super::*;

impl Driver {
    /// Hands a server request the session let through to its handler, on a task of its own;
    /// its answer comes back as a `Respond` command. (The session refused the rest itself:
    /// unknown, undecodable, undeclared, past [`MAX_SERVER_REQUESTS`], or with no client
    /// handler.) The handler is the call's own ([`crate::CallHooks::on_server_request`])
    /// when the session names the call it is about (`related`), else the client's.
    pub(super) fn serve(&mut self, id: RequestId, request: ServerRequest, related: Option<OpId>) {
        let own = match related.and_then(|op| self.waiters.get(&op)) {
            Some(Waiter::Call {
                hooks:
                    CallHooks {
                        requests: Some(handler),
                        ..
                    },
                ..
            }) => Some(handler.clone()),
            _ => None,
        };
        // A client without a handler never gets here: its session refuses every request
        // (`max_server_requests` 0, `Client::new`).
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

    /// A notification for whoever listens ([`crate::Client::notifications`]).
    fn notice(&self, n: toolwire_types::Notification) {
        tracing::debug!(method = %n.method, "notification");
        // Decoded only for someone who listens.
        if self.link.notices.receiver_count() > 0 {
            let _ = self.link.notices.send(Arc::new(crate::Notice::new(n)));
        }
    }

    pub(super) fn handle_events(&mut self) {
        self.dispatch_events();
        self.link
            .publish_listening(self.epoch, self.session.is_listening());
    }

    fn dispatch_events(&mut self) {
        while let Some(event) = self.session.poll_event() {
            match event {
                Event::Ready(n) => {
                    self.recovery.ready();
                    tracing::debug!(version = %n.version, "connection ready");
                    // Legacy: the session reports ready once the level asked is in force.
                    self.publish(ConnectionState::Ready(Arc::new(*n)));
                }
                Event::Failed(e) => {
                    // A server that never answered: say what the transport saw of it (a
                    // child still running, silent on stdout, its last stderr lines).
                    let error = match (&e, self.transport.peer_state()) {
                        (SessionError::Timeout { method }, Some(peer)) => {
                            Error::Connection(crate::ConnectionError::Unanswered { method, peer })
                        }
                        _ => Error::negotiation(Arc::new(e)),
                    };
                    // The connection is over (with a policy, the next call makes a new one).
                    self.refused = Some(self.end_with(error));
                }
                // A walk ends as `ToolsListed`, everything else as `Completed`.
                Event::Completed { op, result } => {
                    if let Some(Waiter::Call { reply, .. } | Waiter::Request(reply)) =
                        self.waiters.remove(&op)
                    {
                        drop(reply.send(result.map_err(|e| self.describe(e))));
                    }
                }
                Event::ToolsListed { op, result } => {
                    if let Ok(outcome) = &result {
                        announce(&self.changes, &outcome.commit);
                    }
                    if let Some(Waiter::List(reply)) = self.waiters.remove(&op) {
                        drop(reply.send(result.map_err(|e| self.describe(e))));
                    }
                }
                Event::ToolsRefreshed(Ok(outcome)) => {
                    let generation = outcome.commit.generation;
                    tracing::debug!(generation, "tool list refreshed");
                    announce(&self.changes, &outcome.commit);
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
                    if let Some(Waiter::Call {
                        hooks:
                            CallHooks {
                                progress: Some(callback),
                                ..
                            },
                        ..
                    }) = self.waiters.get(&op)
                    {
                        callback(&params);
                    }
                }
                Event::CallLog { op, notification } => match self.waiters.get(&op) {
                    Some(Waiter::Call {
                        hooks:
                            CallHooks {
                                log: Some(on_log), ..
                            },
                        ..
                    }) => on_log(&notification),
                    _ => self.notice(notification),
                },
                Event::Notification(n) => self.notice(n),
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
    }

    /// A failed operation, for its caller. One the connection's death ended says the
    /// transport's cause; one held until a handshake that never came
    /// finished says what the transport saw of the server instead (a child still installing
    /// itself, or waiting on the network).
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

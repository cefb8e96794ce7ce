//! When the transport dies: what it still holds is read, what was in flight is queued
//! again or failed, and a new session is made over a new transport after the policy's
//! backoff.

use super::*;

/// What it takes to send a call again on a new connection (kept only for calls that are
/// safe to repeat, and only when the client reconnects).
pub(super) struct Replay {
    /// Safe to repeat (`retry_safe`, or read-only or idempotent hints).
    pub(super) safe: bool,
    pub(super) name: String,
    pub(super) arguments: Option<Arc<JsonObject>>,
    pub(super) options: Box<CallOptions>,
    pub(super) input: Option<Box<InputResponses>>,
    /// When the caller stops waiting, whichever connection it is on.
    pub(super) deadline: Instant,
}

impl Driver {
    /// Whether a call may be sent again on a new connection: the caller said so, or the tool
    /// (the call's own definition, else the cached one) is read-only or idempotent.
    pub(super) fn safe_to_repeat(&self, name: &str, options: &CallOptions) -> bool {
        options.retry_safe.unwrap_or_else(|| match &options.tool {
            Some(tool) => tool.is_safe_to_retry(),
            None => self
                .link
                .cache
                .load()
                .get(name)
                .is_some_and(|cached| Tool::is_safe_to_retry(cached.tool())),
        })
    }

    /// The transport died: what was in flight is sent again or failed, then a new connection
    /// is made (at once for the legacy fallback, else after the policy's backoff); the error
    /// that ends the driver instead.
    pub(super) async fn recover(
        &mut self,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<(), Error> {
        self.drain().await;
        let probing = self.session.is_probing();
        if let Err(e) = self.transport.close().await {
            tracing::debug!(error = %e, "closing the dead transport");
        }
        let cause = self
            .last_transport_error
            .as_ref()
            .map_or_else(|| "the transport closed".to_owned(), ToString::to_string);
        let fallback = probing
            && self.link.connector.is_some()
            && self.link.session.mode == ProtocolMode::Auto
            && !self.link.legacy_only.swap(true, Ordering::SeqCst);
        if fallback {
            tracing::info!(
                "the server ended during the server/discover probe; starting it again with initialize"
            );
        } else if self.backoff.is_none() || self.link.connector.is_none() {
            self.fail_in_flight(false, &[]);
            return Err(self.give_up());
        } else {
            tracing::warn!(cause, "the connection to the MCP server died; reconnecting");
        }
        let unread = self.transport.unread();
        self.fail_in_flight(self.backoff.is_some(), &unread);
        self.ready = false;
        self.state.send_replace(Negotiation::Reconnecting);
        let mut first = fallback;
        loop {
            if !first {
                let Some((attempt, delay)) = self.backoff.as_mut().and_then(Backoff::next) else {
                    tracing::warn!(cause, "giving up reconnecting to the MCP server");
                    return Err(self.give_up());
                };
                self.link
                    .connection
                    .send_replace(ConnectionState::Reconnecting { attempt });
                tracing::info!(attempt, ?delay, "reconnecting to the MCP server");
                if !self.wait(delay, commands).await {
                    return Err(Error::Closed);
                }
            }
            first = false;
            let Some(connector) = self.link.connector.clone() else {
                return Err(self.give_up());
            };
            match connector() {
                Ok(transport) => {
                    // The new session subscribes to what the old one had, at its log level.
                    self.session.carry_into(&mut self.link.session);
                    self.session = self.link.session(transport.carries_headers());
                    self.identity = transport.authorization_context();
                    self.link.transport.send_replace(Some(transport.clone()));
                    self.transport = transport;
                    self.last_transport_error = None;
                    self.relist = true;
                    self.state.send_replace(Negotiation::Pending);
                    self.link
                        .connection
                        .send_replace(ConnectionState::Connecting);
                    self.session.start(Instant::now());
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not start a new connection");
                    self.last_transport_error = Some(Arc::new(e));
                }
            }
        }
    }

    /// Reads what a dead transport still holds (briefly): answers that arrived before the
    /// death reach their callers, and a failed send learns why the peer went away (a stdio
    /// child's exit status says more than a broken pipe).
    pub(super) async fn drain(&mut self) {
        let transport = self.transport.clone();
        let drain = async {
            while let Some(item) = transport.recv().await {
                match item {
                    Ok(message) => self.session.handle_inbound(&message.body, Instant::now()),
                    Err(TransportError::Request(failure)) => {
                        self.session.handle_undelivered(failure, Instant::now());
                    }
                    Err(e) => self.last_transport_error = Some(Arc::new(e)),
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(3), drain).await;
        self.handle_events();
    }

    /// The connection is over for good: says so (negotiation closed, state `Failed`) and
    /// fails everything still waiting as never sent; the error that ends the driver.
    pub(super) fn give_up(&mut self) -> Error {
        let error = self.lost(false);
        self.state.send_replace(Negotiation::Closed {
            error: self.last_transport_error.clone(),
        });
        self.link.connection.send_replace(ConnectionState::Failed {
            reason: error.clone(),
        });
        self.fail_all(&error);
        error
    }

    /// The calls in flight on a dead connection: with `replay`, tool listings, calls safe to
    /// repeat and calls the dead server never read (`unread`: they never reached it) wait for
    /// the next connection; every other one fails saying it may have run.
    pub(super) fn fail_in_flight(
        &mut self,
        replay: bool,
        unread: &[toolwire_transport::RequestId],
    ) {
        self.call_ops.clear();
        let error = self.lost(true);
        let waiters: Vec<(OpId, Waiter)> = self.waiters.drain().collect();
        for (op, waiter) in waiters {
            let never_read = !unread.is_empty()
                && self
                    .session
                    .request_of(op)
                    .is_some_and(|id| unread.contains(&id));
            match waiter {
                Waiter::Call {
                    call,
                    reply,
                    progress,
                    replay: Some(again),
                    ..
                } if replay && (again.safe || never_read) => {
                    tracing::debug!(call, tool = %again.name, never_read, "sending the call again after the reconnect");
                    let Replay {
                        safe: _,
                        name,
                        arguments,
                        options,
                        input,
                        deadline,
                    } = *again;
                    self.queued.push(Queued {
                        deadline,
                        command: Command::Call {
                            call,
                            progress,
                            name,
                            arguments,
                            options,
                            input,
                            reply,
                        },
                    });
                }
                Waiter::List(reply) if replay => self.queue(Command::ListTools {
                    mode: CacheMode::Refresh,
                    reply,
                }),
                other => other.fail(error.clone()),
            }
        }
    }

    /// Waits out a reconnect delay while taking commands (queued, or cancelled) and failing
    /// the queued ones whose callers stop waiting; `false` if the client closed meanwhile.
    pub(super) async fn wait(
        &mut self,
        delay: Duration,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> bool {
        let until = tokio::time::Instant::now() + delay;
        loop {
            let next = self
                .next_queued_deadline()
                .map_or(until, |at| until.min(at.into()));
            tokio::select! {
                command = commands.recv() => match command {
                    None => {
                        self.shutdown(Error::Closed).await;
                        return false;
                    }
                    Some(Command::Close { reply }) => {
                        self.shutdown(Error::Closed).await;
                        let _ = reply.send(());
                        return false;
                    }
                    Some(Command::Cancel { call }) => self.cancel(call),
                    Some(command @ (Command::Call { .. } | Command::ListTools { .. } | Command::Request { .. } | Command::SetLogLevel { .. })) => {
                        self.queue(command);
                    }
                    // The dead session's server requests cannot be answered any more.
                    Some(Command::Start | Command::Respond { .. }) => {}
                },
                () = tokio::time::sleep_until(next) => {
                    self.expire_queued(Instant::now());
                    if tokio::time::Instant::now() >= until {
                        return true;
                    }
                }
            }
        }
    }
}

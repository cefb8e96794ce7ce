//! What reaches the driver (`Command`) and how each is issued on the session, and who waits
//! for what (`Waiter`).

use super::*;

/// Issues one request on the session (which holds it until it is ready, and carries it to
/// the next session when it may go again).
pub(crate) type IssueRequest =
    Box<dyn FnOnce(&mut Session, Instant) -> Result<OpId, RequestError> + Send>;

/// Each command that sends requests carries the W3C trace context of the caller's span
/// (`trace`): the session puts it in the `_meta` of every request the command queues.
pub(crate) enum Command {
    /// Negotiate; the requests of the handshake carry `trace`.
    Start {
        trace: Option<TraceContext>,
    },
    Call {
        call: u64,
        hooks: CallHooks,
        /// The call as asked (its arguments shared with the caller, which keeps them for an
        /// `input_required` round); boxed, it moves into the session as it is.
        request: Box<CallRequest>,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
        trace: Option<TraceContext>,
    },
    ListTools {
        mode: CacheMode,
        reply: oneshot::Sender<Result<ListOutcome, Error>>,
        trace: Option<TraceContext>,
    },
    /// Any other request: issued on the session by the closure.
    Request {
        issue: IssueRequest,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
        trace: Option<TraceContext>,
    },
    Close {
        reply: oneshot::Sender<()>,
    },
    /// A call's future was dropped before its answer.
    Cancel {
        call: u64,
    },
    /// The log level changed (answered once it is in force).
    SetLogLevel {
        level: toolwire_types::LoggingLevel,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
        trace: Option<TraceContext>,
    },
    /// A handler finished answering a server request.
    Respond {
        id: RequestId,
        result: Result<Value, ErrorObject>,
    },
}

impl Command {
    /// The trace context of the caller that sent it.
    pub(super) fn trace(&self) -> Option<&TraceContext> {
        match self {
            Self::Start { trace }
            | Self::Call { trace, .. }
            | Self::ListTools { trace, .. }
            | Self::Request { trace, .. }
            | Self::SetLogLevel { trace, .. } => trace.as_ref(),
            Self::Close { .. } | Self::Cancel { .. } | Self::Respond { .. } => None,
        }
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Start { .. } => "Start",
            Self::Call { .. } => "Call",
            Self::ListTools { .. } => "ListTools",
            Self::Request { .. } => "Request",
            Self::Close { .. } => "Close",
            Self::Cancel { .. } => "Cancel",
            Self::Respond { .. } => "Respond",
            Self::SetLogLevel { .. } => "SetLogLevel",
        })
    }
}

/// `{}`: what a request that needs no answer from the server answers.
pub(super) fn empty_result() -> Box<RawValue> {
    serde_json::value::to_raw_value(&serde_json::Map::new())
        .unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// Sends a commit to subscribers when it changed something.
pub(crate) fn announce(changes: &broadcast::Sender<Commit>, commit: &Commit) {
    if !commit.diff.is_empty() {
        // No subscriber is not an error.
        let _ = changes.send(commit.clone());
    }
}

/// Who waits for an operation of the session, and how to answer them.
pub(super) enum Waiter {
    /// A `tools/call` of the caller's call `call`.
    Call {
        call: u64,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
        hooks: CallHooks,
        /// Sent again after a reconnect, the call carries its trace context again.
        trace: Option<TraceContext>,
    },
    /// A `tools/list` walk.
    List(oneshot::Sender<Result<ListOutcome, Error>>),
    /// Any other request (its requests carry `trace` again on the next session).
    Request {
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
        trace: Option<TraceContext>,
    },
}

impl Waiter {
    /// Tells the waiter the operation failed.
    pub(super) fn fail(self, error: Error) {
        match self {
            Self::Call { reply, .. } | Self::Request { reply, .. } => {
                drop(reply.send(Err(error)));
            }
            Self::List(reply) => drop(reply.send(Err(error))),
        }
    }
}

/// The driver's maps, looked up several times per call: `foldhash` with a random seed per map
/// (SipHash, the std default, cost more than the lookups themselves). Their keys are ids the
/// client chose.
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Fails one command that never reached a session.
pub(super) fn fail_command(command: Command, error: Error) {
    match command {
        Command::Call { reply, .. } | Command::Request { reply, .. } => {
            drop(reply.send(Err(error)));
        }
        Command::ListTools { reply, .. } => drop(reply.send(Err(error))),
        Command::SetLogLevel { reply, .. } => drop(reply.send(Err(error))),
        Command::Close { reply } => drop(reply.send(())),
        Command::Start { .. } | Command::Cancel { .. } | Command::Respond { .. } => {}
    }
}

impl Driver {
    pub(super) fn issue(&mut self, command: Command) {
        self.note_identity();
        let now = Instant::now();
        // The requests this command queues carry its caller's trace context, and only they:
        // what the session sends on its own afterwards carries none.
        self.session.set_trace_context(command.trace().cloned());
        self.issue_traced(command, now);
        self.session.set_trace_context(None);
    }

    fn issue_traced(&mut self, command: Command, now: Instant) {
        match command {
            Command::Call {
                call,
                hooks,
                request,
                reply,
                trace,
            } => match self.session.call(request, now) {
                Ok(op) => {
                    self.call_ops.insert(call, op);
                    let waiter = Waiter::Call {
                        call,
                        reply,
                        hooks,
                        trace,
                    };
                    self.waiters.insert(op, waiter);
                }
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::ListTools { mode, reply, .. } => {
                match self.session.list_tools_with(mode, now) {
                    Ok(op) => drop(self.waiters.insert(op, Waiter::List(reply))),
                    Err(e) => drop(reply.send(Err(e.into()))),
                }
            }
            Command::Request {
                issue,
                reply,
                trace,
            } => match issue(&mut self.session, now) {
                Ok(op) => drop(self.waiters.insert(op, Waiter::Request { reply, trace })),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Cancel { call } => self.cancel(call),
            // Kept for later sessions too (`Session::carry_into`).
            Command::SetLogLevel { level, reply, .. } => {
                match self.session.change_log_level(level, now) {
                    Ok(Some(op)) => drop(
                        self.waiters
                            .insert(op, Waiter::Request { reply, trace: None }),
                    ),
                    // Modern: in force from the next request on.
                    Ok(None) => drop(reply.send(Ok(empty_result()))),
                    Err(e) => drop(reply.send(Err(e.into()))),
                }
            }
            Command::Respond { id, result } => {
                let answered = match &result {
                    Ok(value) => self.session.respond(&id, Ok(value)),
                    Err(error) => self.session.respond(&id, Err::<&Value, _>(error.clone())),
                };
                if let Err(e) = answered {
                    tracing::warn!(error = %e, %id, "could not answer the server's request");
                }
            }
            Command::Start { .. } | Command::Close { .. } => {}
        }
    }

    /// The caller stopped waiting for a call.
    pub(super) fn cancel(&mut self, call: u64) {
        if let Some(op) = self.call_ops.remove(&call) {
            // The Completed(Cancelled) event that follows finds no one waiting.
            if let Some(id) = self.session.cancel(op, Some("the caller stopped waiting")) {
                self.transport.cancel(&id);
            }
        }
    }
}

//! What reaches the driver (`Command`) and how each is issued on the session, and who waits
//! for what (`Waiter`).

use super::*;

/// Issues one request on the session (which holds it until it is ready, and carries it to
/// the next session when it may go again); `None`: done at once, answered `{}` (a modern
/// log level, in force from the next request on).
pub(crate) type IssueRequest =
    Box<dyn FnOnce(&mut Session, Instant) -> Result<Option<OpId>, RequestError> + Send>;

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
            | Self::Request { trace, .. } => trace.as_ref(),
            Self::Close { .. } | Self::Cancel { .. } | Self::Respond { .. } => None,
        }
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
    },
    /// A `tools/list` walk.
    List(oneshot::Sender<Result<ListOutcome, Error>>),
    /// Any other request.
    Request(oneshot::Sender<Result<Box<RawValue>, Error>>),
}

impl Waiter {
    /// Tells the waiter the operation failed.
    pub(super) fn fail(self, error: Error) {
        match self {
            Self::Call { reply, .. } | Self::Request(reply) => drop(reply.send(Err(error))),
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
                ..
            } => match self.session.call(request, now) {
                Ok(op) => drop(self.waiters.insert(op, Waiter::Call { call, reply, hooks })),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::ListTools { mode, reply, .. } => {
                match self.session.list_tools_with(mode, now) {
                    Ok(op) => drop(self.waiters.insert(op, Waiter::List(reply))),
                    Err(e) => drop(reply.send(Err(e.into()))),
                }
            }
            Command::Request { issue, reply, .. } => match issue(&mut self.session, now) {
                Ok(Some(op)) => drop(self.waiters.insert(op, Waiter::Request(reply))),
                Ok(None) => drop(reply.send(Ok(empty_result()))),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Cancel { call } => self.cancel(call),
            Command::Respond { id, result } => {
                if let Err(e) = self
                    .session
                    .respond(&id, result.as_ref().map_err(Clone::clone))
                {
                    tracing::warn!(error = %e, %id, "could not answer the server's request");
                }
            }
            Command::Start { .. } | Command::Close { .. } => {}
        }
    }

    /// The caller stopped waiting for call `call` (rare: looked for, not indexed). Its
    /// `Completed(Cancelled)` finds a receiver that is gone.
    pub(super) fn cancel(&mut self, call: u64) {
        let op = self.waiters.iter().find_map(|(op, waiter)| {
            matches!(waiter, Waiter::Call { call: c, .. } if *c == call).then_some(*op)
        });
        if let Some(id) =
            op.and_then(|op| self.session.cancel(op, Some("the caller stopped waiting")))
        {
            self.transport.cancel(&id);
        }
    }
}

//! What a client asks of its driver: one [`Command`] per request, call, listing, cancel or
//! handler's answer, sent over the driver's channel, each request with the reply its caller
//! waits on.

use std::time::Instant;

use serde_json::Value;
use serde_json::value::RawValue;
use toolwire_cache::ListOutcome;
use toolwire_session::{CacheMode, CallRequest, OpId, RequestError, Session};
use toolwire_types::{ErrorObject, RequestId, TraceContext};

use crate::waiters::Reply;
use crate::{CallHooks, Error};

/// Issues one request on the session (which holds it until it is ready, and carries it to
/// the next session when it may go again); `None`: done at once, answered `{}` (a modern
/// log level, in force from the next request on).
pub(crate) type IssueRequest =
    Box<dyn FnOnce(&mut Session, Instant) -> Result<Option<OpId>, RequestError> + Send>;

/// Each command that sends requests carries the W3C trace context of the caller's span
/// (`trace`): the session puts it in the `_meta` of every request the command queues.
pub(crate) enum Command {
    /// Negotiate; the requests of the handshake carry `trace`.
    Start { trace: Option<TraceContext> },
    Call {
        call: u64,
        hooks: CallHooks,
        /// The call as asked (its arguments shared with the caller, which keeps them for an
        /// `input_required` round); boxed, it moves into the session as it is.
        request: Box<CallRequest>,
        reply: Reply<Box<RawValue>>,
        trace: Option<TraceContext>,
    },
    ListTools {
        mode: CacheMode,
        reply: Reply<ListOutcome>,
        trace: Option<TraceContext>,
    },
    /// Any other request: issued on the session by the closure.
    Request {
        issue: IssueRequest,
        reply: Reply<Box<RawValue>>,
        trace: Option<TraceContext>,
    },
    Close {
        reply: tokio::sync::oneshot::Sender<()>,
    },
    /// A call's future was dropped before its answer.
    Cancel { call: u64 },
    /// A handler finished answering a server request.
    Respond {
        id: RequestId,
        result: Result<Value, ErrorObject>,
    },
}

impl Command {
    /// The trace context of the caller that sent it.
    pub(crate) fn trace(&self) -> Option<&TraceContext> {
        match self {
            Self::Start { trace }
            | Self::Call { trace, .. }
            | Self::ListTools { trace, .. }
            | Self::Request { trace, .. } => trace.as_ref(),
            Self::Close { .. } | Self::Cancel { .. } | Self::Respond { .. } => None,
        }
    }

    /// The command never reached a session: whoever waits on it hears `error`.
    pub(crate) fn fail(self, error: Error) {
        match self {
            Self::Call { reply, .. } | Self::Request { reply, .. } => drop(reply.send(Err(error))),
            Self::ListTools { reply, .. } => drop(reply.send(Err(error))),
            Self::Close { reply } => drop(reply.send(())),
            Self::Start { .. } | Self::Cancel { .. } | Self::Respond { .. } => {}
        }
    }
}

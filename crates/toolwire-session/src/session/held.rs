//! What is asked before the session is ready: held in the order asked, each until its caller
//! stops waiting, and issued once negotiation ends ([`Event::Ready`]). A spent session (after
//! [`Session::interrupt`]) holds too: what it carries and what is asked of it meanwhile goes
//! to the session after it ([`Session::successor`]), under the same operation ids.

use std::collections::VecDeque;
use std::time::Duration;

use web_time::Instant;

use toolwire_types::TraceContext;

use super::Session;
use super::call::CallRequest;
use super::interrupt::Interrupted;
use crate::{CacheMode, Event, OpId, RequestError};

/// How a request is asked again on another session (or once this one is ready), as the
/// caller first asked it: kept by the session for every request of a caller's that may be
/// sent again ([`Interrupted::Reissue`]).
pub struct Again(Box<AskAs>);

/// Issues a request on a session as operation `OpId`.
type AskAs = dyn FnOnce(&mut Session, OpId, Instant) -> Result<(), RequestError> + Send;

impl Again {
    pub(super) fn new(
        ask: impl FnOnce(&mut Session, OpId, Instant) -> Result<(), RequestError> + Send + 'static,
    ) -> Self {
        Self(Box::new(ask))
    }
}

impl std::fmt::Debug for Again {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Again")
    }
}

/// One operation held.
pub(super) enum Ask {
    Call(Box<CallRequest>),
    /// A `tools/list` walk in this cache mode.
    List(CacheMode),
    /// Any other request.
    Request(Again),
}

impl Ask {
    /// Whether it ends as [`Event::ToolsListed`] (a walk), not [`Event::Completed`].
    fn lists(&self) -> bool {
        matches!(self, Self::List(_))
    }
}

struct HeldOp {
    op: OpId,
    /// When its caller stops waiting, and how long that was.
    deadline: Instant,
    patience: Duration,
    /// The trace context its requests carry.
    trace: Option<TraceContext>,
    ask: Ask,
}

/// The operations held, in the order asked.
#[derive(Default)]
pub(super) struct Held(VecDeque<HeldOp>);

impl Held {
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.0.iter().map(|h| h.deadline).min()
    }
}

impl Session {
    /// Whether what is asked now goes out now: negotiation ended ([`Event::Ready`]) and the
    /// session is not spent. Before that, every request is held (and sent once it is ready,
    /// or fails when its caller's time is up); after a failed negotiation, refused.
    pub fn is_ready(&self) -> bool {
        self.ready && !self.spent && self.negotiation.negotiated().is_some()
    }

    /// Holds `ask` for its caller's `patience` (refused once negotiation failed for good).
    pub(super) fn hold(
        &mut self,
        ask: Ask,
        patience: Duration,
        now: Instant,
    ) -> Result<OpId, RequestError> {
        if self.negotiation.has_failed() && !self.spent {
            return Err(RequestError::NotReady);
        }
        let op = self.allocate_op();
        let trace = self.trace.clone();
        self.held_as(op, crate::later(now, patience), patience, trace, ask);
        Ok(op)
    }

    fn held_as(
        &mut self,
        op: OpId,
        deadline: Instant,
        patience: Duration,
        trace: Option<TraceContext>,
        ask: Ask,
    ) {
        self.held.0.push_back(HeldOp {
            op,
            deadline,
            patience,
            trace,
            ask,
        });
    }

    /// Holds an operation of the dead connection that may go again ([`Session::interrupt`]'s
    /// `Replay`, `Reissue` and `Relist`) for the session after this one, under the same id,
    /// deadline and trace context. What cannot go again is handed back.
    pub fn carry(&mut self, item: Interrupted) -> Result<(), Interrupted> {
        let patience = self.config.request_timeout;
        let (op, deadline, patience, trace, ask) = match item {
            Interrupted::Replay {
                op,
                call,
                deadline,
                trace,
                ..
            } => {
                let patience = call.options.timeout.unwrap_or(patience);
                (op, deadline, patience, trace, Ask::Call(call))
            }
            Interrupted::Reissue {
                op,
                again,
                deadline,
                trace,
                ..
            } => (op, deadline, patience, trace, Ask::Request(again)),
            Interrupted::Relist {
                op,
                deadline,
                trace,
            } => (op, deadline, patience, trace, Ask::List(CacheMode::Refresh)),
            lost @ Interrupted::Lost { .. } => return Err(lost),
        };
        self.held_as(op, deadline, patience, trace, ask);
        Ok(())
    }

    /// Negotiation ended: everything held goes out, in the order asked, each with its own
    /// trace context.
    pub(super) fn release_held(&mut self, now: Instant) {
        for held in std::mem::take(&mut self.held.0) {
            let lists = held.ask.lists();
            let issued = self.traced(held.trace, |s| match held.ask {
                Ask::Call(call) => s.issue_call(held.op, call, true, now),
                Ask::List(mode) => s.list_tools_as(held.op, mode, now),
                Ask::Request(again) => (again.0)(s, held.op, now),
            });
            if let Err(e) = issued {
                self.fail_op(held.op, lists, e);
            }
        }
    }

    /// Fails the held operations whose callers stopped waiting by `now`.
    pub(super) fn expire_held(&mut self, now: Instant) {
        let (expired, kept) = std::mem::take(&mut self.held.0)
            .into_iter()
            .partition(|h| h.deadline <= now);
        self.held.0 = kept;
        for held in expired {
            let error = RequestError::Unnegotiated(held.patience);
            self.fail_op(held.op, held.ask.lists(), error);
        }
    }

    /// Moves every held deadline `by` later ([`Session::pause`]).
    pub(super) fn postpone_held(&mut self, by: Duration) {
        for held in &mut self.held.0 {
            held.deadline = crate::later(held.deadline, by);
        }
    }

    /// Forgets a held operation, which completes as cancelled; `false` if none is held as `op`.
    pub(super) fn cancel_held(&mut self, op: OpId) -> bool {
        let Some(at) = self.held.0.iter().position(|h| h.op == op) else {
            return false;
        };
        if let Some(held) = self.held.0.remove(at) {
            self.fail_op(op, held.ask.lists(), RequestError::Cancelled);
        }
        true
    }

    /// Negotiation failed for good: everything held fails, since nothing will be sent.
    pub(super) fn fail_held(&mut self) {
        for held in std::mem::take(&mut self.held.0) {
            self.fail_op(held.op, held.ask.lists(), RequestError::NotReady);
        }
    }

    /// The session after this one takes what this one holds.
    pub(super) fn hand_over_held(&mut self, next: &mut Session) {
        next.held = std::mem::take(&mut self.held);
    }

    /// Operation `op` ends with `error`: as [`Event::ToolsListed`] when it is a walk
    /// (`lists`), else as [`Event::Completed`].
    pub(super) fn fail_op(&mut self, op: OpId, lists: bool, error: RequestError) {
        self.events.push_back(if lists {
            Event::ToolsListed {
                op,
                result: Err(error),
            }
        } else {
            Event::Completed {
                op,
                result: Err(error),
            }
        });
    }
}

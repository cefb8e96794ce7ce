//! The connection under a session died: what becomes of each operation still under way.
//! Which calls may be sent again is decided here, by the rule the HTTP transport's resend
//! follows (the call's [`RetryClass`](toolwire_wire::RetryClass)): a call safe to repeat, or
//! one the dead server never read, goes again on the next connection (so does any other
//! request whose method is safe to repeat); any other may have run and fails. A log-level
//! change completes: the next session carries the level.

use web_time::Instant;

use toolwire_types::TraceContext;
use toolwire_wire::RequestId;

use super::call::CallRequest;
use super::{Again, PendingKind, Session};
use crate::{Event, OpId};

/// What becomes of one operation when its connection dies ([`Session::interrupt`]).
#[derive(Debug)]
pub enum Interrupted {
    /// A call to send again on the next connection ([`Session::call`]): safe to repeat, or
    /// never read by the dead server. `deadline` is when its caller stops waiting.
    Replay {
        /// The operation on the dead session.
        op: OpId,
        /// The call as asked.
        call: Box<CallRequest>,
        /// Whether the dead server may have acted on it (it read it): what to tell the caller
        /// if there is no next connection.
        may_have_run: bool,
        /// When the caller stops waiting.
        deadline: Instant,
        /// The trace context it carried, which it carries again.
        trace: Option<TraceContext>,
    },
    /// Any other request of the caller's that may be sent again (its method is safe to
    /// repeat, or the dead server never read it), with how to ask it again.
    Reissue {
        /// The operation on the dead session.
        op: OpId,
        /// How it is asked again ([`Session::carry`]).
        again: Again,
        /// Whether the dead server may have acted on it.
        may_have_run: bool,
        /// When the caller stops waiting.
        deadline: Instant,
        /// The trace context it carried, which it carries again.
        trace: Option<TraceContext>,
    },
    /// A `tools/list` walk: list again on the next connection.
    Relist {
        /// The operation on the dead session.
        op: OpId,
        /// When the caller stops waiting.
        deadline: Instant,
        /// The trace context its first page carried, which its pages carry again.
        trace: Option<TraceContext>,
    },
    /// Over: the server may have acted on it (`may_have_run`), or it cannot be sent again
    /// (a request the session does not keep). Its caller gets an error.
    Lost {
        /// The operation on the dead session.
        op: OpId,
        /// Whether the dead server read it.
        may_have_run: bool,
    },
}

impl Interrupted {
    /// The operation on the dead session.
    pub fn op(&self) -> OpId {
        match self {
            Self::Replay { op, .. }
            | Self::Reissue { op, .. }
            | Self::Relist { op, .. }
            | Self::Lost { op, .. } => *op,
        }
    }
}

impl Session {
    /// The connection under this session died, or its legacy session is gone
    /// ([`Event::SessionGone`]) (`unread`: the requests the transport knows the server never
    /// read, such as lines a dead child never took from its stdin; those that found the
    /// session gone, and those queued and never sent, count too). Ends every
    /// operation: a result the settle barrier held completes now, marked
    /// [`TOOLS_STALE_META`](crate::TOOLS_STALE_META) (the server answered; the changes it
    /// announced will be listed on the next connection, if any); everything else is returned,
    /// to be held for the next connection ([`Session::carry`]) or failed. The session is spent
    /// afterwards: nothing more goes out, what is asked of it is held, and the next connection
    /// gets a new session ([`Session::successor`]) that takes what this one holds.
    pub fn interrupt(&mut self, unread: &[RequestId], now: Instant) -> Vec<Interrupted> {
        self.spent = true;
        // Nothing more goes out; a request queued and never sent was never read.
        let unsent: Vec<RequestId> = self
            .transmits
            .drain(..)
            .filter_map(|t| match t.kind {
                toolwire_types::MessageKind::Request { id, .. } => Some(id),
                _ => None,
            })
            .collect();
        // Subscription changes waiting for the dead stream's acknowledgement: the server may
        // have taken them (the next session subscribes to everything subscribed anyway).
        let mut out: Vec<Interrupted> = self
            .listen
            .take_waiting()
            .map(|op| Interrupted::Lost {
                op,
                may_have_run: true,
            })
            .collect();
        let (held, relists) = self.barrier.take_all();
        for h in held {
            self.events.push_back(Event::Completed {
                op: h.op,
                result: Ok(toolwire_types::flag_meta(h.result, crate::TOOLS_STALE_META)),
            });
        }
        // Answered with a header mismatch: the server did not run them.
        for r in relists {
            let timeout = r
                .call
                .options
                .timeout
                .unwrap_or(self.config.request_timeout);
            out.push(Interrupted::Replay {
                op: r.op,
                call: r.call,
                may_have_run: false,
                deadline: crate::later(now, timeout),
                trace: r.trace,
            });
        }
        // In the order they were sent.
        let pending = self.pending.drain();
        self.serving.clear();
        let gone = std::mem::take(&mut self.gone);
        for (id, p) in pending {
            let read = ![unread, gone.as_slice(), unsent.as_slice()]
                .iter()
                .any(|ids| ids.contains(&id));
            let op = p.op();
            let again = p.retry_safe || !read;
            let trace = p.trace;
            let item = match (p.kind, op) {
                (PendingKind::ToolCall { call, .. }, Some(op)) if again => Interrupted::Replay {
                    op,
                    call,
                    may_have_run: read,
                    deadline: p.deadline,
                    trace,
                },
                // The session's own refresh: the next connection lists again anyway.
                (PendingKind::ListPage { .. }, Some(op)) if self.refresh.is_current(op) => {
                    continue;
                }
                (PendingKind::ListPage { .. }, Some(op)) => Interrupted::Relist {
                    op,
                    deadline: p.deadline,
                    trace,
                },
                // A level change: the next session carries the level and sets it before
                // anything else goes out ([`Session::carry_into`]), so the caller's change
                // holds: it completes now.
                (PendingKind::LogLevel { .. }, Some(op)) => {
                    self.events.push_back(Event::Completed {
                        op,
                        result: Ok(super::listen::empty()),
                    });
                    continue;
                }
                (
                    PendingKind::Request { again: ask, .. }
                    | PendingKind::Cached { again: ask, .. },
                    Some(op),
                ) if again => Interrupted::Reissue {
                    op,
                    again: ask,
                    may_have_run: read,
                    deadline: p.deadline,
                    trace,
                },
                (PendingKind::Subscription { uri, subscribe, .. }, Some(op)) if again => {
                    Interrupted::Reissue {
                        op,
                        again: Again::new(super::subscriptions::subscription_again(uri, subscribe)),
                        may_have_run: read,
                        deadline: p.deadline,
                        trace,
                    }
                }
                (_, Some(op)) => Interrupted::Lost {
                    op,
                    may_have_run: read,
                },
                // The session's own (negotiation, listen stream, keep-alive): gone with it.
                (_, None) => continue,
            };
            out.push(item);
        }
        out
    }

    /// The connection under this session died (or its legacy session is gone): every
    /// operation ends as [`Session::interrupt`] decides. When `reconnecting`, what may go
    /// again is held for the next session ([`Session::carry`]); everything else completes
    /// with [`RequestError::Lost`](crate::RequestError::Lost), saying whether the dead
    /// server may have acted on it.
    pub fn lose_connection(&mut self, unread: &[RequestId], reconnecting: bool, now: Instant) {
        for item in self.interrupt(unread, now) {
            let lost = if reconnecting {
                match self.carry(item) {
                    Ok(()) => continue,
                    Err(lost) => lost,
                }
            } else {
                item
            };
            let (op, lists, may_have_run) = match lost {
                Interrupted::Replay {
                    op, may_have_run, ..
                }
                | Interrupted::Reissue {
                    op, may_have_run, ..
                }
                | Interrupted::Lost { op, may_have_run } => (op, false, may_have_run),
                Interrupted::Relist { op, .. } => (op, true, false),
            };
            self.fail_op(op, lists, crate::RequestError::Lost { may_have_run });
        }
    }
}

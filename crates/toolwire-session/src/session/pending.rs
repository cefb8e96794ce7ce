//! The pending table: the requests in flight, each with its deadlines and what its answer
//! completes, and the progress tokens that name them. One type, so a request always leaves
//! with its token, and every question about deadlines is asked in one place.

use std::time::Duration;

use web_time::Instant;

use toolwire_types::{RequestId, TraceContext};

use super::{FastMap, PendingKind};
use crate::OpId;

/// One request in flight.
pub(super) struct Pending {
    pub(super) kind: PendingKind,
    pub(super) deadline: Instant,
    pub(super) timeout: Duration,
    /// Progress may push `deadline` forward, never past this.
    pub(super) hard_deadline: Instant,
    /// The progress token the request carries, if it asked for progress.
    pub(super) progress_token: Option<RequestId>,
    /// Whether sending it again can do no harm (its `RetryClass`).
    pub(super) retry_safe: bool,
    /// The trace context it carries: a walk's later pages carry it too, and so does the
    /// request when it goes again on another connection.
    pub(super) trace: Option<TraceContext>,
}

impl Pending {
    /// The caller's operation this request belongs to.
    pub(super) fn op(&self) -> Option<OpId> {
        match &self.kind {
            PendingKind::Request { op, .. }
            | PendingKind::Cached { op, .. }
            | PendingKind::ToolCall { op, .. }
            | PendingKind::ListPage { op, .. } => Some(*op),
            PendingKind::Subscription { op, .. } | PendingKind::LogLevel { op, .. } => *op,
            PendingKind::Probe
            | PendingKind::LateProbe { .. }
            | PendingKind::Initialize
            | PendingKind::Listen
            | PendingKind::KeepAlive => None,
        }
    }
}

/// The requests in flight and their progress tokens.
#[derive(Default)]
pub(super) struct PendingTable {
    requests: FastMap<RequestId, Pending>,
    /// Progress token → the request it belongs to.
    progress: FastMap<RequestId, RequestId>,
}

/// Ids in the order the session made them (numbers grow; a string id, which the session never
/// makes, last).
fn order(id: &RequestId) -> i64 {
    match id {
        RequestId::Number(n) => *n,
        RequestId::String(_) => i64::MAX,
    }
}

impl PendingTable {
    /// Records request `id` (and its progress token).
    pub(super) fn insert(&mut self, id: RequestId, pending: Pending) {
        if let Some(token) = &pending.progress_token {
            self.progress.insert(token.clone(), id.clone());
        }
        self.requests.insert(id, pending);
    }

    /// Takes request `id` out (its progress token with it).
    pub(super) fn remove(&mut self, id: &RequestId) -> Option<Pending> {
        let pending = self.requests.remove(id)?;
        if let Some(token) = &pending.progress_token {
            self.progress.remove(token);
        }
        Some(pending)
    }

    /// The caller's operation request `id` belongs to, while it is in flight.
    pub(super) fn op_of(&self, id: &RequestId) -> Option<OpId> {
        self.requests.get(id).and_then(Pending::op)
    }

    /// Whether operation `op` is a `tools/call` in flight.
    pub(super) fn is_tool_call(&self, op: OpId) -> bool {
        self.requests
            .values()
            .any(|p| matches!(p.kind, PendingKind::ToolCall { op: o, .. } if o == op))
    }

    /// Whether operation `op` is a `tools/call` in flight whose caller answers the server's
    /// requests about it ([`crate::CallOptions::answers_requests`]).
    pub(super) fn answers_requests(&self, op: OpId) -> bool {
        self.answering_requests().any(|o| o == op)
    }

    /// The `tools/call`s in flight whose callers answer the server's requests about them.
    pub(super) fn answering_requests(&self) -> impl Iterator<Item = OpId> + '_ {
        self.requests.values().filter_map(|p| match &p.kind {
            PendingKind::ToolCall { op, call, .. } if call.options.answers_requests => Some(*op),
            _ => None,
        })
    }

    /// Whether request `id` is in flight.
    pub(super) fn contains(&self, id: &RequestId) -> bool {
        self.requests.contains_key(id)
    }

    /// How many requests are in flight.
    pub(super) fn len(&self) -> usize {
        self.requests.len()
    }

    /// Takes out the `initialize` in flight, if one is.
    pub(super) fn remove_initialize(&mut self) -> Option<Pending> {
        let id = self
            .requests
            .iter()
            .find(|(_, p)| matches!(p.kind, PendingKind::Initialize))
            .map(|(id, _)| id.clone())?;
        self.remove(&id)
    }

    /// Whether a `server/discover` that timed out may still be answered.
    pub(super) fn has_late_probe(&self) -> bool {
        self.requests
            .values()
            .any(|p| matches!(p.kind, PendingKind::LateProbe { .. }))
    }

    /// The earliest deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.requests.values().map(|p| p.deadline).min()
    }

    /// Takes out every request whose deadline is at or before `now`, in the order sent.
    pub(super) fn expired(&mut self, now: Instant) -> Vec<(RequestId, Pending)> {
        let mut due: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        due.sort_by_key(order);
        due.into_iter()
            .filter_map(|id| self.remove(&id).map(|p| (id, p)))
            .collect()
    }

    /// Takes out every request, in the order sent.
    pub(super) fn drain(&mut self) -> Vec<(RequestId, Pending)> {
        self.progress.clear();
        let mut all: Vec<(RequestId, Pending)> = self.requests.drain().collect();
        all.sort_by_key(|(id, _)| order(id));
        all
    }

    /// Moves every deadline (hard ones too) `by` later.
    pub(super) fn postpone(&mut self, by: Duration) {
        for pending in self.requests.values_mut() {
            pending.deadline = crate::later(pending.deadline, by);
            pending.hard_deadline = crate::later(pending.hard_deadline, by);
        }
    }

    /// The id of the request in flight for `op`, if one is.
    pub(super) fn request_of(&self, op: OpId) -> Option<RequestId> {
        self.requests
            .iter()
            .find(|(_, p)| p.op() == Some(op))
            .map(|(id, _)| id.clone())
    }

    /// Progress for `token` at `now`: its request's deadline moves to a whole timeout from
    /// now (never past its hard deadline); the request's operation, if it is someone's.
    /// `None` when no request in flight carries the token.
    pub(super) fn progressed(&mut self, token: &RequestId, now: Instant) -> Option<Option<OpId>> {
        let id = self.progress.get(token)?;
        let pending = self.requests.get_mut(id)?;
        pending.deadline = crate::later(now, pending.timeout).min(pending.hard_deadline);
        Some(pending.op())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(at: Instant, timeout_ms: u64, hard_ms: u64, token: Option<i64>) -> Pending {
        Pending {
            kind: PendingKind::Request {
                op: OpId::for_test(1),
                again: super::super::Again::new(|_, _, _| Ok(())),
            },
            deadline: at + Duration::from_millis(timeout_ms),
            timeout: Duration::from_millis(timeout_ms),
            hard_deadline: at + Duration::from_millis(hard_ms),
            progress_token: token.map(RequestId::Number),
            trace: None,
            retry_safe: false,
        }
    }

    #[test]
    fn a_request_leaves_with_its_progress_token() {
        let t0 = Instant::now();
        let mut table = PendingTable::default();
        table.insert(RequestId::Number(1), request(t0, 100, 1000, Some(1)));
        assert_eq!(
            table.progressed(&RequestId::Number(1), t0),
            Some(Some(OpId::for_test(1)))
        );
        assert!(table.remove(&RequestId::Number(1)).is_some());
        assert_eq!(table.progressed(&RequestId::Number(1), t0), None);
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn progress_moves_the_deadline_up_to_the_hard_one() {
        let t0 = Instant::now();
        let mut table = PendingTable::default();
        table.insert(RequestId::Number(1), request(t0, 100, 250, Some(7)));
        let progress = RequestId::Number(7);
        assert!(
            table
                .progressed(&progress, t0 + Duration::from_millis(90))
                .is_some()
        );
        assert_eq!(table.next_deadline(), Some(t0 + Duration::from_millis(190)));
        assert!(
            table
                .progressed(&progress, t0 + Duration::from_millis(200))
                .is_some()
        );
        assert_eq!(
            table.next_deadline(),
            Some(t0 + Duration::from_millis(250)),
            "never past the hard deadline"
        );
    }

    #[test]
    fn expired_requests_come_out_in_the_order_sent_and_the_rest_stay() {
        let t0 = Instant::now();
        let mut table = PendingTable::default();
        for (id, timeout) in [(3, 50), (1, 50), (2, 500), (4, 10)] {
            table.insert(RequestId::Number(id), request(t0, timeout, 1000, None));
        }
        let expired: Vec<RequestId> = table
            .expired(t0 + Duration::from_millis(50))
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let ids = [1, 3, 4].map(RequestId::Number);
        assert_eq!(expired, ids);
        assert!(table.contains(&RequestId::Number(2)));
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn postponing_moves_every_deadline_and_draining_empties_the_table() {
        let t0 = Instant::now();
        let mut table = PendingTable::default();
        table.insert(RequestId::Number(2), request(t0, 100, 300, Some(9)));
        table.insert(RequestId::Number(1), request(t0, 200, 300, None));
        table.postpone(Duration::from_secs(60));
        assert_eq!(
            table.next_deadline(),
            Some(t0 + Duration::from_millis(60_100))
        );
        assert!(table.request_of(OpId::for_test(1)).is_some());
        assert_eq!(
            table.request_of(OpId::for_test(2)),
            None,
            "nobody's operation"
        );
        let drained: Vec<RequestId> = table.drain().into_iter().map(|(id, _)| id).collect();
        assert_eq!(drained, [1, 2].map(RequestId::Number));
        assert_eq!(table.progressed(&RequestId::Number(9), t0), None);
        assert_eq!(table.next_deadline(), None);
    }
}

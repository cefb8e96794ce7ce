//! The session's own tool-list refreshes, as one small machine: at most one walk at a time, a
//! burst of list changes during a walk asks for exactly one more, and whoever waits for a list
//! fetched "after now" holds a sequence number whose end it waits for.

use crate::OpId;

/// Refreshes started and finished, numbered from 1.
#[derive(Debug, Default)]
pub(super) struct Refresh {
    /// The walk under way, if any.
    current: Option<OpId>,
    /// Another walk is wanted after the current one.
    again: bool,
    /// Walks started, and the number of the last one that finished.
    started: u64,
    finished: u64,
    /// Whether the last finished walk succeeded.
    ok: bool,
}

/// What [`Refresh::request`] asks of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wanted {
    /// No walk is under way: start one now, then report it with [`Refresh::started`].
    Start,
    /// A walk is under way; one more follows it, and this is its number.
    Queued(u64),
}

impl Refresh {
    /// A fresh list is wanted (a list change, a call waiting for one).
    pub(super) fn request(&mut self) -> Wanted {
        if self.current.is_some() {
            self.again = true;
            Wanted::Queued(self.started + 1)
        } else {
            Wanted::Start
        }
    }

    /// Walk `op` was sent; returns its number.
    pub(super) fn started(&mut self, op: OpId) -> u64 {
        self.current = Some(op);
        self.started += 1;
        self.started
    }

    /// Whether `op` is the refresh walk under way (and not the caller's own listing).
    pub(super) fn is_current(&self, op: OpId) -> bool {
        self.current == Some(op)
    }

    /// Whether a walk is under way.
    pub(super) fn under_way(&self) -> bool {
        self.current.is_some()
    }

    /// The walk under way ended; returns whether another must start now (changes came while
    /// it ran).
    pub(super) fn finished(&mut self, ok: bool) -> bool {
        self.current = None;
        self.finished = self.started;
        self.ok = ok;
        std::mem::take(&mut self.again)
    }

    /// The number of the walk whose end shows a list fetched after now: the current one, or
    /// the one already queued after it.
    pub(super) fn latest_wanted(&self) -> u64 {
        self.started + u64::from(self.again)
    }

    /// Whether walk `seq` has ended.
    pub(super) fn has_finished(&self, seq: u64) -> bool {
        self.finished >= seq
    }

    /// Whether the last walk that ended succeeded.
    pub(super) fn last_ok(&self) -> bool {
        self.ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(n: u64) -> OpId {
        OpId::for_test(n)
    }

    #[test]
    fn a_burst_of_changes_during_a_walk_costs_one_more_walk() {
        let mut r = Refresh::default();
        assert_eq!(r.request(), Wanted::Start);
        assert_eq!(r.started(op(1)), 1);
        assert!(r.is_current(op(1)) && !r.is_current(op(2)));
        // Three changes while walk 1 runs: all wait for walk 2.
        for _ in 0..3 {
            assert_eq!(r.request(), Wanted::Queued(2));
        }
        assert_eq!(r.latest_wanted(), 2);
        assert!(!r.has_finished(1));
        assert!(r.finished(true), "one more walk is owed");
        assert!(r.has_finished(1) && !r.has_finished(2));
        assert_eq!(r.started(op(2)), 2);
        assert!(!r.finished(false), "nothing came meanwhile");
        assert!(r.has_finished(2));
        assert!(!r.last_ok());
        assert!(!r.under_way());
        assert_eq!(r.request(), Wanted::Start);
    }

    #[test]
    fn without_a_queued_walk_the_current_one_is_the_latest() {
        let mut r = Refresh::default();
        r.started(op(7));
        assert_eq!(r.latest_wanted(), 1);
        r.request();
        assert_eq!(r.latest_wanted(), 2);
    }
}

//! Streams that stay open as long as their client likes, counted per caller (its principal, or
//! every unauthenticated client together, as for sessions) so that one caller cannot take the
//! front end's connections with them: `subscriptions/listen` streams, at most
//! [`Limits::listens_per_caller`](crate::Limits::listens_per_caller), and the 2024-11-05
//! transport's streams, at most [`Limits::sessions_per_caller`](crate::Limits::sessions_per_caller)
//! (each is a session). Each stream holds a [`Slot`], given back when it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::core::lock;

/// One kind of stream open now, counted per caller tag ([`crate::Caller::tag`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct Slots(Arc<Mutex<HashMap<[u8; 16], usize>>>);

/// One open stream of a caller: its place is given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Slots,
    owner: [u8; 16],
}

impl Slots {
    /// A place for another stream of `owner`, or `None` when it holds `cap` already.
    pub(crate) fn hold(&self, owner: [u8; 16], cap: usize) -> Option<Slot> {
        let mut open = lock(&self.0);
        let held = open.entry(owner).or_insert(0);
        if *held >= cap {
            return None;
        }
        *held += 1;
        Some(Slot {
            slots: self.clone(),
            owner,
        })
    }

    /// How many `owner` holds.
    #[cfg(test)]
    fn held(&self, owner: [u8; 16]) -> usize {
        lock(&self.0).get(&owner).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = lock(&self.slots.0);
        if let Some(held) = open.get_mut(&self.owner) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                open.remove(&self.owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_past_its_bound_is_refused_and_another_caller_is_not_and_an_end_gives_back() {
        let slots = Slots::default();
        let (one, two) = ([1; 16], [2; 16]);
        let first = slots.hold(one, 2);
        let second = slots.hold(one, 2);
        assert!(first.is_some() && second.is_some());
        assert!(slots.hold(one, 2).is_none(), "past the bound");
        let others = slots.hold(two, 2);
        assert!(others.is_some(), "another caller has its own bound");
        drop(first);
        assert_eq!(slots.held(one), 1);
        assert!(
            slots.hold(one, 2).is_some(),
            "an ended stream gives its place back"
        );
        drop(others);
        assert_eq!(slots.held(two), 0);
        assert!(
            lock(&slots.0).get(&two).is_none(),
            "no entry kept for a caller with none"
        );
    }
}

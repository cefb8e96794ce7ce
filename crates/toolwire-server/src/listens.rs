//! The `subscriptions/listen` streams each caller holds open over HTTP: at most
//! [`Limits::listens_per_caller`] (a caller is its principal, or every unauthenticated client
//! together, as for sessions), so one caller cannot take the front end's connections with
//! streams that never time out. Each stream holds a [`Slot`], given back when it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::Limits;
use crate::core::lock;

/// The listen streams open now, counted per caller tag ([`crate::Caller::tag`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct Listens(Arc<Mutex<HashMap<[u8; 16], usize>>>);

/// One open listen stream of a caller: its place is given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    listens: Listens,
    owner: [u8; 16],
}

impl Listens {
    /// A place for another listen stream of `owner`, or `None` past the bound.
    pub(crate) fn hold(&self, owner: [u8; 16], limits: &Limits) -> Option<Slot> {
        let mut open = lock(&self.0);
        let held = open.entry(owner).or_insert(0);
        if *held >= limits.listens_per_caller {
            return None;
        }
        *held += 1;
        Some(Slot {
            listens: self.clone(),
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
        let mut open = lock(&self.listens.0);
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
        let limits = Limits {
            listens_per_caller: 2,
            ..Limits::default()
        };
        let listens = Listens::default();
        let (one, two) = ([1; 16], [2; 16]);
        let first = listens.hold(one, &limits);
        let second = listens.hold(one, &limits);
        assert!(first.is_some() && second.is_some());
        assert!(listens.hold(one, &limits).is_none(), "past the bound");
        let others = listens.hold(two, &limits);
        assert!(others.is_some(), "another caller has its own bound");
        drop(first);
        assert_eq!(listens.held(one), 1);
        assert!(
            listens.hold(one, &limits).is_some(),
            "an ended stream gives its place back"
        );
        drop(others);
        assert_eq!(listens.held(two), 0);
        assert!(
            lock(&listens.0).get(&two).is_none(),
            "no entry kept for a caller with none"
        );
    }
}

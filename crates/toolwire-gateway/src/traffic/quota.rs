//! Daily quotas: calls a day per caller (of an upstream, or of one of its tools), counted for
//! the current day in UTC and renewed at midnight UTC. A refused call counts for nothing:
//! [`DayQuota::give_back`] returns a call taken before a later check refused it.
//!
//! Counts are the replica's own: behind a balancer without affinity, N replicas let a caller
//! make up to N times its quota. A day's table holds the callers that called that day, and is
//! emptied when the day changes, so it cannot outgrow one day's callers.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Seconds in a day.
const DAY: u64 = 86_400;

/// Calls a day by key, one limit for all.
#[derive(Debug)]
pub(crate) struct DayQuota<K> {
    limit: u64,
    /// The day counted (days since the Unix epoch) and each key's calls that day.
    today: Mutex<(u64, HashMap<K, u64>)>,
}

impl<K: Hash + Eq + Clone> DayQuota<K> {
    /// `limit` calls a day per key (at least one).
    pub(crate) fn new(limit: u64) -> Self {
        Self {
            limit: limit.max(1),
            today: Mutex::new((0, HashMap::new())),
        }
    }

    /// The calls a day each key may make.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Takes one call for `key` at `now` (seconds since the Unix epoch), or says how long
    /// until the quota renews (midnight UTC).
    pub(crate) fn take<Q>(&self, key: &Q, now: u64) -> Result<(), Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut today = crate::lock(&self.today);
        let day = now / DAY;
        if today.0 != day {
            *today = (day, HashMap::new());
        }
        let used = match today.1.get_mut(key) {
            Some(used) => used,
            None => today.1.entry(key.to_owned()).or_insert(0),
        };
        if *used >= self.limit {
            return Err(Duration::from_secs((day + 1) * DAY - now));
        }
        *used += 1;
        Ok(())
    }

    /// Gives back a call [`Self::take`] took for `key` on the day of `now`.
    pub(crate) fn give_back<Q>(&self, key: &Q, now: u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut today = crate::lock(&self.today);
        if today.0 == now / DAY
            && let Some(used) = today.1.get_mut(key)
        {
            *used = used.saturating_sub(1);
        }
    }
}

#[cfg(test)]
impl<K: Hash + Eq + Clone> DayQuota<K> {
    /// `key`'s calls counted today.
    pub(crate) fn used<Q>(&self, key: &Q) -> Option<u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        crate::lock(&self.today).1.get(key).copied()
    }
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    /// 2026-12-01 10:00:00 UTC.
    const MORNING: u64 = 1_796_119_200;

    #[test]
    fn each_key_has_its_own_count_and_the_one_past_it_waits_for_midnight() {
        let quota = DayQuota::<String>::new(2);
        assert!(quota.take("alice", MORNING).is_ok());
        assert!(quota.take("alice", MORNING + 1).is_ok());
        let wait = quota.take("alice", MORNING + 2).unwrap_err();
        assert_eq!(wait, Duration::from_secs(14 * 3600 - 2), "until 00:00 UTC");
        assert!(
            quota.take("bob", MORNING + 3).is_ok(),
            "bob's count is his own"
        );
    }

    #[test]
    fn the_quota_renews_when_the_day_changes_and_old_keys_are_dropped() {
        let quota = DayQuota::<String>::new(1);
        assert!(quota.take("alice", MORNING).is_ok());
        assert!(quota.take("alice", MORNING + 60).is_err());
        let tomorrow = MORNING + DAY;
        assert!(quota.take("alice", tomorrow).is_ok());
        assert_eq!(crate::lock(&quota.today).1.len(), 1);
        assert!(quota.take("bob", tomorrow).is_ok());
        assert_eq!(crate::lock(&quota.today).1.len(), 2);
    }

    #[test]
    fn a_call_given_back_can_be_made_again_but_not_on_another_day() {
        let quota = DayQuota::<String>::new(1);
        assert!(quota.take("alice", MORNING).is_ok());
        quota.give_back("alice", MORNING);
        assert!(quota.take("alice", MORNING).is_ok());
        // A give-back for yesterday does not touch today's count.
        let tomorrow = MORNING + DAY;
        assert!(quota.take("alice", tomorrow).is_ok());
        quota.give_back("alice", MORNING);
        assert!(quota.take("alice", tomorrow).is_err());
    }
}

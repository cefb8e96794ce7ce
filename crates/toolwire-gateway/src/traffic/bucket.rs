//! Rate limits: a token bucket per key (an upstream, or a caller of an upstream). A bucket
//! holds up to `burst` calls and refills at `per_second`; a call takes one, or is refused with
//! the time until one is back. Buckets of keys unused long enough to be full again are
//! dropped, so a stream of new callers cannot grow the table without bound.
//!
//! Hand-written rather than `governor`: a bucket is a few lines of arithmetic under a lock the
//! gateway holds anyway, and `governor`'s keyed store would bring its own concurrent map and
//! clock crates for it.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One key's bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Buckets by key, all with one rate and burst.
#[derive(Debug)]
pub(crate) struct Buckets<K> {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<K, Bucket>>,
}

/// Past this many keys, the buckets that are full again are dropped before a new one is made.
const PRUNE_ABOVE: usize = 4096;

impl<K: Hash + Eq + Clone> Buckets<K> {
    /// `per_second` calls a second on average, up to `burst` at once (at least one).
    pub(crate) fn new(per_second: f64, burst: u32) -> Self {
        Self {
            per_second,
            burst: f64::from(burst.max(1)),
            buckets: Mutex::default(),
        }
    }

    /// Takes one call for `key` at `now`, or says how long until one is there. The key is
    /// copied only the first time it is seen.
    pub(crate) fn take<Q>(&self, key: &Q, now: Instant) -> Result<(), Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut buckets = crate::lock(&self.buckets);
        if buckets.len() > PRUNE_ABOVE {
            let full_after = Duration::from_secs_f64(self.burst / self.per_second);
            buckets.retain(|_, b| now.saturating_duration_since(b.at) < full_after);
        }
        if let Some(bucket) = buckets.get_mut(key) {
            return self.spend(bucket, now);
        }
        let bucket = buckets.entry(key.to_owned()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        self.spend(bucket, now)
    }

    /// Refills `bucket` up to `now`, then takes one call from it.
    fn spend(&self, bucket: &mut Bucket, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let missing = 1.0 - bucket.tokens;
        Err(Duration::from_secs_f64(missing / self.per_second))
    }

    /// Keys with a bucket now.
    #[cfg(test)]
    fn keys(&self) -> usize {
        crate::lock(&self.buckets).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_through_then_calls_are_refused_until_the_bucket_refills() {
        let b = Buckets::new(2.0, 3);
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(b.take(&"alice", now), Ok(()));
        }
        let wait = b.take(&"alice", now).unwrap_err();
        assert_eq!(
            wait,
            Duration::from_millis(500),
            "one call back at 2 a second"
        );
        assert_eq!(b.take(&"alice", now + Duration::from_millis(500)), Ok(()));
        // Another key has its own bucket.
        assert_eq!(b.take(&"bob", now), Ok(()));
    }

    #[test]
    fn the_table_drops_keys_whose_buckets_are_full_again() {
        let b = Buckets::new(1000.0, 1);
        let now = Instant::now();
        for n in 0..=PRUNE_ABOVE {
            b.take(&n, now).unwrap();
        }
        assert_eq!(b.keys(), PRUNE_ABOVE + 1);
        b.take(&usize::MAX, now + Duration::from_secs(1)).unwrap();
        assert_eq!(b.keys(), 1, "every idle bucket dropped, the new one made");
    }
}

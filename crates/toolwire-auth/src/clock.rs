//! Wall-clock time as the OAuth client reads it.

use std::fmt;
use std::sync::Arc;

/// Where the OAuth client reads the time, in whole seconds since the Unix epoch: when tokens
/// were saved and when they expire, and the `iat` of DPoP proofs and client assertions.
///
/// The system clock by default ([`Clock::system`]). A caller that simulates time (a test of
/// refresh before expiry, a replay of recorded traffic) gives its own with [`Clock::from_fn`]
/// to [`OAuthConfig::clock`](crate::OAuthConfig::clock), so nothing has to wait for a token
/// to age.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl Clock {
    /// The system clock (`SystemTime::now`); a clock set before 1970 reads as 0.
    pub fn system() -> Self {
        Self(Arc::new(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        }))
    }

    /// A clock read from `now`, which returns seconds since the Unix epoch.
    pub fn from_fn(now: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    /// Seconds since the Unix epoch.
    pub fn now(&self) -> u64 {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Clock").field(&self.now()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn a_clock_from_a_function_reads_what_the_function_returns_each_time() {
        let t = Arc::new(AtomicU64::new(100));
        let clock = Clock::from_fn({
            let t = t.clone();
            move || t.load(Ordering::Relaxed)
        });
        assert_eq!(clock.now(), 100);
        t.store(160, Ordering::Relaxed);
        assert_eq!(clock.clone().now(), 160, "clones read the same source");
    }

    #[test]
    fn the_system_clock_is_past_2020() {
        assert!(Clock::system().now() > 1_577_836_800);
    }
}

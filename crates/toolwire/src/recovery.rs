//! What a client does when its connection dies, decided without I/O: fall back to the legacy
//! era at once (a server that died during the `server/discover` probe), end (nothing was ever
//! established, or nothing can heal it), or reconnect after the [`ReconnectPolicy`]'s next
//! delay ([`Reconnects`]). The driver reports the deaths, the failed reconnects and the
//! handshakes that finish, and acts on the answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::reconnect::ReconnectPolicy;

/// The recovery of one driver's connections (one [`Recovery`] per driver; the legacy pin is
/// shared by every driver of a client).
#[derive(Debug)]
pub(crate) struct Recovery {
    /// Absent: the client has no reconnect policy.
    backoff: Option<Reconnects>,
    /// The client can make new transports (a transport given once cannot be made again).
    connector: bool,
    /// Set once a server died during the probe: the client's later sessions go straight to
    /// `initialize`.
    legacy_only: Arc<AtomicBool>,
    /// A handshake finished at least once on this driver's connections.
    ever_ready: bool,
    /// When the next connection is due.
    retry_at: Option<Instant>,
}

/// What follows a connection's death.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterDeath {
    /// The server died during the probe: the next connection, in the legacy era, is due at
    /// once (policy or not; once per client). `hold`: what may go again waits for it (with a
    /// reconnect policy).
    Fallback { hold: bool },
    /// No handshake ever finished: a server that exits at start would only exit again, so
    /// the connection ends and its own last words say why.
    EndedBeforeHandshake,
    /// Attempt `attempt` of the policy is due after its delay ([`Recovery::deadline`]);
    /// what may go again waits for it.
    Reconnect { attempt: u32 },
    /// Over for good: no connector, no policy, or its attempts ran out.
    GiveUp,
}

impl AfterDeath {
    /// Whether the operations under way are held for the next connection (those the session
    /// says may go again), rather than failed now.
    pub(crate) fn holds(self) -> bool {
        match self {
            Self::Fallback { hold } => hold,
            Self::Reconnect { .. } => true,
            Self::EndedBeforeHandshake | Self::GiveUp => false,
        }
    }
}

impl Recovery {
    pub(crate) fn new(
        policy: Option<ReconnectPolicy>,
        connector: bool,
        legacy_only: Arc<AtomicBool>,
    ) -> Self {
        Self {
            backoff: policy.map(Reconnects::new),
            connector,
            legacy_only,
            ever_ready: false,
            retry_at: None,
        }
    }

    /// A handshake finished: the next death starts the policy's attempts from the first.
    pub(crate) fn ready(&mut self) {
        self.ever_ready = true;
        if let Some(backoff) = &mut self.backoff {
            backoff.reset();
        }
    }

    /// Whether a handshake ever finished (before that, errors describe the server).
    pub(crate) fn ever_ready(&self) -> bool {
        self.ever_ready
    }

    /// The connection died; `during_probe`: the session was waiting for the answer to
    /// `server/discover` ([`toolwire_session::Session::falls_back_on_death`]).
    pub(crate) fn died(&mut self, during_probe: bool, now: Instant) -> AfterDeath {
        if during_probe && self.connector && !self.legacy_only.swap(true, Ordering::SeqCst) {
            self.retry_at = Some(now);
            return AfterDeath::Fallback {
                hold: self.backoff.is_some(),
            };
        }
        if !self.ever_ready {
            return AfterDeath::EndedBeforeHandshake;
        }
        match self.schedule(now) {
            Some(attempt) => AfterDeath::Reconnect { attempt },
            None => AfterDeath::GiveUp,
        }
    }

    /// Making the next transport failed: the number of the attempt now due after the
    /// policy's next delay, or `None` when the attempts ran out.
    pub(crate) fn connect_failed(&mut self, now: Instant) -> Option<u32> {
        self.schedule(now)
    }

    fn schedule(&mut self, now: Instant) -> Option<u32> {
        if !self.connector {
            return None;
        }
        let (attempt, delay) = self.backoff.as_mut()?.next()?;
        self.retry_at = Some(toolwire_session::later(now, delay));
        Some(attempt)
    }

    /// When the next connection is due, if one is.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Whether the next connection is due now (then it is no longer pending).
    pub(crate) fn due(&mut self, now: Instant) -> bool {
        let due = self.retry_at.is_some_and(|at| at <= now);
        if due {
            self.retry_at = None;
        }
        due
    }
}

/// The delays between attempts: the shared [`Backoff`](toolwire_transport::Backoff) from the
/// policy's minimum to its maximum, with jitter, as many as the policy allows. Reset by a
/// connection that gets ready.
#[derive(Debug)]
pub(crate) struct Reconnects {
    policy: ReconnectPolicy,
    delays: toolwire_transport::Delays,
}

impl Reconnects {
    pub(crate) fn new(policy: ReconnectPolicy) -> Self {
        let delays = Self::delays(&policy);
        Self { policy, delays }
    }

    fn delays(policy: &ReconnectPolicy) -> toolwire_transport::Delays {
        toolwire_transport::Backoff {
            min: policy.min_delay,
            max: policy.max_delay,
            attempts: Some(policy.max_attempts),
            jitter: true,
        }
        .delays()
    }

    /// The next attempt's number and the delay before it; `None` once the policy's attempts
    /// ran out.
    pub(crate) fn next(&mut self) -> Option<(u32, Duration)> {
        let delay = self.delays.next()?;
        Some((self.delays.attempt(), delay))
    }

    /// A connection got ready: the next death starts from the first delay again.
    pub(crate) fn reset(&mut self) {
        self.delays = Self::delays(&self.policy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_attempts: u32) -> ReconnectPolicy {
        ReconnectPolicy::new(
            max_attempts,
            Duration::from_millis(100),
            Duration::from_millis(800),
        )
    }

    #[test]
    fn delays_grow_within_the_policy_bounds_and_attempts_run_out() {
        let mut backoff = Reconnects::new(policy(6));
        let mut seen = Vec::new();
        while let Some((attempt, delay)) = backoff.next() {
            seen.push((attempt, delay));
        }
        let attempts: Vec<u32> = seen.iter().map(|(a, _)| *a).collect();
        assert_eq!(attempts, [1, 2, 3, 4, 5, 6]);
        for (attempt, delay) in &seen {
            // Jitter adds up to the delay itself: [d, 2d), d = min · 2^(n-1) capped at max.
            let base = (100u64 << (attempt - 1)).min(800);
            let delay = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            assert!(
                (base..2 * base).contains(&delay),
                "attempt {attempt}: {delay} ms"
            );
        }
        assert_eq!(backoff.next(), None, "the seventh attempt is refused");
    }

    #[test]
    fn a_ready_connection_resets_the_count_and_the_delay() {
        let mut backoff = Reconnects::new(policy(3));
        for _ in 0..3 {
            assert!(backoff.next().is_some());
        }
        assert_eq!(backoff.next(), None);
        backoff.reset();
        let (attempt, delay) = backoff.next().unwrap_or_default();
        assert_eq!(attempt, 1);
        assert!(delay < Duration::from_millis(200), "{delay:?}");
    }

    #[test]
    fn a_death_during_the_probe_falls_back_at_once_and_only_once_per_client() {
        let pin = Arc::new(AtomicBool::new(false));
        let now = Instant::now();
        let mut first = Recovery::new(None, true, pin.clone());
        assert_eq!(first.died(true, now), AfterDeath::Fallback { hold: false });
        assert!(
            pin.load(Ordering::SeqCst),
            "the client is pinned to the legacy era"
        );
        assert!(first.due(now), "the fallback is due at once");
        assert!(!first.due(now), "and only once");
        // Another driver of the same client: pinned already, so a death is just a death.
        let mut second = Recovery::new(Some(policy(3)), true, pin);
        assert_eq!(second.died(true, now), AfterDeath::EndedBeforeHandshake);
        assert_eq!(second.deadline(), None);
    }

    #[test]
    fn a_fallback_holds_what_may_go_again_only_with_a_policy() {
        let mut healing = Recovery::new(Some(policy(3)), true, Arc::default());
        let verdict = healing.died(true, Instant::now());
        assert_eq!(verdict, AfterDeath::Fallback { hold: true });
        assert!(verdict.holds());
        assert!(!AfterDeath::Fallback { hold: false }.holds());
    }

    #[test]
    fn without_a_connector_a_probe_death_ends_and_the_client_stays_unpinned() {
        let pin = Arc::new(AtomicBool::new(false));
        let mut given_once = Recovery::new(Some(policy(3)), false, pin.clone());
        assert_eq!(
            given_once.died(true, Instant::now()),
            AfterDeath::EndedBeforeHandshake
        );
        assert!(!pin.load(Ordering::SeqCst));
        given_once.ready();
        assert_eq!(given_once.died(false, Instant::now()), AfterDeath::GiveUp);
    }

    #[test]
    fn a_connection_never_ready_ends_instead_of_reconnecting() {
        let mut recovery = Recovery::new(Some(policy(3)), true, Arc::default());
        let verdict = recovery.died(false, Instant::now());
        assert_eq!(verdict, AfterDeath::EndedBeforeHandshake);
        assert!(!verdict.holds());
        assert_eq!(recovery.deadline(), None);
    }

    #[test]
    fn after_a_handshake_deaths_reconnect_after_a_delay_until_the_attempts_run_out() {
        let now = Instant::now();
        let mut recovery = Recovery::new(Some(policy(2)), true, Arc::default());
        recovery.ready();
        assert_eq!(
            recovery.died(false, now),
            AfterDeath::Reconnect { attempt: 1 }
        );
        let at = recovery.deadline().expect("the attempt is scheduled");
        assert!(at > now, "after the policy's delay");
        assert!(!recovery.due(now), "not before its delay");
        assert!(recovery.due(at));
        assert_eq!(recovery.connect_failed(at), Some(2));
        assert_eq!(recovery.connect_failed(at), None, "two attempts, then none");
        // A handshake that finishes starts the count again.
        recovery.ready();
        assert_eq!(
            recovery.died(false, now),
            AfterDeath::Reconnect { attempt: 1 }
        );
    }

    #[test]
    fn without_a_policy_a_death_after_the_handshake_gives_up() {
        let mut recovery = Recovery::new(None, true, Arc::default());
        recovery.ready();
        assert!(recovery.ever_ready());
        assert_eq!(recovery.died(false, Instant::now()), AfterDeath::GiveUp);
        assert_eq!(recovery.deadline(), None);
    }
}

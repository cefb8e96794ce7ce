//! A circuit breaker for one upstream: closed while calls succeed; open after a run of
//! consecutive failures, when calls fail at once instead of each waiting out its deadline;
//! half-open after a delay, when one trial call is let through: its success closes the
//! breaker, its failure opens it again.

use std::time::{Duration, Instant};

/// Where the breaker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Calls go through; `failures` in a row so far.
    Closed { failures: u32 },
    /// Calls fail at once until `until`.
    Open { until: Instant },
    /// One trial call goes through (`trying` while it runs); the others fail at once.
    HalfOpen { trying: bool },
}

/// How a call was let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// With the breaker closed.
    Normal,
    /// As the trial of a half-open breaker.
    Trial,
}

/// How a call let through ended, as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The upstream answered (a result, a tool error, or a JSON-RPC error of its own).
    Answered,
    /// The upstream did not answer: a timeout, a lost connection, not running.
    Failed,
    /// Neither: the caller went away first.
    Abandoned,
}

/// Why a call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Open for this much longer.
    Open(Duration),
    /// Half-open, its trial call still running.
    Trying,
}

/// One upstream's breaker.
#[derive(Debug)]
pub(crate) struct Breaker {
    state: State,
    /// Consecutive failures that open it.
    threshold: u32,
    /// How long it stays open before a trial.
    open_for: Duration,
}

impl Breaker {
    pub(crate) fn new(threshold: u32, open_for: Duration) -> Self {
        Self {
            state: State::Closed { failures: 0 },
            threshold: threshold.max(1),
            open_for,
        }
    }

    /// Whether a call may go through at `now`, and how.
    pub(crate) fn admit(&mut self, now: Instant) -> Result<Admitted, Refused> {
        match self.state {
            State::Closed { .. } => Ok(Admitted::Normal),
            State::Open { until } if now < until => Err(Refused::Open(until - now)),
            State::Open { .. } | State::HalfOpen { trying: false } => {
                self.state = State::HalfOpen { trying: true };
                Ok(Admitted::Trial)
            }
            State::HalfOpen { trying: true } => Err(Refused::Trying),
        }
    }

    /// A call let through as `admitted` ended as `ended` at `now`: when this opened the
    /// breaker, until when.
    pub(crate) fn record(
        &mut self,
        admitted: Admitted,
        ended: Ended,
        now: Instant,
    ) -> Option<Instant> {
        let was_open = matches!(self.state, State::Open { .. });
        self.state = match (admitted, self.state, ended) {
            (Admitted::Trial, _, Ended::Answered) => State::Closed { failures: 0 },
            (Admitted::Trial, _, Ended::Failed) => self.opened(now),
            (Admitted::Trial, _, Ended::Abandoned) => State::HalfOpen { trying: false },
            (Admitted::Normal, State::Closed { .. }, Ended::Answered) => {
                State::Closed { failures: 0 }
            }
            (Admitted::Normal, State::Closed { failures }, Ended::Failed) => {
                if failures + 1 >= self.threshold {
                    self.opened(now)
                } else {
                    State::Closed {
                        failures: failures + 1,
                    }
                }
            }
            // Abandoned calls say nothing of the upstream; a call let through before the
            // breaker opened does not move it once it is open or half-open.
            (Admitted::Normal, state, _) => state,
        };
        match self.state {
            State::Open { until } if !was_open => Some(until),
            _ => None,
        }
    }

    fn opened(&self, now: Instant) -> State {
        State::Open {
            until: now + self.open_for,
        }
    }

    /// The state in one word at `now`: `closed`, `open` or `half-open` (an open breaker whose
    /// delay has passed is half-open: its next call is the trial).
    pub(crate) fn word(&self, now: Instant) -> &'static str {
        match self.state {
            State::Closed { .. } => "closed",
            State::Open { until } if now < until => "open",
            State::Open { .. } | State::HalfOpen { .. } => "half-open",
        }
    }

    /// The consecutive failures that open it.
    pub(crate) fn threshold(&self) -> u32 {
        self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: Duration = Duration::from_secs(30);

    #[test]
    fn it_opens_after_the_threshold_of_consecutive_failures_and_an_answer_resets_the_count() {
        let now = Instant::now();
        let mut b = Breaker::new(3, OPEN);
        for _ in 0..2 {
            let a = b.admit(now).unwrap();
            b.record(a, Ended::Failed, now);
        }
        // An answer in between: the run starts again.
        let a = b.admit(now).unwrap();
        b.record(a, Ended::Answered, now);
        for _ in 0..2 {
            let a = b.admit(now).unwrap();
            b.record(a, Ended::Failed, now);
        }
        assert_eq!(b.word(now), "closed");
        let a = b.admit(now).unwrap();
        b.record(a, Ended::Failed, now);
        assert_eq!(b.word(now), "open");
        assert_eq!(b.admit(now), Err(Refused::Open(OPEN)));
        let later = now + Duration::from_secs(10);
        assert_eq!(
            b.admit(later),
            Err(Refused::Open(Duration::from_secs(20))),
            "the refusal says how long it stays open"
        );
    }

    #[test]
    fn after_the_delay_one_trial_goes_through_and_its_outcome_closes_or_reopens() {
        let now = Instant::now();
        let mut b = Breaker::new(1, OPEN);
        let a = b.admit(now).unwrap();
        b.record(a, Ended::Failed, now);
        let after = now + OPEN;
        assert_eq!(b.word(after), "half-open");
        let trial = b.admit(after).unwrap();
        assert_eq!(trial, Admitted::Trial);
        assert_eq!(b.admit(after), Err(Refused::Trying), "one trial at a time");
        b.record(trial, Ended::Failed, after);
        assert_eq!(b.word(after), "open", "a failed trial opens it again");
        let later = after + OPEN;
        let trial = b.admit(later).unwrap();
        b.record(trial, Ended::Answered, later);
        assert_eq!(b.word(later), "closed");
        assert_eq!(b.admit(later), Ok(Admitted::Normal));
    }

    #[test]
    fn an_abandoned_trial_lets_the_next_call_be_the_trial() {
        let now = Instant::now();
        let mut b = Breaker::new(1, OPEN);
        let a = b.admit(now).unwrap();
        b.record(a, Ended::Failed, now);
        let after = now + OPEN;
        let trial = b.admit(after).unwrap();
        b.record(trial, Ended::Abandoned, after);
        assert_eq!(b.admit(after), Ok(Admitted::Trial));
    }

    #[test]
    fn calls_let_through_before_it_opened_do_not_move_it() {
        let now = Instant::now();
        let mut b = Breaker::new(1, OPEN);
        let early = b.admit(now).unwrap();
        let failing = b.admit(now).unwrap();
        b.record(failing, Ended::Failed, now);
        b.record(early, Ended::Answered, now);
        assert_eq!(b.word(now), "open", "a late answer does not close it");
    }
}

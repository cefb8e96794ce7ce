//! Stopping without losing a call: a server that drains refuses new requests with a
//! retryable refusal (HTTP 503 with `Retry-After`), lets the requests it is answering finish
//! up to a deadline, then closes its connections gracefully (an answer being written is
//! written) and stops. Responses to the server's own requests (an elicitation's answer a call
//! in flight waits for) and notifications (a cancellation) are still taken while it drains.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// Where a server is in its stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Taking requests.
    Serving,
    /// Refusing new requests; those in flight go on.
    Draining,
    /// Closing its connections: nothing in flight is waited for any more.
    Closing,
}

/// The phase and the requests being answered, shared by the front ends and the handle that
/// stops the server.
#[derive(Debug)]
pub(crate) struct Drain {
    phase: watch::Sender<Phase>,
    in_flight: AtomicUsize,
    /// Told each time the last request in flight ends.
    settled: tokio::sync::Notify,
}

impl Default for Drain {
    fn default() -> Self {
        Self {
            phase: watch::Sender::new(Phase::Serving),
            in_flight: AtomicUsize::new(0),
            settled: tokio::sync::Notify::new(),
        }
    }
}

/// A request being answered, counted until it is dropped.
#[derive(Debug)]
pub(crate) struct Working<'a>(&'a Drain);

impl Drop for Working<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.settled.notify_waiters();
        }
    }
}

/// What a drain came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drained {
    /// Requests still in flight when the deadline came (their answers are lost).
    pub abandoned: usize,
}

impl Drain {
    /// Counts a request from now until the returned guard is dropped.
    pub(crate) fn working(&self) -> Working<'_> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Working(self)
    }

    /// Whether new requests are refused.
    pub(crate) fn refusing(&self) -> bool {
        *self.phase.borrow() != Phase::Serving
    }

    /// The phase, as it changes.
    pub(crate) fn watch(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// Requests being answered.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Refuses new requests from now on.
    pub(crate) fn begin(&self) {
        self.phase.send_if_modified(|phase| {
            let was = *phase == Phase::Serving;
            if was {
                *phase = Phase::Draining;
            }
            was
        });
    }

    /// Waits until nothing is in flight or `deadline` has passed, then turns to closing; says
    /// how many requests were left.
    pub(crate) async fn settle(&self, deadline: Duration) -> Drained {
        let waited = tokio::time::timeout(deadline, async {
            loop {
                // Registered before the count is read, so an end in between is not missed.
                let settled = self.settled.notified();
                if self.in_flight() == 0 {
                    return;
                }
                settled.await;
            }
        })
        .await;
        self.phase.send_replace(Phase::Closing);
        Drained {
            abandoned: if waited.is_ok() { 0 } else { self.in_flight() },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn settling_waits_for_the_last_request_in_flight_and_no_longer() {
        let drain = Arc::new(Drain::default());
        let first = drain.working();
        let second = drain.working();
        assert!(!drain.refusing());
        drain.begin();
        assert!(drain.refusing());
        let waiting = tokio::spawn({
            let drain = drain.clone();
            async move { drain.settle(Duration::from_secs(30)).await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one request is still in flight");
        drop(second);
        let drained = waiting.await.unwrap();
        assert_eq!(drained.abandoned, 0);
        assert_eq!(*drain.watch().borrow(), Phase::Closing);
    }

    #[tokio::test]
    async fn a_request_still_running_at_the_deadline_is_counted_as_abandoned() {
        let drain = Arc::new(Drain::default());
        let _stuck = drain.working();
        drain.begin();
        let drained = drain.settle(Duration::from_millis(50)).await;
        assert_eq!(drained.abandoned, 1);
        assert_eq!(*drain.watch().borrow(), Phase::Closing);
    }
}

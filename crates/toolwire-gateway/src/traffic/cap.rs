//! A cap on one upstream's calls in flight: past it, calls wait their turn (first come, first
//! served) in a queue of bounded length for a bounded time; a call that finds the queue full,
//! or waits out its time, is refused at once rather than piling up behind a slow upstream.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a call found no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// The queue was full already.
    QueueFull,
    /// It waited this long.
    Waited(Duration),
}

/// One upstream's cap.
#[derive(Debug)]
pub(crate) struct Cap {
    slots: Arc<Semaphore>,
    max: usize,
    waiting: Arc<AtomicUsize>,
    queue: usize,
    wait: Duration,
}

/// A call waiting for a slot, counted until dropped.
struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Cap {
    /// At most `max` calls in flight (at least one), `queue` waiting, each for up to `wait`.
    pub(crate) fn new(max: usize, queue: usize, wait: Duration) -> Self {
        let max = max.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
            waiting: Arc::default(),
            queue,
            wait,
        }
    }

    /// A slot, held until the permit is dropped.
    pub(crate) async fn enter(&self) -> Result<OwnedSemaphorePermit, Full> {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            return Ok(slot);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Full::QueueFull);
        }
        let _waiting = Waiting(self.waiting.clone());
        match tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(slot)) => Ok(slot),
            // The semaphore is never closed; were it, no slot would ever come.
            Ok(Err(_)) | Err(_) => Err(Full::Waited(self.wait)),
        }
    }

    /// Calls waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Calls in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.max.saturating_sub(self.slots.available_permits())
    }

    /// The most calls in flight at once.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// The most calls waiting.
    pub(crate) fn queue(&self) -> usize {
        self.queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_cap_calls_wait_in_order_and_past_the_queue_they_are_refused() {
        let cap = Arc::new(Cap::new(1, 1, Duration::from_secs(30)));
        let first = cap.enter().await.unwrap();
        assert_eq!(cap.in_flight(), 1);
        let waiter = tokio::spawn({
            let cap = cap.clone();
            async move { cap.enter().await.map(|_| ()) }
        });
        while cap.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(cap.enter().await.err(), Some(Full::QueueFull));
        drop(first);
        assert_eq!(
            waiter.await.unwrap(),
            Ok(()),
            "the waiting call got the slot"
        );
        assert_eq!(cap.waiting(), 0);
        assert_eq!(cap.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_call_that_waits_out_its_time_is_refused_and_leaves_the_queue() {
        let cap = Cap::new(1, 8, Duration::from_millis(20));
        let _held = cap.enter().await.unwrap();
        assert_eq!(
            cap.enter().await.err(),
            Some(Full::Waited(Duration::from_millis(20)))
        );
        assert_eq!(cap.waiting(), 0);
    }
}

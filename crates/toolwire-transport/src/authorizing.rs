//! Credential repairs under way on a transport, as a count the client can await.

use std::sync::Arc;

use tokio::sync::watch;

/// How many credential repairs (a refresh, a person logging in) a transport has under way.
///
/// A transport counts each repair with [`Authorizing::start`] while it runs; the client
/// [`subscribe`](Authorizing::subscribe)s and is woken when the count changes, so it can hold
/// its deadlines while a person logs in and move them by the time it took, without asking
/// the transport over and over. Clones share the count.
#[derive(Clone, Debug)]
pub struct Authorizing(Arc<watch::Sender<u32>>);

impl Default for Authorizing {
    fn default() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }
}

impl Authorizing {
    /// Counts one repair until the returned guard is dropped.
    pub fn start(&self) -> AuthorizingGuard {
        self.0.send_modify(|n| *n += 1);
        AuthorizingGuard(self.0.clone())
    }

    /// Whether a repair is under way now.
    pub fn is_active(&self) -> bool {
        *self.0.borrow() > 0
    }

    /// The count as it changes (above zero: a repair is under way).
    pub fn subscribe(&self) -> watch::Receiver<u32> {
        self.0.subscribe()
    }
}

/// One repair under way, counted while it lives (see [`Authorizing::start`]).
#[derive(Debug)]
pub struct AuthorizingGuard(Arc<watch::Sender<u32>>);

impl Drop for AuthorizingGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watcher_sees_a_repair_start_and_end() {
        let authorizing = Authorizing::default();
        let mut watcher = authorizing.subscribe();
        assert!(!authorizing.is_active());
        let guard = authorizing.clone().start();
        assert!(
            watcher.has_changed().unwrap(),
            "the start wakes the watcher"
        );
        assert_eq!(*watcher.borrow_and_update(), 1);
        assert!(authorizing.is_active());
        let second = authorizing.start();
        drop(guard);
        assert!(watcher.has_changed().unwrap());
        assert_eq!(
            *watcher.borrow_and_update(),
            1,
            "one repair is still under way"
        );
        drop(second);
        assert!(watcher.has_changed().unwrap(), "the end wakes the watcher");
        assert_eq!(*watcher.borrow_and_update(), 0);
        assert!(!authorizing.is_active());
    }
}

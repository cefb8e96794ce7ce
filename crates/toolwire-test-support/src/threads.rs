//! Running one operation on several threads at once, for the benches that check a read path
//! stays flat as readers are added.

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Runs `op` `iters` times on each of `threads` threads at once (they start together); the
/// time per operation as one thread sees it, averaged over the threads.
pub fn per_thread<F: Fn() + Sync>(threads: usize, iters: u64, op: F) -> Duration {
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        op();
                    }
                    t0.elapsed()
                })
            })
            .collect();
        let total: Duration = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .sum();
        total / u32::try_from(threads).unwrap_or(u32::MAX)
    })
}

//! [`ReadAhead`]: how much a transport may read from its peer before `recv` takes it.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What messages read ahead of [`Transport::recv`](crate::Transport::recv) may hold in all:
/// twice the largest message (at least 64 KiB), counted in KiB. A reader waits for its
/// message's share before passing the message on, and the share comes back when the message
/// is handed out. So a peer that writes faster than the client reads is read no further (its
/// pipe or TCP window then holds it back) instead of filling memory, and one message of the
/// largest size always fits.
#[derive(Debug, Clone)]
pub struct ReadAhead {
    room: Arc<Semaphore>,
    /// The whole budget, in KiB.
    total: usize,
}

impl ReadAhead {
    /// The budget for messages of at most `max_message_size` bytes.
    pub fn new(max_message_size: usize) -> Self {
        let total = max_message_size.saturating_mul(2).div_ceil(1024).max(64);
        Self {
            room: Arc::new(Semaphore::new(total)),
            total,
        }
    }

    /// Waits until a message of `len` bytes fits, and returns its share, to be held until the
    /// message is handed out (at least 1 KiB, at most the whole budget). `None` only if the
    /// budget was closed, which nothing does.
    pub async fn reserve(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        let units = u32::try_from(len.div_ceil(1024).clamp(1, self.total)).unwrap_or(u32::MAX);
        self.room.clone().acquire_many_owned(units).await.ok()
    }
}

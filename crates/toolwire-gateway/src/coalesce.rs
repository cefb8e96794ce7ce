//! The merged tools' changes announced downstream: one `notifications/tools/list_changed`
//! per burst of upstream changes.

use std::time::Duration;

use tokio::sync::broadcast;
use toolwire_server::Change;

/// How long the gateway waits after a change of the merged tools for more before it tells
/// downstream clients: a burst (a server reconnecting, several servers starting) is one
/// `notifications/tools/list_changed`.
pub const COALESCE: Duration = Duration::from_millis(50);

/// The longest a change waits to be announced while more keep coming.
pub const COALESCE_MAX: Duration = Duration::from_millis(500);

/// Forwards the host's tool changes as [`Change::Tools`], one per burst: a change is
/// announced once [`COALESCE`] passes without another, or [`COALESCE_MAX`] after the burst
/// began. Ends when the host is gone.
pub(crate) async fn coalesce<T: Clone>(
    mut host: broadcast::Receiver<T>,
    out: broadcast::Sender<Change>,
) {
    use broadcast::error::RecvError;
    use tokio::time::{Instant, sleep_until};
    loop {
        match host.recv().await {
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
        let began = Instant::now();
        let mut deadline = began + COALESCE;
        let mut closed = false;
        loop {
            tokio::select! {
                () = sleep_until(deadline) => break,
                more = host.recv() => match more {
                    Ok(_) | Err(RecvError::Lagged(_)) => {
                        deadline = (Instant::now() + COALESCE).min(began + COALESCE_MAX);
                    }
                    Err(RecvError::Closed) => {
                        closed = true;
                        break;
                    }
                },
            }
        }
        // No listener now is not the end: a client may connect later.
        let _ = out.send(Change::Tools);
        if closed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_changes_is_one_notification_and_a_later_change_another() {
        let (host, from_host) = broadcast::channel::<u32>(16);
        let (out, mut heard) = broadcast::channel(16);
        let task = tokio::spawn(coalesce(from_host, out));

        // Five changes, each less than the window after the one before.
        for n in 0..5 {
            host.send(n).unwrap();
            tokio::time::sleep(COALESCE / 2).await;
        }
        assert_eq!(heard.recv().await.unwrap(), Change::Tools);
        // Long after the burst, still only the one.
        tokio::time::sleep(COALESCE * 10).await;
        assert!(matches!(
            heard.try_recv(),
            Err(broadcast::error::TryRecvError::Empty)
        ));

        // A change after a quiet spell is heard on its own.
        host.send(5).unwrap();
        assert_eq!(heard.recv().await.unwrap(), Change::Tools);
        tokio::time::sleep(COALESCE * 10).await;
        assert!(matches!(
            heard.try_recv(),
            Err(broadcast::error::TryRecvError::Empty)
        ));

        // Changes that never stop are still announced, every COALESCE_MAX.
        let started = tokio::time::Instant::now();
        for n in 0..40 {
            host.send(n).unwrap();
            tokio::time::sleep(COALESCE / 2).await;
            if let Ok(change) = heard.try_recv() {
                assert_eq!(change, Change::Tools);
                break;
            }
        }
        let waited = started.elapsed();
        assert!(
            waited >= COALESCE_MAX && waited < COALESCE_MAX + COALESCE,
            "{waited:?}"
        );

        // The host gone: so is the coalescer.
        drop(host);
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_announced_without_a_change() {
        let (host, from_host) = broadcast::channel::<u32>(16);
        let (out, mut heard) = broadcast::channel(16);
        let _task = tokio::spawn(coalesce(from_host, out));
        tokio::time::sleep(COALESCE * 10).await;
        assert!(matches!(
            heard.try_recv(),
            Err(broadcast::error::TryRecvError::Empty)
        ));
        drop(host);
    }
}

//! The child's output: stdout read as bounded newline-delimited messages within the
//! read-ahead budget, stderr as bounded lines escaped for display.

use super::*;

/// A reader that counts what passes through it.
pub(super) struct Counted<R>(pub(super) R, pub(super) Arc<std::sync::atomic::AtomicU64>);

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.0).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        self.1
            .fetch_add(u64::try_from(read).unwrap_or(u64::MAX), Ordering::Relaxed);
        polled
    }
}

/// Reads newline-delimited messages from the child's stdout, each at most `limit` bytes. A
/// longer one is skipped up to its newline and reported; a last line without a newline is
/// delivered at EOF; empty lines are skipped. Messages wait for their share of `budget`
/// before they are passed on, so reading stops while the consumer lags.
pub(super) async fn read_stdout(
    stdout: impl tokio::io::AsyncRead + Unpin,
    tx: mpsc::Sender<ReaderEvent>,
    limit: usize,
    budget: ReadAhead,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line: Vec<u8> = Vec::new();
    let mut skipping = false;
    loop {
        let (consumed, complete) = match reader.fill_buf().await {
            Err(e) => {
                let _ = tx.send(ReaderEvent::ReadError(e)).await;
                return;
            }
            Ok([]) => {
                if !skipping && !line.is_empty() && !deliver(&tx, &mut line, &budget).await {
                    return;
                }
                let _ = tx.send(ReaderEvent::Eof).await;
                return;
            }
            Ok(buf) => {
                let newline = memchr::memchr(b'\n', buf);
                let take = newline.unwrap_or(buf.len());
                if !skipping {
                    if line.len() + take > limit {
                        skipping = true;
                        if line.is_empty() {
                            line.extend_from_slice(&buf[..take.min(4096)]);
                        }
                        let id = toolwire_types::Message::leading_id(&line);
                        line = Vec::new();
                        if tx.send(ReaderEvent::TooLarge(id)).await.is_err() {
                            return;
                        }
                    } else {
                        line.extend_from_slice(&buf[..take]);
                    }
                }
                (newline.map_or(take, |i| i + 1), newline.is_some())
            }
        };
        reader.consume(consumed);
        if complete {
            if !skipping && !deliver(&tx, &mut line, &budget).await {
                return;
            }
            line.clear();
            skipping = false;
        }
    }
}

/// Sends one line (without a trailing `\r`) unless it is blank, once the budget has room for
/// it; `false` once nobody listens.
async fn deliver(tx: &mpsc::Sender<ReaderEvent>, line: &mut Vec<u8>, budget: &ReadAhead) -> bool {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        line.clear();
        return true;
    }
    let Some(share) = budget.reserve(line.len()).await else {
        return false;
    };
    tx.send(ReaderEvent::Message(
        Bytes::from(std::mem::take(line)),
        share,
    ))
    .await
    .is_ok()
}

/// Reads the child's stderr line by line (each at most `max_line` bytes), keeps the last
/// `keep` lines, and hands each to the configured sink.
pub(super) async fn read_stderr(
    stderr: ChildStderr,
    mode: StderrMode,
    tail: Tail,
    keep: usize,
    max_line: usize,
) {
    let mut reader = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let limit = u64::try_from(max_line).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buf);
        // Escape sequences a child writes reach logs, errors and terminals only as text.
        let text = toolwire_types::printable(text.trim_end_matches(['\n', '\r']));
        let text = text.as_ref();
        {
            let mut tail = lock_tail(&tail);
            if tail.len() == keep {
                tail.pop_front();
            }
            if keep > 0 {
                tail.push_back(text.to_owned());
            }
        }
        match &mode {
            StderrMode::Tracing => tracing::info!(target: "toolwire::stdio::stderr", "{text}"),
            StderrMode::Callback(f) => f(text),
            StderrMode::Discard | StderrMode::Inherit => {}
        }
    }
}

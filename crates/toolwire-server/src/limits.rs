//! What a connection is doing, for the idle cut-off ([`crate::Limits::idle_timeout`]) and the
//! head cut-off ([`crate::Limits::header_timeout`]): when a byte last went either way, how
//! many requests are in flight on it, and since when the head of the next one has been
//! arriving.
//!
//! The head's clock starts at its first byte, not when the connection fell idle: hyper's own
//! `header_read_timeout` runs from the end of the last answer, which makes it the idle timeout
//! of every kept-alive connection, and a client that reuses its connection as the server
//! closes it loses the request it sent (a pool that pings every 10 s met a 10 s header timeout
//! every time).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One connection's activity, shared by its stream and its service.
#[derive(Debug, Clone)]
pub(crate) struct Activity(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    began: Instant,
    /// Milliseconds after `began` of the last byte either way.
    last: AtomicU64,
    /// Requests whose answer (head) is not given yet.
    in_flight: AtomicUsize,
    /// One more than the milliseconds after `began` of the first byte read since the last
    /// request began (the next request's head arriving); 0 while none was.
    head_since: AtomicU64,
    /// What the connection speaks, from its first bytes: [`UNREAD`], [`HTTP1`] or [`HTTP2`].
    /// An HTTP/2 connection's frames between requests (pings, settings, window updates)
    /// begin no head, so its head clock stops once its preface is whole.
    protocol: AtomicU8,
    /// How much of the HTTP/2 preface the first bytes matched so far.
    preface: AtomicUsize,
}

/// Nothing read yet.
const UNREAD: u8 = 0;
/// HTTP/1: bytes between requests are the next request's head.
const HTTP1: u8 = 1;
/// HTTP/2 (its connection preface came first).
const HTTP2: u8 = 2;

/// The first bytes an HTTP/2 client sends (RFC 9113, section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(Shared {
            began: Instant::now(),
            last: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            head_since: AtomicU64::new(0),
            protocol: AtomicU8::new(UNREAD),
            preface: AtomicUsize::new(0),
        }))
    }
}

/// A request in flight; it ends when dropped.
pub(crate) struct Busy(Activity);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

impl Activity {
    fn now(&self) -> u64 {
        u64::try_from(self.0.began.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    fn touch(&self) {
        self.0.last.store(self.now(), Ordering::Relaxed);
    }

    /// Bytes were read: with no request in flight they are the next request's head, whose
    /// clock starts now unless it already runs.
    fn read(&self, bytes: &[u8]) {
        let now = self.now();
        self.0.last.store(now, Ordering::Relaxed);
        if self.0.protocol.load(Ordering::Relaxed) == UNREAD {
            // Undecided while the bytes so far are a start of the preface (its head clock runs
            // meanwhile, as for any head: a client trickling the preface is cut off too).
            let seen = self.0.preface.load(Ordering::Relaxed);
            let rest = &H2_PREFACE[seen..];
            let shared = bytes.len().min(rest.len());
            if bytes[..shared] != rest[..shared] {
                self.0.protocol.store(HTTP1, Ordering::Relaxed);
            } else if seen + shared == H2_PREFACE.len() {
                self.0.protocol.store(HTTP2, Ordering::Relaxed);
                self.0.head_since.store(0, Ordering::Relaxed);
                return;
            } else {
                self.0.preface.store(seen + shared, Ordering::Relaxed);
            }
        }
        if self.0.protocol.load(Ordering::Relaxed) != HTTP2
            && self.0.in_flight.load(Ordering::Relaxed) == 0
        {
            let _ = self.0.head_since.compare_exchange(
                0,
                now + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// A request begins (its head was read whole).
    pub(crate) fn busy(&self) -> Busy {
        self.0.in_flight.fetch_add(1, Ordering::Relaxed);
        self.0.head_since.store(0, Ordering::Relaxed);
        Busy(self.clone())
    }

    /// How long the head of the next request has been arriving: zero when none began, or
    /// while a request is in flight.
    pub(crate) fn head_for(&self) -> Duration {
        let since = self.0.head_since.load(Ordering::Relaxed);
        if since == 0 || self.0.in_flight.load(Ordering::Relaxed) > 0 {
            return Duration::ZERO;
        }
        self.0
            .began
            .elapsed()
            .saturating_sub(Duration::from_millis(since - 1))
    }

    /// How long the connection has been idle: zero while a request is in flight.
    pub(crate) fn idle_for(&self) -> Duration {
        if self.0.in_flight.load(Ordering::Relaxed) > 0 {
            return Duration::ZERO;
        }
        let last = Duration::from_millis(self.0.last.load(Ordering::Relaxed));
        self.0.began.elapsed().saturating_sub(last)
    }
}

/// A connection's stream, telling its [`Activity`] of every byte.
pub(crate) struct Tracked<C> {
    inner: C,
    activity: Activity,
}

impl<C> Tracked<C> {
    pub(crate) fn new(inner: C, activity: Activity) -> Self {
        Self { inner, activity }
    }
}

impl<C: AsyncRead + Unpin> AsyncRead for Tracked<C> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read(&buf.filled()[before..]);
        }
        polled
    }
}

impl<C: AsyncWrite + Unpin> AsyncWrite for Tracked<C> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heads_clock_starts_at_its_first_byte_and_stops_when_its_request_begins() {
        let activity = Activity::default();
        std::thread::sleep(Duration::from_millis(30));
        // Idle, nothing read: no head is arriving, however long the connection idled.
        assert_eq!(activity.head_for(), Duration::ZERO);
        activity.read(b"POST /mcp HTTP/1.1\r\n");
        std::thread::sleep(Duration::from_millis(20));
        let arriving = activity.head_for();
        assert!(
            arriving >= Duration::from_millis(20) && arriving < Duration::from_millis(30),
            "{arriving:?}"
        );
        // More bytes of the same head do not restart it.
        activity.read(b"host: x\r\n");
        assert!(activity.head_for() >= Duration::from_millis(20));
        // The head was whole: the request runs, and its body's bytes start no clock.
        let busy = activity.busy();
        activity.read(b"{\"jsonrpc\"");
        assert_eq!(activity.head_for(), Duration::ZERO);
        drop(busy);
        assert_eq!(activity.head_for(), Duration::ZERO);
    }

    #[test]
    fn an_http2_connections_frames_between_requests_start_no_heads_clock() {
        let activity = Activity::default();
        // The preface in two pieces: its clock runs until it is whole, as a head's would.
        activity.read(b"PRI * HTTP/2.0\r\n");
        std::thread::sleep(Duration::from_millis(20));
        assert!(activity.head_for() >= Duration::from_millis(20));
        activity.read(b"\r\nSM\r\n\r\n");
        assert_eq!(activity.head_for(), Duration::ZERO);
        // A ping between requests starts nothing.
        activity.read(b"\x00\x00\x08\x06\x00\x00\x00\x00\x00ping-data");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(activity.head_for(), Duration::ZERO);

        // A request that only begins like the preface is an HTTP/1 head, and its clock runs.
        let http1 = Activity::default();
        http1.read(b"P");
        http1.read(b"OST /mcp HTTP/1.1\r\n");
        std::thread::sleep(Duration::from_millis(20));
        assert!(http1.head_for() >= Duration::from_millis(20));
    }

    #[test]
    fn a_connection_idles_only_without_a_request_in_flight_or_a_byte() {
        let activity = Activity::default();
        std::thread::sleep(Duration::from_millis(20));
        assert!(activity.idle_for() >= Duration::from_millis(20));
        let busy = activity.busy();
        assert_eq!(activity.idle_for(), Duration::ZERO);
        drop(busy);
        let after = activity.idle_for();
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            activity.idle_for() > after,
            "idle time grows with no activity"
        );
    }
}

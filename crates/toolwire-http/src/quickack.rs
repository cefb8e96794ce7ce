//! Immediate ACKs on the client's connections (`TCP_QUICKACK` after every read, on Linux).
//!
//! A server that writes one answer in several small writes with Nagle's algorithm on (an SSE
//! stream: priming event, answer, end of body) holds each write until the previous one is
//! acknowledged, and a kept-alive connection acknowledges late (delayed ACK, ~40 ms on Linux):
//! every call stalls for that long. A new connection per call dodges it (at twice the cost:
//! rmcp's default); completing at the answer event does not, because the answer itself is the
//! held write. Re-arming quick-ACK mode after each read makes the client acknowledge at once, so
//! the server's next write leaves at once: one `setsockopt` per read, against ~44 ms per call.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::MaybeHttpsStream;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::route::{Hop, Router};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The connector of every request, handing out [`QuickAck`] streams; each connection takes
/// the hop its destination's own URL calls for ([`Router::hop`]).
#[derive(Clone)]
pub(crate) struct QuickAckConnector(pub(crate) Arc<Router>);

impl tower_service::Service<Uri> for QuickAckConnector {
    type Response = QuickAck;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<QuickAck, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // The connectors are made ready per call (the HTTP connector always is).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let hop = match self.0.hop(&uri) {
            Ok(hop) => hop,
            Err(e) => return Box::pin(std::future::ready(Err(BoxError::from(e)))),
        };
        match hop {
            #[cfg(unix)]
            Hop::Unix(path) => Box::pin(async move {
                let stream = tokio::net::UnixStream::connect(&*path).await?;
                Ok(QuickAck(Io::Unix(TokioIo::new(stream)), false))
            }),
            #[cfg(not(unix))]
            Hop::Unix(_) => Box::pin(std::future::ready(Err(BoxError::from(
                "Unix sockets are not available on this platform",
            )))),
            Hop::Direct => {
                let connecting = self.0.direct().call(uri);
                Box::pin(async move { connecting.await.map(|io| QuickAck(Io::Tcp(io), false)) })
            }
            Hop::Tunnel { proxy, auth } => {
                tracing::debug!(proxy = %crate::redirect::origin(&proxy), "through a CONNECT tunnel");
                let connecting = self.0.tunnel(proxy, auth).call(uri);
                Box::pin(async move { connecting.await.map(|io| QuickAck(Io::Tcp(io), false)) })
            }
            Hop::Forward { proxy, .. } => {
                tracing::debug!(proxy = %crate::redirect::origin(&proxy), "through a forwarding proxy");
                let connecting = self.0.direct().call(proxy);
                Box::pin(async move { connecting.await.map(|io| QuickAck(Io::Tcp(io), true)) })
            }
        }
    }
}

/// A client connection that re-arms quick-ACK mode after every read (TCP only); `true` when it
/// leads to a forwarding proxy (requests then go in absolute form).
pub(crate) struct QuickAck(Io, bool);

/// What a connection runs on.
#[allow(
    clippy::large_enum_variant,
    reason = "one per connection, made once and never moved after: boxing TCP would only add a hop to every read"
)]
pub(crate) enum Io {
    /// TCP, with TLS for `https`.
    Tcp(MaybeHttpsStream<TokioIo<TcpStream>>),
    /// A Unix domain socket (plain HTTP).
    #[cfg(unix)]
    Unix(TokioIo<tokio::net::UnixStream>),
}

/// Runs `$body` on the connection's stream, whichever it is.
macro_rules! on_io {
    ($io:expr, $s:ident => $body:expr) => {
        match $io {
            Io::Tcp($s) => $body,
            #[cfg(unix)]
            Io::Unix($s) => $body,
        }
    };
}

impl QuickAck {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn tcp(&self) -> Option<&TcpStream> {
        match &self.0 {
            Io::Tcp(MaybeHttpsStream::Http(io)) => Some(io.inner()),
            Io::Tcp(MaybeHttpsStream::Https(io)) => Some(io.inner().get_ref().0.inner().inner()),
            #[cfg(unix)]
            Io::Unix(_) => None,
        }
    }

    fn quickack(&self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(tcp) = self.tcp()
            && let Err(e) = socket2::SockRef::from(tcp).set_tcp_quickack(true)
        {
            tracing::trace!(error = %e, "TCP_QUICKACK");
        }
    }
}

impl Read for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let polled = on_io!(&mut self.0, s => Pin::new(s).poll_read(cx, buf));
        if matches!(polled, Poll::Ready(Ok(()))) {
            self.quickack();
        }
        polled
    }
}

impl Write for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        on_io!(&mut self.0, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        on_io!(&mut self.0, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        on_io!(&mut self.0, s => Pin::new(s).poll_shutdown(cx))
    }

    fn is_write_vectored(&self) -> bool {
        on_io!(&self.0, s => s.is_write_vectored())
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        on_io!(&mut self.0, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }
}

impl Connection for QuickAck {
    fn connected(&self) -> Connected {
        match &self.0 {
            Io::Tcp(s) => s.connected().proxy(self.1),
            #[cfg(unix)]
            Io::Unix(_) => Connected::new(),
        }
    }
}

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
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How connections reach the server.
#[derive(Clone)]
pub(crate) enum Route {
    /// Straight to it.
    Direct(HttpsConnector<HttpConnector>),
    /// `https://` through an HTTP proxy: a `CONNECT` tunnel, then TLS to the server inside it.
    Tunnel(HttpsConnector<Tunnel<HttpConnector>>),
    /// `http://` through an HTTP proxy: the connection goes to the proxy, and requests name
    /// the server in absolute form.
    Forward {
        connector: HttpsConnector<HttpConnector>,
        proxy: Uri,
    },
}

/// The connector of every route, handing out [`QuickAck`] streams.
#[derive(Clone)]
pub(crate) struct QuickAckConnector(pub(crate) Route);

impl tower_service::Service<Uri> for QuickAckConnector {
    type Response = QuickAck;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<QuickAck, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match &mut self.0 {
            Route::Direct(c) | Route::Forward { connector: c, .. } => c.poll_ready(cx),
            Route::Tunnel(c) => c.poll_ready(cx),
        }
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        match &mut self.0 {
            Route::Direct(c) => {
                let connecting = c.call(uri);
                Box::pin(async move { connecting.await.map(|io| QuickAck(io, false)) })
            }
            Route::Tunnel(c) => {
                let connecting = c.call(uri);
                Box::pin(async move { connecting.await.map(|io| QuickAck(io, false)) })
            }
            Route::Forward { connector, proxy } => {
                let connecting = connector.call(proxy.clone());
                Box::pin(async move { connecting.await.map(|io| QuickAck(io, true)) })
            }
        }
    }
}

/// A client connection that re-arms quick-ACK mode after every read; `true` when it leads to
/// a forwarding proxy (requests then go in absolute form).
pub(crate) struct QuickAck(MaybeHttpsStream<TokioIo<TcpStream>>, bool);

impl QuickAck {
    fn tcp(&self) -> &TcpStream {
        match &self.0 {
            MaybeHttpsStream::Http(io) => io.inner(),
            MaybeHttpsStream::Https(io) => io.inner().get_ref().0.inner().inner(),
        }
    }

    fn quickack(&self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Err(e) = socket2::SockRef::from(self.tcp()).set_tcp_quickack(true) {
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
        let polled = Pin::new(&mut self.0).poll_read(cx, buf);
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
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
}

impl Connection for QuickAck {
    fn connected(&self) -> Connected {
        self.0.connected().proxy(self.1)
    }
}

//! The HTTP edge: connections accepted under a cap ([`crate::Limits::max_connections`], with a
//! pause after a failed accept), each served until it ends or idles
//! ([`crate::Limits::idle_timeout`], [`crate::Limits::header_timeout`]), and the host checks a
//! server on loopback makes before anything else of a request is read (DNS rebinding).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::drain::Phase;
use crate::http::Front;
use crate::{Edge, Service};

/// Where connections come from.
pub(crate) enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// A Unix domain socket.
    #[cfg(unix)]
    Unix(tokio::net::UnixListener),
}

/// One accepted connection.
enum Accepted {
    Tcp(tokio::net::TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

impl<S: Service + Edge> Front<S> {
    /// Accepts connections until the task is dropped, or until a drain turns to closing
    /// ([`crate::HttpServer::drain`]): then nothing more is accepted, and the connections get
    /// [`crate::CLOSE_GRACE`] to finish the answers they are writing. Its connections (and
    /// their streams) end with it, as a stopped server's would.
    pub(crate) async fn run(self: Arc<Self>, listener: Listener) {
        let mut connections = tokio::task::JoinSet::new();
        let mut phase = self.core.drain.watch();
        let closing = async move {
            let _ = phase.wait_for(|p| *p == Phase::Closing).await;
        };
        tokio::pin!(closing);
        let limits = &self.core.options.limits;
        let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
        loop {
            let next = async {
                // At the cap, nothing is accepted until a connection ends: the rest wait in
                // the listen backlog.
                let slot = slots.clone().acquire_owned().await.ok()?;
                let accepted = match &listener {
                    Listener::Tcp(tcp) => tcp.accept().await.map(|(stream, _)| {
                        // Off only for the stall benchmark, which needs Nagle's algorithm on.
                        let _ = stream.set_nodelay(self.core.options.nodelay);
                        Accepted::Tcp(stream)
                    }),
                    #[cfg(unix)]
                    Listener::Unix(unix) => unix.accept().await.map(|(s, _)| Accepted::Unix(s)),
                };
                Some((slot, accepted))
            };
            let (slot, accepted) = tokio::select! {
                biased;
                () = &mut closing => break,
                next = next => match next {
                    Some(next) => next,
                    None => return,
                },
            };
            let stream = match accepted {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of file descriptors (or another passing failure): trying again at
                    // once would spin; a pause lets connections end.
                    tracing::warn!(error = %e, "accepting a connection failed; pausing");
                    drop(slot);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            while connections.try_join_next().is_some() {}
            let front = self.clone();
            connections.spawn(async move {
                let _slot = slot;
                match stream {
                    Accepted::Tcp(s) => front.serve_connection(s).await,
                    #[cfg(unix)]
                    Accepted::Unix(s) => front.serve_connection(s).await,
                }
            });
        }
        // Closing: each connection ends once its answer is written; one that does not (a
        // stream that never ends) is cut when the set is dropped.
        let _ = tokio::time::timeout(crate::CLOSE_GRACE, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
    }

    /// Serves one connection until it ends, or until it has been idle (no request in flight,
    /// no byte either way) for [`crate::Limits::idle_timeout`].
    async fn serve_connection<C>(self: Arc<Self>, stream: C)
    where
        C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let limits = self.core.options.limits.clone();
        let activity = crate::limits::Activity::default();
        let stream = crate::limits::Tracked::new(stream, activity.clone());
        let in_flight = activity.clone();
        // A drain that turns to closing ends the connection once its answer is written.
        let mut phase = self.core.drain.watch();
        let service = service_fn(move |req: Request<Incoming>| {
            let front = self.clone();
            let busy = in_flight.busy();
            async move {
                let _busy = busy;
                Ok::<_, Infallible>(front.answer(req).await)
            }
        });
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        // The head's timeout is kept here ([`crate::limits::Activity::head_for`]): hyper's runs
        // from the end of the last answer, an idle timeout for every kept-alive connection.
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(None);
        builder.http2().timer(TokioTimer::new());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        let check =
            (limits.idle_timeout.min(limits.header_timeout) / 4).max(Duration::from_millis(10));
        let mut closing = false;
        loop {
            tokio::select! {
                _ = connection.as_mut() => return,
                () = tokio::time::sleep(check), if !closing => {
                    // A head that trickles in is cut off (the connection dropped: there is
                    // no answer to finish).
                    if activity.head_for() > limits.header_timeout {
                        return;
                    }
                    if activity.idle_for() > limits.idle_timeout {
                        closing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
                _ = phase.wait_for(|p| *p == Phase::Closing), if !closing => {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Whether the host named by `value` (a `Host` header's `host[:port]`, or an `Origin`'s
/// `scheme://host[:port]`) is loopback or one of `allowed`.
pub(crate) fn local_host(value: &str, allowed: &[String]) -> bool {
    let authority = value.split_once("://").map_or(value, |(_, rest)| rest);
    let authority = authority.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(host))
}

/// What names a host other than a local one, on a server listening on loopback: the `Host`
/// header (HTTP/1.1), the `:authority` (HTTP/2, or an absolute URI) and the `Origin` must each
/// name a local host (or one of `allowed`) when present, and the first or the second must be.
pub(crate) fn foreign_name(
    headers: &http::HeaderMap,
    uri: &http::Uri,
    allowed: &[String],
) -> Option<HeaderValue> {
    let named = [http::header::HOST, http::header::ORIGIN]
        .iter()
        .filter_map(|name| headers.get(name).cloned())
        .chain(
            uri.authority()
                .and_then(|a| HeaderValue::from_str(a.as_str()).ok()),
        );
    for value in named {
        if value.to_str().map_or(true, |v| !local_host(v, allowed)) {
            return Some(value);
        }
    }
    (headers.get(http::header::HOST).is_none() && uri.authority().is_none())
        .then(|| HeaderValue::from_static("(no host named)"))
}

#[cfg(test)]
mod tests {
    use super::{foreign_name, local_host};

    #[test]
    fn an_authority_or_host_naming_another_host_is_foreign_and_naming_none_is_too() {
        let local: http::Uri = "/mcp".parse().unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::HOST, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(foreign_name(&headers, &local, &[]), None);
        // HTTP/2 (h2c) carries the host in `:authority`, which hyper gives as the URI's.
        let evil: http::Uri = "http://evil.example/mcp".parse().unwrap();
        assert_eq!(
            foreign_name(&http::HeaderMap::new(), &evil, &[]).unwrap(),
            "evil.example"
        );
        assert_eq!(foreign_name(&headers, &evil, &[]).unwrap(), "evil.example");
        let fine: http::Uri = "http://localhost:1/mcp".parse().unwrap();
        assert_eq!(foreign_name(&http::HeaderMap::new(), &fine, &[]), None);
        // Neither a Host nor an authority: nothing says the request is for this host.
        assert!(foreign_name(&http::HeaderMap::new(), &local, &[]).is_some());
        headers.insert(http::header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(foreign_name(&headers, &local, &[]).is_some());
    }

    #[test]
    fn loopback_hosts_and_origins_are_local_and_others_are_not() {
        let allowed = ["mcp.internal".to_owned()];
        for local in [
            "localhost",
            "localhost:8080",
            "LOCALHOST",
            "127.0.0.1:3000",
            "127.8.9.10",
            "[::1]:8080",
            "http://localhost:8080",
            "https://127.0.0.1",
            "http://[::1]",
            "mcp.internal:80",
            "https://MCP.internal",
        ] {
            assert!(local_host(local, &allowed), "{local}");
        }
        for foreign in [
            "evil.example",
            "evil.example:8080",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "10.0.0.1:80",
            "[::2]:80",
            "null",
            "",
        ] {
            assert!(!local_host(foreign, &allowed), "{foreign}");
        }
    }
}

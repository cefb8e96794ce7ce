//! The floor of a gateway: a reverse proxy that reads nothing of MCP. Each request's method,
//! headers and body go to the upstream as they came, over a pooled keep-alive hyper client,
//! and its answer comes back as it came. What a call through it adds over a direct call is
//! the cost of a second HTTP hop on this machine (a server side, a client side, two more
//! loopback exchanges and the wake-ups between the processes), which no gateway can go below.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::{Error, Server, serve_self};

type Upstream = Client<HttpConnector, Full<Bytes>>;

/// Forwards one request; a failure upstream is a 502 with its reason.
async fn forward(
    upstream: Upstream,
    target: http::Uri,
    request: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, Infallible> {
    let bad_gateway = |e: &dyn std::fmt::Display| {
        let mut response = http::Response::new(Full::new(Bytes::from(e.to_string())));
        *response.status_mut() = http::StatusCode::BAD_GATEWAY;
        response
    };
    let (mut parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return Ok(bad_gateway(&e)),
    };
    parts.uri = target;
    parts.headers.remove(http::header::HOST);
    let answer = match upstream
        .request(http::Request::from_parts(parts, Full::new(body)))
        .await
    {
        Ok(answer) => answer,
        Err(e) => return Ok(bad_gateway(&e)),
    };
    let (parts, body) = answer.into_parts();
    match body.collect().await {
        Ok(collected) => Ok(http::Response::from_parts(
            parts,
            Full::new(collected.to_bytes()),
        )),
        Err(e) => Ok(bad_gateway(&e)),
    }
}

/// Serves on a free loopback port in front of `upstream` (its endpoint URL) until killed, on
/// one thread, as the gateways of the same cases run; prints its URL first, on stderr.
pub(super) fn run(upstream: &str) -> Result<(), Error> {
    let target: http::Uri = upstream.parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        eprintln!(
            "floor proxy listening on http://{}{}",
            listener.local_addr()?,
            target.path()
        );
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let (client, target) = (client.clone(), target.clone());
            let service = hyper::service::service_fn(move |request| {
                forward(client.clone(), target.clone(), request)
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// Starts it in front of `upstream`: this binary with `--serve-floor-proxy`.
pub(super) fn start(upstream: &str) -> Result<Server, Error> {
    serve_self(&["--serve-floor-proxy", upstream])
}

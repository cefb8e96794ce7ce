//! The HTTP+SSE transport of protocol version 2024-11-05, which many deployed servers still
//! speak: one long `GET` of the server's SSE endpoint carries everything the server says (the
//! first event, `endpoint`, names where to POST; each `message` event is one JSON-RPC
//! message), and every client message is a POST to that endpoint, acknowledged with 202.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Method, Uri};
use tokio::sync::watch;
use toolwire_transport::{
    BoxFuture, Inbound, MessageKind, Outbound, RequestId, Transport, TransportError,
};

use crate::response::content_type;
use crate::{HttpError, Inner, Owner, SseParser, lock, redirect};

/// How long a message waits for the `endpoint` event before the connection counts as failed.
const ENDPOINT_WAIT: Duration = Duration::from_secs(30);

/// Where the stream is.
#[derive(Debug, Clone)]
enum Endpoint {
    /// Not opened yet, or waiting for the `endpoint` event.
    Pending,
    /// Where messages go.
    Ready(Uri),
    /// The stream could not be opened, or ended: the transport is finished.
    Failed(Arc<HttpError>),
}

/// The 2024-11-05 HTTP+SSE transport: build it with
/// [`crate::HttpTransportBuilder::build_sse`] from the server's SSE URL, with every setting
/// of the Streamable HTTP transport (headers, bearer token, TLS, proxy, timeouts, limits).
///
/// The stream opens on first use. A message waits (up to 30 s) for the `endpoint` event,
/// whose URL must have the stream's origin (another one is refused: the token would follow);
/// a POST that is not accepted fails its request through `recv`, as over Streamable HTTP.
/// When the stream ends, `recv` reports why and then ends: the connection is over (a client
/// with a reconnect policy opens a new one). Messages carry no MCP headers: this era has none.
#[derive(Clone)]
pub struct SseTransport {
    inner: Arc<Inner>,
    url: Arc<str>,
    endpoint: watch::Sender<Endpoint>,
    _owner: Arc<Owner>,
}

impl std::fmt::Debug for SseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseTransport")
            .field("url", &toolwire_types::redacted_url(self.url.as_ref()))
            .field("endpoint", &*self.endpoint.borrow())
            .finish_non_exhaustive()
    }
}

impl SseTransport {
    pub(crate) fn new(inner: Arc<Inner>, url: String) -> Self {
        Self {
            _owner: Arc::new(Owner(inner.clone())),
            inner,
            url: url.into(),
            endpoint: watch::channel(Endpoint::Pending).0,
        }
    }

    /// Where messages are posted, once the server said so.
    pub fn endpoint(&self) -> Option<String> {
        match &*self.endpoint.borrow() {
            Endpoint::Ready(uri) => Some(uri.to_string()),
            Endpoint::Pending | Endpoint::Failed(_) => None,
        }
    }

    /// Opens the stream unless it is open (or was).
    fn open(&self) {
        let mut state = lock(&self.inner.state);
        if state.listener.is_some() || state.closed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let task = runtime.spawn(stream(self.inner.clone(), self.endpoint.clone()));
        state.listener = Some(task.abort_handle());
    }

    /// The endpoint, waiting for the `endpoint` event.
    pub(crate) async fn ready(&self) -> Result<Uri, Arc<HttpError>> {
        self.open();
        let mut rx = self.endpoint.subscribe();
        let ready = rx.wait_for(|e| !matches!(e, Endpoint::Pending));
        match tokio::time::timeout(ENDPOINT_WAIT, ready).await {
            Ok(Ok(state)) => match &*state {
                Endpoint::Ready(uri) => Ok(uri.clone()),
                Endpoint::Failed(e) => Err(e.clone()),
                Endpoint::Pending => Err(Arc::new(HttpError::Closed)),
            },
            Ok(Err(_)) => Err(Arc::new(HttpError::Closed)),
            Err(_) => Err(Arc::new(HttpError::NoEndpoint(ENDPOINT_WAIT))),
        }
    }

    /// POSTs one message to the endpoint; `Err` with what the server said when it is not
    /// accepted.
    async fn post(&self, to: &Uri, out: &Outbound) -> Result<(), crate::post::Failure> {
        let (mut req, _, _) = self
            .inner
            .request(Method::POST, out.body.clone(), false, Some(to));
        req.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let method = out.kind.method();
        self.inner.authorize(&mut req, method).await?;
        let resp = self.inner.roundtrip(req).await?;
        let status = resp.status();
        if !status.is_success() {
            return Err(self.inner.status_failure(resp, method).await);
        }
        // "Accepted", or nothing: the answer comes on the stream.
        let mut body = resp.into_body();
        let ack = self.inner.read_error_body(&mut body).await;
        self.inner.received(method, status, &ack);
        Ok(())
    }
}

/// Why a stream is over, as `recv` reports it.
fn ended(error: Arc<HttpError>) -> TransportError {
    TransportError::Io(std::io::Error::other(error))
}

/// Runs the SSE stream: the `endpoint` event, then every `message` into the mailbox; when it
/// ends, reports why and closes the mailbox.
async fn stream(inner: Arc<Inner>, endpoint: watch::Sender<Endpoint>) {
    let error = match read(&inner, &endpoint).await {
        Ok(()) => HttpError::StreamEnded { resumes: 0 },
        Err(e) => e,
    };
    let error = Arc::new(error);
    tracing::debug!(error = %error, "the SSE stream is over");
    endpoint.send_replace(Endpoint::Failed(error.clone()));
    if !lock(&inner.state).closed {
        inner.push(Err(ended(error)));
    }
    inner.end_mailbox();
}

async fn read(inner: &Inner, endpoint: &watch::Sender<Endpoint>) -> Result<(), HttpError> {
    let (mut req, _, _) = inner.request(Method::GET, Bytes::new(), false, None);
    req.headers_mut()
        .insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    inner.authorize(&mut req, None).await?;
    let resp = inner.roundtrip(req).await?;
    let status = resp.status();
    if !status.is_success() {
        return Err(inner.status_failure(resp, None).await.error);
    }
    let kind = content_type(resp.headers());
    if kind != "text/event-stream" {
        return Err(HttpError::UnexpectedContentType(kind));
    }
    inner.received(None, status, b"");
    let base = inner.uri.clone();
    let mut body = resp.into_body();
    let mut parser = SseParser::new(inner.config.max_sse_line, inner.config.max_message_size);
    let mut events = Vec::new();
    while let Some(chunk) = inner.chunk(&mut body).await? {
        parser.feed(&chunk, &mut events)?;
        for event in events.drain(..) {
            match event.event.as_deref() {
                Some("endpoint") => {
                    let to = endpoint_uri(&base, &event.data)?;
                    tracing::debug!(endpoint = %to.path(), "the server named its message endpoint");
                    endpoint.send_replace(Endpoint::Ready(to));
                }
                None | Some("message") if !event.data.is_empty() => {
                    inner.push_streamed(event.data, None).await;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The `endpoint` event's URL, resolved against the stream's; it must share its origin.
pub(crate) fn endpoint_uri(base: &Uri, data: &[u8]) -> Result<Uri, HttpError> {
    let refused = |reason| HttpError::BadEndpoint { reason };
    let text = std::str::from_utf8(data)
        .map_err(|_| refused("it is not UTF-8"))?
        .trim();
    let joined = url::Url::parse(&base.to_string())
        .and_then(|b| b.join(text))
        .map_err(|_| refused("it is not a URL"))?;
    let uri: Uri = joined
        .as_str()
        .parse()
        .map_err(|_| refused("it is not a URL"))?;
    if redirect::origin(&uri) != redirect::origin(base) {
        return Err(refused(
            "it names another origin than the stream's (the token would follow it)",
        ));
    }
    Ok(uri)
}

impl Transport for SseTransport {
    fn carries_headers(&self) -> bool {
        false
    }

    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            if lock(&self.inner.state).closed {
                return Err(TransportError::Closed);
            }
            let to = self.ready().await.map_err(ended)?;
            if let Err(f) = self.post(&to, &message).await {
                match message.kind {
                    MessageKind::Request { id, .. } => self.fail(id, f),
                    kind => {
                        tracing::warn!(method = kind.method(), error = %f.error, "the server did not accept a message");
                    }
                }
            }
            Ok(())
        })
    }

    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
        self.open();
        Box::pin(self.inner.next_item())
    }

    fn authorization_context(&self) -> u64 {
        self.inner.authorization_context()
    }

    fn authorizing(&self) -> Option<toolwire_transport::Authorizing> {
        Some(self.inner.authorizing.clone())
    }

    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.inner.close())
    }
}

impl SseTransport {
    /// A request the server did not accept fails through `recv`.
    fn fail(&self, id: RequestId, f: crate::post::Failure) {
        tracing::debug!(error = %f.error, "request not accepted");
        self.inner
            .push(Err(TransportError::Request(f.into_request_failure(id))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_against_the_stream_and_keep_its_origin() {
        let base: Uri = "http://127.0.0.1:8000/sse".parse().unwrap_or_default();
        let ok = |data: &str| {
            endpoint_uri(&base, data.as_bytes())
                .map(|u| u.to_string())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            ok("/messages/?session_id=abc").ok().as_deref(),
            Some("http://127.0.0.1:8000/messages/?session_id=abc")
        );
        assert_eq!(
            ok("messages?x=1").ok().as_deref(),
            Some("http://127.0.0.1:8000/messages?x=1")
        );
        assert_eq!(
            ok(" http://127.0.0.1:8000/m \n").ok().as_deref(),
            Some("http://127.0.0.1:8000/m")
        );
        for other in [
            "http://evil.example/m",
            "https://127.0.0.1:8000/m",
            "//127.0.0.1:9/m",
        ] {
            let err = ok(other).unwrap_err();
            assert!(err.contains("another origin"), "{other}: {err}");
        }
    }
}

//! The spec's backwards-compatibility rule for clients: speak Streamable HTTP, and when the
//! server answers the `initialize` POST with 400, 404 or 405, GET the same URL; if that opens
//! an SSE stream whose first event is `endpoint`, the server speaks the 2024-11-05 HTTP+SSE
//! transport, and everything from `initialize` on goes that way.

use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;
use toolwire_transport::{
    BoxFuture, Inbound, MessageKind, Outbound, RequestFailure, RequestId, SessionStep, Transport,
    TransportError,
};

use crate::{HttpTransport, HttpTransportBuilder, SseTransport, lock};

/// Streamable HTTP with the fallback to HTTP+SSE (what `ClientBuilder::connect_http` uses):
/// build it with [`HttpTransportBuilder::build_with_sse_fallback`]. Until a fallback it is the
/// [`HttpTransport`] it wraps (one atomic load per message more).
#[derive(Clone)]
pub struct HttpOrSseTransport {
    http: HttpTransport,
    shared: Arc<Shared>,
}

struct Shared {
    /// The settings, to build the SSE transport from.
    builder: HttpTransportBuilder,
    /// Set once the fallback succeeded: everything goes there.
    sse: OnceLock<SseTransport>,
    /// The last `initialize` sent, to send again over SSE.
    initialize: Mutex<Option<Outbound>>,
    /// A fallback under way: the failure that started it (returned if it fails) and its
    /// outcome (`Some(true)` once switched).
    pending: Mutex<Option<(RequestFailure, watch::Receiver<Option<bool>>)>>,
    /// Whether `pending` may hold something: every message reads this, not the lock.
    under_way: std::sync::atomic::AtomicBool,
    /// Tried once: a second refusal is the caller's.
    tried: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for HttpOrSseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOrSseTransport")
            .field("http", &self.http)
            .field("sse", &self.shared.sse.get())
            .finish_non_exhaustive()
    }
}

impl HttpOrSseTransport {
    pub(crate) fn new(http: HttpTransport, mut builder: HttpTransportBuilder) -> Self {
        builder.authorizing = Some(http.inner.authorizing.clone());
        Self {
            http,
            shared: Arc::new(Shared {
                builder,
                sse: OnceLock::new(),
                initialize: Mutex::new(None),
                pending: Mutex::new(None),
                under_way: std::sync::atomic::AtomicBool::new(false),
                tried: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// The Streamable HTTP transport (its session id, its token).
    pub fn http(&self) -> &HttpTransport {
        &self.http
    }

    /// The HTTP+SSE transport, once the server turned out to speak only that.
    pub fn sse(&self) -> Option<&SseTransport> {
        self.shared.sse.get()
    }

    /// Whether a fallback may be under way (the lock-free check every message makes).
    fn under_way(&self) -> bool {
        self.shared
            .under_way
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether `failure` is the `initialize` POST refused in the way the rule names.
    fn falls_back(&self, failure: &RequestFailure) -> bool {
        let refused = matches!(failure.status, Some(400 | 404 | 405));
        let initialize = lock(&self.shared.initialize).as_ref().is_some_and(
            |out| matches!(&out.kind, MessageKind::Request { id, .. } if *id == failure.id),
        );
        refused
            && initialize
            && !self
                .shared
                .tried
                .swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// Starts the fallback on a task of its own (so a dropped `recv` loses nothing).
    fn start_fallback(&self, failure: RequestFailure) {
        let (done, outcome) = watch::channel(None);
        *lock(&self.shared.pending) = Some((failure, outcome));
        self.shared
            .under_way
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let switched = match fall_back(&shared).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!(error = %e, "no HTTP+SSE fallback");
                    false
                }
            };
            done.send_replace(Some(switched));
        });
    }

    /// Waits for a fallback under way; `Some(failure)` if it did not switch.
    async fn settle(&self) -> Option<Option<RequestFailure>> {
        if !self.under_way() {
            return None;
        }
        let mut outcome = lock(&self.shared.pending).as_ref()?.1.clone();
        // Cancel-safe: nothing is taken until the outcome is known.
        let _ = outcome.wait_for(Option::is_some).await;
        let (failure, outcome) = lock(&self.shared.pending).take()?;
        self.shared
            .under_way
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let switched = *outcome.borrow() == Some(true);
        Some((!switched).then_some(failure))
    }
}

/// Opens the SSE stream on the same URL and, once it named its endpoint, sends `initialize`
/// again through it.
async fn fall_back(shared: &Shared) -> Result<(), TransportError> {
    let sse = shared
        .builder
        .clone()
        .build_sse()
        .map_err(|e| TransportError::Setup(Box::new(e)))?;
    sse.ready()
        .await
        .map_err(|e| TransportError::Io(std::io::Error::other(e)))?;
    let Some(initialize) = lock(&shared.initialize).clone() else {
        return Err(TransportError::Closed);
    };
    tracing::info!(
        "the server refused Streamable HTTP and opened an HTTP+SSE stream; using the 2024-11-05 transport"
    );
    sse.send(initialize).await?;
    let _ = shared.sse.set(sse);
    Ok(())
}

impl Transport for HttpOrSseTransport {
    fn carries_headers(&self) -> bool {
        true
    }

    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            // A fallback under way decides where this goes (its outcome stays for `recv`).
            let under_way = self
                .under_way()
                .then(|| lock(&self.shared.pending).as_ref().map(|(_, o)| o.clone()))
                .flatten();
            if let Some(mut outcome) = under_way {
                let _ = outcome.wait_for(Option::is_some).await;
            }
            if let Some(sse) = self.shared.sse.get() {
                return sse.send(message).await;
            }
            if message.session == SessionStep::Opens {
                *lock(&self.shared.initialize) = Some(message.clone());
            }
            self.http.send(message).await
        })
    }

    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
        Box::pin(async move {
            loop {
                if let Some(sse) = self.shared.sse.get() {
                    return sse.recv().await;
                }
                if let Some(outcome) = self.settle().await {
                    match outcome {
                        None => continue,
                        Some(failure) => return Some(Err(TransportError::Request(failure))),
                    }
                }
                let item = self.http.recv().await;
                if let Some(Err(TransportError::Request(failure))) = &item
                    && self.falls_back(failure)
                {
                    self.start_fallback(failure.clone());
                    continue;
                }
                return item;
            }
        })
    }

    fn cancel(&self, id: &RequestId) {
        match self.shared.sse.get() {
            Some(sse) => sse.cancel(id),
            None => self.http.cancel(id),
        }
    }

    fn authorizing(&self) -> Option<toolwire_transport::Authorizing> {
        // The SSE transport, once built, counts into the same (see `new`).
        self.http.authorizing()
    }

    fn authorization_context(&self) -> u64 {
        // Both share the HTTP transport's credentials.
        self.http.authorization_context()
    }

    fn mcp_session_id(&self) -> Option<String> {
        // The 2024-11-05 transport has none (its session is in the endpoint's URL).
        match self.shared.sse.get() {
            Some(_) => None,
            None => self.http.session_id(),
        }
    }

    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            if let Some(sse) = self.shared.sse.get() {
                sse.close().await?;
            }
            self.http.close().await
        })
    }
}

//! The legacy session (2025-03-26 … 2025-11-25): the handshake kept for replay after a 404,
//! the GET stream for server messages, and `DELETE` on close.

use std::sync::Arc;

use bytes::Bytes;
use http::header::ACCEPT;
use http::{HeaderName, HeaderValue, Method, Response, StatusCode};
use hyper::body::Incoming;
use toolwire_transport::{BoxFuture, MessageKind, Outbound, RequestId};

use crate::{
    Cursor, DEFAULT_SSE_RETRY, HttpError, Inner, LAST_EVENT_ID, MAX_LISTEN_FAILURES,
    PROTOCOL_VERSION, SESSION_ID, content_type, lock, payload_session_id, sse_answer,
};

/// A message as sent, to replay the legacy handshake.
#[derive(Clone)]
pub(crate) struct Replay {
    pub(crate) body: Bytes,
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
}

/// What a legacy session holds on the server besides the handshake: the log level and the
/// resource subscriptions, each as last sent. A new session starts without them, so they
/// are replayed after the handshake, before the request that found the session gone.
#[derive(Default)]
pub(crate) struct SessionState {
    log_level: Option<Replay>,
    /// Each subscribed URI with its `resources/subscribe`, in the order they were made.
    subscriptions: Vec<(String, Replay)>,
}

impl SessionState {
    /// Records `out` (answered with a success status) if it sets session state.
    pub(crate) fn record(&mut self, out: &Outbound) {
        let method = out.kind.method();
        let replay = || Replay {
            body: out.body.clone(),
            headers: out.headers.clone(),
        };
        match method {
            Some("logging/setLevel") => self.log_level = Some(replay()),
            Some(m @ ("resources/subscribe" | "resources/unsubscribe")) => {
                #[derive(serde::Deserialize)]
                struct Params {
                    uri: String,
                }
                #[derive(serde::Deserialize)]
                struct Body {
                    params: Params,
                }
                let Ok(body) = serde_json::from_slice::<Body>(&out.body) else {
                    return;
                };
                let uri = body.params.uri;
                self.subscriptions.retain(|(u, _)| *u != uri);
                if m == "resources/subscribe" {
                    self.subscriptions.push((uri, replay()));
                }
            }
            _ => {}
        }
    }

    /// What to send again on a new session, in order.
    fn replays(&self) -> Vec<(&'static str, Replay)> {
        let level = self
            .log_level
            .iter()
            .map(|r| ("logging/setLevel", r.clone()));
        let subscriptions = self
            .subscriptions
            .iter()
            .map(|(_, r)| ("resources/subscribe", r.clone()));
        level.chain(subscriptions).collect()
    }
}

/// A session id is visible ASCII (0x21–0x7E).
pub(crate) fn valid_session_id(value: &HeaderValue) -> bool {
    !value.is_empty() && value.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b))
}

impl Inner {
    /// Replays the legacy handshake if the session expired or the token changed.
    /// Boxed: it calls [`Inner::post`], which calls it.
    pub(crate) fn ensure_session(&self) -> BoxFuture<'_, Result<(), HttpError>> {
        Box::pin(self.replay_handshake())
    }

    pub(crate) async fn replay_handshake(&self) -> Result<(), HttpError> {
        if !lock(&self.state).stale {
            return Ok(());
        }
        let _one = self.handshake.lock().await;
        let (initialize, initialized) = {
            let mut state = lock(&self.state);
            if !state.stale {
                return Ok(());
            }
            if let Some(listener) = state.listener.take() {
                listener.abort();
            }
            state.session_id = None;
            (state.initialize.clone(), state.initialized.clone())
        };
        let Some(initialize) = initialize else {
            lock(&self.state).stale = false;
            return Ok(());
        };
        tracing::info!("replaying the initialize handshake for a new session");
        let mut out = Outbound::new(
            initialize.body.clone(),
            MessageKind::Request {
                id: RequestId::Number(0),
                method: "initialize",
            },
        );
        out.headers = initialize.headers;
        let lost = |why: HttpError| HttpError::SessionLost(Box::new(why));
        let resp = self.post(&out, true).await.map_err(|f| lost(f.error))?;
        let session = resp.headers().get(SESSION_ID).cloned();
        let mut body = resp.into_body();
        let answer = self
            .read_body(&mut body, self.config.max_message_size)
            .await
            .map_err(lost)?;
        let session = session
            .filter(valid_session_id)
            .or_else(|| payload_session_id(sse_answer(&answer).unwrap_or(&answer)));
        {
            let mut state = lock(&self.state);
            state.session_id = session;
            state.stale = false;
            state.relisten = initialized.is_some();
        }
        if let Some(initialized) = initialized {
            let mut out = Outbound::new(
                initialized.body,
                MessageKind::Notification {
                    method: "notifications/initialized",
                },
            );
            out.headers = initialized.headers;
            self.post(&out, true).await.map_err(|f| lost(f.error))?;
        }
        // The log level and subscriptions the old session had; their answers are not the
        // caller's (it had them already), and a failure costs only that piece of state.
        let replays = lock(&self.state).session_state.replays();
        for (method, replay) in replays {
            let mut out = Outbound::new(
                replay.body,
                MessageKind::Request {
                    id: RequestId::Number(0),
                    method,
                },
            );
            out.headers = replay.headers;
            let sent = match self.post(&out, true).await {
                Ok(resp) => {
                    let mut body = resp.into_body();
                    self.read_body(&mut body, self.config.max_message_size)
                        .await
                        .map(drop)
                }
                Err(f) => Err(f.error),
            };
            if let Err(e) = sent {
                tracing::warn!(method, error = %e, "could not restore session state on the new session");
            }
        }
        Ok(())
    }

    /// A GET for the event stream (`Last-Event-ID` to resume).
    pub(crate) async fn get(
        &self,
        last_event_id: Option<&str>,
    ) -> Result<Response<Incoming>, HttpError> {
        let (mut req, _, _) = self.request(Method::GET, Bytes::new(), true, None);
        let headers = req.headers_mut();
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(version) = lock(&self.state).version.clone() {
            headers.insert(PROTOCOL_VERSION, version);
        }
        if let Some(id) = last_event_id.and_then(|id| HeaderValue::try_from(id).ok()) {
            headers.insert(LAST_EVENT_ID, id);
        }
        self.authorize(&mut req, None).await?;
        self.roundtrip(req).await
    }

    /// The legacy GET stream: server requests and notifications, reconnected while it works.
    pub(crate) async fn listen(
        self: Arc<Self>,
        mut opened: Option<tokio::sync::oneshot::Sender<()>>,
    ) {
        let mut cursor = Cursor::default();
        let mut failures = 0;
        let mut delays = self.config.retry.delays();
        loop {
            let response = self.get(cursor.last_id.as_deref()).await;
            if let Some(opened) = opened.take() {
                let _ = opened.send(());
            }
            let failed = match response {
                Ok(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                    tracing::debug!("the server offers no GET stream (405)");
                    return;
                }
                Ok(resp) if resp.status() == StatusCode::NOT_FOUND => {
                    // A 404 means the session is gone only when the request named one;
                    // without a session it is a server that serves no GET here.
                    let mut state = lock(&self.state);
                    if state.session_id.is_some() {
                        tracing::debug!("GET stream: the session is gone (404)");
                        state.stale = true;
                    } else {
                        tracing::debug!("the server offers no GET stream (404, no session)");
                    }
                    return;
                }
                Ok(resp)
                    if resp.status().is_success()
                        && content_type(resp.headers()) == "text/event-stream" =>
                {
                    self.received(None, resp.status(), b"");
                    let before = cursor.last_id.clone();
                    let mut body = resp.into_body();
                    let ended = self.pump(&mut body, None, &mut cursor).await;
                    tracing::debug!(?ended, "GET stream ended");
                    cursor.last_id == before
                }
                Ok(resp) => {
                    tracing::debug!(status = %resp.status(), "GET stream refused");
                    true
                }
                Err(e) => {
                    tracing::debug!(error = %e, "GET stream failed");
                    true
                }
            };
            failures = if failed { failures + 1 } else { 0 };
            if failures > MAX_LISTEN_FAILURES {
                tracing::warn!(
                    "giving up the GET stream after {MAX_LISTEN_FAILURES} failures; server messages outside responses will be missed"
                );
                return;
            }
            let delay = match (failed, cursor.retry) {
                (false, Some(retry)) => retry,
                (false, None) => DEFAULT_SSE_RETRY,
                (true, _) => delays.next().unwrap_or(self.config.retry.max_delay),
            };
            tokio::time::sleep(delay).await;
        }
    }

    /// Reopens the GET stream after a replayed handshake.
    pub(crate) fn relisten(self: &Arc<Self>) {
        let mut state = lock(&self.state);
        if std::mem::take(&mut state.relisten) && self.config.get_stream && !state.closed {
            let listener = tokio::spawn(self.clone().listen(None));
            if let Some(old) = state.listener.replace(listener.abort_handle()) {
                old.abort();
            }
        }
    }

    /// The legacy handshake is finishing (`initialized` is about to be sent): remember it for
    /// replays, open the GET stream; the receiver fires once the server answered the GET (or
    /// it failed).
    pub(crate) fn handshake_done(
        self: &Arc<Self>,
        initialized: &Outbound,
    ) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let version = initialized
            .headers
            .iter()
            .find(|(n, _)| *n == PROTOCOL_VERSION)
            .map(|(_, v)| v.clone());
        let mut state = lock(&self.state);
        state.version = version;
        state.initialized = Some(Replay {
            body: initialized.body.clone(),
            headers: initialized.headers.clone(),
        });
        // The GET stream belongs to a legacy session: only after an `initialize` went through.
        if !self.config.get_stream || state.closed || state.initialize.is_none() {
            return None;
        }
        if let Some(old) = state.listener.take() {
            old.abort();
        }
        let (opened, answered) = tokio::sync::oneshot::channel();
        let listener = tokio::spawn(self.clone().listen(Some(opened)));
        state.listener = Some(listener.abort_handle());
        Some(answered)
    }

    pub(crate) async fn delete_session(&self) {
        let (session, version) = {
            let state = lock(&self.state);
            (state.session_id.clone(), state.version.clone())
        };
        if session.is_none() {
            return;
        }
        let (mut req, _, _) = self.request(Method::DELETE, Bytes::new(), true, None);
        if let Some(version) = version {
            req.headers_mut().insert(PROTOCOL_VERSION, version);
        }
        if let Err(e) = self.authorize(&mut req, None).await {
            tracing::debug!(error = %e, "no credentials for the DELETE; the session is left to expire");
            return;
        }
        match tokio::time::timeout(self.config.delete_timeout, self.roundtrip(req)).await {
            Ok(Ok(resp)) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!("the server does not let clients end sessions (405)")
            }
            Ok(Ok(resp)) => tracing::debug!(status = %resp.status(), "session ended"),
            Ok(Err(e)) => tracing::debug!(error = %e, "DELETE failed"),
            Err(_) => tracing::debug!("DELETE timed out"),
        }
    }
}

//! The legacy session (2025-03-26 … 2025-11-25): its id, the GET stream for server messages,
//! its end (a 404 that names it; the session above opens a new one), and `DELETE` on close.

use std::sync::Arc;

use bytes::Bytes;
use http::header::ACCEPT;
use http::{HeaderValue, Method, Response, StatusCode};
use hyper::body::Incoming;
use toolwire_transport::Outbound;

use crate::{
    Cursor, DEFAULT_SSE_RETRY, HttpError, Inner, LAST_EVENT_ID, MAX_LISTEN_FAILURES,
    PROTOCOL_VERSION, State, content_type, lock,
};

impl State {
    /// The server no longer knows the session (or the identity presented changed): the id is
    /// dropped with its GET stream, and every request until a new session opens fails as
    /// [`HttpError::SessionExpired`] without being sent.
    pub(crate) fn end_session(&mut self) {
        self.session_id = None;
        self.session_ended = true;
        if let Some(listener) = self.listener.take() {
            listener.abort();
        }
    }

    /// A request that opens a session is on its way: it goes without an id, and the one its
    /// answer carries is the new session's.
    pub(crate) fn open_session(&mut self) {
        self.session_id = None;
        self.session_ended = false;
        if let Some(listener) = self.listener.take() {
            listener.abort();
        }
    }
}

/// A session id is visible ASCII (0x21–0x7E).
pub(crate) fn valid_session_id(value: &HeaderValue) -> bool {
    !value.is_empty() && value.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b))
}

impl Inner {
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
                        state.end_session();
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

    /// The legacy handshake is finishing (`initialized` is about to be sent): open the GET
    /// stream; the receiver fires once the server answered the GET (or it failed).
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
        // The GET stream belongs to a legacy session: only after an opening request went
        // through.
        if !self.config.get_stream || state.closed || !state.legacy {
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

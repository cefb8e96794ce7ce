//! Reading an answer: a JSON body, or an SSE stream whose events are pushed as they arrive
//! (the request completes on the event that answers it, never waiting for the body's tail),
//! resumed with `Last-Event-ID` when a legacy stream breaks.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use toolwire_transport::{Inbound, RequestId};

use crate::{
    DEFAULT_SSE_RETRY, DRAIN, Failure, HttpError, Inner, MAX_RESUMES, SESSION_ID, SseParser, lock,
    valid_session_id,
};

pub(crate) fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Whether `data` is a JSON-RPC response to `id` (its envelope, read by `toolwire-types`).
pub(crate) fn answers(data: &[u8], id: &RequestId) -> bool {
    toolwire_types::Message::answered_id(data).as_ref() == Some(id)
}

/// `result.sessionId` of the answer that opened a session, for servers that put it in the
/// payload (a visible-ASCII value only).
pub(crate) fn payload_session_id(data: &[u8]) -> Option<HeaderValue> {
    let id = toolwire_types::Message::result_session_id(data)?;
    HeaderValue::try_from(id).ok().filter(valid_session_id)
}

/// What a response stream has shown so far.
#[derive(Default)]
pub(crate) struct Cursor {
    pub(crate) last_id: Option<String>,
    pub(crate) retry: Option<Duration>,
    pub(crate) answer: Option<Bytes>,
    /// Reading the answer to a request that opens a session: capture the session id when it
    /// comes.
    pub(crate) opens: bool,
    pub(crate) header_session: Option<HeaderValue>,
}

impl Inner {
    /// The next chunk of body data (`None` at the end), within the read timeout.
    pub(crate) async fn chunk(&self, body: &mut Incoming) -> Result<Option<Bytes>, HttpError> {
        loop {
            let next = body.frame();
            let frame = match self.config.read_timeout {
                Some(t) => tokio::time::timeout(t, next)
                    .await
                    .map_err(|_| HttpError::ReadTimeout(t))?,
                None => next.await,
            };
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(HttpError::Body(Box::new(e))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// A whole body, refusing more than `limit` bytes.
    pub(crate) async fn read_body(
        &self,
        body: &mut Incoming,
        limit: usize,
    ) -> Result<Bytes, HttpError> {
        let mut buf = BytesMut::new();
        while let Some(data) = self.chunk(body).await? {
            if buf.len() + data.len() > limit {
                return Err(HttpError::ResponseTooLarge { limit });
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf.freeze())
    }

    /// Reads a 2xx answer to request `id`, pushing every message it carries.
    pub(crate) async fn deliver(
        self: &Arc<Self>,
        resp: Response<Incoming>,
        id: &RequestId,
        method: &str,
        opens: bool,
    ) -> Result<(), Failure> {
        let status = resp.status();
        let content_type = content_type(resp.headers());
        let header_session = resp.headers().get(SESSION_ID).cloned();
        let legacy = lock(&self.state).legacy;
        if opens && let Some(h) = header_session.as_ref().filter(|h| valid_session_id(h)) {
            // At once, not after the answer: resuming a cut answer stream needs the session.
            lock(&self.state).session_id = Some(h.clone());
        }
        let mut body = resp.into_body();
        match content_type.as_str() {
            "application/json" => {
                let data = self
                    .read_body(&mut body, self.config.max_message_size)
                    .await?;
                self.received(Some(method), status, &data);
                if data.iter().all(u8::is_ascii_whitespace) {
                    return Err(HttpError::NoAnswer(status).into());
                }
                if opens {
                    self.capture_session(header_session, &data);
                }
                self.push(Ok(Inbound::new(data)));
                Ok(())
            }
            "text/event-stream" => {
                self.received(Some(method), status, b"");
                self.read_stream(body, id, opens, legacy, header_session)
                    .await
                    .map_err(Failure::from)
            }
            _ => {
                let data = self.read_error_body(&mut body).await;
                self.received(Some(method), status, &data);
                if data.is_empty() {
                    Err(HttpError::NoAnswer(status).into())
                } else {
                    Err(HttpError::UnexpectedContentType(content_type).into())
                }
            }
        }
    }

    pub(crate) fn capture_session(&self, header: Option<HeaderValue>, answer: &[u8]) {
        let session = match header {
            Some(h) if valid_session_id(&h) => Some(h),
            Some(_) => {
                tracing::warn!("ignoring an Mcp-Session-Id with characters outside 0x21-0x7E");
                None
            }
            None => payload_session_id(answer),
        };
        if session.is_some() {
            lock(&self.state).session_id = session;
        }
    }

    /// Reads an SSE answer to `id`, resuming it with `Last-Event-ID` (legacy) when it breaks.
    pub(crate) async fn read_stream(
        self: &Arc<Self>,
        mut body: Incoming,
        id: &RequestId,
        opens: bool,
        legacy: bool,
        header_session: Option<HeaderValue>,
    ) -> Result<(), HttpError> {
        let mut cursor = Cursor {
            opens,
            header_session,
            ..Cursor::default()
        };
        let mut resumes = 0;
        loop {
            let ended = self.pump(&mut body, Some(id), &mut cursor).await;
            if cursor.answer.is_some() {
                return Ok(());
            }
            if let Err(e @ HttpError::Sse(_)) = ended {
                return Err(e);
            }
            if !legacy || cursor.last_id.is_none() || resumes >= MAX_RESUMES {
                tracing::debug!(?ended, resumes, "response stream ended before its answer");
                return Err(HttpError::StreamEnded { resumes });
            }
            resumes += 1;
            let delay = cursor.retry.unwrap_or(DEFAULT_SSE_RETRY);
            tracing::info!(?delay, last_event_id = ?cursor.last_id, "response stream broke; resuming");
            tokio::time::sleep(delay).await;
            match self.get(cursor.last_id.as_deref()).await {
                Ok(resp)
                    if resp.status().is_success()
                        && content_type(resp.headers()) == "text/event-stream" =>
                {
                    body = resp.into_body();
                }
                Ok(resp) => {
                    tracing::debug!(status = %resp.status(), "resumption refused");
                }
                Err(e) => tracing::debug!(error = %e, "resumption failed"),
            }
        }
    }

    /// Reads events from `body` until it ends (or, once the answer to `id` came, for a short
    /// drain), pushing messages. `Ok` at the end of the body.
    pub(crate) async fn pump(
        &self,
        body: &mut Incoming,
        id: Option<&RequestId>,
        cursor: &mut Cursor,
    ) -> Result<(), HttpError> {
        let mut parser = SseParser::new(self.config.max_sse_line, self.config.max_message_size);
        let mut events = Vec::new();
        let mut drain_until = None;
        loop {
            let next = match drain_until {
                Some(at) => match tokio::time::timeout_at(at, self.chunk(body)).await {
                    Ok(next) => next,
                    Err(_) => return Ok(()),
                },
                None => self.chunk(body).await,
            };
            let Some(data) = next? else {
                return Ok(());
            };
            parser.feed(&data, &mut events)?;
            for event in events.drain(..) {
                if let Some(last) = event.id {
                    cursor.last_id = Some(last);
                }
                if let Some(retry) = event.retry {
                    cursor.retry = Some(retry);
                }
                if !(event.data.is_empty()
                    || matches!(event.event.as_deref(), None | Some("message")))
                {
                    continue;
                }
                if event.data.is_empty() {
                    continue;
                }
                if let Some(id) = id
                    && cursor.answer.is_none()
                    && answers(&event.data, id)
                {
                    cursor.answer = Some(event.data.clone());
                    drain_until = Some(tokio::time::Instant::now() + DRAIN);
                    if cursor.opens {
                        // Before the answer is handed on: the next request needs the session.
                        self.capture_session(cursor.header_session.take(), &event.data);
                    }
                }
                tracing::trace!(bytes = event.data.len(), "SSE message");
                self.push_streamed(event.data, id).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use toolwire_transport::RequestId;

    use super::*;
    use crate::valid_session_id;

    #[test]
    fn finds_the_answer_and_session_ids() {
        let id = RequestId::Number(7);
        assert!(answers(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#, &id));
        assert!(!answers(br#"{"jsonrpc":"2.0","id":7,"method":"x"}"#, &id));
        assert!(!answers(br#"{"jsonrpc":"2.0","id":8,"result":{}}"#, &id));
        assert!(!answers(b"not json", &id));
        assert_eq!(
            payload_session_id(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"abc-1"}}"#),
            Some(HeaderValue::from_static("abc-1"))
        );
        assert_eq!(
            payload_session_id(br#"{"result":{"sessionId":"a b"}}"#),
            None
        );
        assert!(!valid_session_id(&HeaderValue::from_static("")));
    }
}

//! How a checked POST is answered (`Front::frame`): a notification or a response with 202, a
//! listen stream, an `initialize` with its new session, a request as one JSON body or as an
//! SSE stream (its notifications, the server's questions, keep-alive comments, then its
//! answer; events logged for resumption in a legacy session; a call whose 2026-07-28 client is
//! gone dropped, which cancels it).

use std::sync::Arc;
use std::time::Duration;
use toolwire_types::ClientMethod;

use crate::streamed::StreamSender;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::core::{Handled, error};
use crate::http::{Body, Front};
use crate::respond::{
    denied, empty, in_request_map, json_bytes, json_response, json_text_response, sse_response,
    sse_text,
};
use crate::{Caller, Denial, Edge, Framing, Service};

impl<S: Service + Edge> Front<S> {
    /// Answers a checked POST: a notification or response with 202, a listen stream, an
    /// `initialize` with a new session, a request as one JSON body or an SSE stream.
    pub(crate) async fn frame(
        self: &Arc<Self>,
        parts: http::request::Parts,
        incoming: crate::incoming::Incoming,
        modern: bool,
        mut session: Option<String>,
        caller: Option<Arc<Caller>>,
    ) -> Response<Body> {
        let options = &self.core.options;
        let message = &incoming.value;
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let owner = Caller::tag(caller.as_deref());
        // The request's header map, emptied, carries the answer (`in_request_map`).
        let headers = parts.headers;
        let nowhere = &self.nowhere;
        // A client that accepts only JSON gets JSON, whatever the server prefers.
        let framing = match options.framing {
            Framing::Sse if !accepts_event_stream(&headers) => Framing::Json,
            framing => framing,
        };
        let core = self.core.clone();
        let is_request = message.get("id").is_some_and(|i| !i.is_null())
            && message["method"].as_str().is_some_and(|m| !m.is_empty());
        let who = caller.as_deref();
        if !is_request {
            let _ = core
                .handle(&incoming, nowhere, session.as_deref(), false, who)
                .await;
            return in_request_map(headers, StatusCode::ACCEPTED, None);
        }
        if core.drain.refusing() {
            return crate::respond::draining(&id);
        }
        let kind = incoming.method;
        if kind == ClientMethod::Listen && modern {
            return match core.handle(&incoming, nowhere, None, false, who).await {
                Handled::Listen(id, interest) => self.listen(id, interest, caller),
                Handled::Answer(a) => json_text_response(StatusCode::OK, a.into_bytes()),
                Handled::Refused(a, _) => json_response(StatusCode::OK, &a),
                Handled::Nothing => empty(StatusCode::ACCEPTED),
            };
        }
        let new_session = if kind == ClientMethod::Initialize && options.sessions && !modern {
            let declared =
                serde_json::to_vec(&message["params"]["capabilities"]).map_or(0, |t| t.len());
            if declared > options.limits.max_declaration {
                return json_response(
                    StatusCode::OK,
                    &error(
                        &id,
                        toolwire_types::error::code::INVALID_PARAMS,
                        format!(
                            "the declared capabilities are {declared} bytes, more than the {} this server keeps",
                            options.limits.max_declaration
                        ),
                        None,
                    ),
                );
            }
            if !self.room_for(owner) {
                return crate::respond::retry_after(StatusCode::SERVICE_UNAVAILABLE, "30");
            }
            let minted = match &options.session_keys {
                Some(keys) => keys.seal(std::time::SystemTime::now(), owner),
                None => Some(crate::session_id::random()),
            };
            let Some(minted) = minted else {
                tracing::warn!("the system's random source failed: no session id");
                return empty(StatusCode::INTERNAL_SERVER_ERROR);
            };
            Some(minted)
        } else {
            None
        };
        if let Some(sid) = &new_session {
            self.sessions.hold(sid, owner);
            self.count_sessions();
            session = Some(sid.clone());
        }
        let mut response = match framing {
            Framing::Json => {
                let answer = match core
                    .handle(&incoming, nowhere, session.as_deref(), false, who)
                    .await
                {
                    Handled::Answer(a) => a,
                    Handled::Refused(_, denial) => return denied(&denial),
                    Handled::Listen(..) | Handled::Nothing => return empty(StatusCode::ACCEPTED),
                };
                in_request_map(headers, StatusCode::OK, Some(answer.into_bytes()))
            }
            Framing::Sse => {
                let (notify, mut notes) = mpsc::unbounded_channel();
                let (mut tx, response) = sse_response();
                // A request the service may refuse with a challenge begins its response with
                // its first event (or as that refusal); the others at once.
                let hold = core.service.may_challenge(kind, who);
                let (head, headed) = oneshot::channel::<Option<Box<Denial>>>();
                let mut head = Some(head);
                if !hold && let Some(head) = head.take() {
                    let _ = head.send(None);
                }
                let front = self.clone();
                let cut = !modern && self.core.service.cut_answer_stream();
                tokio::spawn(async move {
                    // Closed however the task ends (a refusal, a client gone, its answer).
                    let opened = session
                        .as_ref()
                        .map(|sid| Opened::new(front.clone(), sid, &id));
                    let stream = opened.as_ref().map(|o| o.stream);
                    let mut sent_ok = true;
                    let handling = core.handle(
                        &incoming,
                        &notify,
                        session.as_deref(),
                        true,
                        caller.as_deref(),
                    );
                    tokio::pin!(handling);
                    // Held: nothing is sent before the first event, which may be a refusal.
                    let mut first = None;
                    if head.is_some() {
                        first = Some(tokio::select! {
                            a = &mut handling => Ok(a),
                            Some(note) = notes.recv() => Err(note),
                        });
                        if let Some(Ok(Handled::Refused(_, denial))) =
                            first.take_if(|f| matches!(f, Ok(Handled::Refused(..))))
                        {
                            if let Some(head) = head.take() {
                                let _ = head.send(Some(denial));
                            }
                            return;
                        }
                        if let Some(head) = head.take() {
                            let _ = head.send(None);
                        }
                    }
                    if let (Some(sid), Some(stream)) = (&session, stream) {
                        // Priming event: an id and empty data, with the reconnection delay.
                        let prime = front.sessions.log(sid, stream, Bytes::new());
                        let _ = tx
                            .send_data(Bytes::from(format!("id: {prime}\nretry: 500\ndata:\n\n")))
                            .await;
                    }
                    let answer = match first {
                        Some(Ok(answer)) => answer,
                        early => {
                            if let Some(Err(note)) = early {
                                sent_ok &= front
                                    .emit(&mut tx, session.as_deref(), stream, &note, cut)
                                    .await;
                            }
                            let quiet = front.core.options.limits.sse_keep_alive;
                            loop {
                                tokio::select! {
                                    a = &mut handling => break a,
                                    Some(note) = notes.recv() => {
                                        sent_ok &= front.emit(&mut tx, session.as_deref(), stream, &note, cut).await;
                                    }
                                    // A comment keeps proxies from closing a quiet stream, and
                                    // finds out whether the client is still there: a 2026-07-28
                                    // call whose client went away is dropped, which cancels it
                                    // (a legacy one runs on for a `Last-Event-ID` resumption).
                                    () = tokio::time::sleep(quiet), if !cut => {
                                        let gone = tx.send_data(Bytes::from_static(b": keep-alive\n\n")).await.is_err();
                                        if gone && session.is_none() {
                                            tracing::debug!("the client went away: its call is dropped");
                                            return;
                                        }
                                    }
                                }
                            }
                        }
                    };
                    while let Ok(note) = notes.try_recv() {
                        sent_ok &= front
                            .emit(&mut tx, session.as_deref(), stream, &note, cut)
                            .await;
                    }
                    let answer = match answer {
                        Handled::Answer(answer) => Some(answer.into_bytes()),
                        Handled::Refused(answer, _) => Some(json_bytes(&answer)),
                        Handled::Listen(..) | Handled::Nothing => None,
                    };
                    if let Some(answer) = answer {
                        sent_ok &= front
                            .emit_text(&mut tx, session.as_deref(), stream, answer.into(), cut)
                            .await;
                    }
                    if cut {
                        // Let hyper write what was sent first: the abort closes the connection, whatever
                        // hyper has taken but not yet written.
                        for _ in 0..100 {
                            if tx.capacity() == tx.max_capacity() {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        tx.abort(std::io::Error::other(
                            "answer stream cut for the client to resume",
                        ))
                        .await;
                    } else if !sent_ok {
                        tracing::debug!("the client went away before its answer");
                    }
                });
                match headed.await {
                    Ok(Some(denial)) => return denied(&denial),
                    _ => response,
                }
            }
        };
        if let Some(sid) = &new_session
            && let Ok(v) = HeaderValue::try_from(sid.as_str())
        {
            response.headers_mut().insert("mcp-session-id", v);
        }
        response
    }

    /// Sends one event (logged for resumption in a session); with `cut`, logs without sending.
    async fn emit(
        &self,
        tx: &mut StreamSender,
        session: Option<&str>,
        stream: Option<u64>,
        data: &Value,
        cut: bool,
    ) -> bool {
        self.emit_text(tx, session, stream, json_bytes(data).into(), cut)
            .await
    }

    /// [`Self::emit`] for a message whose JSON text is written already.
    async fn emit_text(
        &self,
        tx: &mut StreamSender,
        session: Option<&str>,
        stream: Option<u64>,
        json: Bytes,
        cut: bool,
    ) -> bool {
        // Written once: the text kept for resumption is the text sent.
        let id = match (session, stream) {
            (Some(sid), Some(stream)) => Some(self.sessions.log(sid, stream, json.clone())),
            _ => None,
        };
        if cut {
            return true;
        }
        tx.send_data(sse_text(id.as_deref(), &json)).await.is_ok()
    }
}

/// A stream of a legacy session (an SSE answer), open while this lives: the session does not
/// idle meanwhile, and may again once it is dropped, however the stream's task ends.
struct Opened<S: Service + Edge> {
    front: Arc<Front<S>>,
    sid: String,
    stream: u64,
}

impl<S: Service + Edge> Opened<S> {
    /// The stream of `sid` that answers the request `id`.
    fn new(front: Arc<Front<S>>, sid: &str, id: &Value) -> Self {
        let stream = front
            .sessions
            .open_stream(sid, crate::cursor::Carries::Answer(id));
        Self {
            front,
            sid: sid.to_owned(),
            stream,
        }
    }
}

impl<S: Service + Edge> Drop for Opened<S> {
    fn drop(&mut self) {
        self.front.sessions.close_stream(&self.sid, self.stream);
    }
}

/// Whether the request's `Accept` lets the answer be an event stream: no `Accept` at all, or a
/// range that covers `text/event-stream` and is not refused with `q=0`. The spec asks clients
/// to accept both, and some send `application/json` alone: they are answered in the one
/// framing they read.
fn accepts_event_stream(headers: &http::HeaderMap) -> bool {
    let mut values = headers.get_all(http::header::ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return true;
    }
    values
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            !refused && matches!(media.as_str(), "text/event-stream" | "text/*" | "*/*")
        })
}

#[cfg(test)]
mod tests {
    use super::accepts_event_stream;

    fn accept(values: &[&str]) -> bool {
        let mut headers = http::HeaderMap::new();
        for v in values {
            headers.append(
                http::header::ACCEPT,
                v.parse()
                    .unwrap_or_else(|_| http::HeaderValue::from_static("")),
            );
        }
        accepts_event_stream(&headers)
    }

    #[test]
    fn an_answer_is_an_event_stream_only_where_the_accept_header_allows_one() {
        assert!(accept(&[]));
        assert!(accept(&["application/json, text/event-stream"]));
        assert!(accept(&["application/json", "text/event-stream"]));
        assert!(accept(&["*/*"]));
        assert!(accept(&["Text/Event-Stream;q=0.5"]));
        assert!(!accept(&["application/json"]));
        assert!(!accept(&["application/json, text/event-stream;q=0"]));
        assert!(!accept(&["application/*"]));
    }
}

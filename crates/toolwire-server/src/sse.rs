//! The 2024-11-05 HTTP+SSE front end (with [`crate::Options::sse`]): `GET {path}/sse` opens a
//! stream whose first event, `endpoint`, names `{path}/messages?session_id=…`; each POST there
//! is handled in the legacy era and acknowledged with 202, and its answer, notifications and
//! tool-list changes go down that session's stream as `message` events.

use std::sync::Arc;
use toolwire_types::ClientMethod;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::core::{Handled, error, lock};
use crate::http::{Body, Front, MAX_BODY, empty, sse_response, with_body};
use crate::respond::{sse_endpoint, sse_message};
use crate::{Caller, Change};

impl<S: crate::Service + crate::Edge> Front<S> {
    /// `GET …/sse`: a new session and its stream; 429 with `Retry-After` when the caller holds
    /// [`crate::Limits::sessions_per_caller`] of them already. A quiet stream gets a comment
    /// every [`crate::Limits::sse_keep_alive`], which finds out a client gone.
    pub(crate) fn sse_stream(
        self: &Arc<Self>,
        base: &str,
        caller: Option<Arc<Caller>>,
        owner: [u8; 16],
    ) -> Response {
        let limits = &self.core.options.limits;
        let Some(slot) = self.sse_streams.hold(owner, limits.sessions_per_caller) else {
            return crate::respond::retry_after(StatusCode::TOO_MANY_REQUESTS, "5");
        };
        let quiet = limits.sse_keep_alive;
        let id = crate::session_id::random();
        let (messages, mut outgoing) = mpsc::unbounded_channel::<Value>();
        lock(&self.sse_sessions).insert(id.clone(), (messages, caller.clone()));
        let (mut tx, response) = sse_response();
        let mut changes = self.core.subscribe();
        let front = self.clone();
        let endpoint = sse_endpoint(&format!("{base}/messages?session_id={id}"));
        // The scope its messages are handled in (`sse_post`).
        let scope = format!("sse:{id}");
        tokio::spawn(async move {
            // Its place is given back when the stream ends.
            let _slot = slot;
            if tx.send_data(endpoint).await.is_ok() {
                loop {
                    let event = tokio::select! {
                        next = outgoing.recv() => match next {
                            Some(value) => sse_message(&value),
                            None => break,
                        },
                        change = changes.recv() => {
                            let change = match change {
                                Ok(change) => change,
                                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Change::Tools,
                                Err(_) => continue,
                            };
                            let listener = crate::Listener::new(caller.as_deref(), &scope);
                            match front.core.legacy_notification(&change, &listener) {
                                Some(note) => sse_message(&note),
                                None => continue,
                            }
                        }
                        () = tokio::time::sleep(quiet) => Bytes::from_static(b": keep-alive\n\n"),
                    };
                    if tx.send_data(event).await.is_err() {
                        break;
                    }
                }
            }
            // The client went away: so does its session.
            lock(&front.sse_sessions).remove(&id);
            front.core.forget(&scope);
        });
        response
    }

    /// `POST …/messages?session_id=…`: handled, acknowledged with 202; what it gives goes
    /// down the session's stream.
    pub(crate) async fn sse_post(
        self: &Arc<Self>,
        query: Option<&str>,
        body: Incoming,
        caller: Option<&Arc<Caller>>,
    ) -> Response {
        let id = query
            .unwrap_or("")
            .split('&')
            .find_map(|pair| pair.strip_prefix("session_id="));
        let session = id.and_then(|id| lock(&self.sse_sessions).get(id).cloned());
        // Unknown, or begun by another caller: the same answer either way.
        let Some((stream, owner)) = session.filter(|(_, owner)| {
            owner.as_ref().map(|o| &o.principal) == caller.map(|c| &c.principal)
        }) else {
            return empty(StatusCode::NOT_FOUND);
        };
        let Ok(body) = http_body_util::Limited::new(body, MAX_BODY).collect().await else {
            return empty(StatusCode::PAYLOAD_TOO_LARGE);
        };
        let incoming = match self.core.read(&body.to_bytes()) {
            Ok(incoming) => incoming,
            Err(e) => {
                let _ = stream.send(error(
                    &Value::Null,
                    -32700,
                    format!("Parse error: {e}"),
                    None,
                ));
                return empty(StatusCode::BAD_REQUEST);
            }
        };
        let request = incoming.value["method"].is_string()
            && incoming.value.get("id").is_some_and(|id| !id.is_null());
        if request && self.core.drain.refusing() {
            return crate::respond::draining(&incoming.value["id"]);
        }
        if incoming.method == ClientMethod::Discover {
            // This transport predates the modern era, as a server speaking it would.
            let id = incoming.value["id"].clone();
            let _ = stream.send(error(
                &id,
                -32601,
                "Method not found: server/discover",
                None,
            ));
            return with_body(
                StatusCode::ACCEPTED,
                "text/plain",
                Bytes::from_static(b"Accepted"),
            );
        }
        let core = self.core.clone();
        let scope = format!("sse:{}", id.unwrap_or_default());
        tokio::spawn(async move {
            // What the handler sends on the way goes to the stream in order, before its answer.
            match core
                .handle(&incoming, &stream, Some(&scope), true, owner.as_deref())
                .await
            {
                Handled::Answer(answer) => {
                    let _ = stream.send(answer.into_value());
                }
                Handled::Refused(answer, _) => {
                    let _ = stream.send(answer);
                }
                Handled::Listen(..) | Handled::Nothing => {}
            }
        });
        with_body(
            StatusCode::ACCEPTED,
            "text/plain",
            Bytes::from_static(b"Accepted"),
        )
    }
}

type Response = http::Response<Body>;

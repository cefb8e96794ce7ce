//! Requests the server makes of a client (`elicitation/create`, `sampling/createMessage`,
//! `roots/list`) while it handles one of the client's requests, in the legacy era: each is
//! sent where the request's notifications go (its SSE answer stream, stdout) and waits here,
//! by its id, for the response the client sends back (a POST, a line on stdin).
//!
//! Each request is bound to the [`Scope`] it was sent on (the caller and its legacy session or
//! connection): a response is taken only from that scope, so one caller cannot answer
//! another's question even knowing its id. Ids are `srv-<128 random bits>`, each drawn anew:
//! seeing one tells nothing of the next, and they never clash with the client's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::core::lock;
use crate::service::{Answer, RpcError};

/// Where a message came from, and so where the answers to what is sent there may come from:
/// the caller that sent it ([`crate::Caller`]'s tag; zeros for an unauthenticated one) and
/// the legacy session or connection it came in on, when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Scope {
    /// The caller's tag.
    pub(crate) owner: [u8; 16],
    /// Its legacy session, HTTP+SSE connection or `stdio`.
    pub(crate) session: Option<String>,
}

impl Scope {
    pub(crate) fn new(owner: [u8; 16], session: Option<&str>) -> Self {
        Self {
            owner,
            session: session.map(str::to_owned),
        }
    }
}

/// One request sent, by its id: who may answer it and where the answer goes.
struct Sent {
    scope: Scope,
    to: oneshot::Sender<Answer>,
}

/// The requests sent to clients that wait for their answers.
pub(crate) struct Asks {
    waiting: Mutex<HashMap<String, Sent>>,
}

/// One request waiting for its answer; leaves the table when dropped, answered or not.
pub(crate) struct Waiting {
    asks: Arc<Asks>,
    key: String,
    /// Resolves with the client's answer.
    pub(crate) answer: oneshot::Receiver<Answer>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        lock(&self.asks.waiting).remove(&self.key);
    }
}

/// What became of a response from a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answered {
    /// Handed to the request that waits for it.
    Taken,
    /// No request of this server waits for that id.
    Unknown,
    /// A request waits for that id, but was sent to another scope: refused, and the request
    /// still waits for its own client's answer.
    Foreign,
}

impl Asks {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::new(HashMap::new()),
        })
    }

    /// A new request's id, registered to wait for its answer from `scope`.
    pub(crate) fn begin(self: &Arc<Self>, scope: Scope) -> (Value, Waiting) {
        let key = format!("srv-{}", crate::session_id::random());
        let (to, answer) = oneshot::channel();
        lock(&self.waiting).insert(key.clone(), Sent { scope, to });
        let waiting = Waiting {
            asks: self.clone(),
            key: key.clone(),
            answer,
        };
        (Value::String(key), waiting)
    }

    /// A response from a client (`{"id", "result"}` or `{"id", "error"}`) that came in on
    /// `from`: hands it to the request that waits for it, if that request was sent there.
    pub(crate) fn answered(&self, message: &Value, from: &Scope) -> Answered {
        let Some(key) = message["id"].as_str() else {
            return Answered::Unknown;
        };
        let sent = {
            let mut waiting = lock(&self.waiting);
            match waiting.get(key) {
                None => {
                    tracing::debug!(id = key, "a response to no request of this server");
                    return Answered::Unknown;
                }
                Some(sent) if sent.scope != *from => {
                    tracing::info!(
                        id = key,
                        "refusing a response to a request sent to another caller or session"
                    );
                    return Answered::Foreign;
                }
                Some(_) => waiting.remove(key),
            }
        };
        let Some(Sent { to, .. }) = sent else {
            return Answered::Unknown;
        };
        let answer = match (message.get("result"), message.get("error")) {
            (Some(result), None) => Ok(result.clone()),
            (None, Some(error)) => Err(RpcError {
                challenge: None,
                code: error["code"]
                    .as_i64()
                    .unwrap_or(toolwire_types::error::code::INTERNAL_ERROR),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                data: error.get("data").cloned(),
            }),
            _ => Err(RpcError::new(
                toolwire_types::error::code::INVALID_REQUEST,
                "the client's response had neither a result nor an error",
            )),
        };
        let _ = to.send(answer);
        Answered::Taken
    }

    /// How many requests wait for an answer.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.waiting).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn alice() -> Scope {
        Scope::new([1; 16], Some("session-a"))
    }

    #[tokio::test]
    async fn an_answer_reaches_the_request_with_its_id_and_no_other() {
        let asks = Asks::new();
        let (first, mut one) = asks.begin(alice());
        let (second, mut two) = asks.begin(alice());
        assert_ne!(first, second);
        let answer = json!({"jsonrpc": "2.0", "id": second, "result": {"x": 2}});
        assert_eq!(asks.answered(&answer, &alice()), Answered::Taken);
        assert_eq!((&mut two.answer).await.unwrap(), Ok(json!({"x": 2})));
        let guessed = json!({"id": "srv-guessed-1", "result": {}});
        assert_eq!(asks.answered(&guessed, &alice()), Answered::Unknown);
        let refusal = json!({"id": first, "error": {"code": -1, "message": "no"}});
        assert_eq!(asks.answered(&refusal, &alice()), Answered::Taken);
        let refused = (&mut one.answer).await.unwrap().unwrap_err();
        assert_eq!((refused.code, refused.message.as_str()), (-1, "no"));
    }

    #[tokio::test]
    async fn another_caller_or_session_cannot_answer_and_the_request_still_waits_for_its_own() {
        let asks = Asks::new();
        let (id, mut waiting) = asks.begin(alice());
        let forged = json!({"id": id, "result": {"action": "accept"}});
        // Another caller, on a session of the same name; the same caller on another session;
        // and no session at all.
        for other in [
            Scope::new([2; 16], Some("session-a")),
            Scope::new([1; 16], Some("session-b")),
            Scope::new([1; 16], None),
        ] {
            assert_eq!(
                asks.answered(&forged, &other),
                Answered::Foreign,
                "{other:?}"
            );
        }
        assert!(
            waiting.answer.try_recv().is_err(),
            "a forged answer got through"
        );
        assert_eq!(asks.len(), 1);
        let own = json!({"id": id, "result": {"action": "decline"}});
        assert_eq!(asks.answered(&own, &alice()), Answered::Taken);
        assert_eq!(
            (&mut waiting.answer).await.unwrap(),
            Ok(json!({"action": "decline"}))
        );
    }

    #[test]
    fn ids_share_nothing_a_client_could_learn_the_next_from() {
        let asks = Asks::new();
        let (a, _one) = asks.begin(alice());
        let (b, _two) = asks.begin(alice());
        let (a, b) = (a.as_str().unwrap(), b.as_str().unwrap());
        // 128 random bits each, as 32 hex digits after the prefix.
        assert_eq!((a.len(), b.len()), (36, 36));
        let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        // Only `srv-` and whatever two random draws happen to share (8 digits: 1 in 2^32).
        assert!(common < 12, "{a} and {b} share a prefix of {common}");
    }

    #[test]
    fn a_request_given_up_leaves_the_table() {
        let asks = Asks::new();
        let (id, waiting) = asks.begin(alice());
        assert_eq!(asks.len(), 1);
        drop(waiting);
        assert_eq!(asks.len(), 0);
        let late = json!({"id": id, "result": {}});
        assert_eq!(asks.answered(&late, &alice()), Answered::Unknown);
    }
}

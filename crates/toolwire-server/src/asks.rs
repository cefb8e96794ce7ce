//! Requests the server makes of a client (`elicitation/create`, `sampling/createMessage`,
//! `roots/list`) while it handles one of the client's requests, in the legacy era: each is
//! sent where the request's notifications go (its SSE answer stream, stdout) and waits here,
//! by its id, for the response the client sends back (a POST, a line on stdin).
//!
//! Ids are `srv-<64 random bits>-<n>`: a client cannot answer a request it was never sent by
//! guessing its id, and ids never clash with the client's own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::core::lock;
use crate::service::{Answer, RpcError};

/// The requests sent to clients that wait for their answers.
pub(crate) struct Asks {
    prefix: String,
    next: AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
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

impl Asks {
    pub(crate) fn new() -> Arc<Self> {
        let random = crate::session_id::random();
        Arc::new(Self {
            prefix: format!("srv-{}", &random[..16.min(random.len())]),
            next: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::new()),
        })
    }

    /// A new request's id, registered to wait for its answer.
    pub(crate) fn begin(self: &Arc<Self>) -> (Value, Waiting) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let key = format!("{}-{n}", self.prefix);
        let (tx, answer) = oneshot::channel();
        lock(&self.waiting).insert(key.clone(), tx);
        let waiting = Waiting {
            asks: self.clone(),
            key: key.clone(),
            answer,
        };
        (Value::String(key), waiting)
    }

    /// A response from a client (`{"id", "result"}` or `{"id", "error"}`): hands it to the
    /// request that waits for it. `false` when nothing waits for that id.
    pub(crate) fn answered(&self, message: &Value) -> bool {
        let Some(key) = message["id"].as_str() else {
            return false;
        };
        let Some(tx) = lock(&self.waiting).remove(key) else {
            tracing::debug!(id = key, "a response to no request of this server");
            return false;
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
        let _ = tx.send(answer);
        true
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

    #[tokio::test]
    async fn an_answer_reaches_the_request_with_its_id_and_no_other() {
        let asks = Asks::new();
        let (first, mut one) = asks.begin();
        let (second, mut two) = asks.begin();
        assert_ne!(first, second);
        assert!(asks.answered(&json!({"jsonrpc": "2.0", "id": second, "result": {"x": 2}})));
        assert_eq!((&mut two.answer).await.unwrap(), Ok(json!({"x": 2})));
        assert!(!asks.answered(&json!({"id": "srv-guessed-1", "result": {}})));
        assert!(asks.answered(&json!({"id": first, "error": {"code": -1, "message": "no"}})));
        let refused = (&mut one.answer).await.unwrap().unwrap_err();
        assert_eq!((refused.code, refused.message.as_str()), (-1, "no"));
    }

    #[test]
    fn a_request_given_up_leaves_the_table() {
        let asks = Asks::new();
        let (id, waiting) = asks.begin();
        assert_eq!(asks.len(), 1);
        drop(waiting);
        assert_eq!(asks.len(), 0);
        assert!(!asks.answered(&json!({"id": id, "result": {}})));
    }
}

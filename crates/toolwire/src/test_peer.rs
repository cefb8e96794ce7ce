//! A modern MCP server in memory, for the facade's own tests: `server/discover` and
//! `tools/list` (one tool, `job`) are answered here, every other request by the test's
//! script. It records the virtual time (tests run on a paused clock), method and params of
//! each scripted request, and its authorization context is a counter the test turns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use toolwire_transport::{BoxFuture, Inbound, Outbound, Transport, TransportError};

type Script = Box<dyn FnMut(&str, &Value) -> Value + Send>;

/// What the server saw: when, which method, with which params.
pub(crate) type Seen = Arc<Mutex<Vec<(Duration, String, Value)>>>;

pub(crate) struct Peer {
    start: Instant,
    script: Mutex<Script>,
    seen: Seen,
    identity: Arc<AtomicU64>,
    to_client: mpsc::UnboundedSender<Inbound>,
    from_peer: tokio::sync::Mutex<mpsc::UnboundedReceiver<Inbound>>,
    answers: Answers,
}

/// The client's answers to the server's own requests, as JSON.
pub(crate) type Answers = Arc<Mutex<Vec<Value>>>;

impl Peer {
    /// A server answering with `script(method, params)` (a `result`).
    pub(crate) fn new(script: impl FnMut(&str, &Value) -> Value + Send + 'static) -> (Self, Seen) {
        let (to_client, from_peer) = mpsc::unbounded_channel();
        let seen = Seen::default();
        let peer = Self {
            start: Instant::now(),
            script: Mutex::new(Box::new(script)),
            seen: seen.clone(),
            identity: Arc::default(),
            to_client,
            from_peer: tokio::sync::Mutex::new(from_peer),
            answers: Answers::default(),
        };
        (peer, seen)
    }

    /// Sends the client a message of the server's own (a request, a notification).
    pub(crate) fn injector(&self) -> mpsc::UnboundedSender<Inbound> {
        self.to_client.clone()
    }

    /// The client's answers to the server's requests, as they come.
    pub(crate) fn answers(&self) -> Answers {
        self.answers.clone()
    }

    /// The counter [`Transport::authorization_context`] reads.
    pub(crate) fn identity(&self) -> Arc<AtomicU64> {
        self.identity.clone()
    }
}

/// The methods `seen` recorded, in order.
pub(crate) fn methods(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|(_, m, _)| m.clone())
        .collect()
}

impl Transport for Peer {
    fn carries_headers(&self) -> bool {
        false
    }
    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        let request: Value = serde_json::from_slice(&message.body).unwrap_or(Value::Null);
        if request.get("method").is_none() && request.get("id").is_some() {
            self.answers.lock().unwrap().push(request.clone());
        }
        if let (Some(id), Some(method)) = (request.get("id"), request["method"].as_str()) {
            let params = request["params"].clone();
            let result = match method {
                "server/discover" => json!({
                    "resultType": "complete", "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}, "resources": {}, "prompts": {},
                        "extensions": {"io.modelcontextprotocol/tasks": {}}},
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "peer", "version": "1"}}}),
                "tools/list" => json!({"resultType": "complete", "tools": [
                    {"name": "job", "inputSchema": {"type": "object"}}]}),
                _ => {
                    self.seen.lock().unwrap().push((
                        self.start.elapsed(),
                        method.to_owned(),
                        params.clone(),
                    ));
                    (self.script.lock().unwrap())(method, &params)
                }
            };
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            let _ = self
                .to_client
                .send(Inbound::new(serde_json::to_vec(&answer).unwrap()));
        }
        Box::pin(async { Ok(()) })
    }
    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
        Box::pin(async { self.from_peer.lock().await.recv().await.map(Ok) })
    }
    fn authorization_context(&self) -> u64 {
        self.identity.load(Ordering::SeqCst)
    }
    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async { Ok(()) })
    }
}

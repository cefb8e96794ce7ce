//! What the test files here share.

#![allow(dead_code, unused_imports, reason = "each test file uses its own part")]

pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Mutex};
pub(crate) use std::time::{Duration, Instant};

pub(crate) use bytes::Bytes;
pub(crate) use serde_json::{Value, json};
pub(crate) use toolwire_http::{
    AcceptProfile, HttpError, HttpTransport, Proxy, RetryPolicy, StaticAuthorization,
};
pub(crate) use toolwire_test_support::forward::ForwardProxy;
pub(crate) use toolwire_test_support::http::{Feed, HttpPeer, Part, Recorded, Reply, sse_event};
pub(crate) use toolwire_transport::{
    Inbound, MessageKind, Outbound, RequestId, RetryClass, SessionStep, Transport, TransportError,
};

pub(crate) fn request(id: i64, method: &'static str, retry: RetryClass) -> Outbound {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method}).to_string();
    let mut out = Outbound::new(
        body,
        MessageKind::Request {
            id: RequestId::Number(id),
            method,
        },
    );
    out.retry = retry;
    // What the session marks on the handshake's requests (the transport reads only that).
    if method == "initialize" {
        out.session = SessionStep::Opens;
    }
    out
}

pub(crate) fn notification(method: &'static str) -> Outbound {
    let mut out = Outbound::new(
        json!({"jsonrpc": "2.0", "method": method}).to_string(),
        MessageKind::Notification { method },
    );
    if method == "notifications/initialized" {
        out.session = SessionStep::Opened;
    }
    out
}

pub(crate) fn answer(id: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"ok": true}}).to_string()
}

/// The next thing `recv` yields, within 10 s.
pub(crate) async fn next(t: &HttpTransport) -> Result<Inbound, TransportError> {
    tokio::time::timeout(Duration::from_secs(10), t.recv())
        .await
        .expect("no message within 10 s")
        .expect("transport closed")
}

/// The failure of the next item, with its HTTP error.
pub(crate) async fn failure(t: &HttpTransport) -> (Option<u16>, String, Bytes) {
    match next(t).await {
        Err(TransportError::Request(f)) => (f.status, f.cause.to_string(), f.body),
        other => panic!("expected a request failure, got {other:?}"),
    }
}

pub(crate) fn fast_retries() -> RetryPolicy {
    RetryPolicy::new(3, Duration::from_millis(10), Duration::from_millis(50))
}

/// Answers every request with a JSON result, and notifications with 202.
pub(crate) fn json_ok(req: &Recorded) -> Reply {
    match req.rpc_id() {
        Some(id) => Reply::json(200, answer(&id)),
        None => Reply::status(202),
    }
}

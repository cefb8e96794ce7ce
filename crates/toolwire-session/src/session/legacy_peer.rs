//! For the unit tests of the session's modules: a legacy session on a made-up clock, and the
//! server's side of its handshake.

use std::sync::Arc;
use web_time::Instant;

use serde_json::{Value, json};
use toolwire_cache::ToolCache;
use toolwire_types::{Implementation, ProtocolVersion};

use super::Session;
use crate::{ProtocolMode, SessionConfig};

/// A session pinned to 2025-11-25, set up by `config` from the defaults.
pub(super) fn legacy(config: impl FnOnce(SessionConfig) -> SessionConfig) -> Session {
    let base = SessionConfig::new(Implementation::new("t", "0"))
        .with_mode(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25));
    Session::new(config(base), Arc::new(ToolCache::default()), false)
}

/// The next message sent, as JSON.
pub(super) fn sent(s: &mut Session) -> Option<Value> {
    s.poll_transmit()
        .map(|m| serde_json::from_slice(&m.body).unwrap_or(Value::Null))
}

/// The server answers request `id` with `result`.
pub(super) fn answer(s: &mut Session, id: &Value, result: Value, now: Instant) {
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    s.handle_inbound(body.as_bytes(), now);
}

/// Starts `s` and answers its `initialize` with `capabilities`.
pub(super) fn negotiate(s: &mut Session, capabilities: Value, now: Instant) {
    s.start(now);
    let init = sent(s).unwrap_or_default();
    assert_eq!(init["method"], "initialize");
    let result = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "serverInfo": {"name": "s", "version": "1"},
    });
    answer(s, &init["id"], result, now);
    assert_eq!(
        sent(s).unwrap_or_default()["method"],
        "notifications/initialized"
    );
}

//! What every session test file shares: the scripted peer on a fake clock.

#![allow(dead_code, unused_imports, reason = "each test file uses its own part")]

pub(crate) use std::sync::{Arc, Mutex};
pub(crate) use std::time::{Duration, Instant};

pub(crate) use serde_json::{Value, json};
pub(crate) use toolwire_cache::{RejectReason, ToolCache};
pub(crate) use toolwire_session::*;
pub(crate) use toolwire_types::{Capability, Implementation, ProtocolVersion, Tool};
pub(crate) use toolwire_wire::RequestFailure;

/// A session, its cache and the fake clock's origin.
pub(crate) struct Peer {
    pub(crate) session: Session,
    pub(crate) t0: Instant,
}

/// The test client's configuration: the listen stream and automatic refreshes off, so each
/// test sees only the messages of the behaviour it is about (`dynamic_config` turns them on).
pub(crate) fn config() -> SessionConfig {
    SessionConfig::new(Implementation::new("toolwire-test", "0.1.0"))
        .with_listen(false)
        .with_auto_refresh(false)
}

/// The defaults, as users get them.
pub(crate) fn dynamic_config() -> SessionConfig {
    SessionConfig::new(Implementation::new("toolwire-test", "0.1.0"))
}

impl Peer {
    pub(crate) fn new(mode: ProtocolMode, carries_headers: bool) -> Self {
        Self::with_config(config().with_mode(mode), carries_headers)
    }

    pub(crate) fn with_config(config: SessionConfig, carries_headers: bool) -> Self {
        Self {
            session: Session::new(config, Arc::new(ToolCache::default()), carries_headers),
            t0: Instant::now(),
        }
    }

    pub(crate) fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    /// The next message the session sends, as JSON, with its headers.
    pub(crate) fn sent(&mut self) -> (Value, Vec<(String, String)>) {
        let t = self
            .session
            .poll_transmit()
            .expect("the session should have sent something");
        let headers = t
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        (serde_json::from_slice(&t.body).unwrap(), headers)
    }

    pub(crate) fn nothing_sent(&mut self) {
        if let Some(t) = self.session.poll_transmit() {
            panic!("unexpected transmit {}", String::from_utf8_lossy(&t.body));
        }
    }

    pub(crate) fn reply(&mut self, request: &Value, result: Value, ms: u64) {
        let msg = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        self.session
            .handle_inbound(msg.to_string().as_bytes(), self.at(ms));
    }

    pub(crate) fn reply_error(&mut self, request: &Value, code: i64, data: Value, ms: u64) {
        let msg = json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": "no", "data": data}});
        self.session
            .handle_inbound(msg.to_string().as_bytes(), self.at(ms));
    }

    pub(crate) fn event(&mut self) -> Event {
        self.session.poll_event().expect("an event")
    }

    /// Negotiates the modern era.
    pub(crate) fn ready_modern(carries_headers: bool) -> Self {
        Self::ready_modern_with(config(), carries_headers)
    }

    /// Negotiates the modern era with `config`.
    pub(crate) fn ready_modern_with(config: SessionConfig, carries_headers: bool) -> Self {
        let mut p = Self::with_config(config, carries_headers);
        p.session.start(p.at(0));
        let (discover, _) = p.sent();
        p.reply(&discover, json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}), 1);
        assert!(matches!(p.event(), Event::Ready(_)));
        p
    }

    /// Negotiates the legacy era at 2025-11-25.
    pub(crate) fn ready_legacy(carries_headers: bool) -> Self {
        let mut p = Self::new(
            ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
            carries_headers,
        );
        p.session.start(p.at(0));
        let (init, _) = p.sent();
        p.reply(&init, init_result("2025-11-25"), 1);
        let (initialized, _) = p.sent();
        assert_eq!(initialized["method"], "notifications/initialized");
        assert!(matches!(p.event(), Event::Ready(_)));
        p
    }
}

pub(crate) fn init_result(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "legacy", "version": "1"}})
}

pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

pub(crate) fn region_tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}}}})
}

impl Peer {
    /// Every event so far.
    pub(crate) fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.session.poll_event()).collect()
    }

    /// Negotiates the modern era with the defaults and answers the listen request with its
    /// acknowledgement; returns the listen request.
    pub(crate) fn ready_dynamic() -> (Self, Value) {
        let mut p = Self::ready_modern_with(dynamic_config(), true);
        let (listen, headers) = p.sent();
        assert_eq!(listen["method"], "subscriptions/listen");
        assert_eq!(
            listen["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        assert_eq!(header(&headers, "Mcp-Method"), Some("subscriptions/listen"));
        p.listen_ack(&listen, 2);
        p.nothing_sent();
        p.events();
        (p, listen)
    }

    pub(crate) fn listen_ack(&mut self, listen: &Value, ms: u64) {
        let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": true},
                "_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]}}});
        self.session
            .handle_inbound(ack.to_string().as_bytes(), self.at(ms));
    }

    pub(crate) fn list_changed(&mut self, listen: &Value, ms: u64) {
        let n = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": listen["id"]}}});
        self.session
            .handle_inbound(n.to_string().as_bytes(), self.at(ms));
    }

    /// Expects a `tools/list` and answers it with `tools`.
    pub(crate) fn answer_list(&mut self, tools: Value, ms: u64) {
        let (list, _) = self.sent();
        assert_eq!(list["method"], "tools/list");
        self.reply(&list, json!({ "tools": tools }), ms);
    }

    pub(crate) fn completed(&mut self, op: OpId) -> Option<Result<String, String>> {
        self.events().into_iter().find_map(|e| match e {
            Event::Completed { op: o, result } if o == op => Some(
                result
                    .map(|r| r.get().to_owned())
                    .map_err(|e| e.to_string()),
            ),
            _ => None,
        })
    }
}

/// Starts a call; its request is the next transmit.
pub(crate) fn start_call(p: &mut Peer, name: &str, args: Value, options: CallOptions) -> OpId {
    p.session
        .call_tool(name, args.as_object().cloned(), options, p.at(5))
        .unwrap()
}

pub(crate) fn named(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

pub(crate) fn unlock_result(field: &str, names: &[&str]) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": "ok"}]});
    r[field] = json!(names);
    r
}

pub(crate) fn request_id(request: &Value) -> toolwire_types::RequestId {
    serde_json::from_value(request["id"].clone()).unwrap()
}

impl Peer {
    /// Negotiates the modern era with the defaults against a server declaring `capabilities`;
    /// returns the listen request, if one was sent.
    pub(crate) fn ready_modern_declaring(
        capabilities: Value,
        carries_headers: bool,
    ) -> (Self, Option<Value>) {
        let mut p = Self::with_config(dynamic_config(), carries_headers);
        p.session.start(p.at(0));
        let (discover, _) = p.sent();
        p.reply(
            &discover,
            json!({"supportedVersions": ["2026-07-28"], "capabilities": capabilities,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}),
            1,
        );
        assert!(matches!(p.event(), Event::Ready(_)));
        let listen = p.session.poll_transmit().map(|t| {
            let v: Value = serde_json::from_slice(&t.body).unwrap();
            assert_eq!(v["method"], "subscriptions/listen");
            v
        });
        (p, listen)
    }
}

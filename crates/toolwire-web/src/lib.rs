//! The Toolwire MCP client where JavaScript runs: a browser page, a worker, Node. The same
//! sans-IO session as the native client (negotiation of both protocol eras, the tool cache
//! with its header plans, SEP-2243 headers on every call) drives Streamable HTTP over the
//! platform's `fetch`, and [`Client`] is what JavaScript sees:
//!
//! ```js
//! import init, { Client } from "./toolwire_web.js";
//! await init();
//! const client = await Client.connect("https://mcp.example.com/mcp");
//! const tools = await client.listTools();          // [{ name, description, inputSchema, … }]
//! const result = await client.callTool("echo", { text: "hi" });
//! ```
//!
//! What works: both eras (`server/discover` with the `_meta` envelope, or `initialize` and the
//! `Mcp-Session-Id` it assigns), JSON and SSE answers, `tools/list` (every page) and
//! `tools/call` with the headers the tool's `x-mcp-header` annotations ask for, a bearer
//! token given by the page, several requests at once. What does not: stdio (a browser starts
//! no process), OAuth's login (its loopback listener; a page passes the token it has), the
//! server's own stream (GET, `subscriptions/listen`: no notifications between requests),
//! server-to-client requests (refused, as a client that declared none), resumption of a
//! broken SSE answer, and a browser's cross-origin rules (the server must allow the page's
//! origin and the MCP headers).
//!
//! Dependencies: `wasm-bindgen`, `wasm-bindgen-futures`, `js-sys` and `web-sys` (the bridge
//! to JavaScript and its `fetch`); `web-time` for the session's clock (`performance.now`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;
use toolwire_cache::{ListOutcome, ToolCache};
use toolwire_session::{
    CallOptions, Event, OpId, ProtocolMode, RequestError, Session, SessionConfig,
};
use toolwire_types::{Implementation, JsonObject, ProtocolVersion};
use toolwire_wire::{Outbound, RequestFailure, SessionStep};
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_time::Instant;

#[wasm_bindgen]
extern "C" {
    /// The global `fetch` (browsers, workers, Node 18 and later).
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(request: &web_sys::Request) -> js_sys::Promise;

    /// The global `setTimeout`.
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(callback: &js_sys::Function, ms: i32) -> JsValue;
}

/// How long a caller whose answer another caller's `fetch` carries waits before it looks
/// again (a timer, not a microtask: the `fetch` must get to run).
const IDLE_MS: i32 = 2;

/// Why a request got no answer, as the session hears it.
#[derive(Debug)]
struct FetchFailed(String);

impl std::fmt::Display for FetchFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FetchFailed {}

/// One connection: the session, where it sends, and what has finished.
struct Connection {
    url: String,
    authorization: Option<String>,
    session: Session,
    /// The legacy session the server assigned (`Mcp-Session-Id`).
    session_id: Option<String>,
    ready: Option<Result<ProtocolVersion, String>>,
    completed: HashMap<OpId, Result<Box<RawValue>, RequestError>>,
    listed: HashMap<OpId, Result<ListOutcome, RequestError>>,
}

impl Connection {
    /// Takes what the session has to say.
    fn drain_events(&mut self) {
        while let Some(event) = self.session.poll_event() {
            match event {
                Event::Ready(negotiated) => self.ready = Some(Ok(negotiated.version)),
                Event::Failed(e) => self.ready = Some(Err(e.to_string())),
                Event::Completed { op, result } => {
                    self.completed.insert(op, result);
                }
                Event::ToolsListed { op, result } => {
                    self.listed.insert(op, result);
                }
                _ => {}
            }
        }
    }
}

/// An MCP client for JavaScript (see the crate docs).
#[wasm_bindgen]
pub struct Client {
    inner: Rc<RefCell<Connection>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("version", &self.protocol_version())
            .finish_non_exhaustive()
    }
}

/// A JavaScript `Error` with `message`.
fn error(message: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&message.to_string()).into()
}

/// A JSON value as JavaScript's (objects, arrays, strings, numbers: through `JSON.parse`).
fn to_js(json: &str) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(json)
}

#[wasm_bindgen]
impl Client {
    /// Connects to the Streamable HTTP endpoint at `url` and negotiates: `protocol` pins a
    /// version (`"2025-11-25"`, `"2026-07-28"`, …), absent the newest both sides speak;
    /// `token` is a bearer token every request carries. Resolves once negotiated.
    pub fn connect(
        url: String,
        protocol: Option<String>,
        token: Option<String>,
    ) -> js_sys::Promise {
        wasm_bindgen_futures::future_to_promise(async move {
            let mode = match protocol {
                Some(version) => ProtocolMode::Pinned(
                    ProtocolVersion::new(&version).map_err(|e| error(format!("{version}: {e}")))?,
                ),
                None => ProtocolMode::Auto,
            };
            let config = SessionConfig::new(Implementation::new(
                "toolwire-web",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_mode(mode)
            .with_listen(false)
            .with_auto_refresh(false);
            let mut session = Session::new(config, Arc::new(ToolCache::default()), true);
            session.start(Instant::now());
            let inner = Rc::new(RefCell::new(Connection {
                url,
                authorization: token.map(|t| format!("Bearer {t}")),
                session,
                session_id: None,
                ready: None,
                completed: HashMap::new(),
                listed: HashMap::new(),
            }));
            let version = pump(&inner, |c| c.ready.clone()).await?;
            version.map_err(error)?;
            Ok(Client { inner }.into())
        })
    }

    /// The negotiated protocol version.
    #[wasm_bindgen(js_name = protocolVersion)]
    pub fn protocol_version(&self) -> Option<String> {
        self.inner
            .borrow()
            .session
            .version()
            .map(ToString::to_string)
    }

    /// The server's tools, every page (each as the server defined it).
    #[wasm_bindgen(js_name = listTools)]
    pub fn list_tools(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let op = inner
                .borrow_mut()
                .session
                .list_tools(Instant::now())
                .map_err(error)?;
            let outcome = pump(&inner, |c| c.listed.remove(&op))
                .await?
                .map_err(error)?;
            let tools = serde_json::to_string(&outcome.tools).map_err(error)?;
            to_js(&tools)
        })
    }

    /// Calls tool `name` with `args` (an object, or nothing): the result as the server sent
    /// it (`content`, `structuredContent`, `isError`). A JSON-RPC error rejects with its
    /// message.
    #[wasm_bindgen(js_name = callTool)]
    pub fn call_tool(&self, name: String, args: JsValue) -> js_sys::Promise {
        let inner = self.inner.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let arguments: Option<JsonObject> = if args.is_undefined() || args.is_null() {
                None
            } else {
                let text = js_sys::JSON::stringify(&args)?
                    .as_string()
                    .ok_or_else(|| error("the arguments do not serialise"))?;
                match serde_json::from_str::<Value>(&text).map_err(error)? {
                    Value::Object(object) => Some(object),
                    other => {
                        return Err(error(format!("arguments must be an object, not {other}")));
                    }
                }
            };
            let op = inner
                .borrow_mut()
                .session
                .call_tool(&name, arguments, CallOptions::default(), Instant::now())
                .map_err(error)?;
            let raw = pump(&inner, |c| c.completed.remove(&op))
                .await?
                .map_err(error)?;
            to_js(raw.get())
        })
    }
}

/// Sends what the session queued and hands it the answers until `done` finds what the caller
/// waits for. Other callers' outcomes stay for them.
async fn pump<T>(
    inner: &Rc<RefCell<Connection>>,
    mut done: impl FnMut(&mut Connection) -> Option<T>,
) -> Result<T, JsValue> {
    loop {
        let next = {
            let mut connection = inner.borrow_mut();
            connection.drain_events();
            if let Some(found) = done(&mut connection) {
                return Ok(found);
            }
            connection.session.poll_transmit()
        };
        match next {
            Some(message) => send(inner, message).await?,
            // Another caller's `fetch` carries the answer, or a deadline is to come: let the
            // event loop run, then give the session the time.
            None => {
                sleep(IDLE_MS).await?;
                let mut connection = inner.borrow_mut();
                let now = Instant::now();
                if connection
                    .session
                    .poll_timeout()
                    .is_some_and(|at| at <= now)
                {
                    connection.session.handle_timeout(now);
                }
            }
        }
    }
}

/// Resolves after `ms` milliseconds.
async fn sleep(ms: i32) -> Result<(), JsValue> {
    let timer = js_sys::Promise::new(&mut |resolve, _| {
        set_timeout(&resolve, ms);
    });
    JsFuture::from(timer).await.map(drop)
}

/// POSTs one message and gives the session what came back.
async fn send(inner: &Rc<RefCell<Connection>>, message: Outbound) -> Result<(), JsValue> {
    let (url, authorization, session_id) = {
        let c = inner.borrow();
        (c.url.clone(), c.authorization.clone(), c.session_id.clone())
    };
    let headers = web_sys::Headers::new()?;
    headers.set("content-type", "application/json")?;
    headers.set("accept", "application/json, text/event-stream")?;
    for (name, value) in &message.headers {
        let value = value.to_str().map_err(error)?;
        headers.set(name.as_str(), value)?;
    }
    if let Some(authorization) = &authorization {
        headers.set("authorization", authorization)?;
    }
    if message.session != SessionStep::Opens
        && let Some(id) = &session_id
    {
        headers.set("mcp-session-id", id)?;
    }
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    let body = std::str::from_utf8(&message.body).map_err(error)?;
    init.set_body(&JsValue::from_str(body));
    let request = web_sys::Request::new_with_str_and_init(&url, &init)?;
    let answered = JsFuture::from(global_fetch(&request)).await;
    let now = Instant::now();
    let response: web_sys::Response = match answered.and_then(|r| r.dyn_into()) {
        Ok(response) => response,
        Err(failure) => {
            let why = failure
                .dyn_ref::<js_sys::Error>()
                .map_or_else(|| "fetch failed".to_owned(), |e| String::from(e.message()));
            if let Some(id) = message.kind.request_id() {
                inner.borrow_mut().session.handle_undelivered(
                    RequestFailure {
                        id: id.clone(),
                        status: None,
                        body: Bytes::new(),
                        cause: Arc::new(FetchFailed(why)),
                        session_gone: false,
                    },
                    now,
                );
            }
            return Ok(());
        }
    };
    let status = response.status();
    let content_type = response.headers().get("content-type")?.unwrap_or_default();
    if message.session == SessionStep::Opens
        && let Some(id) = response.headers().get("mcp-session-id")?
    {
        inner.borrow_mut().session_id = Some(id);
    }
    let text = JsFuture::from(response.text()?)
        .await?
        .as_string()
        .unwrap_or_default();
    let mut c = inner.borrow_mut();
    if (200..300).contains(&status) {
        if content_type.starts_with("text/event-stream") {
            for data in sse_data(&text) {
                c.session.handle_inbound(data.as_bytes(), now);
            }
        } else if !text.trim().is_empty() {
            c.session.handle_inbound(text.as_bytes(), now);
        }
    } else if let Some(id) = message.kind.request_id() {
        let session_gone = status == 404 && session_id.is_some();
        c.session.handle_undelivered(
            RequestFailure {
                id: id.clone(),
                status: Some(status),
                cause: Arc::new(FetchFailed(format!("HTTP {status}"))),
                body: Bytes::from(text),
                session_gone,
            },
            now,
        );
    }
    Ok(())
}

/// The `data` of each event of a whole SSE body (its lines joined with `\n`), in order; events
/// without data (a priming event) are skipped.
fn sse_data(body: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in body.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Some(done) = data.take().filter(|d| !d.is_empty()) {
                events.push(done);
            }
            continue;
        }
        if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::sse_data;

    #[test]
    fn an_sse_body_gives_each_events_data_and_skips_the_empty_priming_event() {
        let body = "id: 1\nretry: 500\ndata:\n\nevent: message\ndata: {\"a\":\ndata: 1}\n\ndata: {\"b\":2}\n";
        assert_eq!(sse_data(body), vec!["{\"a\":\n1}", "{\"b\":2}"]);
        assert!(sse_data(": comment only\n\n").is_empty());
    }
}

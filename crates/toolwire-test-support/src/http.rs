//! Scripted HTTP peers on loopback: a hyper server whose every answer a test chooses, and
//! [`scripted`], which serves a [`ScriptedServer`] over Streamable HTTP.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::channel::Channel;
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::{Eras, ScriptedServer};

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The HTTP method.
    pub method: Method,
    /// The request target's path and query.
    pub path: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Recorded {
    /// A header as a string (`""` when absent or not UTF-8).
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The JSON-RPC method of the body, if any.
    pub fn rpc_method(&self) -> Option<String> {
        let v: Value = serde_json::from_slice(&self.body).ok()?;
        v["method"].as_str().map(str::to_owned)
    }

    /// The JSON-RPC id of the body, if any.
    pub fn rpc_id(&self) -> Option<Value> {
        let v: Value = serde_json::from_slice(&self.body).ok()?;
        v.get("id").cloned()
    }
}

/// One piece of a response body.
#[derive(Debug, Clone)]
pub enum Part {
    /// Bytes, written as one chunk.
    Data(Bytes),
    /// A pause.
    Sleep(Duration),
    /// Breaks the stream (the connection is reset mid-body).
    Cut,
    /// Whatever the feed's sender sends, as it comes, until the sender is dropped.
    Feed(Feed),
}

/// The receiving end of a live body part ([`Part::Feed`]).
#[derive(Debug, Clone)]
pub struct Feed(Arc<Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Bytes>>>>);

impl Feed {
    /// A feed and the sender that writes into it.
    pub fn new() -> (tokio::sync::mpsc::UnboundedSender<Bytes>, Self) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (tx, Self(Arc::new(Mutex::new(Some(rx)))))
    }
}

/// A response a handler chooses.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// The body, in pieces.
    pub parts: Vec<Part>,
}

impl Reply {
    /// A status with no body.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            parts: Vec::new(),
        }
    }

    /// A JSON body.
    pub fn json(status: u16, body: impl Into<Bytes>) -> Self {
        Self::status(status)
            .header("content-type", "application/json")
            .part(Part::Data(body.into()))
    }

    /// An SSE stream of `events` (each already framed, e.g. from [`sse_event`]), one chunk
    /// each.
    pub fn sse(events: impl IntoIterator<Item = String>) -> Self {
        let mut reply = Self::status(200).header("content-type", "text/event-stream");
        for event in events {
            reply.parts.push(Part::Data(Bytes::from(event)));
        }
        reply
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Adds a body part.
    pub fn part(mut self, part: Part) -> Self {
        self.parts.push(part);
        self
    }
}

/// One SSE event carrying `data`, with an optional id.
pub fn sse_event(id: Option<&str>, data: &[u8]) -> String {
    let mut event = String::new();
    if let Some(id) = id {
        event.push_str(&format!("id: {id}\n"));
    }
    event.push_str(&format!("data: {}\n\n", String::from_utf8_lossy(data)));
    event
}

/// A listener on a free loopback port, and its address. Panics without one: a test that
/// cannot bind loopback cannot run at all.
#[allow(
    clippy::panic,
    reason = "test support: a test that cannot bind loopback cannot run at all"
)]
pub(crate) async fn bind_loopback() -> (TcpListener, SocketAddr) {
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("cannot bind a loopback port: {e}"),
    };
    match listener.local_addr() {
        Ok(addr) => (listener, addr),
        Err(e) => panic!("no local address: {e}"),
    }
}

type Handler = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

/// A loopback HTTP server; every request is recorded, then answered by the handler. Stops
/// when dropped.
pub struct HttpPeer {
    /// Its address.
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<Recorded>>>,
    disconnects: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for HttpPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpPeer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpPeer {
    /// Starts a server on 127.0.0.1 (inside a tokio runtime). Panics without a loopback port.
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let (listener, addr) = bind_loopback().await;
        let log = Arc::new(Mutex::new(Vec::new()));
        let handler: Handler = Arc::new(handler);
        let disconnects = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(accept(
            listener,
            handler,
            log.clone(),
            disconnects.clone(),
            connections.clone(),
        ));
        Self {
            addr,
            log,
            disconnects,
            connections,
            task,
        }
    }

    /// How many TCP connections were accepted.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// How many response bodies the client stopped reading before they were written whole.
    pub fn disconnects(&self) -> u64 {
        self.disconnects.load(Ordering::SeqCst)
    }

    /// The MCP endpoint URL (`http://127.0.0.1:PORT/mcp`).
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The requests with JSON-RPC method `method`.
    pub fn calls(&self, method: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.rpc_method().as_deref() == Some(method))
            .collect()
    }
}

async fn accept(
    listener: TcpListener,
    handler: Handler,
    log: Arc<Mutex<Vec<Recorded>>>,
    disconnects: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        connections.fetch_add(1, Ordering::SeqCst);
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let log = log.clone();
        let disconnects = disconnects.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let handler = handler.clone();
                let log = log.clone();
                let disconnects = disconnects.clone();
                async move { Ok::<_, Infallible>(answer(req, handler, log, disconnects).await) }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    req: Request<Incoming>,
    handler: Handler,
    log: Arc<Mutex<Vec<Recorded>>>,
    disconnects: Arc<AtomicU64>,
) -> Response<Channel<Bytes, std::io::Error>> {
    let (head, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let recorded = Recorded {
        path: head
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), ToString::to_string),
        method: head.method,
        headers: head.headers,
        body,
    };
    if let Ok(mut log) = log.lock() {
        log.push(recorded.clone());
    }
    let reply = handler(&recorded);
    let (mut tx, body) = Channel::<Bytes, std::io::Error>::new(4);
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    for (name, value) in &reply.headers {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::try_from(name.as_str()),
            http::HeaderValue::try_from(value.as_str()),
        ) {
            response.headers_mut().append(n, v);
        }
    }
    tokio::spawn(async move {
        for part in reply.parts {
            match part {
                Part::Data(data) => {
                    if tx.send(Frame::data(data)).await.is_err() {
                        disconnects.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                }
                Part::Sleep(d) => tokio::time::sleep(d).await,
                Part::Feed(feed) => {
                    let rx = feed.0.lock().ok().and_then(|mut r| r.take());
                    if let Some(mut rx) = rx {
                        while let Some(data) = rx.recv().await {
                            if tx.send(Frame::data(data)).await.is_err() {
                                disconnects.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                        }
                    }
                }
                Part::Cut => {
                    // Let hyper write what was sent first (an abort overtakes queued frames).
                    for _ in 0..100 {
                        if tx.capacity() == tx.max_capacity() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    tx.abort(std::io::Error::other("cut by the test"));
                    return;
                }
            }
        }
    });
    response
}

/// How [`scripted`] frames answers to requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One `application/json` body (notifications before the answer are dropped).
    Json,
    /// A `text/event-stream` with a priming event, then every message with an event id.
    Sse,
}

/// How long after its answer the scripted HTTP server announces the tools `unlock` registers.
pub const REGISTER_DELAY: Duration = Duration::from_millis(200);

/// A handler that serves a [`ScriptedServer`] over Streamable HTTP: legacy `initialize` gets
/// an `Mcp-Session-Id`, later legacy requests must carry it (400 without, 404 for an unknown
/// one); GET answers 405; DELETE 200; notifications and responses 202. A request the script
/// never answers (`slow`) gets a stream that stays open.
///
/// Tool-list changes come [`REGISTER_DELAY`] after the answer that causes them: on the open
/// `subscriptions/listen` streams (modern, with SSE framing: acknowledged, each notification
/// carrying its subscription id), else on the answer's own SSE stream (legacy).
pub fn scripted(eras: Eras, framing: Framing) -> impl Fn(&Recorded) -> Reply + Send + Sync {
    let server = Mutex::new(ScriptedServer::new(eras));
    let sessions = AtomicU64::new(0);
    let event_ids = AtomicU64::new(0);
    let listeners: Mutex<Vec<(Value, tokio::sync::mpsc::UnboundedSender<Bytes>)>> =
        Mutex::new(Vec::new());
    move |req: &Recorded| {
        if req.method == Method::GET {
            return Reply::status(405);
        }
        if req.method == Method::DELETE {
            return Reply::status(200);
        }
        let v: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let method = v["method"].as_str().unwrap_or("").to_owned();
        if method == "server/discover" && matches!(eras, Eras::Legacy | Eras::StrictLegacy) {
            // What the TypeScript SDK's legacy servers answer to anything before initialize.
            return Reply::json(
                400,
                r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}"#,
            );
        }
        let name = v["params"]["name"].as_str().unwrap_or("").to_owned();
        let session = sessions.load(Ordering::SeqCst);
        let legacy_call = session > 0 && method != "initialize" && method != "server/discover";
        if legacy_call {
            let sent = req.header("mcp-session-id");
            if sent.is_empty() {
                return Reply::status(400);
            }
            if sent != format!("session-{session}") {
                return Reply::status(404);
            }
        }
        if method == "subscriptions/listen" && framing == Framing::Sse && session == 0 {
            let id = v["id"].clone();
            let (tx, feed) = Feed::new();
            let ack = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": {"toolsListChanged": true},
                    "_meta": {"io.modelcontextprotocol/subscriptionId": id}}});
            let _ = tx.send(Bytes::from(sse_event(None, ack.to_string().as_bytes())));
            if let Ok(mut l) = listeners.lock() {
                l.push((id, tx));
            }
            return Reply::sse([]).part(Part::Feed(feed));
        }
        let Ok(mut server) = server.lock() else {
            return Reply::status(500);
        };
        let lines = server.handle_line(&req.body);
        let later = server.after((&method, &name));
        drop(server);
        let mut delayed = Vec::new();
        let live: Vec<(Value, tokio::sync::mpsc::UnboundedSender<Bytes>)> = listeners
            .lock()
            .map(|mut l| {
                l.retain(|(_, tx)| !tx.is_closed());
                l.clone()
            })
            .unwrap_or_default();
        if !later.is_empty() && !live.is_empty() {
            tokio::spawn(async move {
                tokio::time::sleep(REGISTER_DELAY).await;
                for line in later {
                    for (id, tx) in &live {
                        let mut n: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
                        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] = id.clone();
                        let _ = tx.send(Bytes::from(sse_event(None, n.to_string().as_bytes())));
                    }
                }
            });
        } else {
            delayed = later;
        }
        if v.get("id").is_none() || method.is_empty() {
            return Reply::status(202);
        }
        let mut reply = match framing {
            Framing::Json => {
                let answer = lines.into_iter().find(|l| {
                    serde_json::from_slice::<Value>(l)
                        .map(|m| m.get("method").is_none())
                        .unwrap_or(false)
                });
                match answer {
                    Some(a) => Reply::json(200, a),
                    None => Reply::status(200)
                        .header("content-type", "application/json")
                        .part(Part::Sleep(Duration::from_secs(3600))),
                }
            }
            Framing::Sse => {
                let mut events = vec![format!(
                    "id: {}\ndata:\n\n",
                    event_ids.fetch_add(1, Ordering::SeqCst)
                )];
                let empty = lines.is_empty();
                for l in lines {
                    let id = event_ids.fetch_add(1, Ordering::SeqCst).to_string();
                    events.push(sse_event(Some(&id), &l));
                }
                let mut reply = Reply::sse(events);
                if empty {
                    reply = reply.part(Part::Sleep(Duration::from_secs(3600)));
                }
                if !delayed.is_empty() {
                    reply = reply.part(Part::Sleep(REGISTER_DELAY));
                    for l in delayed {
                        let id = event_ids.fetch_add(1, Ordering::SeqCst).to_string();
                        reply = reply.part(Part::Data(Bytes::from(sse_event(Some(&id), &l))));
                    }
                }
                reply
            }
        };
        if method == "initialize" && !matches!(eras, Eras::Modern) {
            let n = sessions.fetch_add(1, Ordering::SeqCst) + 1;
            reply = reply.header("mcp-session-id", &format!("session-{n}"));
        }
        reply
    }
}

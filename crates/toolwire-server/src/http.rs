//! The Streamable HTTP front end, by job: a request routed (pages, authentication, method), a
//! POST read, its SEP-2243 headers checked, placed in its legacy session (held in
//! `sessions.rs`), then answered (`frame.rs`: JSON or SSE, events kept for resumption); the GET
//! stream and its `Last-Event-ID` replays, DELETE, listen streams, the fault knobs.
//! Connections and the host checks are `edge.rs`'s.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;
use toolwire_types::ClientMethod;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use serde_json::Value;

use tokio::sync::mpsc;
use toolwire_headers::{
    ReceivedHeaders, check_present, check_request, check_request_repairing_version,
};

use crate::Repair;

use crate::core::{Core, Interest, Keyed, error, request_version};
use crate::cursor::Cursor;
use crate::respond::{denied, json_bytes, json_response, sse, sse_text};
pub(crate) use crate::respond::{empty, sse_response, with_body};
use crate::sessions::{Resume, Sessions};
use crate::{Caller, Change, Edge, Eras, Service};

/// A response's body: whole (a JSON answer, a page; no channel or task for a body known at
/// once), or a stream fed through a channel (SSE).
pub(crate) type Body = Either<Full<Bytes>, crate::streamed::Streamed>;

/// An answer given instead of going on (boxed: a response is large, and a refusal is rare).
type Refusal = Box<Response<Body>>;

/// The largest request body accepted.
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;
/// A 2024-11-05 SSE session: where its stream takes messages, and who began it.
pub(crate) type SseSession = (mpsc::UnboundedSender<Value>, Option<Arc<Caller>>);

/// The HTTP side's state: sessions and fault counters.
pub(crate) struct Front<S> {
    pub(crate) core: Arc<Core<S>>,
    /// The legacy sessions, each under its caller.
    pub(crate) sessions: Sessions,
    /// The 2024-11-05 SSE sessions: where each one's stream takes messages.
    pub(crate) sse_sessions: std::sync::Mutex<Keyed<SseSession>>,
    /// Listening on a loopback address: `Host` and `Origin` must name a local host.
    local: bool,
    /// Where the notifications of a request answered with one JSON body go: no stream carries
    /// them to the client, so nowhere (its receiver is gone; a send drops the message at once
    /// rather than keeping it until the answer, and no channel is made per request).
    pub(crate) nowhere: mpsc::UnboundedSender<Value>,
    /// The era repairs logged already, per caller.
    repairs: crate::repair::Repairs,
    /// The `subscriptions/listen` streams open, per caller.
    listens: crate::slots::Slots,
    /// The 2024-11-05 transport's streams open, per caller.
    pub(crate) sse_streams: crate::slots::Slots,
}

/// The HTTP response that carries `page`.
fn page_response(page: crate::Page) -> Response<Body> {
    let status = StatusCode::from_u16(page.status).unwrap_or(StatusCode::OK);
    let mut response = with_body(status, page.content_type, Bytes::from(page.body));
    for (name, value) in page.headers {
        response.headers_mut().append(name, value);
    }
    response
}

fn header<'a>(req: &'a http::request::Parts, name: &str) -> Option<&'a str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

/// Writes the event `next` makes for each tool-list change to `tx`, with a keep-alive comment
/// after 15 quiet seconds, until the client goes away or `next` says the stream is over.
async fn forward_changes(
    mut tx: crate::streamed::StreamSender,
    mut changes: tokio::sync::broadcast::Receiver<Change>,
    quiet: Duration,
    mut next: impl FnMut(&Change) -> ControlFlow<(), Option<Bytes>>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let event = tokio::select! {
            change = changes.recv() => {
                // Changes missed: say the tool list changed (the one thing every stream hears).
                let change = match change {
                    Ok(change) => change,
                    Err(RecvError::Lagged(_)) => Change::Tools,
                    Err(RecvError::Closed) => return,
                };
                match next(&change) {
                    ControlFlow::Continue(Some(event)) => event,
                    ControlFlow::Continue(None) => continue,
                    ControlFlow::Break(()) => return,
                }
            }
            // A comment keeps proxies from closing a quiet stream.
            () = tokio::time::sleep(quiet) => Bytes::from_static(b": keep-alive\n\n"),
        };
        if tx.send_data(event).await.is_err() {
            return;
        }
    }
}

impl<S: Service + Edge> Front<S> {
    pub(crate) fn new(core: Arc<Core<S>>, local: bool) -> Arc<Self> {
        let sessions = Sessions::new(
            core.options.limits.clone(),
            core.options.session_keys.clone(),
        );
        Arc::new(Self {
            sessions,
            local,
            core,
            sse_sessions: std::sync::Mutex::new(HashMap::default()),
            nowhere: mpsc::unbounded_channel().0,
            repairs: crate::repair::Repairs::default(),
            listens: crate::slots::Slots::default(),
            sse_streams: crate::slots::Slots::default(),
        })
    }

    /// Answers one request.
    pub(crate) async fn answer(self: &Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let options = &self.core.options;
        if self.local {
            let foreign =
                crate::edge::foreign_name(req.headers(), req.uri(), &options.allowed_hosts);
            if let Some(foreign) = foreign {
                tracing::info!(
                    ?foreign,
                    "refusing a request from another host (DNS rebinding?)"
                );
                return json_response(
                    StatusCode::FORBIDDEN,
                    &error(
                        &Value::Null,
                        -32000,
                        "Forbidden: Host or Origin is not local",
                        None,
                    ),
                );
            }
        }
        let (parts, body) = req.into_parts();
        let base = options.path.trim_end_matches('/');
        let path = parts.uri.path();
        let sse_get = options.sse && path == format!("{base}/sse") && parts.method == Method::GET;
        let sse_post =
            options.sse && path == format!("{base}/messages") && parts.method == Method::POST;
        if path != options.path && !sse_get && !sse_post {
            // The service's own pages (health, metrics, resource metadata), GET only, never
            // behind authentication.
            let page = match parts.method == Method::GET {
                true => {
                    let query = parts.uri.query();
                    self.core.service.page(path, query, &parts.headers).await
                }
                false => None,
            };
            if let Some(page) = page {
                return page_response(page);
            }
            return empty(StatusCode::NOT_FOUND);
        }
        let caller = match self.core.service.authenticate(&parts).await {
            Ok(caller) => caller,
            Err(denial) => return denied(&denial),
        };
        let owner = Caller::tag(caller.as_deref());
        if sse_get {
            return self.sse_stream(base, caller, owner);
        }
        if sse_post {
            return self
                .sse_post(parts.uri.query(), body, caller.as_ref())
                .await;
        }
        if let Some(page) = self.core.service.intercept(&parts).await {
            return page_response(page);
        }
        match parts.method {
            Method::POST => self.post(parts, body, caller).await,
            Method::GET => self.get(&parts, caller).await,
            Method::DELETE => self.delete(&parts, owner),
            _ => empty(StatusCode::METHOD_NOT_ALLOWED),
        }
    }

    /// A POST to the endpoint: read, checked, placed in its session, answered (framed as JSON
    /// or SSE).
    async fn post(
        self: &Arc<Self>,
        parts: http::request::Parts,
        body: Incoming,
        caller: Option<Arc<Caller>>,
    ) -> Response<Body> {
        let mut incoming = match self.read(body).await {
            Ok(incoming) => incoming,
            Err(refused) => return *refused,
        };
        crate::incoming::adopt_trace_headers(&parts.headers, &mut incoming.value);
        let message = &incoming.value;
        let method = message["method"].as_str().unwrap_or("").to_owned();
        let modern = request_version(message).is_some() && self.core.options.eras != Eras::Legacy;
        let owner = Caller::tag(caller.as_deref());
        if let Err(refused) = self.check_headers(&parts, &incoming, &method, modern, owner) {
            return *refused;
        }
        let session = match self.session_of(&parts, &incoming, &method, modern, owner) {
            Ok(session) => session,
            Err(refused) => return *refused,
        };
        self.frame(parts, incoming, modern, session, caller).await
    }

    /// The message a POST carries, read within [`MAX_BODY`] and
    /// [`crate::Limits::body_timeout`].
    async fn read(&self, body: Incoming) -> Result<crate::incoming::Incoming, Refusal> {
        let collecting = http_body_util::Limited::new(body, MAX_BODY).collect();
        let limit = self.core.options.limits.body_timeout;
        let body = match tokio::time::timeout(limit, collecting).await {
            Ok(Ok(b)) => b.to_bytes(),
            Ok(Err(_)) => return Err(Box::new(empty(StatusCode::PAYLOAD_TOO_LARGE))),
            Err(_) => return Err(Box::new(empty(StatusCode::REQUEST_TIMEOUT))),
        };
        self.core.read(&body).map_err(|e| {
            Box::new(json_response(
                StatusCode::BAD_REQUEST,
                &error(&Value::Null, -32700, format!("Parse error: {e}"), None),
            ))
        })
    }

    /// The SEP-2243 headers against the body (required for a 2026-07-28 request, checked
    /// where sent for another), and a legacy-only server's answer to `server/discover`.
    fn check_headers(
        &self,
        parts: &http::request::Parts,
        incoming: &crate::incoming::Incoming,
        method: &str,
        modern: bool,
        owner: [u8; 16],
    ) -> Result<(), Refusal> {
        let options = &self.core.options;
        let message = &incoming.value;
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        if modern {
            if options.validate_headers {
                let (received, plan) = self.routing(parts, incoming);
                let params = message["params"].as_object();
                let checked = if options.era_repair {
                    check_request_repairing_version(&received, method, params, plan.as_ref())
                        .map(|repaired| {
                            repaired.map(|m| self.repaired(Repair::VersionHeader, owner, &m))
                        })
                        .map(|_| ())
                } else {
                    check_request(&received, method, params, plan.as_ref())
                };
                if let Err(mismatch) = checked {
                    tracing::info!(%mismatch, "refusing a request whose headers do not match its body");
                    let e = mismatch.to_error();
                    return Err(Box::new(json_response(
                        StatusCode::BAD_REQUEST,
                        &error(&id, e.code, e.message, e.data.clone()),
                    )));
                }
            }
        } else if options.validate_headers
            && request_version(message).is_none()
            && let Err(refused) = self.check_legacy_headers(parts, method, incoming)
        {
            // A balancer may route on these: a legacy body under headers that say otherwise
            // would go where they say and do what the body says.
            tracing::info!(refused = %refused.message, "refusing a legacy request whose 2026-07-28 headers do not match its body");
            return Err(Box::new(json_response(
                StatusCode::BAD_REQUEST,
                &error(&id, refused.code, refused.message, refused.data),
            )));
        } else if incoming.method == ClientMethod::Discover && options.eras == Eras::Legacy {
            // What the TypeScript SDK's legacy servers answer to anything before initialize.
            return Err(Box::new(json_response(
                StatusCode::BAD_REQUEST,
                &error(
                    &Value::Null,
                    -32000,
                    "Bad Request: Server not initialized",
                    None,
                ),
            )));
        }
        Ok(())
    }

    /// `repair` was made for the caller tagged `owner` (what it overlooked: `what`): reported
    /// to the service each time, logged the first time for that caller.
    fn repaired(&self, repair: Repair, owner: [u8; 16], what: &dyn std::fmt::Display) {
        if self.repairs.first(repair, owner) {
            tracing::info!(repair = repair.as_str(), %what, "era repair: served as the body says (logged once per caller)");
        }
        self.core.service.repaired(repair);
    }

    /// The legacy session a POST belongs to, when it has one: named by `Mcp-Session-Id`, live
    /// here and begun by this caller (`owner`), else the refusal.
    fn session_of(
        &self,
        parts: &http::request::Parts,
        incoming: &crate::incoming::Incoming,
        method: &str,
        modern: bool,
        owner: [u8; 16],
    ) -> Result<Option<String>, Refusal> {
        let options = &self.core.options;
        let message = &incoming.value;
        if modern
            || options.eras == Eras::Modern
            || !options.sessions
            || incoming.method == ClientMethod::Initialize
        {
            return Ok(None);
        }
        let Some(sid) = header(parts, "mcp-session-id") else {
            if message.get("id").is_some() || !method.is_empty() {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                return Err(Box::new(json_response(
                    StatusCode::BAD_REQUEST,
                    &error(
                        &id,
                        -32000,
                        "Bad Request: no valid session ID provided",
                        None,
                    ),
                )));
            }
            return Err(Box::new(empty(StatusCode::BAD_REQUEST)));
        };
        if self.owner(sid) != Some(owner) {
            // Unknown, expired, or begun by another caller: the same answer either way.
            return Err(Box::new(empty(StatusCode::NOT_FOUND)));
        }
        if !self.sessions.used(sid) {
            return Err(Box::new(empty(StatusCode::NOT_FOUND)));
        }
        Ok(Some(sid.to_owned()))
    }

    /// The routing headers of a request whose body is not 2026-07-28's, against that body:
    /// `MCP-Protocol-Version: 2026-07-28` contradicts it, and `Mcp-Method`, `Mcp-Name` and
    /// `Mcp-Param-*` must say what it says when they are sent (some clients send them in
    /// every era).
    fn check_legacy_headers(
        &self,
        parts: &http::request::Parts,
        method: &str,
        incoming: &crate::incoming::Incoming,
    ) -> Result<(), toolwire_types::ErrorObject> {
        if header(parts, "mcp-protocol-version") == Some(crate::core::MODERN) {
            return Err(toolwire_types::ErrorObject::new(
                toolwire_types::error::code::HEADER_MISMATCH,
                "Header mismatch: MCP-Protocol-Version is 2026-07-28, and the body is not a 2026-07-28 request",
            ));
        }
        let routed = parts.headers.keys().any(|name| {
            let name = name.as_str();
            name == "mcp-method" || name == "mcp-name" || name.starts_with("mcp-param-")
        });
        if !routed {
            return Ok(());
        }
        let (received, plan) = self.routing(parts, incoming);
        check_present(
            &received,
            method,
            incoming.value["params"].as_object(),
            plan.as_ref(),
        )
        .map_err(|mismatch| mismatch.to_error())
    }

    /// What a request's SEP-2243 headers are checked with: the headers as received, and the
    /// header plan of the tool a `tools/call` names, if it has one.
    fn routing<'p>(
        &self,
        parts: &'p http::request::Parts,
        incoming: &crate::incoming::Incoming,
    ) -> (ReceivedHeaders<'p>, Option<toolwire_headers::HeaderPlan>) {
        let received = ReceivedHeaders::new(
            parts
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_bytes())),
        );
        let plan = (incoming.method == ClientMethod::CallTool)
            .then(|| {
                self.core
                    .plan(incoming.value["params"]["name"].as_str().unwrap_or(""))
            })
            .flatten();
        (received, plan)
    }

    /// The owner tag of `sid` when it is a live session here ([`Sessions::owner`]); the
    /// sessions that ended on the way are forgotten.
    fn owner(&self, sid: &str) -> Option<[u8; 16]> {
        let mut ended = Vec::new();
        let found = self.sessions.owner(sid, &mut ended);
        // The count is said only when it changed: a session adopted or ended on the way.
        let changed = !ended.is_empty() || found.is_some_and(|f| f.adopted);
        self.forget_all(ended);
        if changed {
            self.count_sessions();
        }
        found.map(|f| f.owner)
    }

    /// A session was held or ended: the service hears how many there are now.
    pub(crate) fn count_sessions(&self) {
        self.core.service.legacy_sessions(self.sessions.len());
    }

    /// Whether a new session of `owner` may be held ([`Sessions::room_for`]).
    pub(crate) fn room_for(&self, owner: [u8; 16]) -> bool {
        let mut ended = Vec::new();
        let room = self.sessions.room_for(owner, &mut ended);
        if !ended.is_empty() {
            self.forget_all(ended);
            self.count_sessions();
        }
        room
    }

    /// The session `sid` ends here: what it kept goes, in the protocol layer and the service
    /// too.
    pub(crate) fn end_session(&self, sid: &str) {
        if self.sessions.end(sid) {
            self.core.forget(sid);
            self.count_sessions();
        }
    }

    /// Sessions that ended: the protocol layer and the service forget them.
    fn forget_all(&self, ended: Vec<String>) {
        for sid in ended {
            self.core.forget(&sid);
        }
    }

    /// The modern listen stream: the acknowledgement, then every change it asked for.
    pub(crate) fn listen(
        self: &Arc<Self>,
        id: Value,
        interest: Interest,
        caller: Option<Arc<Caller>>,
    ) -> Response<Body> {
        let owner = Caller::tag(caller.as_deref());
        let cap = self.core.options.limits.listens_per_caller;
        let Some(slot) = self.listens.hold(owner, cap) else {
            return crate::respond::too_many_listens(&id, cap);
        };
        let (mut tx, response) = sse_response();
        let changes = self.core.subscribe();
        let core = self.core.clone();
        tokio::spawn(async move {
            // Its place is given back when the stream ends.
            let _slot = slot;
            let who = caller.as_deref();
            let watched = core.service.watch(interest.resources(), true, who).await;
            let interest = interest.narrowed(watched);
            if tx
                .send_data(sse(None, &interest.acknowledged(&id)))
                .await
                .is_ok()
            {
                forward_changes(tx, changes, core.options.limits.sse_keep_alive, |change| {
                    ControlFlow::Continue(
                        interest
                            .notification(change, &id)
                            .map(|note| sse(None, &note)),
                    )
                })
                .await;
            }
            core.service
                .watch(interest.resources(), false, caller.as_deref())
                .await;
        });
        response
    }

    /// GET: the legacy server-message stream, or a replay after `Last-Event-ID`.
    async fn get(
        self: &Arc<Self>,
        parts: &http::request::Parts,
        caller: Option<Arc<Caller>>,
    ) -> Response<Body> {
        let owner = Caller::tag(caller.as_deref());
        let options = &self.core.options;
        if options.eras == Eras::Modern || !options.sessions {
            return empty(StatusCode::METHOD_NOT_ALLOWED);
        }
        let Some(sid) = header(parts, "mcp-session-id").map(str::to_owned) else {
            return empty(StatusCode::BAD_REQUEST);
        };
        if self.owner(&sid) != Some(owner) {
            return empty(StatusCode::NOT_FOUND);
        }
        // What a resumed GET stream sent after the client's last event, sent first.
        let mut replay = Vec::new();
        if let Some(last) = header(parts, "last-event-id") {
            // An id this server never wrote resumes nothing: said at once, rather than with
            // an empty stream the client would come back to again and again.
            let Some(cursor) = Cursor::parse(last) else {
                return empty(StatusCode::BAD_REQUEST);
            };
            match self.sessions.resume(&sid, &cursor) {
                Resume::Replay if cursor.answer.is_some() => {
                    return self.follow(sid, cursor.stream, cursor.seq);
                }
                Resume::Replay => replay = self.sessions.after(&sid, cursor.stream, cursor.seq),
                // A new GET stream instead, below.
                Resume::Listen => {}
                Resume::Elsewhere => return elsewhere(),
                Resume::Lost { id } => return lost_answer(id.as_ref()),
            }
        }
        let (mut tx, response) = sse_response();
        let changes = self.core.subscribe();
        let front = self.clone();
        tokio::spawn(async move {
            for (_, id, data) in replay {
                if tx.send_data(sse_text(Some(&id), &data)).await.is_err() {
                    return;
                }
            }
            let (stream, ended) = front.sessions.open_get_stream(&sid);
            let quiet = front.core.options.limits.sse_keep_alive;
            let forward = forward_changes(tx, changes, quiet, |change| {
                match front.sessions.listener(&sid) {
                    // The session was deleted: end its stream.
                    None => return ControlFlow::Break(()),
                    // A newer GET stream of the session carries it.
                    Some(newest) if newest != stream => return ControlFlow::Continue(None),
                    Some(_) => {}
                }
                let listener = crate::Listener::new(caller.as_deref(), &sid);
                let Some(note) = front.core.legacy_notification(change, &listener) else {
                    return ControlFlow::Continue(None);
                };
                let json = Bytes::from(json_bytes(&note));
                let id = front.sessions.log(&sid, stream, json.clone());
                ControlFlow::Continue(Some(sse_text(Some(&id), &json)))
            });
            // A newer GET stream past the cap, or the session's end, ends this one now.
            tokio::select! {
                () = forward => {}
                _ = ended => {}
            }
            front.sessions.close_stream(&sid, stream);
        });
        response
    }

    /// An answer's stream of `sid` resumed after its event `seq`: what it sent since, then
    /// what it sends until it ends (its answer), as it comes; a comment every
    /// `sse_keep_alive` finds out whether the client is still there.
    fn follow(self: &Arc<Self>, sid: String, stream: u64, mut seq: u64) -> Response<Body> {
        let (mut tx, response) = sse_response();
        let front = self.clone();
        tokio::spawn(async move {
            let quiet = front.core.options.limits.sse_keep_alive;
            loop {
                // Taken before the read: an event logged after it wakes the wait below.
                let logged = front.sessions.logged(&sid, stream);
                let woken = logged.as_ref().map(|l| l.notified());
                tokio::pin!(woken);
                if let Some(woken) = woken.as_mut().as_pin_mut() {
                    woken.enable();
                }
                for (at, id, data) in front.sessions.after(&sid, stream, seq) {
                    if tx.send_data(sse_text(Some(&id), &data)).await.is_err() {
                        return;
                    }
                    seq = at;
                }
                // Ended: everything it kept was sent.
                let Some(woken) = woken.as_pin_mut() else {
                    return;
                };
                tokio::select! {
                    () = woken => {}
                    () = tokio::time::sleep(quiet) => {
                        if tx.send_data(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        response
    }

    fn delete(&self, parts: &http::request::Parts, owner: [u8; 16]) -> Response<Body> {
        let options = &self.core.options;
        if options.eras == Eras::Modern || !options.sessions {
            return empty(StatusCode::METHOD_NOT_ALLOWED);
        }
        match header(parts, "mcp-session-id") {
            Some(sid) if self.owner(sid) == Some(owner) => {
                self.end_session(sid);
                empty(StatusCode::OK)
            }
            Some(_) => empty(StatusCode::NOT_FOUND),
            None => empty(StatusCode::BAD_REQUEST),
        }
    }
}

/// A resumed answer another process wrote ([`Resume::Elsewhere`]): `503`, which clients take
/// as one failed attempt, and which a balancer told so (nginx: `proxy_next_upstream error
/// timeout http_503`) retries at the next replica, until the one that wrote it replays it.
fn elsewhere() -> Response<Body> {
    json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &error(
            &Value::Null,
            toolwire_types::error::code::INTERNAL_ERROR,
            "the stream this Last-Event-ID names was written by another server process: the replica that runs the request replays it, if it is still there",
            None,
        ),
    )
}

/// A resumed answer this process no longer keeps ([`Resume::Lost`]): the request it answers,
/// when its id is known, gets an error saying so, on a stream that ends there; without an id,
/// `410 Gone`.
fn lost_answer(id: Option<&Value>) -> Response<Body> {
    let Some(id) = id else {
        return empty(StatusCode::GONE);
    };
    let answer = error(
        id,
        toolwire_types::error::code::INTERNAL_ERROR,
        "the request ran, but its answer is no longer kept for resumption",
        None,
    );
    let (mut tx, response) = sse_response();
    tokio::spawn(async move {
        let _ = tx.send_data(sse(None, &answer)).await;
    });
    response
}

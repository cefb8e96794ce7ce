//! What a server built on this crate provides: the [`Service`] trait and the values it trades.

use serde::Deserialize as _;
use std::collections::BTreeSet;
use std::future::Future;
use toolwire_types::methods::method as mcp;
use toolwire_types::{ClientMethod, Method as _, RequestMethod};

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use toolwire_headers::HeaderPlan;
use toolwire_types::error::code;

use crate::asks::{Asks, Scope};
use crate::guard::{Caller, Denial};

/// The era a request arrived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` and sessions (2024-11-05 … 2025-11-25).
    Legacy,
    /// Stateless 2026-07-28: the request carries its protocol version in `_meta`.
    Modern,
}

/// One request for the service: everything but discovery, `initialize`, `ping` and
/// `subscriptions/listen`, which the protocol layer answers itself.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Request<'a> {
    /// Its JSON-RPC id.
    pub id: &'a Value,
    /// The method, to dispatch on ([`ClientMethod::Other`] for one `toolwire-types` does not
    /// know, whose name is [`Request::method_name`]).
    pub method: ClientMethod,
    /// The method's name as it came.
    pub method_name: &'a str,
    /// Its `params` (`Null` when it had none), as they came: a relay passes them on as they
    /// are, a service that reads them decodes them ([`Request::params_as`]). Their `_meta`
    /// lacks the client's capabilities and information, which are [`Request::client`] and
    /// [`Request::client_info`].
    pub params: &'a Value,
    /// The era it arrived in.
    pub era: Era,
    /// The capabilities the client declared: in its `initialize` (legacy), or in the
    /// request's `_meta` (2026-07-28). `None` when they are not known here (a legacy session
    /// another replica began).
    pub client: Option<&'a Value>,
    /// What the client said it is (`name`, `version`, …), when the request carries it
    /// (2026-07-28's `_meta`).
    pub client_info: Option<&'a Value>,
    /// Who sent it, when the server authenticates callers ([`Edge::authenticate`]).
    pub caller: Option<&'a Caller>,
    /// The legacy session (or HTTP+SSE connection, or `stdio`) it came in on, when it has
    /// one: a service that keeps state per session (log levels, subscriptions) keys it by
    /// this and the caller together. None for a 2026-07-28 request, which has no session.
    pub session: Option<&'a str>,
}

impl Request<'_> {
    /// Its params as method `M`'s typed params (absent params read as `{}`), or the `-32602`
    /// error that says what is wrong with them.
    pub fn params_as<M: RequestMethod>(&self) -> Result<M::Params, RpcError> {
        let read = if self.params.is_null() {
            M::Params::deserialize(&Value::Object(serde_json::Map::new()))
        } else {
            M::Params::deserialize(self.params)
        };
        read.map_err(|e| {
            RpcError::new(
                code::INVALID_PARAMS,
                format!("Invalid params for {}: {e}", M::NAME),
            )
        })
    }
}

/// A JSON-RPC error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The code (`toolwire_types::error::code`).
    pub code: i64,
    /// One line for a person.
    pub message: String,
    /// Structured data, when the code defines some.
    pub data: Option<Value>,
    /// Over HTTP, answer the request with this refusal instead: its status and
    /// `WWW-Authenticate` (a gateway relaying its upstream's challenge), when the response
    /// has not begun ([`Edge::may_challenge`]); over stdio, and once an SSE stream has
    /// begun, the JSON-RPC error stands.
    pub challenge: Option<Box<crate::Denial>>,
}

impl RpcError {
    /// An error without data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
            challenge: None,
        }
    }

    /// The same error, answered over HTTP as `denial` ([`RpcError::challenge`]).
    #[must_use]
    pub fn with_challenge(mut self, denial: crate::Denial) -> Self {
        self.challenge = Some(Box::new(denial));
        self
    }

    /// The same error with `data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// The answer to one request: its `result`, or an error.
pub type Answer = Result<Value, RpcError>;

/// A request's `result` as a [`Service`] gives it: a JSON value, or JSON text already
/// written, which goes out as it is (a gateway passes an upstream's result on as it came,
/// neither decoded nor encoded again).
#[derive(Debug, Clone)]
pub enum Reply {
    /// A result as a JSON value.
    Json(Value),
    /// A result as JSON text: an object, sent as it is where the era and method need nothing
    /// added to it (else read and completed as a [`Reply::Json`] would be).
    Text(Box<serde_json::value::RawValue>),
    /// A result as JSON text, as [`Reply::Text`], whose object the service knows says what it
    /// is (`resultType`, 2026-07-28): it is not read again to find out. The service answers
    /// so only where the request's era has that member.
    Typed(Box<serde_json::value::RawValue>),
}

impl From<Value> for Reply {
    fn from(value: Value) -> Self {
        Self::Json(value)
    }
}

/// Where a request's notifications go while it runs (progress, log messages): on its SSE
/// stream over HTTP, on stdout over stdio. In the legacy era it also carries the server's
/// own requests to the client ([`Notifier::ask`]).
#[derive(Clone)]
pub struct Notifier {
    to: mpsc::UnboundedSender<Value>,
    /// Where the server's requests wait for their answers, and the only scope they are taken
    /// from.
    asks: Option<(Arc<Asks>, Scope)>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("can_ask", &self.can_ask())
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// Sends a whole JSON-RPC notification (`{"jsonrpc": "2.0", "method": …}`). A client
    /// that went away is not an error: the notification is dropped.
    pub fn send(&self, notification: Value) {
        let _ = self.to.send(notification);
    }

    /// A notifier whose notifications go to `to` (for tests and front ends of your own); it
    /// cannot ask the client anything.
    pub fn new(to: mpsc::UnboundedSender<Value>) -> Self {
        Self { to, asks: None }
    }

    /// A notifier that can also ask the client, for the front ends.
    pub(crate) fn asking(
        to: mpsc::UnboundedSender<Value>,
        asks: Option<(Arc<Asks>, Scope)>,
    ) -> Self {
        Self { to, asks }
    }

    /// Whether [`Notifier::ask`] can reach the client: a legacy request with a stream back to
    /// it (an SSE answer, stdio, HTTP+SSE). Not in 2026-07-28, whose servers ask by answering
    /// `input_required`, nor over HTTP with JSON answers, which have nowhere to send a request.
    pub fn can_ask(&self) -> bool {
        self.asks.is_some()
    }

    /// Sends the client a request (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`) on this request's stream and waits for its answer. An error when the
    /// notifier cannot ask ([`Notifier::can_ask`]), the client refused, or its stream closed
    /// first. The caller checks the client declared the capability ([`Request::client`]) and
    /// bounds the wait.
    pub async fn ask(&self, method: &str, params: Value) -> Answer {
        let Some((asks, scope)) = &self.asks else {
            return Err(RpcError::new(
                code::INTERNAL_ERROR,
                format!("{method} cannot reach this client: its request has no stream back to it"),
            ));
        };
        let (id, mut waiting) = asks.begin(scope.clone());
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.to.send(request).is_err() {
            return Err(closed(method));
        }
        tokio::select! {
            answer = &mut waiting.answer => answer.unwrap_or_else(|_| Err(closed(method))),
            () = self.to.closed() => Err(closed(method)),
        }
    }
}

/// The client went away before it answered `method`.
fn closed(method: &str) -> RpcError {
    RpcError::new(
        code::INTERNAL_ERROR,
        format!("the client went away before it answered {method}"),
    )
}

/// Something that changed on the server, for the streams that listen.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The tool list.
    Tools,
    /// The resource with this URI.
    Resource(String),
    /// The URL elicitation with this id was completed (legacy era only: 2026-07-28 completes
    /// one by retrying the request).
    ElicitationComplete(String),
    /// A log message not tied to a request: this whole `notifications/message` (legacy era
    /// only: 2026-07-28 sends log messages on the request that asked for them).
    Log(Value),
    /// `change` for the legacy sessions of one caller only (the [`Caller::principal`] that
    /// began them): a URL elicitation completed for that caller reaches nobody else. Not sent
    /// over stdio, whose caller is not authenticated.
    ForCaller {
        /// Whose sessions hear it.
        principal: String,
        /// What they hear.
        change: Box<Change>,
    },
    /// `change` as one of the service's sources made it (a gateway's upstream, by name): the
    /// service's [`Service::legacy_notification`] decides which listeners may hear of that
    /// source; the default delivers `change` as if it came alone.
    Sourced {
        /// Where it came from.
        source: String,
        /// What happened there.
        change: Box<Change>,
    },
}

impl Change {
    /// Whether a legacy session begun by `caller` hears it.
    pub(crate) fn reaches(&self, caller: Option<&Caller>) -> bool {
        match self {
            Self::ForCaller { principal, .. } => caller.is_some_and(|c| c.principal == *principal),
            Self::Sourced { change, .. } => change.reaches(caller),
            _ => true,
        }
    }
}

/// A legacy session that hears changes (on its GET stream, its HTTP+SSE stream, or stdio):
/// who began it and which session it is, for a service that delivers each change only where
/// it belongs ([`Service::legacy_notification`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Listener<'a> {
    /// The caller that began the session, when the service authenticates callers.
    pub caller: Option<&'a Caller>,
    /// The session (its `Mcp-Session-Id`, the HTTP+SSE connection's id, or `stdio`), as
    /// [`Request::session`] names it.
    pub session: &'a str,
}

impl<'a> Listener<'a> {
    /// The session `session`, begun by `caller`.
    pub fn new(caller: Option<&'a Caller>, session: &'a str) -> Self {
        Self { caller, session }
    }
}

/// A page a service serves over HTTP beside the MCP endpoint (`GET` only): a health check,
/// metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page {
    /// The HTTP status.
    pub status: u16,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
    /// More headers (`Location`, `Set-Cookie`, `Cache-Control`, …).
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

impl Page {
    /// A page with this status, type and body.
    pub fn new(status: u16, content_type: &'static str, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    /// The same page with the header `name: value` too.
    #[must_use]
    pub fn with_header(mut self, name: http::HeaderName, value: http::HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }
}

/// Who the server is and what it offers, for `initialize` and `server/discover`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerInfo {
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// What the server tells a model about itself, if anything.
    pub instructions: Option<String>,
    /// The `capabilities` object, the same in both eras.
    pub capabilities: Value,
}

impl ServerInfo {
    /// A server's name, version and capabilities.
    pub fn new(name: impl Into<String>, version: impl Into<String>, capabilities: Value) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            instructions: None,
            capabilities,
        }
    }

    /// The same with instructions.
    #[must_use]
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }
}

/// The server's own behaviour: tools, resources, prompts, whatever it offers, in MCP's terms.
/// The protocol layer ([`crate::serve_http`], [`crate::serve_stdio`]) does the rest: eras and
/// versions, sessions, framing, SEP-2243 header checks, listen streams, caching fields; what
/// a server does at its HTTP edge (who is calling, refusals, pages beside the endpoint) is its
/// [`Edge`].
pub trait Service: Send + Sync + 'static {
    /// Who the server is.
    fn info(&self) -> ServerInfo;

    /// Answers one request. Notifications the work makes go to `notifier`; they reach the
    /// client before the answer.
    fn handle<'a>(
        &'a self,
        request: Request<'a>,
        notifier: &'a Notifier,
    ) -> impl Future<Output = Result<Reply, RpcError>> + Send + 'a;

    /// A notification from the client (`notifications/initialized`, `notifications/cancelled`,
    /// …). Nothing by default.
    fn notified(&self, notification: &Value) {
        let _ = notification;
    }

    /// The SEP-2243 header plan of the tool `name` (from its `x-mcp-header` annotations), to
    /// check a `tools/call`'s `Mcp-Param-*` headers against its arguments. None when the tool
    /// has none or is unknown.
    fn header_plan(&self, name: &str) -> Option<HeaderPlan> {
        let _ = name;
        None
    }

    /// A 2026-07-28 listen stream of `caller` begins (`on`) or ended (`!on`) asking for
    /// updates of these resources: a service that must subscribe somewhere to hear of them
    /// (the gateway, to its upstreams) does it here, and resolves with the resources it
    /// watches for this caller (those it may see); only those are acknowledged and delivered.
    /// The stream is acknowledged once this resolves, so nothing after the acknowledgement is
    /// missed. Every resource asked for, by default; called once per stream each way (on the
    /// way out, with what it resolved with on the way in).
    fn watch<'a>(
        &'a self,
        resources: &'a BTreeSet<String>,
        on: bool,
        caller: Option<&'a Caller>,
    ) -> impl Future<Output = BTreeSet<String>> + Send + 'a {
        let _ = (on, caller);
        std::future::ready(resources.clone())
    }

    /// The legacy session `session` ended (deleted by its client, expired, or its stream
    /// closed): what the service kept for it can go. Nothing by default.
    fn session_ended(&self, session: &str) {
        let _ = session;
    }

    /// A request of `method` arrived, whoever answers it (the server core answers
    /// `initialize`, `server/discover` and `ping` itself). Counted by the gateway; nothing by
    /// default.
    fn received(&self, method: ClientMethod) {
        let _ = method;
    }

    /// This front end holds `open` legacy sessions now: said after each change (a session
    /// begun, taken up from another replica, ended). Exported by the gateway; nothing by
    /// default.
    fn legacy_sessions(&self, open: usize) {
        let _ = open;
    }

    /// A client quirk was overlooked ([`crate::Options::era_repair`]): the request was served
    /// as its body says. Counted by the gateway; nothing by default.
    fn repaired(&self, repair: crate::Repair) {
        let _ = repair;
    }

    /// Changes as they happen. The default has none.
    fn changes(&self) -> broadcast::Receiver<Change> {
        broadcast::channel(1).1
    }

    /// The notification the legacy session `listener` hears for `change` (None: it hears
    /// nothing). By default every change: a service with `resources/subscribe` filters updates
    /// here, and a service with several callers delivers each change only to the sessions it
    /// belongs to.
    fn legacy_notification(&self, change: &Change, listener: &Listener<'_>) -> Option<Value> {
        let _ = listener;
        legacy_notification(change)
    }
}

/// The notification a legacy session hears for `change`, for a service that filters nothing
/// ([`Service::legacy_notification`]'s default).
pub fn legacy_notification(change: &Change) -> Option<Value> {
    Some(match change {
        Change::Tools => crate::list_changed(None),
        Change::Resource(uri) => crate::resource_updated(uri, None),
        Change::ElicitationComplete(id) => {
            json!({"jsonrpc": "2.0", "method": mcp::ElicitationComplete::NAME,
                "params": {"elicitationId": id}})
        }
        Change::Log(message) => message.clone(),
        Change::ForCaller { change, .. } | Change::Sourced { change, .. } => {
            return legacy_notification(change);
        }
    })
}

/// What a server does at its HTTP edge, before and beside MCP: who sent a request (and how a
/// request is refused), whether a refusal may still become a call's HTTP status, and the
/// pages it serves beside the endpoint (health, metrics, resource metadata, sign-in pages).
/// Every default is a server that authenticates nobody and serves no page; a server over stdio
/// has no edge.
pub trait Edge: Send + Sync + 'static {
    /// Who sent an HTTP request to the MCP endpoint, from its credentials (the headers of
    /// `request`: `Authorization`, `DPoP`), before anything else of it is read: a
    /// [`Caller`] the request is served for (and its legacy session bound to), a
    /// [`Denial`] answered instead, or None for a server that does not authenticate
    /// (the default). Not asked over stdio, whose caller is whoever started the process, nor
    /// for [`Edge::page`]s.
    fn authenticate<'a>(
        &'a self,
        request: &'a http::request::Parts,
    ) -> impl Future<Output = Result<Option<Arc<Caller>>, Denial>> + Send + 'a {
        let _ = request;
        std::future::ready(Ok(None))
    }

    /// Whether a `method` request of `caller` may be answered with an HTTP refusal
    /// ([`RpcError::challenge`]): an SSE response to it then begins only with its first event,
    /// so that a refusal can still be its status. False by default.
    fn may_challenge(&self, method: ClientMethod, caller: Option<&Caller>) -> bool {
        let _ = (method, caller);
        false
    }

    /// An answer to give a request to the MCP endpoint (its head, `request`; it is
    /// authenticated already) instead of serving it: a maintenance page, a fault a test server
    /// injects. May take its time (a slow network, simulated). None, the default, serves the
    /// request.
    fn intercept<'a>(
        &'a self,
        request: &'a http::request::Parts,
    ) -> impl Future<Output = Option<Page>> + Send + 'a {
        let _ = request;
        std::future::ready(None)
    }

    /// Whether the legacy SSE stream about to carry a request's answer closes before the
    /// answer is sent on it. The answer is kept, as every event is, for the client to resume
    /// the stream with `Last-Event-ID`: the transport lets a server close a stream at any
    /// time, and a test server does it to exercise its clients. Asked once per such stream;
    /// false by default.
    fn cut_answer_stream(&self) -> bool {
        false
    }

    /// The page at `path` (not the MCP endpoint), for a `GET` over HTTP with `query` (the
    /// part after `?`, if any) and the request's `headers` (its cookies, say); None is a 404.
    /// None by default.
    fn page<'a>(
        &'a self,
        path: &'a str,
        query: Option<&'a str>,
        headers: &'a http::HeaderMap,
    ) -> impl Future<Output = Option<Page>> + Send + 'a {
        let _ = (path, query, headers);
        std::future::ready(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(method: ClientMethod, params: &'a Value) -> Request<'a> {
        static ID: Value = Value::Null;
        Request {
            id: &ID,
            method,
            method_name: method.name().unwrap_or("x/unknown"),
            params,
            era: Era::Legacy,
            client: None,
            client_info: None,
            caller: None,
            session: None,
        }
    }

    #[test]
    fn typed_params_read_absent_params_as_empty_and_name_what_is_missing() {
        let none = Value::Null;
        let listed = request(ClientMethod::ListTools, &none).params_as::<mcp::ListTools>();
        assert!(listed.is_ok_and(|p| p.cursor.is_none()));

        let no_uri = json!({"_meta": {"progressToken": 1}});
        let refused = request(ClientMethod::ReadResource, &no_uri)
            .params_as::<mcp::ReadResource>()
            .expect_err("a read without a uri");
        assert_eq!(refused.code, code::INVALID_PARAMS);
        assert!(
            refused.message.contains("resources/read") && refused.message.contains("uri"),
            "{}",
            refused.message
        );

        let read = json!({"uri": "file:///a.txt"});
        let params = request(ClientMethod::ReadResource, &read).params_as::<mcp::ReadResource>();
        assert_eq!(params.map(|p| p.uri).ok().as_deref(), Some("file:///a.txt"));
    }
}

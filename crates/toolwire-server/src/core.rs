//! The protocol layer shared by the front ends: eras and versions, discovery and
//! `initialize`, `ping`, listen streams, the fields every 2026-07-28 result carries; the rest
//! goes to the [`Service`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use toolwire_types::Method as _;
use toolwire_types::methods::method as mcp;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, oneshot};
use toolwire_headers::HeaderPlan;
use toolwire_types::{ClientMethod, ClientNotice, ProtocolVersion, error::code, meta_key};
use tracing::Instrument as _;

use crate::asks::{Asks, Scope};
use crate::incoming::{Incoming, Reader};
use crate::service::{Change, Era, Notifier, Reply, Request, RpcError, Service};
use crate::{Eras, Options};

/// The modern version served (the types' newest).
pub(crate) const MODERN: &str = match ProtocolVersion::LATEST.known() {
    Some(version) => version,
    None => "",
};

/// Locks a mutex; the data under every lock here stays consistent if a holder panicked.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What handling one message gave.
pub(crate) enum Handled {
    /// The response to send.
    Answer(Outgoing),
    /// An error response that, over HTTP and before the response began, goes as this refusal
    /// instead ([`crate::RpcError::challenge`]).
    Refused(Value, Box<crate::Denial>),
    /// Nothing to send (a notification or a response from the client).
    Nothing,
    /// A `subscriptions/listen` the front end keeps open (its request id, what it asked for).
    Listen(Value, Interest),
}

/// A response to send: a JSON value, or its text already written (a result the service gave
/// as text, [`Reply::Text`], goes out without being read).
#[derive(Debug)]
pub(crate) enum Outgoing {
    Json(Value),
    Text(Vec<u8>),
}

impl Outgoing {
    /// The response's text.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        match self {
            Self::Json(value) => crate::respond::json_bytes(&value),
            Self::Text(text) => text,
        }
    }

    /// The response as a JSON value (read from its text if it was written).
    pub(crate) fn into_value(self) -> Value {
        match self {
            Self::Json(value) => value,
            // Written here from a valid id and a valid result: it reads back.
            Self::Text(text) => serde_json::from_slice(&text).unwrap_or_else(|e| {
                error(
                    &Value::Null,
                    code::INTERNAL_ERROR,
                    format!("an answer did not read back: {e}"),
                    None,
                )
            }),
        }
    }
}

/// What a `subscriptions/listen` stream asked for (and is acknowledged: every notification
/// the layer can deliver is honoured).
#[derive(Debug, Clone, Default)]
pub(crate) struct Interest {
    tools: bool,
    resources: BTreeSet<String>,
}

impl Interest {
    fn from_params(params: &Value) -> Self {
        let asked = &params["notifications"];
        Self {
            tools: asked["toolsListChanged"] == true,
            resources: asked["resourceSubscriptions"]
                .as_array()
                .map(|uris| {
                    uris.iter()
                        .filter_map(|u| u.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The notification `change` makes on the listen stream `subscription`, if it asked for it.
    pub(crate) fn notification(&self, change: &Change, subscription: &Value) -> Option<Value> {
        match change {
            Change::Tools => self.tools.then(|| list_changed(Some(subscription))),
            Change::Resource(uri) => self
                .resources
                .contains(uri)
                .then(|| resource_updated(uri, Some(subscription))),
            // The 2026-07-28 era completes URL elicitations by retrying the request.
            Change::Sourced { change, .. } => self.notification(change, subscription),
            Change::ElicitationComplete(_) | Change::Log(_) | Change::ForCaller { .. } => None,
        }
    }

    /// The same, narrowed to the resources the service watches for its caller
    /// ([`Service::watch`]).
    pub(crate) fn narrowed(mut self, watched: BTreeSet<String>) -> Self {
        self.resources = watched;
        self
    }

    /// The resources whose updates it asked for.
    pub(crate) fn resources(&self) -> &BTreeSet<String> {
        &self.resources
    }

    /// The first message of a listen stream: everything asked for is honoured.
    pub(crate) fn acknowledged(&self, subscription: &Value) -> Value {
        let mut agreed = json!({});
        if self.tools {
            agreed["toolsListChanged"] = json!(true);
        }
        if !self.resources.is_empty() {
            agreed["resourceSubscriptions"] = json!(self.resources);
        }
        json!({"jsonrpc": "2.0", "method": mcp::SubscriptionsAcknowledged::NAME,
            "params": {"notifications": agreed,
                "_meta": {meta_key::SUBSCRIPTION_ID: subscription}}})
    }
}

/// The protocol layer over one service.
pub(crate) struct Core<S> {
    pub(crate) options: Options,
    pub(crate) service: Arc<S>,
    /// Requests a client may cancel, by (scope, id as JSON text): what cancels each.
    in_flight: Mutex<InFlightTable>,
    /// The server's requests to clients, waiting for their answers.
    asks: Arc<Asks>,
    /// The capabilities each legacy client declared in its `initialize`, by scope.
    clients: Mutex<Keyed<Arc<Value>>>,
    /// Reads messages, keeping the declarations 2026-07-28 requests repeat.
    reader: Reader,
    /// The requests being answered, and whether new ones are still taken.
    pub(crate) drain: Arc<crate::drain::Drain>,
}

/// A map by a session's or connection's id, hashed with `foldhash` (seeded per process): its
/// keys are long (a sealed session id is over a hundred characters), and SipHash over them was
/// a thousand instructions a look-up, several look-ups a request.
pub(crate) type Keyed<V> = HashMap<String, V, foldhash::quality::RandomState>;

/// The requests in flight, by (scope, id as JSON text).
type InFlightTable = HashMap<(String, String), oneshot::Sender<()>, foldhash::quality::RandomState>;

/// Takes a request out of the in-flight table when its handling ends, however it ends.
struct InFlight<'a> {
    table: &'a Mutex<InFlightTable>,
    key: (String, String),
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        lock(self.table).remove(&self.key);
    }
}

/// A JSON-RPC error response.
pub(crate) fn error(
    id: &Value,
    code: i64,
    message: impl Into<String>,
    data: Option<Value>,
) -> Value {
    let mut e = json!({"code": code, "message": message.into()});
    if let Some(data) = data {
        e["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

/// The `_meta.protocolVersion` a modern request carries.
pub(crate) fn request_version(message: &Value) -> Option<&str> {
    message["params"]["_meta"][meta_key::PROTOCOL_VERSION].as_str()
}

/// The response to `id` whose result is `text`, as written.
fn written(id: &Value, text: &serde_json::value::RawValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.get().len() + 64);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(&crate::respond::json_bytes(id));
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(text.get().as_bytes());
    out.push(b'}');
    out
}

/// Whether a 2026-07-28 method's result is cacheable, so carries `ttlMs` and `cacheScope`
/// (the types' table).
fn cacheable(method: ClientMethod) -> bool {
    method
        .name()
        .is_some_and(toolwire_types::CachePolicy::carries_hints)
}

impl<S: Service> Core<S> {
    pub(crate) fn new(options: Options, service: Arc<S>) -> Arc<Self> {
        Arc::new(Self {
            options,
            service,
            in_flight: Mutex::new(HashMap::default()),
            asks: Asks::new(),
            clients: Mutex::new(HashMap::default()),
            reader: Reader::default(),
            drain: Arc::default(),
        })
    }

    /// Reads one message from its bytes.
    pub(crate) fn read(&self, bytes: &[u8]) -> Result<Incoming, serde_json::Error> {
        self.reader.read(bytes)
    }

    /// The legacy session or connection `scope` ended: what was kept of its client goes, here
    /// and in the service.
    pub(crate) fn forget(&self, scope: &str) {
        lock(&self.clients).remove(scope);
        self.service.session_ended(scope);
    }

    /// Changes, as they happen.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.service.changes()
    }

    /// The legacy notification `change` makes for `listener`, if it hears of it at all.
    pub(crate) fn legacy_notification(
        &self,
        change: &Change,
        listener: &crate::Listener<'_>,
    ) -> Option<Value> {
        if !change.reaches(listener.caller) {
            return None;
        }
        self.service.legacy_notification(change, listener)
    }

    /// The header plan of tool `name`, if it has one.
    pub(crate) fn plan(&self, name: &str) -> Option<HeaderPlan> {
        self.service.header_plan(name)
    }

    fn modern_ok(&self) -> bool {
        self.options.eras != Eras::Legacy
    }

    fn legacy_ok(&self) -> bool {
        self.options.eras != Eras::Modern
    }

    /// Handles one message; notifications the work makes go to `notify` as they happen.
    /// `scope` is the connection or legacy session the message came in on, when there is one:
    /// a `notifications/cancelled` there ends the request it names (its handling is dropped,
    /// and nothing is answered), and only there. `streams` says the front end delivers what
    /// goes to `notify` to the client while the request runs, so a legacy request may carry
    /// the server's own requests to it ([`Notifier::ask`]); their answers come back here.
    /// `caller` is who sent it, when the service authenticated it.
    pub(crate) async fn handle(
        self: &Arc<Self>,
        incoming: &Incoming,
        notify: &mpsc::UnboundedSender<Value>,
        scope: Option<&str>,
        streams: bool,
        caller: Option<&crate::Caller>,
    ) -> Handled {
        let message = &incoming.value;
        let Some(method) = message["method"].as_str() else {
            // A response: to one of this server's requests (taken only from the caller and
            // session it was sent to), or to nothing.
            let from = Scope::new(crate::Caller::tag(caller), scope);
            self.asks.answered(message, &from);
            return Handled::Nothing;
        };
        let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
            if ClientNotice::of(method) == ClientNotice::Cancelled
                && let Some(scope) = scope
            {
                let key = (scope.to_owned(), message["params"]["requestId"].to_string());
                if let Some(cancel) = lock(&self.in_flight).remove(&key) {
                    let _ = cancel.send(());
                }
            }
            self.service.notified(message);
            return Handled::Nothing;
        };
        // Counted until it is answered (or dropped): a drain waits for it.
        let _working = self.drain.working();
        let span = request_span(incoming.method, method, id, &message["params"], scope);
        let handled = self
            .handle_request(incoming, method, id, notify, scope, streams, caller)
            .instrument(span.clone())
            .await;
        if let Handled::Answer(answer) = &handled
            && !span.is_disabled()
        {
            let text;
            let answer = match answer {
                Outgoing::Json(answer) => answer,
                Outgoing::Text(written) => {
                    text = serde_json::from_slice::<Value>(written).unwrap_or_default();
                    &text
                }
            };
            if let Some(code) = answer["error"]["code"].as_i64() {
                toolwire_telemetry::record_error(&span, &code);
            } else if answer["result"]["isError"] == true {
                toolwire_telemetry::record_error(&span, &"tool_error");
            }
        }
        handled
    }

    /// [`ServerCore::handle`] for a request (`id`), inside its span.
    #[allow(
        clippy::too_many_arguments,
        reason = "what `handle` was given, handed on"
    )]
    async fn handle_request(
        self: &Arc<Self>,
        incoming: &Incoming,
        method: &str,
        id: &Value,
        notify: &mpsc::UnboundedSender<Value>,
        scope: Option<&str>,
        streams: bool,
        caller: Option<&crate::Caller>,
    ) -> Handled {
        let message = &incoming.value;
        let params = &message["params"];
        let modern = request_version(message);
        let kind = incoming.method;
        self.service.received(kind);
        if self.modern_ok() && kind != ClientMethod::Initialize {
            match modern {
                Some(v) if v != MODERN => {
                    return Handled::Answer(Outgoing::Json(error(
                        id,
                        code::UNSUPPORTED_PROTOCOL_VERSION,
                        format!("Unsupported protocol version {v}"),
                        Some(json!({"supported": [MODERN], "requested": v})),
                    )));
                }
                None if !self.legacy_ok() => {
                    return Handled::Answer(Outgoing::Json(error(
                        id,
                        code::INVALID_PARAMS,
                        "Missing _meta.io.modelcontextprotocol/protocolVersion",
                        None,
                    )));
                }
                _ => {}
            }
        }
        let era = if modern.is_some() {
            Era::Modern
        } else {
            Era::Legacy
        };
        let answer = match kind {
            ClientMethod::Discover if self.modern_ok() => {
                let info = self.service.info();
                let mut r = json!({
                    "supportedVersions": [MODERN],
                    "capabilities": info.capabilities,
                    "_meta": {meta_key::SERVER_INFO: {"name": info.name, "version": info.version}}
                });
                if let Some(instructions) = info.instructions {
                    r["instructions"] = json!(instructions);
                }
                Ok(Reply::Json(r))
            }
            ClientMethod::Initialize if self.legacy_ok() => {
                if let Some(scope) = scope {
                    let declared = params["capabilities"].clone();
                    lock(&self.clients).insert(scope.to_owned(), Arc::new(declared));
                }
                // The client's, when this server speaks it; else the newest legacy one.
                let asked = params["protocolVersion"].as_str().unwrap_or("");
                let version = ProtocolVersion::legacy()
                    .find(|v| v.as_str() == asked)
                    .unwrap_or(&ProtocolVersion::LATEST_LEGACY)
                    .as_str();
                let info = self.service.info();
                let mut r = json!({
                    "protocolVersion": version,
                    "capabilities": info.capabilities,
                    "serverInfo": {"name": info.name, "version": info.version},
                });
                if let Some(instructions) = info.instructions {
                    r["instructions"] = json!(instructions);
                }
                Ok(Reply::Json(r))
            }
            ClientMethod::Listen if modern.is_some() => {
                return Handled::Listen(id.clone(), Interest::from_params(params));
            }
            ClientMethod::Ping => Ok(Reply::Json(json!({}))),
            _ => {
                // A 2026-07-28 request carries them; a legacy session's are shared (a count
                // taken, not the declaration copied on every request).
                let session_declared = match era {
                    Era::Modern => None,
                    Era::Legacy => scope.and_then(|s| lock(&self.clients).get(s).cloned()),
                };
                let declared = match era {
                    Era::Modern => incoming.client.as_deref(),
                    Era::Legacy => session_declared.as_deref(),
                };
                let request = Request {
                    id,
                    method: kind,
                    method_name: method,
                    params,
                    era,
                    client: declared,
                    client_info: incoming.client_info.as_deref(),
                    caller,
                    session: match era {
                        Era::Modern => None,
                        Era::Legacy => scope,
                    },
                };
                let asks = (streams && era == Era::Legacy).then(|| {
                    let to = Scope::new(crate::Caller::tag(caller), scope);
                    (self.asks.clone(), to)
                });
                let notifier = Notifier::asking(notify.clone(), asks);
                // Boxed: a service's future (a gateway's holds a whole call upstream) is large,
                // and this one is moved into its span's wrapper and the front end's futures;
                // as a box each move is a pointer's, not kilobytes of `memcpy` a request.
                let handling = Box::pin(self.service.handle(request, &notifier));
                let Some(scope) = scope else {
                    return self.answer(kind, id, modern.is_some(), handling.await);
                };
                let (cancel, cancelled) = oneshot::channel();
                let key = (scope.to_owned(), id.to_string());
                lock(&self.in_flight).insert(key.clone(), cancel);
                let _in_flight = InFlight {
                    table: &self.in_flight,
                    key,
                };
                // A sender dropped without sending (a later request reused the id) cancels
                // nothing.
                let cancelled = async {
                    if cancelled.await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                tokio::select! {
                    answer = handling => answer,
                    () = cancelled => {
                        tracing::debug!(%id, method, "cancelled by the client");
                        return Handled::Nothing;
                    }
                }
            }
        };
        self.answer(kind, id, modern.is_some(), answer)
    }

    /// The response to `id` from the service's answer, with the fields 2026-07-28 results
    /// carry.
    fn answer(
        &self,
        method: ClientMethod,
        id: &Value,
        modern: bool,
        answer: Result<Reply, RpcError>,
    ) -> Handled {
        let answer = match answer {
            // Sent as written, when there is nothing to add to it: the legacy era adds nothing,
            // 2026-07-28 the fields below, which a result of a method kept by its hints, or
            // without `resultType`, lacks. A typed result has it, as its service said.
            Ok(Reply::Text(text))
                if !modern || (!cacheable(method) && toolwire_types::names_result_type(&text)) =>
            {
                return Handled::Answer(Outgoing::Text(written(id, &text)));
            }
            Ok(Reply::Typed(text)) if !modern || !cacheable(method) => {
                return Handled::Answer(Outgoing::Text(written(id, &text)));
            }
            Ok(Reply::Text(text) | Reply::Typed(text)) => {
                serde_json::from_str(text.get()).map_err(|e| {
                    RpcError::new(
                        code::INTERNAL_ERROR,
                        format!("the result given as text does not read as JSON: {e}"),
                    )
                })
            }
            Ok(Reply::Json(value)) => Ok(value),
            Err(e) => Err(e),
        };
        Handled::Answer(Outgoing::Json(match answer {
            Ok(mut r) => {
                if modern && let Some(object) = r.as_object_mut() {
                    // 2026-07-28 results say what they are; every cacheable result says how
                    // long it keeps (both fields required).
                    object
                        .entry("resultType")
                        .or_insert_with(|| json!("complete"));
                    if cacheable(method) {
                        object.entry("ttlMs").or_insert_with(|| json!(0));
                        object
                            .entry("cacheScope")
                            .or_insert_with(|| json!("private"));
                    }
                }
                json!({"jsonrpc": "2.0", "id": id, "result": r})
            }
            Err(RpcError {
                code,
                message,
                data,
                challenge,
            }) => {
                let answer = error(id, code, message, data);
                if let Some(denial) = challenge {
                    return Handled::Refused(answer, denial);
                }
                answer
            }
        }))
    }
}

/// The server span of one request, as the OpenTelemetry conventions for MCP name it: the
/// child of the trace context its `_meta` carried, when it carried one.
fn request_span(
    kind: ClientMethod,
    method: &str,
    id: &Value,
    params: &Value,
    scope: Option<&str>,
) -> tracing::Span {
    use toolwire_telemetry::Subject;
    let text = |key: &str| params.get(key).and_then(Value::as_str);
    let subject = match kind {
        ClientMethod::CallTool => text("name").map_or(Subject::None, Subject::Tool),
        ClientMethod::GetPrompt => text("name").map_or(Subject::None, Subject::Prompt),
        ClientMethod::ReadResource | ClientMethod::Subscribe | ClientMethod::Unsubscribe => {
            text("uri").map_or(Subject::None, Subject::Resource)
        }
        _ => Subject::None,
    };
    let meta = params.get("_meta").and_then(Value::as_object);
    let span = toolwire_telemetry::server(method, subject, meta);
    if !span.is_disabled() {
        match id {
            Value::String(id) => toolwire_telemetry::record_request_id(&span, id),
            id => toolwire_telemetry::record_request_id(&span, id),
        }
        let version = meta
            .and_then(|m| m.get(meta_key::PROTOCOL_VERSION))
            .and_then(Value::as_str);
        // stdio is a pipe; every other front end is HTTP over TCP, whose scope, when there is
        // one, is the legacy session (or HTTP+SSE connection).
        let (transport, session) = match scope {
            Some("stdio") => ("pipe", None),
            scope => ("tcp", scope),
        };
        toolwire_telemetry::record_session(&span, version, transport, session);
    }
    span
}

/// `notifications/tools/list_changed`, on a listen stream when `subscription` is given.
pub(crate) fn list_changed(subscription: Option<&Value>) -> Value {
    match subscription {
        Some(id) => json!({"jsonrpc": "2.0", "method": mcp::ToolsListChanged::NAME,
            "params": {"_meta": {meta_key::SUBSCRIPTION_ID: id}}}),
        None => json!({"jsonrpc": "2.0", "method": mcp::ToolsListChanged::NAME}),
    }
}

/// `notifications/resources/updated` for `uri`, on a listen stream when `subscription` is
/// given.
pub(crate) fn resource_updated(uri: &str, subscription: Option<&Value>) -> Value {
    let mut note = json!({"jsonrpc": "2.0", "method": mcp::ResourceUpdated::NAME,
        "params": {"uri": uri}});
    if let Some(id) = subscription {
        note["params"]["_meta"] = json!({meta_key::SUBSCRIPTION_ID: id});
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every request with the text it was made with, typed (said to name its
    /// `resultType`) or not.
    struct Verbatim(&'static str, bool);

    impl Service for Verbatim {
        fn info(&self) -> crate::ServerInfo {
            crate::ServerInfo::new("verbatim", "0", json!({"tools": {}}))
        }

        async fn handle<'a>(&'a self, _: Request<'a>, _: &'a Notifier) -> Result<Reply, RpcError> {
            let reply = if self.1 { Reply::Typed } else { Reply::Text };
            serde_json::value::RawValue::from_string(self.0.to_owned())
                .map(reply)
                .map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))
        }
    }

    async fn answer(result: &'static str, meta: Option<Value>) -> Outgoing {
        answer_to("tools/call", Verbatim(result, false), meta).await
    }

    async fn answer_to(method: &str, service: Verbatim, meta: Option<Value>) -> Outgoing {
        let core = Core::new(Options::default(), Arc::new(service));
        let mut call = json!({"jsonrpc": "2.0", "id": "c-1", "method": method,
            "params": {"name": "t"}});
        if let Some(meta) = meta {
            call["params"]["_meta"] = meta;
        }
        let (notify, _) = mpsc::unbounded_channel();
        match core.handle(&call.into(), &notify, None, false, None).await {
            Handled::Answer(answer) => answer,
            _ => panic!("no answer"),
        }
    }

    #[tokio::test]
    async fn a_result_given_as_text_goes_out_as_written_where_nothing_is_added() {
        // Not in the order a JSON value would put its members, nor its spacing: as written.
        let text = r#"{"z": 1, "content": [], "resultType": "complete"}"#;
        let legacy = answer(text, None).await;
        let modern = answer(text, Some(json!({meta_key::PROTOCOL_VERSION: MODERN}))).await;
        for out in [legacy, modern] {
            let Outgoing::Text(bytes) = out else {
                panic!("not passed on as text");
            };
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                format!(r#"{{"jsonrpc":"2.0","id":"c-1","result":{text}}}"#)
            );
        }
    }

    #[tokio::test]
    async fn a_typed_result_is_taken_at_its_word_except_where_hints_are_added() {
        let modern = || Some(json!({meta_key::PROTOCOL_VERSION: MODERN}));
        // Not read: had it been, it would have been given a `resultType`.
        let text = r#"{"content": []}"#;
        let Outgoing::Text(bytes) = answer_to("tools/call", Verbatim(text, true), modern()).await
        else {
            panic!("a typed result was read");
        };
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            format!(r#"{{"jsonrpc":"2.0","id":"c-1","result":{text}}}"#)
        );
        // A method kept by its hints: read, and given them.
        let listed = r#"{"tools": [], "resultType": "complete"}"#;
        let Outgoing::Json(answer) =
            answer_to("tools/list", Verbatim(listed, true), modern()).await
        else {
            panic!("a listing went out without its hints");
        };
        assert_eq!(answer["result"]["ttlMs"], json!(0));
        assert_eq!(answer["result"]["cacheScope"], json!("private"));
    }

    #[tokio::test]
    async fn a_modern_result_without_its_type_is_read_and_given_one() {
        let out = answer(
            r#"{"content": []}"#,
            Some(json!({meta_key::PROTOCOL_VERSION: MODERN})),
        )
        .await;
        let Outgoing::Json(answer) = out else {
            panic!("passed on without its resultType");
        };
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": "c-1",
                "result": {"content": [], "resultType": "complete"}})
        );
    }
}

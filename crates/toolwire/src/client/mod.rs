//! The client: a clone-able handle to the current connection, whose driver task
//! (`driver/`) runs the session over a transport.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use toolwire_cache::{Commit, ListOutcome, ToolCache, ToolSnapshot};
use toolwire_session::{CacheMode, CallRequest, Negotiated, Session};
use toolwire_transport::Transport;
use toolwire_types::methods::method::{self, CallTool};
use toolwire_types::{
    CallToolResult, GetPromptParams, GetPromptResult, HasMeta, Implementation, InputRequiredResult,
    JsonObject, ListParams, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    MetaOnlyParams, Outcome, ProgressParams, ReadResourceParams, ReadResourceResult, RequestMethod,
    RetryWithInput, ServerRequest, Tool,
};
use toolwire_types::{Prompt, ProtocolVersion, Resource, ResourceTemplate, ServerCapabilities};

use crate::command::Command;
use crate::config::ClientConfig;
use crate::driver::Driver;
use crate::link::Link;
use crate::notices::Notifications;
use crate::output::OutputValidators;
use crate::reconnect::ConnectionState;
use crate::{CallHooks, CallOptions, ClientBuilder, Connector, Error};
use toolwire_session::InputResponses;
use toolwire_telemetry::{Subject, TraceContext};
use tracing::Instrument as _;

mod call;
mod requests;

pub use call::{Called, RawResult};

/// How many `input_required` rounds one call may take.
const MAX_INPUT_ROUNDS: usize = 8;

/// The current connection of a client.
#[derive(Clone)]
enum Connection {
    /// None yet (or shut down): the next use connects.
    Idle,
    /// A driver task runs it.
    Running {
        commands: mpsc::UnboundedSender<Command>,
    },
    /// Closed for good.
    Closed,
}

/// How many server requests (elicitation, sampling, roots) the handler may work on at once
/// (`SessionConfig::max_server_requests` with a handler; without one, 0).
pub(crate) const MAX_SERVER_REQUESTS: usize = 64;

struct Inner {
    connection: std::sync::Mutex<Connection>,
    config: ClientConfig,
    cache: Arc<ToolCache>,
    next_call: AtomicU64,
    /// `None` when validation is off.
    validators: Option<OutputValidators>,
    runtime: tokio::runtime::Handle,
    /// What every driver of the client shares: the connector, the legacy pin, and where the
    /// current one publishes the connection's state, its transport, notifications and
    /// whether it listens.
    link: Link,
    /// The search index of the current tool snapshot ([`Client::search_tools`]).
    search: toolwire_search::IndexCache<String>,
    /// The MCP Apps views read for the current tool snapshot ([`Client::app`]).
    apps: crate::apps::AppCache,
}

pub use toolwire_session::TOOLS_STALE_META;

/// One tool [`Client::search_tools`] found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolMatch {
    /// Its name.
    pub name: String,
    /// Its BM25 score: higher is more relevant; only comparable within one search.
    pub score: f32,
    /// Its definition, from the snapshot searched.
    pub tool: Arc<Tool>,
}

/// Whether the settle barrier released `result` on its timeout (see [`TOOLS_STALE_META`]).
pub fn tools_may_be_stale(result: &CallToolResult) -> bool {
    result
        .meta
        .as_ref()
        .and_then(|m| m.extra.get(TOOLS_STALE_META))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A connection to one MCP server. Clones share it. [`Client::disconnect`] ends the connection
/// but keeps the client: the next call connects again (a new child process, a new
/// negotiation). [`Client::close`] ends it for good; so does dropping the last clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("tools", &self.inner.cache.load().len())
            .finish_non_exhaustive()
    }
}

impl Client {
    pub(crate) fn new(
        config: ClientConfig,
        connection: Option<Arc<dyn Transport>>,
        connector: Option<Connector>,
    ) -> Result<Self, Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Usage(crate::UsageError::NoRuntime))?;
        let mut config = config;
        // The session refuses what no handler could answer, and past the cap what it could.
        config.session.max_server_requests = if config.handler.is_some() {
            MAX_SERVER_REQUESTS
        } else {
            0
        };
        if config.tasks {
            // Declared on every request of the 2026-07-28 era (and in `initialize`, where
            // legacy servers ignore what they do not know).
            config
                .session
                .capabilities
                .extensions
                .get_or_insert_with(JsonObject::new)
                .entry(toolwire_types::TASKS_EXTENSION)
                .or_insert_with(|| serde_json::Value::Object(JsonObject::new()));
        }
        if config.apps {
            config
                .session
                .capabilities
                .extensions
                .get_or_insert_with(JsonObject::new)
                .entry(toolwire_types::UI_EXTENSION)
                .or_insert_with(toolwire_types::ui_extension_settings);
        }
        let cache = Arc::new(ToolCache::new(config.cache.clone()));
        let validators = config
            .validate_structured_output
            .then(OutputValidators::default);
        let notification_buffer = config.notification_buffer;
        let link = Link::new(
            config.session.clone(),
            cache.clone(),
            connector,
            config.reconnect.clone(),
            notification_buffer,
        );
        let inner = Arc::new(Inner {
            connection: std::sync::Mutex::new(Connection::Idle),
            config,
            cache,
            next_call: AtomicU64::new(0),
            validators,
            runtime,
            link,
            search: toolwire_search::IndexCache::default(),
            apps: crate::apps::AppCache::default(),
        });
        if let Some(transport) = connection {
            let running = inner.start(transport);
            *inner.lock() = running;
        }
        Ok(Self { inner })
    }

    /// A builder: client info, protocol mode, timeouts, capabilities and handler, then
    /// `connect*`.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(name, version)
    }

    /// What the current connection negotiated, if it has (no waiting, no connecting).
    pub fn negotiated(&self) -> Option<Arc<Negotiated>> {
        match &*self.inner.link.connection.borrow() {
            ConnectionState::Ready(n) => Some(n.clone()),
            _ => None,
        }
    }

    /// The negotiated protocol version, once negotiated.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.negotiated().map(|n| n.version.clone())
    }

    /// The protocol headers a `tools/call` of `name` with `arguments` carries at the negotiated
    /// version over the transport in use (`MCP-Protocol-Version`, and from `2026-07-28`
    /// `Mcp-Method`, `Mcp-Name` and the `Mcp-Param-*` of the cached tool's plan; none over
    /// stdio), by the session's own rule (`toolwire_session::call_headers_at`); empty before
    /// negotiation. For display and debugging.
    pub fn call_headers(
        &self,
        name: &str,
        arguments: &Value,
    ) -> Result<Vec<(String, String)>, Error> {
        let Some(version) = self.protocol_version() else {
            return Ok(Vec::new());
        };
        let snapshot = self.inner.cache.snapshot();
        let headers = toolwire_session::call_headers_at(
            &version,
            self.carries_headers(),
            name,
            snapshot.plan(name),
            arguments.as_object(),
        )
        .map_err(|e| {
            Error::Usage(crate::UsageError::InvalidCall(Arc::new(
                toolwire_session::RequestError::Argument(e),
            )))
        })?;
        Ok(headers
            .into_iter()
            .map(|h| (h.name.as_str().to_owned(), h.value.as_str().to_owned()))
            .collect())
    }

    /// The server's implementation info, once negotiated.
    pub fn server_info(&self) -> Option<Implementation> {
        self.negotiated().and_then(|n| n.server_info.clone())
    }

    /// The server's capabilities, once negotiated.
    pub fn server_capabilities(&self) -> Option<ServerCapabilities> {
        self.negotiated().map(|n| n.capabilities.clone())
    }

    /// Every notification the server sends from now on (log messages, resource updates, list
    /// changes, `elicitation/complete`, anything else verbatim), across reconnects. Each
    /// subscriber has its own bounded buffer (see `ClientBuilder::notification_buffer`).
    pub fn notifications(&self) -> Notifications {
        Notifications::new(self.inner.link.notices.subscribe())
    }

    /// Asks the server for log messages at `level` and above, from now on and on every later
    /// connection: the legacy era sends `logging/setLevel` (an error if the server declared
    /// no `logging`); the `2026-07-28` era puts it on every request. The messages arrive on
    /// [`Client::notifications`].
    pub async fn set_log_level(&self, level: toolwire_types::LoggingLevel) -> Result<(), Error> {
        self.in_span(
            "logging/setLevel",
            Subject::None,
            no_failure,
            |trace| async move {
                let commands = self.start(&trace)?;
                let (reply, answer) = oneshot::channel();
                // Held with the level for later sessions too (`Session::carry_into`).
                let issue = Box::new(move |session: &mut Session, now| {
                    session.change_log_level(level, now)
                });
                commands
                    .send(Command::Request {
                        issue,
                        reply,
                        trace,
                    })
                    .map_err(|_| self.unsent())?;
                answer.await.map_err(|_| Error::Closed)?.map(drop)
            },
        )
        .await
    }

    /// A command could not reach the driver: the connection ended just before. Why, if it
    /// says.
    fn unsent(&self) -> Error {
        match &*self.inner.link.connection.borrow() {
            ConnectionState::Failed { reason } => reason.clone(),
            _ => Error::Closed,
        }
    }

    /// Where the connection is now.
    pub fn connection_state(&self) -> ConnectionState {
        self.inner.link.connection.borrow().clone()
    }

    /// The `Mcp-Session-Id` the server assigned to the connection in use (legacy Streamable
    /// HTTP), for display and debugging: `None` before the first connection, over stdio and
    /// HTTP+SSE, and in the stateless 2026-07-28 era.
    pub fn mcp_session_id(&self) -> Option<String> {
        self.inner
            .link
            .transport
            .borrow()
            .as_ref()
            .and_then(|t| t.mcp_session_id())
    }

    /// Whether the connection in use carries HTTP headers (Streamable HTTP or HTTP+SSE),
    /// so that [`Client::call_headers`] are what goes on the wire; `false` before the first
    /// connection.
    pub fn carries_headers(&self) -> bool {
        self.inner
            .link
            .transport
            .borrow()
            .as_ref()
            .is_some_and(|t| t.carries_headers())
    }

    /// The connection's state as it changes (connecting, ready, reconnecting with the
    /// attempt, failed with the reason).
    pub fn watch_connection(&self) -> watch::Receiver<ConnectionState> {
        self.inner.link.connection.subscribe()
    }

    /// The current connection's command channel, connecting if idle (or, with a reconnect
    /// policy, if the last connection ended).
    fn connection(&self) -> Result<mpsc::UnboundedSender<Command>, Error> {
        let mut connection = self.inner.lock();
        // Ended: its driver is gone, or says so (it does before it fails its waiters).
        let ended = matches!(&*connection, Connection::Running { commands }
            if commands.is_closed()
                || matches!(*self.inner.link.connection.borrow(), ConnectionState::Failed { .. }));
        if matches!(*connection, Connection::Idle)
            || (ended && self.inner.config.reconnect.is_some())
        {
            let connector = self.inner.link.connector.as_ref().ok_or(Error::Closed)?;
            let transport = connector()
                .map_err(|e| Error::Connection(crate::ConnectionError::Transport(Arc::new(e))))?;
            *connection = self.inner.start(transport);
        }
        match &*connection {
            Connection::Running { commands } => Ok(commands.clone()),
            Connection::Idle | Connection::Closed => Err(Error::Closed),
        }
    }

    /// Negotiates (once per connection, shared by every caller) and returns what was agreed;
    /// while the client reconnects, waits for the new connection.
    pub async fn ready(&self) -> Result<Arc<Negotiated>, Error> {
        let mut rx = self.inner.link.connection.subscribe();
        // The handshake's requests belong to the caller's span.
        self.start(&toolwire_telemetry::current())?;
        loop {
            // Cloned out of the guard: it must not be held across an await.
            let state = rx.borrow_and_update().clone();
            match state {
                ConnectionState::Ready(n) => return Ok(n),
                ConnectionState::Failed { reason } => return Err(reason),
                // Started above, so idle again only after a disconnect.
                ConnectionState::Idle | ConnectionState::Closed => return Err(Error::Closed),
                ConnectionState::Connecting | ConnectionState::Reconnecting { .. } => {}
            }
            rx.changed().await.map_err(|_| Error::Closed)?;
        }
    }

    /// Waits until what the server announces can reach this client, connecting first if
    /// idle, so that a watcher that then causes a change does not miss its notification. In
    /// the `2026-07-28` era that is when the `subscriptions/listen` stream is acknowledged
    /// (at once when the server declares nothing to listen for, or has no such stream); in
    /// the legacy era, once negotiated (notifications come on the connection itself; over
    /// Streamable HTTP the transport opens the GET stream beside it). An
    /// [`Error::Timeout`] after the request timeout when the stream is never acknowledged.
    pub async fn listening(&self) -> Result<(), Error> {
        let mut listening = self.inner.link.listening.subscribe();
        self.ready().await?;
        let timeout = self.inner.config.session.request_timeout;
        match tokio::time::timeout(timeout, listening.wait_for(|l| *l)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout(timeout)),
        }
    }

    /// The current connection, its negotiation started (without waiting for it: commands
    /// sent meanwhile wait in the driver, each up to its deadline); a handshake started here
    /// carries `trace`, the context of the request that needs it.
    fn start(&self, trace: &Option<TraceContext>) -> Result<mpsc::UnboundedSender<Command>, Error> {
        let commands = self.connection()?;
        let state = self.inner.link.connection.borrow().clone();
        match state {
            ConnectionState::Idle => {
                let trace = trace.clone();
                commands
                    .send(Command::Start { trace })
                    .map_err(|_| self.unsent())?;
                // Said here too, so that a `ready` started now waits for this negotiation.
                self.inner.link.connection.send_if_modified(|s| {
                    let idle = matches!(s, ConnectionState::Idle);
                    if idle {
                        *s = ConnectionState::Connecting;
                    }
                    idle
                });
            }
            // Ended for good: say why, not only that.
            ConnectionState::Failed { reason } => return Err(reason),
            _ => {}
        }
        Ok(commands)
    }

    /// Lists the server's tools (every page) into the cache, in one swap; while the last
    /// listing is fresh (SEP-2549: every page's `ttlMs` not yet passed, and no list change or
    /// header mismatch since) it is the answer, with no round trip ([`CacheMode::Use`]; a
    /// server that sends no `ttlMs` is asked every time).
    pub async fn list_tools(&self) -> Result<ListOutcome, Error> {
        self.list_tools_with(CacheMode::Use).await
    }

    /// [`Client::list_tools`] in cache mode `mode`: [`CacheMode::Refresh`] always asks the
    /// server, [`CacheMode::Bypass`] asks without making the answer the fresh listing (the
    /// tool cache still takes it: calls need its schemas for their headers).
    pub async fn list_tools_with(&self, mode: CacheMode) -> Result<ListOutcome, Error> {
        self.in_span(
            "tools/list",
            Subject::None,
            no_failure,
            |trace| async move {
                let commands = self.start(&trace)?;
                let (reply, answer) = oneshot::channel();
                commands
                    .send(Command::ListTools { mode, reply, trace })
                    .map_err(|_| self.unsent())?;
                answer.await.map_err(|_| Error::Closed)?
            },
        )
        .await
    }

    /// Lists the server's tools (every page) into the cache and returns them, in the server's
    /// order. Tools the listing left out (a definition that does not decode, broken
    /// `x-mcp-header` annotations) are not among them: [`Client::list_tools`] says which and
    /// why.
    pub async fn list_all_tools(&self) -> Result<Vec<Arc<Tool>>, Error> {
        self.list_tools().await.map(|outcome| outcome.tools)
    }

    /// Checks a result's `structuredContent` against the tool's output schema, when
    /// validation is on and the result is not a tool error.
    pub(crate) fn validate(
        &self,
        name: &str,
        output_schema: Option<&toolwire_types::Schema>,
        result: &CallToolResult,
    ) -> Result<(), Error> {
        if let (Some(validators), Some(schema), Some(structured), false) = (
            &self.inner.validators,
            output_schema,
            &result.structured_content,
            result.is_error(),
        ) {
            validators.check(name, schema, structured)?;
        }
        Ok(())
    }

    /// Answers one `input_required` round through the handler: the responses by key, and
    /// the state to echo.
    pub(crate) async fn answer_input(
        &self,
        required: Box<InputRequiredResult>,
        rounds: &mut usize,
    ) -> Result<(JsonObject, Option<String>), Error> {
        self.answer_input_with(required, rounds, None).await
    }

    /// [`Client::answer_input`] through the call's own handler when it has one.
    pub(crate) async fn answer_input_with(
        &self,
        required: Box<InputRequiredResult>,
        rounds: &mut usize,
        per_call: Option<&crate::ServerRequestHandler>,
    ) -> Result<(JsonObject, Option<String>), Error> {
        *rounds += 1;
        if *rounds > MAX_INPUT_ROUNDS {
            return Err(Error::Input(crate::InputError::TooManyRounds(
                MAX_INPUT_ROUNDS,
            )));
        }
        let handler = per_call
            .or(self.inner.config.handler.as_ref())
            .ok_or(Error::Input(crate::InputError::NoHandler))?;
        let required = *required;
        let mut responses = JsonObject::new();
        for (key, request) in required.input_requests.into_iter().flatten() {
            let decoded = ServerRequest::decode_value(&request.method, request.params)
                .map_err(|e| Error::Protocol(crate::ProtocolError::Decode(Arc::new(e))))?;
            let answer = handler(decoded)
                .await
                .map_err(|e| Error::Input(crate::InputError::Refused(e)))?;
            responses.insert(key, answer);
        }
        Ok((responses, required.request_state))
    }

    /// The tools the client knows now.
    pub fn tools(&self) -> Arc<ToolSnapshot> {
        self.inner.cache.snapshot()
    }

    /// The MCP Apps view of tool `name` (`_meta.ui.resourceUri`): read with `resources/read`
    /// the first time, checked (a `ui://` URI, `text/html;profile=mcp-app`, its `_meta.ui`), and
    /// kept with its sandbox metadata until the tool list changes. `None` when the tool names
    /// no view, or is not known after a listing. A view that breaks the extension's rules is
    /// [`ProtocolError::App`](crate::ProtocolError::App).
    pub async fn app(&self, name: &str) -> Result<Option<Arc<crate::apps::AppView>>, Error> {
        if !self.tools().contains(name) {
            self.list_tools().await?;
        }
        let snapshot = self.tools();
        let Some(tool) = snapshot.get(name).map(|t| t.tool().clone()) else {
            return Ok(None);
        };
        if let Some(view) = self.inner.apps.get(snapshot.generation(), name) {
            return Ok(Some(view));
        }
        let Some(ui) = tool.ui() else {
            return Ok(None);
        };
        let Some(uri) = crate::apps::view_uri(name, &ui)? else {
            return Ok(None);
        };
        let read = self.read_resource(&uri).await?;
        let view = Arc::new(crate::apps::view(name, &uri, ui, &read)?);
        self.inner.apps.put(snapshot.generation(), view.clone());
        Ok(Some(view))
    }

    /// The `k` tools of the current snapshot most relevant to `query`, best first: BM25 over
    /// their names, titles, descriptions and parameter names ([`toolwire_search`]). The index
    /// is built on the first search after each change of the snapshot, so it follows list
    /// changes; no request is sent (list the tools first).
    pub fn search_tools(&self, query: &str, k: usize) -> Vec<ToolMatch> {
        let snapshot = self.inner.cache.snapshot();
        let index = self.inner.search.index(snapshot.generation(), || {
            snapshot
                .iter()
                .map(|(name, cached)| (name.to_owned(), &**cached.tool()))
                .collect()
        });
        index
            .search(query, k)
            .into_iter()
            .filter_map(|hit| {
                let tool = snapshot.get(&hit.key)?.tool().clone();
                Some(ToolMatch {
                    name: hit.key,
                    score: hit.score,
                    tool,
                })
            })
            .collect()
    }

    /// Pre-loads tool definitions so their calls carry `Mcp-Param-*` headers without a
    /// `tools/list` (all or nothing; they survive refreshes and reconnects until removed).
    pub fn add_known_tools(&self, tools: impl IntoIterator<Item = Tool>) -> Result<Commit, Error> {
        let commit = self
            .inner
            .cache
            .add_known_tools(tools)
            .map_err(|e| Error::Usage(crate::UsageError::KnownTools(Arc::new(e))))?;
        self.inner.link.announce(&commit);
        Ok(commit)
    }

    /// Every change of the tool cache from now on (listings, automatic refreshes after list
    /// changes, known tools), each with its generation and diff. A receiver that falls more
    /// than 64 changes behind gets `Lagged` and can read [`Client::tools`].
    pub fn subscribe_tools(&self) -> broadcast::Receiver<Commit> {
        self.inner.link.changes.subscribe()
    }

    /// Removes the known status of these tools.
    pub fn remove_known_tools<S: AsRef<str>>(
        &self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Commit, Error> {
        let commit = self
            .inner
            .cache
            .remove_known_tools(names)
            .map_err(|e| Error::Usage(crate::UsageError::KnownTools(Arc::new(e))))?;
        self.inner.link.announce(&commit);
        Ok(commit)
    }

    /// Removes the known status of every tool.
    pub fn clear_known_tools(&self) -> Commit {
        let commit = self.inner.cache.clear_known_tools();
        self.inner.link.announce(&commit);
        commit
    }

    /// Ends the current connection but not the client (reusable): pending calls fail with
    /// [`Error::Closed`], the tools the server listed are forgotten (known tools stay), and
    /// the next call connects again through the connector (a new child process, a new
    /// negotiation). Without a connector this is [`Client::close`].
    pub async fn disconnect(&self) {
        let next = if self.inner.link.connector.is_some() {
            Connection::Idle
        } else {
            Connection::Closed
        };
        let state = match next {
            Connection::Idle => ConnectionState::Idle,
            _ => ConnectionState::Closed,
        };
        let previous = self.inner.replace(next);
        close_connection(previous).await;
        // Unless another caller connected meanwhile.
        let connection = self.inner.lock();
        if !matches!(*connection, Connection::Running { .. }) {
            self.inner.link.connection.send_replace(state);
        }
        let listing = self.inner.cache.begin_listing();
        self.inner.cache.commit_listing(listing);
    }

    /// Closes the client for good (final; the transport's graceful shutdown): pending and
    /// later calls fail with [`Error::Closed`]. Dropping the last clone does the same.
    pub async fn close(&self) {
        let previous = self.inner.replace(Connection::Closed);
        close_connection(previous).await;
        self.inner
            .link
            .connection
            .send_replace(ConnectionState::Closed);
    }
}

impl Client {
    /// Runs `send` in the client span of one `method` request (named and attributed as the
    /// OpenTelemetry conventions for MCP say), giving it the W3C trace context its requests
    /// carry (none when tracing is off); records the session it went in, and marks the span
    /// failed when the request failed (`error.type`: the JSON-RPC code of an error answer, the
    /// kind of a local failure, or what `failed` finds in a result).
    async fn in_span<T, Fut>(
        &self,
        method: &str,
        subject: Subject<'_>,
        failed: impl FnOnce(&T) -> Option<&'static str>,
        send: impl FnOnce(Option<TraceContext>) -> Fut,
    ) -> Result<T, Error>
    where
        Fut: Future<Output = Result<T, Error>>,
    {
        let span = toolwire_telemetry::client(method, subject);
        if span.is_disabled() {
            // No subscriber wants it: the request runs bare, with nothing to propagate and
            // nothing to record (and its future is not moved into a wrapper).
            return send(None).await;
        }
        let trace = toolwire_telemetry::context_of(&span);
        let outcome = send(trace).instrument(span.clone()).await;
        let version = self.protocol_version().map(|v| v.to_string());
        let transport = if self.carries_headers() {
            "tcp"
        } else {
            "pipe"
        };
        let session = self.mcp_session_id();
        toolwire_telemetry::record_session(
            &span,
            version.as_deref(),
            transport,
            session.as_deref(),
        );
        match &outcome {
            Ok(result) => {
                if let Some(kind) = failed(result) {
                    toolwire_telemetry::record_error(&span, &kind);
                }
            }
            Err(Error::Server(error)) => toolwire_telemetry::record_error(&span, &error.code),
            Err(other) => toolwire_telemetry::record_error(&span, &error_type(other)),
        }
        outcome
    }
}

/// For [`in_span`]: a result that is never a failure.
fn no_failure<T>(_: &T) -> Option<&'static str> {
    None
}

/// A short, stable name for the kind of a failure that is not an error answer.
fn error_type(error: &Error) -> &'static str {
    match error {
        Error::Server(_) => "server",
        Error::Timeout(_) => "timeout",
        Error::Connection(_) => "connection",
        Error::Negotiation(_) => "negotiation",
        Error::Protocol(_) => "protocol",
        Error::Usage(_) => "usage",
        Error::Input(_) => "input",
        #[cfg(feature = "oauth")]
        Error::Authorization(_) => "authorization",
        Error::TaskEnded { .. } => "task",
        Error::Closed => "closed",
    }
}

pub(crate) fn list_params(cursor: Option<String>) -> ListParams {
    ListParams {
        cursor,
        meta: None,
        extra: JsonObject::new(),
    }
}

async fn close_connection(connection: Connection) {
    if let Connection::Running { commands, .. } = connection {
        let (reply, done) = oneshot::channel();
        if commands.send(Command::Close { reply }).is_ok() {
            let _ = done.await;
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        // The connection is replaced whole, so a panicked holder left nothing half-done.
        self.connection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replaces the connection; the driver of the one before is no longer heard.
    fn replace(&self, next: Connection) -> Connection {
        let mut connection = self.lock();
        self.link.move_on();
        std::mem::replace(&mut *connection, next)
    }

    /// Starts a driver task for a new connection over `transport` (the client's current one:
    /// called with the connection locked, to be put in its place), not started yet.
    fn start(&self, transport: Arc<dyn Transport>) -> Connection {
        // The driver before it, if any, is no longer heard.
        self.link.move_on();
        self.link.connection.send_replace(ConnectionState::Idle);
        let link = self.link.clone();
        let session = link.session(transport.carries_headers());
        link.transport.send_replace(Some(transport.clone()));
        let (commands, rx) = mpsc::unbounded_channel();
        let driver = Driver::new(
            session,
            transport,
            self.config.handler.clone(),
            commands.downgrade(),
            link,
        );
        self.runtime.spawn(driver.run(rx));
        Connection::Running { commands }
    }
}

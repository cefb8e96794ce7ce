//! The client: a handle to a driver task that runs the session over a transport.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use toolwire_cache::{CacheConfig, Commit, ListOutcome, ToolCache, ToolSnapshot};
use toolwire_http::HttpTransportBuilder;
use toolwire_session::{
    CallOptions, Event, Negotiated, OpId, ProtocolMode, Session, SessionConfig, SessionError,
    SettleMode,
};
use toolwire_transport::{BoxFuture, StdioConfig, StdioTransport, Transport, TransportError};
use toolwire_types::methods::method::{self, CallTool};
use toolwire_types::{
    CallToolResult, ErrorObject, GetPromptParams, GetPromptResult, HasMeta, Implementation,
    InputRequiredResult, JsonObject, ListParams, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, MetaOnlyParams, Outcome, ProgressParams, ReadResourceParams,
    ReadResourceResult, RequestId, RequestMethod, RetryWithInput, ServerRequest, Tool,
};
use toolwire_types::{ProtocolVersion, ServerCapabilities};

use crate::Error;
use crate::output::OutputValidators;

/// Answers requests from the server (`elicitation/create`, `sampling/createMessage`,
/// `roots/list`): the decoded request in, the result (any JSON value) or a JSON-RPC error out.
pub type ServerRequestHandler =
    Arc<dyn Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>> + Send + Sync>;

/// A per-call progress callback.
pub type ProgressCallback = Arc<dyn Fn(&ProgressParams) + Send + Sync>;

/// How a [`Client`] behaves.
#[derive(Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// The protocol session's settings (client info, capabilities, mode, timeouts).
    pub session: SessionConfig,
    /// The tool cache's settings.
    pub cache: CacheConfig,
    /// Answers the server's requests; without one they are refused with `-32601`. Declare the
    /// matching capabilities in [`SessionConfig::capabilities`]: requests for undeclared ones
    /// are refused before they reach the handler.
    pub handler: Option<ServerRequestHandler>,
    /// Check `structuredContent` against the tool's `outputSchema` (default `true`; skipped
    /// for `isError` results and when the result has no structured content).
    pub validate_structured_output: bool,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("session", &self.session)
            .field("cache", &self.cache)
            .field("handler", &self.handler.as_ref().map(|_| "Fn"))
            .field(
                "validate_structured_output",
                &self.validate_structured_output,
            )
            .finish()
    }
}

impl ClientConfig {
    /// A client that introduces itself as `name` `version`, with the defaults.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            session: SessionConfig::new(Implementation::new(name, version)),
            cache: CacheConfig::default(),
            handler: None,
            validate_structured_output: true,
        }
    }

    /// Sets the handler for the server's requests and declares `capabilities` for it.
    pub fn with_handler(
        mut self,
        capabilities: toolwire_types::ClientCapabilities,
        handler: impl Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.session = self.session.with_capabilities(capabilities);
        self.handler = Some(Arc::new(handler));
        self
    }

    /// Sets the protocol mode.
    pub fn with_mode(mut self, mode: ProtocolMode) -> Self {
        self.session = self.session.with_mode(mode);
        self
    }

    /// Replaces the session settings.
    pub fn with_session(mut self, session: SessionConfig) -> Self {
        self.session = session;
        self
    }
}

#[derive(Debug, Clone)]
enum Negotiation {
    NotStarted,
    Pending,
    Ready(Arc<Negotiated>),
    Failed(Arc<SessionError>),
    Closed {
        error: Option<Arc<TransportError>>,
        /// The connection ended while the `server/discover` probe was in flight.
        during_probe: bool,
    },
}

/// Issues one request on the session (the driver calls it when the session is ready).
type IssueRequest =
    Box<dyn FnOnce(&mut Session, Instant) -> Result<OpId, toolwire_session::RequestError> + Send>;

enum Command {
    Start,
    Call {
        call: u64,
        progress: Option<ProgressCallback>,
        name: String,
        /// Shared with the caller, which keeps them for an `input_required` round.
        arguments: Option<Arc<JsonObject>>,
        /// Boxed: it may hold a whole tool definition.
        options: Box<CallOptions>,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
    },
    ListTools {
        reply: oneshot::Sender<Result<ListOutcome, Error>>,
    },
    /// Any other request: issued on the session by the closure.
    Request {
        issue: IssueRequest,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
    },
    Close {
        reply: oneshot::Sender<()>,
    },
    /// A call's future was dropped before its answer.
    Cancel {
        call: u64,
    },
    /// A handler finished answering a server request.
    Respond {
        id: RequestId,
        result: Result<Value, ErrorObject>,
    },
}

/// How many `input_required` rounds one call may take.
const MAX_INPUT_ROUNDS: usize = 8;

/// Makes a fresh transport for each connection (used to reconnect after
/// [`Client::shutdown`]).
pub type Connector = Arc<dyn Fn() -> Result<Arc<dyn Transport>, TransportError> + Send + Sync>;

/// Builds a [`Client`]: `Client::builder("my-agent", "1.0").title("My Agent").connect_stdio(..)`.
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    config: ClientConfig,
}

impl ClientBuilder {
    /// The human-readable name in `clientInfo`.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.config.session.client_info.title = Some(title.into());
        self
    }

    /// Which protocol era to speak (default: probe, then fall back).
    pub fn mode(mut self, mode: ProtocolMode) -> Self {
        self.config.session.mode = mode;
        self
    }

    /// The default request deadline and the `server/discover` probe timeout.
    pub fn timeouts(mut self, request: std::time::Duration, probe: std::time::Duration) -> Self {
        self.config.session = self.config.session.with_timeouts(request, probe);
        self
    }

    /// Declares client capabilities (a handler sets its own).
    pub fn capabilities(mut self, capabilities: toolwire_types::ClientCapabilities) -> Self {
        self.config.session.capabilities = capabilities;
        self
    }

    /// Answers the server's requests and `input_required` rounds; declares `capabilities`.
    pub fn handler(
        mut self,
        capabilities: toolwire_types::ClientCapabilities,
        handler: impl Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.config = self.config.with_handler(capabilities, handler);
        self
    }

    /// The tool cache's settings.
    pub fn cache(mut self, cache: CacheConfig) -> Self {
        self.config.cache = cache;
        self
    }

    /// The settle barrier for results that announce tool changes (default: announced
    /// changes, 5 s).
    pub fn settle(mut self, mode: SettleMode, timeout: std::time::Duration) -> Self {
        self.config.session = self.config.session.with_settle(mode, timeout);
        self
    }

    /// Whether to refetch the tool list when the server says it changed (default on).
    pub fn auto_refresh(mut self, on: bool) -> Self {
        self.config.session = self.config.session.with_auto_refresh(on);
        self
    }

    /// Whether to check `structuredContent` against `outputSchema` (default on).
    pub fn validate_structured_output(mut self, validate: bool) -> Self {
        self.config.validate_structured_output = validate;
        self
    }

    /// The configuration built so far.
    pub fn config(self) -> ClientConfig {
        self.config
    }

    /// [`Client::connect`].
    pub fn connect(self, transport: impl Transport) -> Result<Client, Error> {
        Client::connect(transport, self.config)
    }

    /// [`Client::connect_stdio`].
    pub fn connect_stdio(self, stdio: StdioConfig) -> Result<Client, Error> {
        Client::connect_stdio(stdio, self.config)
    }

    /// [`Client::connect_with`].
    pub fn connect_with(self, connector: Connector) -> Result<Client, Error> {
        Client::connect_with(connector, self.config)
    }

    /// [`Client::connect_http`].
    pub fn connect_http(self, http: HttpTransportBuilder) -> Result<Client, Error> {
        Client::connect_http(http, self.config)
    }
}

/// The current connection of a client.
#[derive(Clone)]
enum Connection {
    /// None yet (or shut down): the next use connects.
    Idle,
    /// A driver task runs it.
    Running {
        commands: mpsc::UnboundedSender<Command>,
        negotiation: watch::Receiver<Negotiation>,
    },
    /// Closed for good.
    Closed,
}

struct Inner {
    connection: std::sync::Mutex<Connection>,
    connector: Option<Connector>,
    config: ClientConfig,
    cache: Arc<ToolCache>,
    next_call: AtomicU64,
    /// `None` when validation is off.
    validators: Option<OutputValidators>,
    runtime: tokio::runtime::Handle,
    /// Set once a server died during the probe: later connections go straight to `initialize`.
    legacy_only: std::sync::atomic::AtomicBool,
    /// Every change of the tool cache made through this client.
    changes: broadcast::Sender<Commit>,
}

/// The `_meta` key set to `true` on a `tools/call` result that the settle barrier released
/// on its timeout: the tool list may not show the changes the result announced yet.
pub const TOOLS_STALE_META: &str = "dev.toolwire/toolsStale";

/// Whether the settle barrier released `result` on its timeout (see [`TOOLS_STALE_META`]).
pub fn tools_may_be_stale(result: &CallToolResult) -> bool {
    result
        .meta
        .as_ref()
        .and_then(|m| m.extra.get(TOOLS_STALE_META))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Sets [`TOOLS_STALE_META`] on a raw `tools/call` result.
fn mark_tools_stale(raw: Box<RawValue>) -> Box<RawValue> {
    let Ok(mut value) = serde_json::from_str::<Value>(raw.get()) else {
        return raw;
    };
    if let Some(object) = value.as_object_mut() {
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(TOOLS_STALE_META.to_owned(), Value::Bool(true));
        }
    }
    serde_json::value::to_raw_value(&value).unwrap_or(raw)
}

/// Sends a commit to subscribers when it changed something.
fn announce(changes: &broadcast::Sender<Commit>, commit: &Commit) {
    if !commit.diff.is_empty() {
        // No subscriber is not an error.
        let _ = changes.send(commit.clone());
    }
}

/// A connection to one MCP server. Clones share it. [`Client::shutdown`] ends the connection
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

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Start => "Start",
            Self::Call { .. } => "Call",
            Self::ListTools { .. } => "ListTools",
            Self::Request { .. } => "Request",
            Self::Close { .. } => "Close",
            Self::Cancel { .. } => "Cancel",
            Self::Respond { .. } => "Respond",
        })
    }
}

impl Client {
    fn new(
        config: ClientConfig,
        connection: Option<Arc<dyn Transport>>,
        connector: Option<Connector>,
    ) -> Result<Self, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let cache = Arc::new(ToolCache::new(config.cache.clone()));
        let validators = config
            .validate_structured_output
            .then(OutputValidators::default);
        let inner = Arc::new(Inner {
            connection: std::sync::Mutex::new(Connection::Idle),
            connector,
            config,
            cache,
            next_call: AtomicU64::new(0),
            validators,
            runtime,
            legacy_only: std::sync::atomic::AtomicBool::new(false),
            changes: broadcast::channel(64).0,
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
        ClientBuilder {
            config: ClientConfig::new(name, version),
        }
    }

    /// What the current connection negotiated, if it has (no waiting, no connecting).
    pub fn negotiated(&self) -> Option<Arc<Negotiated>> {
        match &*self.inner.lock() {
            Connection::Running { negotiation, .. } => match &*negotiation.borrow() {
                Negotiation::Ready(n) => Some(n.clone()),
                _ => None,
            },
            Connection::Idle | Connection::Closed => None,
        }
    }

    /// The negotiated protocol version, once negotiated.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.negotiated().map(|n| n.version.clone())
    }

    /// The protocol headers a `tools/call` of `name` with `arguments` carries over HTTP at the
    /// negotiated version (`MCP-Protocol-Version`, and from `2026-07-28` `Mcp-Method`,
    /// `Mcp-Name` and the `Mcp-Param-*` of the cached tool's plan), as the session computes
    /// them; empty before negotiation. For display and debugging.
    pub fn call_headers(
        &self,
        name: &str,
        arguments: &Value,
    ) -> Result<Vec<(String, String)>, Error> {
        let Some(version) = self.protocol_version() else {
            return Ok(Vec::new());
        };
        let mut headers = Vec::new();
        if version.sends_version_header() {
            headers.push(toolwire_headers::protocol_version_header(&version));
        }
        if version.uses_sep2243_headers() {
            let snapshot = self.inner.cache.snapshot();
            let sep2243 = toolwire_session::tool_call_headers(
                name,
                snapshot.plan(name),
                arguments.as_object(),
            )
            .map_err(|e| {
                Error::InvalidCall(Arc::new(toolwire_session::RequestError::Argument(e)))
            })?;
            headers.extend(sep2243);
        }
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

    /// Connects over any transport. Nothing is sent until the first use; then one negotiation
    /// serves every caller. Must be called inside a tokio runtime. Without a [`Connector`] the
    /// client cannot reconnect after [`Client::shutdown`].
    pub fn connect(transport: impl Transport, config: ClientConfig) -> Result<Self, Error> {
        Self::new(config, Some(Arc::new(transport)), None)
    }

    /// Connects lazily through `connector`, which is called again to reconnect after
    /// [`Client::shutdown`].
    pub fn connect_with(connector: Connector, config: ClientConfig) -> Result<Self, Error> {
        Self::new(config, None, Some(connector))
    }

    /// Starts the server as a child process now (so a bad command fails here) and connects
    /// over stdio; after [`Client::shutdown`] the next call starts a new one.
    pub fn connect_stdio(stdio: StdioConfig, config: ClientConfig) -> Result<Self, Error> {
        let first =
            StdioTransport::spawn(stdio.clone()).map_err(|e| Error::Transport(Arc::new(e)))?;
        let connector: Connector = Arc::new(move || {
            StdioTransport::spawn(stdio.clone()).map(|t| Arc::new(t) as Arc<dyn Transport>)
        });
        Self::new(config, Some(Arc::new(first)), Some(connector))
    }

    /// Connects over Streamable HTTP (the URL is checked now; no request is sent until the
    /// first use); after [`Client::shutdown`] the next call builds a new transport from the
    /// same settings. To change the bearer token later, build the [`crate::HttpTransport`] yourself,
    /// keep a clone, and use [`Client::connect`].
    pub fn connect_http(http: HttpTransportBuilder, config: ClientConfig) -> Result<Self, Error> {
        let setup = |e: toolwire_http::HttpError| TransportError::Setup(Box::new(e));
        let first = http
            .clone()
            .build()
            .map_err(|e| Error::Transport(Arc::new(setup(e))))?;
        let connector: Connector = Arc::new(move || {
            http.clone()
                .build()
                .map(|t| Arc::new(t) as Arc<dyn Transport>)
                .map_err(setup)
        });
        Self::new(config, Some(Arc::new(first)), Some(connector))
    }

    /// The current connection's command channel and negotiation state, connecting if idle.
    fn connection(
        &self,
    ) -> Result<(mpsc::UnboundedSender<Command>, watch::Receiver<Negotiation>), Error> {
        let mut connection = self.inner.lock();
        if matches!(*connection, Connection::Idle) {
            let connector = self.inner.connector.as_ref().ok_or(Error::Closed)?;
            let transport = connector().map_err(|e| Error::Transport(Arc::new(e)))?;
            *connection = self.inner.start(transport);
        }
        match &*connection {
            Connection::Running {
                commands,
                negotiation,
            } => Ok((commands.clone(), negotiation.clone())),
            Connection::Idle | Connection::Closed => Err(Error::Closed),
        }
    }

    /// Negotiates (once per connection, shared by every caller) and returns what was agreed.
    pub async fn ready(&self) -> Result<Arc<Negotiated>, Error> {
        let (commands, mut rx) = self.connection()?;
        if matches!(*rx.borrow(), Negotiation::NotStarted) {
            commands.send(Command::Start).map_err(|_| Error::Closed)?;
        }
        loop {
            // Cloned out of the guard: it must not be held across an await.
            let state = rx.borrow_and_update().clone();
            match state {
                Negotiation::Ready(n) => return Ok(n),
                Negotiation::Failed(e) => return Err(Error::Negotiation(e)),
                Negotiation::Closed {
                    error: Some(e),
                    during_probe,
                } => {
                    if during_probe && self.fall_back_to_legacy(&commands) {
                        return Box::pin(self.ready()).await;
                    }
                    return Err(Error::Transport(e));
                }
                Negotiation::Closed { error: None, .. } => return Err(Error::Closed),
                Negotiation::NotStarted | Negotiation::Pending => {}
            }
            rx.changed().await.map_err(|_| Error::Closed)?;
        }
    }

    /// The connection died during the `server/discover` probe: some stdio servers (those built
    /// on rmcp, for one) exit on any request before `initialize`. The spec says to treat that
    /// as legacy: start the server again and use `initialize`. Once per client, in `Auto` mode,
    /// and only with a connector to start it again.
    fn fall_back_to_legacy(&self, dead: &mpsc::UnboundedSender<Command>) -> bool {
        if self.inner.connector.is_none()
            || self.inner.config.session.mode != ProtocolMode::Auto
            || self.inner.legacy_only.swap(true, Ordering::SeqCst)
        {
            return false;
        }
        tracing::info!(
            "the server ended during the server/discover probe; starting it again with initialize"
        );
        let mut connection = self.inner.lock();
        if matches!(&*connection, Connection::Running { commands, .. } if commands.same_channel(dead))
        {
            *connection = Connection::Idle;
        }
        true
    }

    /// Lists the server's tools (every page) into the cache, in one swap.
    pub async fn list_tools(&self) -> Result<ListOutcome, Error> {
        self.ready().await?;
        let (commands, _) = self.connection()?;
        let (reply, answer) = oneshot::channel();
        commands
            .send(Command::ListTools { reply })
            .map_err(|_| Error::Closed)?;
        answer.await.map_err(|_| Error::Closed)?
    }

    /// Calls a tool. `arguments` must be a JSON object or `null`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call_tool_with(name, arguments, CallOptions::default())
            .await
    }

    /// Calls a tool with per-call options (deadline, a tool definition or header map for this
    /// call, retry opt-in).
    ///
    /// Dropping the future cancels the call: the server is told where the era and transport
    /// allow it, and a late answer is discarded.
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        self.call(name, arguments, options, None).await
    }

    /// Calls a tool, asking the server for progress and handing each notification to
    /// `on_progress` (each one also pushes the call's deadline forward).
    pub async fn call_tool_with_progress(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
        on_progress: impl Fn(&ProgressParams) + Send + Sync + 'static,
    ) -> Result<CallToolResult, Error> {
        self.call(
            name,
            arguments,
            options.with_progress(),
            Some(Arc::new(on_progress)),
        )
        .await
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        mut options: CallOptions,
        progress: Option<ProgressCallback>,
    ) -> Result<CallToolResult, Error> {
        let arguments = match arguments {
            Value::Object(map) => Some(Arc::new(map)),
            Value::Null => None,
            _ => return Err(Error::ArgumentsNotAnObject),
        };
        // Which tool definition the result is checked against: the per-call one (its schema
        // copied, as the options move into the call), else the cached one as it is when the
        // call is made (an `Arc`, no copy).
        let given_schema = options.tool.as_ref().map(|t| t.output_schema.clone());
        let cached = match given_schema {
            Some(_) => None,
            None => self
                .inner
                .cache
                .load()
                .get(name)
                .map(|t| Arc::clone(t.tool())),
        };
        // MRTR: each `input_required` answer is met by the handler and the call is retried
        // (new id, the answers, the exact requestState), a bounded number of times. The
        // arguments are shared with every round, never copied. Without a handler an
        // `input_required` answer ends the call (`Error::InputRequired`), so there is no next
        // round to keep the options for: they move into the call.
        let another_round_possible = self.inner.config.handler.is_some();
        let mut rounds = 0;
        let result = loop {
            let this_round = if another_round_possible {
                options.clone()
            } else {
                std::mem::take(&mut options)
            };
            let outcome = self
                .call_once(name, arguments.clone(), this_round, progress.clone())
                .await?;
            match outcome {
                Outcome::Complete(result) => break result,
                Outcome::InputRequired(required) => {
                    let (responses, state) = self.answer_input(required, &mut rounds).await?;
                    options = options.with_input_responses(responses, state);
                }
            }
        };
        let output_schema = match &given_schema {
            Some(given) => given.as_ref(),
            None => cached.as_ref().and_then(|t| t.output_schema.as_ref()),
        };
        if let (Some(validators), Some(schema), Some(structured), false) = (
            &self.inner.validators,
            output_schema,
            &result.structured_content,
            result.is_error(),
        ) {
            validators.check(name, schema, structured)?;
        }
        Ok(result)
    }

    /// One round of a call: one request, its decoded outcome.
    async fn call_once(
        &self,
        name: &str,
        arguments: Option<Arc<JsonObject>>,
        options: CallOptions,
        progress: Option<ProgressCallback>,
    ) -> Result<Outcome<CallToolResult>, Error> {
        self.ready().await?;
        let (commands, _) = self.connection()?;
        let call = self.inner.next_call.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        let options = Box::new(options);
        let command = Command::Call {
            call,
            progress,
            name: name.to_owned(),
            arguments,
            options,
            reply,
        };
        commands.send(command).map_err(|_| Error::Closed)?;
        let mut guard = CancelOnDrop {
            commands: &commands,
            call,
            armed: true,
        };
        let raw = answer.await.map_err(|_| Error::Closed)?;
        guard.armed = false;
        CallTool::decode_result(&raw?).map_err(|e| Error::Decode(Arc::new(e)))
    }

    /// Sends any request by its method marker and decodes its result, e.g.
    /// `client.request::<method::ListResources>(ListParams::default())`. For the methods that
    /// may answer `input_required`, [`Client::request_with_input`] answers it.
    pub async fn request<M>(&self, params: M::Params) -> Result<M::Result, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + Send + 'static,
    {
        match self.request_once::<M>(params).await? {
            Outcome::Complete(result) => Ok(result),
            Outcome::InputRequired(_) => Err(Error::InputRequired),
        }
    }

    /// [`Client::request`] for `prompts/get` and `resources/read` (and `tools/call`): an
    /// `input_required` answer is met by the handler and the request retried (MRTR).
    pub async fn request_with_input<M>(&self, mut params: M::Params) -> Result<M::Result, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + RetryWithInput + Clone + Send + 'static,
    {
        let mut rounds = 0;
        loop {
            match self.request_once::<M>(params.clone()).await? {
                Outcome::Complete(result) => return Ok(result),
                Outcome::InputRequired(required) => {
                    let (responses, state) = self.answer_input(required, &mut rounds).await?;
                    params.set_input(responses, state);
                }
            }
        }
    }

    /// Answers one `input_required` round through the handler: the responses by key, and
    /// the state to echo.
    async fn answer_input(
        &self,
        required: Box<InputRequiredResult>,
        rounds: &mut usize,
    ) -> Result<(JsonObject, Option<String>), Error> {
        *rounds += 1;
        if *rounds > MAX_INPUT_ROUNDS {
            return Err(Error::TooManyInputRounds(MAX_INPUT_ROUNDS));
        }
        let handler = self
            .inner
            .config
            .handler
            .as_ref()
            .ok_or(Error::InputRequired)?;
        let required = *required;
        let mut responses = JsonObject::new();
        for (key, request) in required.input_requests.into_iter().flatten() {
            let decoded = ServerRequest::decode_value(&request.method, request.params)
                .map_err(|e| Error::Decode(Arc::new(e)))?;
            let answer = handler(decoded).await.map_err(Error::InputRequestFailed)?;
            responses.insert(key, answer);
        }
        Ok((responses, required.request_state))
    }

    async fn request_once<M>(&self, params: M::Params) -> Result<Outcome<M::Result>, Error>
    where
        M: RequestMethod,
        M::Params: HasMeta + Send + 'static,
    {
        self.ready().await?;
        let (commands, _) = self.connection()?;
        let (reply, answer) = oneshot::channel();
        // The method says whether it is safe to resend (reads and lists are).
        let issue = Box::new(move |session: &mut Session, now| session.request::<M>(params, now));
        commands
            .send(Command::Request { issue, reply })
            .map_err(|_| Error::Closed)?;
        let raw = answer.await.map_err(|_| Error::Closed)??;
        M::decode_result(&raw).map_err(|e| Error::Decode(Arc::new(e)))
    }

    /// `ping` (legacy era; a modern server has none and answers `-32601`).
    pub async fn ping(&self) -> Result<(), Error> {
        self.request::<method::Ping>(MetaOnlyParams::default())
            .await
            .map(drop)
    }

    /// One page of `resources/list` (`cursor` from the previous page's `next_cursor`).
    pub async fn list_resources(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourcesResult, Error> {
        self.request::<method::ListResources>(list_params(cursor))
            .await
    }

    /// One page of `resources/templates/list`.
    pub async fn list_resource_templates(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourceTemplatesResult, Error> {
        self.request::<method::ListResourceTemplates>(list_params(cursor))
            .await
    }

    /// `resources/read`.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, Error> {
        let params = ReadResourceParams {
            uri: uri.to_owned(),
            input_responses: None,
            request_state: None,
            meta: None,
            extra: JsonObject::new(),
        };
        self.request_with_input::<method::ReadResource>(params)
            .await
    }

    /// One page of `prompts/list`.
    pub async fn list_prompts(&self, cursor: Option<String>) -> Result<ListPromptsResult, Error> {
        self.request::<method::ListPrompts>(list_params(cursor))
            .await
    }

    /// `prompts/get` with string arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: impl IntoIterator<Item = (String, String)>,
    ) -> Result<GetPromptResult, Error> {
        let params = GetPromptParams {
            name: name.to_owned(),
            arguments: Some(arguments.into_iter().collect()),
            input_responses: None,
            request_state: None,
            meta: None,
            extra: JsonObject::new(),
        };
        self.request_with_input::<method::GetPrompt>(params).await
    }

    /// The tools the client knows now.
    pub fn tools(&self) -> Arc<ToolSnapshot> {
        self.inner.cache.snapshot()
    }

    /// Pre-loads tool definitions so their calls carry `Mcp-Param-*` headers without a
    /// `tools/list` (all or nothing; they survive refreshes and reconnects until removed).
    pub fn add_known_tools(&self, tools: impl IntoIterator<Item = Tool>) -> Result<Commit, Error> {
        let commit = self
            .inner
            .cache
            .add_known_tools(tools)
            .map_err(|e| Error::KnownTools(Arc::new(e)))?;
        announce(&self.inner.changes, &commit);
        Ok(commit)
    }

    /// Every change of the tool cache from now on (listings, automatic refreshes after list
    /// changes, known tools), each with its generation and diff. A receiver that falls more
    /// than 64 changes behind gets `Lagged` and can read [`Client::tools`].
    pub fn subscribe_tools(&self) -> broadcast::Receiver<Commit> {
        self.inner.changes.subscribe()
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
            .map_err(|e| Error::KnownTools(Arc::new(e)))?;
        announce(&self.inner.changes, &commit);
        Ok(commit)
    }

    /// Removes the known status of every tool.
    pub fn clear_known_tools(&self) -> Commit {
        let commit = self.inner.cache.clear_known_tools();
        announce(&self.inner.changes, &commit);
        commit
    }

    /// Ends the current connection (pending calls fail with [`Error::Closed`]) and forgets the
    /// tools the server listed (known tools stay), but keeps the client: the next call
    /// connects again through the connector. Without a connector this is [`Client::close`].
    pub async fn shutdown(&self) {
        let next = if self.inner.connector.is_some() {
            Connection::Idle
        } else {
            Connection::Closed
        };
        let previous = std::mem::replace(&mut *self.inner.lock(), next);
        close_connection(previous).await;
        let listing = self.inner.cache.begin_listing();
        self.inner.cache.commit_listing(listing);
    }

    /// Closes the client for good (the transport's graceful shutdown); pending and later calls
    /// fail with [`Error::Closed`].
    pub async fn close(&self) {
        let previous = std::mem::replace(&mut *self.inner.lock(), Connection::Closed);
        close_connection(previous).await;
    }
}

fn list_params(cursor: Option<String>) -> ListParams {
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

    /// Starts a driver task for a new connection over `transport`.
    fn start(&self, transport: Arc<dyn Transport>) -> Connection {
        let mut config = self.config.session.clone();
        if self.legacy_only.load(Ordering::SeqCst) {
            config = config.with_mode(ProtocolMode::Pinned(
                toolwire_types::ProtocolVersion::LATEST_LEGACY,
            ));
        }
        let session = Session::new(config, self.cache.clone(), transport.carries_headers());
        let (commands, rx) = mpsc::unbounded_channel();
        let (state, negotiation) = watch::channel(Negotiation::NotStarted);
        let driver = Driver::new(
            session,
            transport,
            state,
            self.config.handler.clone(),
            commands.downgrade(),
            self.changes.clone(),
        );
        self.runtime.spawn(driver.run(rx));
        Connection::Running {
            commands,
            negotiation,
        }
    }
}

/// Cancels a call whose future is dropped before its answer arrives.
struct CancelOnDrop<'a> {
    commands: &'a mpsc::UnboundedSender<Command>,
    call: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.commands.send(Command::Cancel { call: self.call });
        }
    }
}

/// A call in flight, as the driver tracks it.
struct CallSlot {
    call: u64,
    reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
    progress: Option<ProgressCallback>,
}

/// The driver's maps, looked up several times per call: `foldhash` with a random seed per map
/// (SipHash, the std default, cost more than the lookups themselves). Their keys are ids the
/// client chose, or header names capped at [`MAX_KEPT_HEADER_NAMES`].
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The task that owns the session and the transport.
struct Driver {
    session: Session,
    transport: Arc<dyn Transport>,
    state: watch::Sender<Negotiation>,
    calls: FastMap<OpId, CallSlot>,
    /// The caller's call id → the session's operation.
    call_ops: FastMap<u64, OpId>,
    lists: FastMap<OpId, oneshot::Sender<Result<ListOutcome, Error>>>,
    requests: FastMap<OpId, oneshot::Sender<Result<Box<RawValue>, Error>>>,
    handler: Option<ServerRequestHandler>,
    /// To post handler answers back to this driver without keeping the channel open.
    own_commands: mpsc::WeakUnboundedSender<Command>,
    queued: Vec<Command>,
    ready: bool,
    last_transport_error: Option<Arc<TransportError>>,
    /// Where cache changes are announced.
    changes: broadcast::Sender<Commit>,
    /// Calls the settle barrier released on its timeout.
    stale: std::collections::HashSet<OpId>,
}

impl Driver {
    fn new(
        session: Session,
        transport: Arc<dyn Transport>,
        state: watch::Sender<Negotiation>,
        handler: Option<ServerRequestHandler>,
        own_commands: mpsc::WeakUnboundedSender<Command>,
        changes: broadcast::Sender<Commit>,
    ) -> Self {
        Self {
            session,
            transport,
            state,
            calls: FastMap::default(),
            call_ops: FastMap::default(),
            lists: FastMap::default(),
            requests: FastMap::default(),
            handler,
            own_commands,
            queued: Vec::new(),
            ready: false,
            last_transport_error: None,
            changes,
            stale: std::collections::HashSet::new(),
        }
    }

    fn closed_error(&self) -> Error {
        self.last_transport_error
            .clone()
            .map_or(Error::Closed, Error::Transport)
    }

    /// Fails everything waiting.
    fn fail_all(&mut self, error: &Error) {
        self.call_ops.clear();
        for (_, slot) in self.calls.drain() {
            let _ = slot.reply.send(Err(error.clone()));
        }
        for (_, reply) in self.lists.drain() {
            let _ = reply.send(Err(error.clone()));
        }
        for (_, reply) in self.requests.drain() {
            let _ = reply.send(Err(error.clone()));
        }
        for command in self.queued.drain(..) {
            match command {
                Command::Call { reply, .. } => drop(reply.send(Err(error.clone()))),
                Command::ListTools { reply } => drop(reply.send(Err(error.clone()))),
                Command::Request { reply, .. } => drop(reply.send(Err(error.clone()))),
                Command::Close { reply } => drop(reply.send(())),
                Command::Start | Command::Cancel { .. } | Command::Respond { .. } => {}
            }
        }
    }

    fn issue(&mut self, command: Command) {
        let now = Instant::now();
        match command {
            Command::Call {
                call,
                progress,
                name,
                arguments,
                options,
                reply,
            } => match self
                .session
                .call_tool_shared(&name, arguments, *options, now)
            {
                Ok(op) => {
                    self.call_ops.insert(call, op);
                    self.calls.insert(
                        op,
                        CallSlot {
                            call,
                            reply,
                            progress,
                        },
                    );
                }
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::ListTools { reply } => match self.session.list_tools(now) {
                Ok(op) => drop(self.lists.insert(op, reply)),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Request { issue, reply } => match issue(&mut self.session, now) {
                Ok(op) => drop(self.requests.insert(op, reply)),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Cancel { call } => self.cancel(call),
            Command::Respond { id, result } => {
                let answered = match &result {
                    Ok(value) => self.session.respond(&id, Ok(value)),
                    Err(error) => self.session.respond(&id, Err::<&Value, _>(error.clone())),
                };
                if let Err(e) = answered {
                    tracing::warn!(error = %e, %id, "could not answer the server's request");
                }
            }
            Command::Start | Command::Close { .. } => {}
        }
    }

    /// The caller stopped waiting for a call.
    fn cancel(&mut self, call: u64) {
        // Still queued before negotiation finished: it was never sent.
        self.queued
            .retain(|c| !matches!(c, Command::Call { call: queued, .. } if *queued == call));
        if let Some(op) = self.call_ops.remove(&call) {
            // The Completed(Cancelled) event that follows finds no one waiting.
            if let Some(id) = self.session.cancel(op, Some("the caller stopped waiting")) {
                self.transport.cancel(&id);
            }
        }
    }

    /// Hands a server request to the handler on a task of its own; its answer comes back as
    /// a `Respond` command.
    fn serve(&mut self, request: toolwire_types::Request) {
        tracing::debug!(method = %request.method, id = %request.id, "request from the server");
        let refuse = |message: String| {
            ErrorObject::new(toolwire_types::error::code::METHOD_NOT_FOUND, message)
        };
        let Some(handler) = self.handler.clone() else {
            let error = refuse(format!(
                "Method not found: no handler for {} in this client",
                request.method
            ));
            if let Err(e) = self.session.respond(&request.id, Err::<&(), _>(error)) {
                tracing::warn!(error = %e, "could not answer {}", request.method);
            }
            return;
        };
        let decoded = match ServerRequest::decode(&request.method, request.params.as_deref()) {
            Ok(ServerRequest::Other { method }) => {
                Err(refuse(format!("Method not found: {method}")))
            }
            Ok(decoded) => Ok(decoded),
            Err(e) => Err(ErrorObject::new(
                toolwire_types::error::code::INVALID_PARAMS,
                e.to_string(),
            )),
        };
        let id = request.id;
        let commands = self.own_commands.clone();
        tokio::spawn(async move {
            let result = match decoded {
                Ok(decoded) => handler(decoded).await,
                Err(error) => Err(error),
            };
            if let Some(commands) = commands.upgrade() {
                let _ = commands.send(Command::Respond { id, result });
            }
        });
    }

    fn handle_events(&mut self) {
        while let Some(event) = self.session.poll_event() {
            match event {
                Event::Ready(n) => {
                    self.ready = true;
                    self.state.send_replace(Negotiation::Ready(Arc::new(*n)));
                    for command in std::mem::take(&mut self.queued) {
                        self.issue(command);
                    }
                }
                Event::Failed(e) => {
                    let e = Arc::new(e);
                    self.state.send_replace(Negotiation::Failed(e.clone()));
                    self.fail_all(&Error::Negotiation(e));
                }
                Event::Completed { op, result } => {
                    if let Some(slot) = self.calls.remove(&op) {
                        self.call_ops.remove(&slot.call);
                        let result = match result {
                            Ok(raw) if self.stale.remove(&op) => Ok(mark_tools_stale(raw)),
                            other => other,
                        };
                        let _ = slot.reply.send(result.map_err(Error::from));
                    } else if let Some(reply) = self.requests.remove(&op) {
                        let _ = reply.send(result.map_err(Error::from));
                    }
                }
                Event::SettleTimedOut { op } => {
                    self.stale.insert(op);
                }
                Event::ToolsRefreshed(result) => match result {
                    Ok(outcome) => {
                        tracing::debug!(
                            generation = outcome.commit.generation,
                            "tool list refreshed"
                        );
                        announce(&self.changes, &outcome.commit);
                    }
                    Err(e) => tracing::debug!(error = %e, "tool list refresh failed"),
                },
                Event::ToolsListed { op, result } => {
                    if let Ok(outcome) = &result {
                        announce(&self.changes, &outcome.commit);
                    }
                    if let Some(reply) = self.lists.remove(&op) {
                        let _ = reply.send(result.map_err(Error::from));
                    }
                }
                Event::ServerRequest(request) => self.serve(request),
                Event::Progress { op, params } => {
                    if let Some(callback) =
                        self.calls.get(&op).and_then(|slot| slot.progress.as_ref())
                    {
                        callback(&params);
                    }
                }
                Event::Notification(n) => tracing::debug!(method = %n.method, "notification"),
                Event::Malformed(e) => {
                    tracing::warn!(error = %e, "malformed message from the server")
                }
                _ => {}
            }
        }
    }

    /// Sends everything the session queued; `false` if the transport failed.
    async fn flush(&mut self) -> bool {
        while let Some(message) = self.session.poll_transmit() {
            if let Err(e) = self.transport.send(message).await {
                tracing::warn!(error = %e, "sending failed");
                self.last_transport_error = Some(Arc::new(e));
                return false;
            }
        }
        true
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        // One timer for the session's deadlines, moved when the next one changes (not a new
        // timer per turn of the loop).
        let mut timer = std::pin::pin!(tokio::time::sleep_until(tokio::time::Instant::now()));
        let mut armed: Option<Instant> = None;
        loop {
            self.handle_events();
            if !self.flush().await {
                break;
            }
            self.handle_events();
            let wake = self.session.poll_timeout();
            if wake != armed {
                if let Some(at) = wake {
                    timer.as_mut().reset(at.into());
                }
                armed = wake;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    None => break,
                    Some(Command::Close { reply }) => {
                        self.shutdown().await;
                        let _ = reply.send(());
                        return;
                    }
                    Some(Command::Start) => {
                        if matches!(*self.state.borrow(), Negotiation::NotStarted) {
                            self.state.send_replace(Negotiation::Pending);
                            self.session.start(Instant::now());
                        }
                    }
                    Some(command @ (Command::Call { .. } | Command::ListTools { .. } | Command::Request { .. }))
                        if !self.ready =>
                    {
                        self.queued.push(command);
                    }
                    Some(command) => self.issue(command),
                },
                inbound = self.transport.recv() => match inbound {
                    Some(Ok(message)) => self.session.handle_inbound(&message.body, Instant::now()),
                    Some(Err(TransportError::Request(failure))) => {
                        tracing::debug!(id = %failure.id, error = %failure.cause, "request got no answer");
                        self.session.handle_undelivered(failure, Instant::now());
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "transport error");
                        self.last_transport_error = Some(Arc::new(e));
                    }
                    None => break,
                },
                () = &mut timer, if armed.is_some() => {
                    // Re-armed next turn, for whatever deadline comes next.
                    armed = None;
                    self.session.handle_timeout(Instant::now());
                }
            }
        }
        self.shutdown().await;
    }

    async fn shutdown(&mut self) {
        let error = self.closed_error();
        self.fail_all(&error);
        if let Err(e) = self.transport.close().await {
            tracing::debug!(error = %e, "closing the transport");
        }
        let during_probe = self.session.is_probing();
        self.state.send_replace(Negotiation::Closed {
            error: self.last_transport_error.clone(),
            during_probe,
        });
    }
}

//! The client: a handle to a driver task that runs the session over a transport.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, watch};
use toolwire_cache::{CacheConfig, Commit, ListOutcome, ToolCache, ToolSnapshot};
use toolwire_session::{
    CallOptions, Event, Negotiated, OpId, ProtocolMode, Session, SessionConfig, SessionError,
    Transmit,
};
use toolwire_transport::{
    Outbound, RetryClass, StdioConfig, StdioTransport, Transport, TransportError,
};
use toolwire_types::methods::method::CallTool;
use toolwire_types::{
    CallToolResult, ErrorObject, Implementation, JsonObject, Outcome, RequestMethod, Tool,
};

use crate::Error;

/// How a [`Client`] behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// The protocol session's settings (client info, capabilities, mode, timeouts).
    pub session: SessionConfig,
    /// The tool cache's settings.
    pub cache: CacheConfig,
}

impl ClientConfig {
    /// A client that introduces itself as `name` `version`, with the defaults.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            session: SessionConfig::new(Implementation::new(name, version)),
            cache: CacheConfig::default(),
        }
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
    Closed(Option<Arc<TransportError>>),
}

enum Command {
    Start,
    Call {
        name: String,
        arguments: Option<JsonObject>,
        /// Boxed: it may hold a whole tool definition.
        options: Box<CallOptions>,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
    },
    ListTools {
        reply: oneshot::Sender<Result<ListOutcome, Error>>,
    },
    Close {
        reply: oneshot::Sender<()>,
    },
}

/// A connection to one MCP server. Clones share the connection; it closes when
/// [`Client::close`] is called or the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Client {
    commands: mpsc::UnboundedSender<Command>,
    cache: Arc<ToolCache>,
    negotiation: watch::Receiver<Negotiation>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Start => "Start",
            Self::Call { .. } => "Call",
            Self::ListTools { .. } => "ListTools",
            Self::Close { .. } => "Close",
        })
    }
}

impl Client {
    /// Connects over any transport. Nothing is sent until the first use; then one negotiation
    /// serves every caller. Must be called inside a tokio runtime.
    pub fn connect(transport: impl Transport, config: ClientConfig) -> Result<Self, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let cache = Arc::new(ToolCache::new(config.cache));
        let transport: Arc<dyn Transport> = Arc::new(transport);
        let session = Session::new(config.session, cache.clone(), transport.carries_headers());
        let (commands, rx) = mpsc::unbounded_channel();
        let (state, negotiation) = watch::channel(Negotiation::NotStarted);
        runtime.spawn(Driver::new(session, transport, state).run(rx));
        Ok(Self {
            commands,
            cache,
            negotiation,
        })
    }

    /// Starts `config` as a child process and connects to it over stdio.
    pub fn connect_stdio(stdio: StdioConfig, config: ClientConfig) -> Result<Self, Error> {
        let transport = StdioTransport::spawn(stdio).map_err(|e| Error::Transport(Arc::new(e)))?;
        Self::connect(transport, config)
    }

    fn send(&self, command: Command) -> Result<(), Error> {
        self.commands.send(command).map_err(|_| Error::Closed)
    }

    /// Negotiates (once, shared by every caller) and returns what was agreed.
    pub async fn ready(&self) -> Result<Arc<Negotiated>, Error> {
        let mut rx = self.negotiation.clone();
        if matches!(*rx.borrow(), Negotiation::NotStarted) {
            self.send(Command::Start)?;
        }
        loop {
            match &*rx.borrow_and_update() {
                Negotiation::Ready(n) => return Ok(n.clone()),
                Negotiation::Failed(e) => return Err(Error::Negotiation(e.clone())),
                Negotiation::Closed(Some(e)) => return Err(Error::Transport(e.clone())),
                Negotiation::Closed(None) => return Err(Error::Closed),
                Negotiation::NotStarted | Negotiation::Pending => {}
            }
            rx.changed().await.map_err(|_| Error::Closed)?;
        }
    }

    /// Lists the server's tools (every page) into the cache, in one swap.
    pub async fn list_tools(&self) -> Result<ListOutcome, Error> {
        self.ready().await?;
        let (reply, answer) = oneshot::channel();
        self.send(Command::ListTools { reply })?;
        answer.await.map_err(|_| Error::Closed)?
    }

    /// Calls a tool. `arguments` must be a JSON object or `null`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call_tool_with(name, arguments, CallOptions::default())
            .await
    }

    /// Calls a tool with per-call options (deadline, a tool definition or header map for this
    /// call, retry opt-in, progress).
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            _ => return Err(Error::ArgumentsNotAnObject),
        };
        self.ready().await?;
        let (reply, answer) = oneshot::channel();
        self.send(Command::Call {
            name: name.to_owned(),
            arguments,
            options: Box::new(options),
            reply,
        })?;
        let raw = answer.await.map_err(|_| Error::Closed)??;
        match CallTool::decode_result(&raw).map_err(|e| Error::Decode(Arc::new(e)))? {
            Outcome::Complete(result) => Ok(result),
            Outcome::InputRequired(_) => Err(Error::InputRequired),
        }
    }

    /// The tools the client knows now.
    pub fn tools(&self) -> Arc<ToolSnapshot> {
        self.cache.snapshot()
    }

    /// Pre-loads tool definitions so their calls carry `Mcp-Param-*` headers without a
    /// `tools/list` (all or nothing; they survive refreshes until removed).
    pub fn add_known_tools(&self, tools: impl IntoIterator<Item = Tool>) -> Result<Commit, Error> {
        self.cache
            .add_known_tools(tools)
            .map_err(|e| Error::KnownTools(Arc::new(e)))
    }

    /// Removes the known status of these tools.
    pub fn remove_known_tools<S: AsRef<str>>(
        &self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Commit, Error> {
        self.cache
            .remove_known_tools(names)
            .map_err(|e| Error::KnownTools(Arc::new(e)))
    }

    /// Removes the known status of every tool.
    pub fn clear_known_tools(&self) -> Commit {
        self.cache.clear_known_tools()
    }

    /// Closes the connection (the transport's graceful shutdown); pending calls fail with
    /// [`Error::Closed`].
    pub async fn close(&self) {
        let (reply, done) = oneshot::channel();
        if self.send(Command::Close { reply }).is_ok() {
            let _ = done.await;
        }
    }
}

/// The task that owns the session and the transport.
struct Driver {
    session: Session,
    transport: Arc<dyn Transport>,
    state: watch::Sender<Negotiation>,
    calls: HashMap<OpId, oneshot::Sender<Result<Box<RawValue>, Error>>>,
    lists: HashMap<OpId, oneshot::Sender<Result<ListOutcome, Error>>>,
    queued: Vec<Command>,
    ready: bool,
    last_transport_error: Option<Arc<TransportError>>,
}

fn outbound(t: Transmit) -> Outbound {
    let mut out = Outbound::new(t.body);
    out.retry = if t.retry_safe {
        RetryClass::Safe
    } else {
        RetryClass::Never
    };
    for h in t.headers {
        // Names are tokens and values printable ASCII by construction (toolwire-headers), so
        // neither conversion fails; a failure would drop that one header, loudly.
        match (
            http::HeaderName::from_bytes(h.name.as_str().as_bytes()),
            http::HeaderValue::from_bytes(h.value.as_bytes()),
        ) {
            (Ok(name), Ok(value)) => out.headers.push((name, value)),
            _ => {
                tracing::error!(header = %h.name, "header could not be converted; sent without it")
            }
        }
    }
    out
}

impl Driver {
    fn new(
        session: Session,
        transport: Arc<dyn Transport>,
        state: watch::Sender<Negotiation>,
    ) -> Self {
        Self {
            session,
            transport,
            state,
            calls: HashMap::new(),
            lists: HashMap::new(),
            queued: Vec::new(),
            ready: false,
            last_transport_error: None,
        }
    }

    fn closed_error(&self) -> Error {
        self.last_transport_error
            .clone()
            .map_or(Error::Closed, Error::Transport)
    }

    /// Fails everything waiting.
    fn fail_all(&mut self, error: &Error) {
        for (_, reply) in self.calls.drain() {
            let _ = reply.send(Err(error.clone()));
        }
        for (_, reply) in self.lists.drain() {
            let _ = reply.send(Err(error.clone()));
        }
        for command in self.queued.drain(..) {
            match command {
                Command::Call { reply, .. } => drop(reply.send(Err(error.clone()))),
                Command::ListTools { reply } => drop(reply.send(Err(error.clone()))),
                Command::Close { reply } => drop(reply.send(())),
                Command::Start => {}
            }
        }
    }

    fn issue(&mut self, command: Command) {
        let now = Instant::now();
        match command {
            Command::Call {
                name,
                arguments,
                options,
                reply,
            } => match self.session.call_tool(&name, arguments, *options, now) {
                Ok(op) => drop(self.calls.insert(op, reply)),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::ListTools { reply } => match self.session.list_tools(now) {
                Ok(op) => drop(self.lists.insert(op, reply)),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Start | Command::Close { .. } => {}
        }
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
                    if let Some(reply) = self.calls.remove(&op) {
                        let _ = reply.send(result.map_err(Error::from));
                    }
                }
                Event::ToolsListed { op, result } => {
                    if let Some(reply) = self.lists.remove(&op) {
                        let _ = reply.send(result.map_err(Error::from));
                    }
                }
                Event::ServerRequest(request) => {
                    // No handlers yet: a clear -32601, so the server does not wait in vain.
                    let error = ErrorObject::new(
                        toolwire_types::error::code::METHOD_NOT_FOUND,
                        format!(
                            "Method not found: no handler for {} in this client",
                            request.method
                        ),
                    );
                    if let Err(e) = self.session.respond(&request.id, Err::<&(), _>(error)) {
                        tracing::warn!(error = %e, "could not answer {}", request.method);
                    }
                }
                Event::Progress { op, params } => {
                    tracing::debug!(
                        ?op,
                        progress = params.progress,
                        total = params.total,
                        "progress"
                    );
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
        while let Some(t) = self.session.poll_transmit() {
            if let Err(e) = self.transport.send(outbound(t)).await {
                tracing::warn!(error = %e, "sending failed");
                self.last_transport_error = Some(Arc::new(e));
                return false;
            }
        }
        true
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
            self.handle_events();
            if !self.flush().await {
                break;
            }
            self.handle_events();
            let wake = self.session.poll_timeout();
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
                    Some(command) if !self.ready => self.queued.push(command),
                    Some(command) => self.issue(command),
                },
                inbound = self.transport.recv() => match inbound {
                    Some(Ok(message)) => self.session.handle_inbound(&message.body, Instant::now()),
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "transport error");
                        self.last_transport_error = Some(Arc::new(e));
                    }
                    None => break,
                },
                () = async {
                    match wake {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                } => self.session.handle_timeout(Instant::now()),
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
        self.state
            .send_replace(Negotiation::Closed(self.last_transport_error.clone()));
    }
}

//! The driver: the task that owns one connection's sans-IO [`Session`] and its transport.
//!
//! Callers send it [`Command`]s over a channel and wait on a oneshot each; it issues them on
//! the session, sends what the session emits exactly as emitted, feeds what the transport
//! receives back in, fires the session's timer, and hands each finished operation to its
//! waiter. The loop: drain events → flush messages → `select!` over commands,
//! `transport.recv()` and the next deadline.
//!
//! When the transport dies, the driver either ends (no connector, or no
//! [`ReconnectPolicy`]) or builds a new session over a new transport from the connector,
//! after the policy's backoff: calls in flight are sent again when they are safe to repeat and
//! fail with [`Error::ConnectionLost`] otherwise, queued ones wait (each up to its deadline),
//! and the tools are listed again. A death during the `server/discover` probe restarts at once
//! in the legacy era, policy or not.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use toolwire_cache::{Commit, ListOutcome, ToolCache};
use toolwire_session::{
    CacheMode, CallOptions, Event, InputResponses, Negotiated, OpId, ProtocolMode, Session,
    SessionConfig, SessionError,
};
use toolwire_transport::{Transport, TransportError};
use toolwire_types::{ErrorObject, JsonObject, ProtocolVersion, RequestId, ServerRequest, Tool};

use crate::client::TOOLS_STALE_META;
use crate::reconnect::{Backoff, ConnectionState, ReconnectPolicy};
use crate::{Connector, Error, ProgressCallback, ServerRequestHandler};

#[derive(Debug, Clone)]
pub(crate) enum Negotiation {
    NotStarted,
    Pending,
    /// The connection died; a new one is on its way.
    Reconnecting,
    Ready(Arc<Negotiated>),
    Failed(Error),
    Closed {
        error: Option<Arc<TransportError>>,
    },
}

/// Issues one request on the session (the driver calls it when the session is ready).
pub(crate) type IssueRequest =
    Box<dyn FnOnce(&mut Session, Instant) -> Result<OpId, toolwire_session::RequestError> + Send>;

pub(crate) enum Command {
    Start,
    Call {
        call: u64,
        progress: Option<ProgressCallback>,
        name: String,
        /// Shared with the caller, which keeps them for an `input_required` round.
        arguments: Option<Arc<JsonObject>>,
        /// Boxed: it may hold a whole tool definition.
        options: Box<CallOptions>,
        /// The answers of an `input_required` round, for the rounds after the first (boxed:
        /// the first round, the common one, carries none).
        input: Option<Box<InputResponses>>,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
    },
    ListTools {
        mode: CacheMode,
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
    /// The log level changed (answered once it is in force).
    SetLogLevel {
        level: toolwire_types::LoggingLevel,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
    },
    /// A handler finished answering a server request.
    Respond {
        id: RequestId,
        result: Result<Value, ErrorObject>,
    },
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
            Self::SetLogLevel { .. } => "SetLogLevel",
        })
    }
}

/// `{}`: what a request that needs no answer from the server answers.
fn empty_result() -> Box<RawValue> {
    serde_json::value::to_raw_value(&serde_json::Map::new())
        .unwrap_or_else(|_| RawValue::NULL.to_owned())
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
pub(crate) fn announce(changes: &broadcast::Sender<Commit>, commit: &Commit) {
    if !commit.diff.is_empty() {
        // No subscriber is not an error.
        let _ = changes.send(commit.clone());
    }
}

/// What it takes to send a call again on a new connection (kept only for calls that are
/// safe to repeat, and only when the client reconnects).
struct Replay {
    /// Safe to repeat (`retry_safe`, or read-only or idempotent hints).
    safe: bool,
    name: String,
    arguments: Option<Arc<JsonObject>>,
    options: Box<CallOptions>,
    input: Option<Box<InputResponses>>,
    /// When the caller stops waiting, whichever connection it is on.
    deadline: Instant,
}

/// Who waits for an operation of the session, and how to answer them.
enum Waiter {
    /// A `tools/call` of the caller's call `call`.
    Call {
        call: u64,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
        progress: Option<ProgressCallback>,
        /// The settle barrier released the result on its timeout: mark it stale.
        stale: bool,
        /// Kept while the client reconnects: what to send again after a reconnect.
        replay: Option<Box<Replay>>,
    },
    /// A `tools/list` walk.
    List(oneshot::Sender<Result<ListOutcome, Error>>),
    /// Any other request.
    Request(oneshot::Sender<Result<Box<RawValue>, Error>>),
}

impl Waiter {
    /// Tells the waiter the operation failed.
    fn fail(self, error: Error) {
        match self {
            Self::Call { reply, .. } | Self::Request(reply) => drop(reply.send(Err(error))),
            Self::List(reply) => drop(reply.send(Err(error))),
        }
    }
}

/// The driver's maps, looked up several times per call: `foldhash` with a random seed per map
/// (SipHash, the std default, cost more than the lookups themselves). Their keys are ids the
/// client chose.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A command waiting for the session to be ready, and when its caller stops waiting.
struct Queued {
    deadline: Instant,
    command: Command,
}

/// Fails one command that never reached a session.
fn fail_command(command: Command, error: Error) {
    match command {
        Command::Call { reply, .. } | Command::Request { reply, .. } => {
            drop(reply.send(Err(error)));
        }
        Command::ListTools { reply, .. } => drop(reply.send(Err(error))),
        Command::SetLogLevel { reply, .. } => drop(reply.send(Err(error))),
        Command::Close { reply } => drop(reply.send(())),
        Command::Start | Command::Cancel { .. } | Command::Respond { .. } => {}
    }
}

/// How a driver makes its sessions and, with a connector, new transports.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) session: SessionConfig,
    pub(crate) cache: Arc<ToolCache>,
    /// Absent: a transport given once; when it dies, the driver ends.
    pub(crate) connector: Option<Connector>,
    /// Absent: no reconnecting after a death (the legacy fallback still restarts once).
    pub(crate) reconnect: Option<ReconnectPolicy>,
    /// Set once a server died during the probe: later sessions go straight to `initialize`.
    pub(crate) legacy_only: Arc<AtomicBool>,
    /// Where the connection's state is published (shared by every driver of a client).
    pub(crate) connection: watch::Sender<ConnectionState>,
    /// The transport in use (shared by every driver of a client), for what the client asks
    /// of it directly ([`crate::Client::mcp_session_id`]).
    pub(crate) transport: watch::Sender<Option<Arc<dyn Transport>>>,
    /// Where the server's notifications go (shared by every driver of a client).
    pub(crate) notices: broadcast::Sender<Arc<crate::Notice>>,
}

impl Link {
    /// A session for a new transport.
    pub(crate) fn session(&self, carries_headers: bool) -> Session {
        let mut config = self.session.clone();
        if self.legacy_only.load(Ordering::SeqCst) {
            config = config.with_mode(ProtocolMode::Pinned(ProtocolVersion::LATEST_LEGACY));
        }
        Session::new(config, self.cache.clone(), carries_headers)
    }
}

/// Why one connection's loop ended.
enum Ended {
    /// `Client::close` or `disconnect`: answered once the transport is closed.
    Close(oneshot::Sender<()>),
    /// Every client handle is gone.
    Dropped,
    /// The transport died.
    Died,
}

/// The task that owns the session and the transport.
pub(crate) struct Driver {
    session: Session,
    transport: Arc<dyn Transport>,
    state: watch::Sender<Negotiation>,
    /// Every operation someone waits for.
    waiters: FastMap<OpId, Waiter>,
    /// The caller's call id → the session's operation (a dropped call future names its call).
    call_ops: FastMap<u64, OpId>,
    handler: Option<ServerRequestHandler>,
    /// To post handler answers back to this driver without keeping the channel open.
    own_commands: mpsc::WeakUnboundedSender<Command>,
    queued: Vec<Queued>,
    ready: bool,
    /// A handshake finished at least once on this client (errors before that describe the server).
    ever_ready: bool,
    /// Since when the transport has been authorizing, while it is.
    paused_since: Option<Instant>,
    last_transport_error: Option<Arc<TransportError>>,
    /// Where cache changes are announced.
    changes: broadcast::Sender<Commit>,
    link: Link,
    backoff: Option<Backoff>,
    /// Tools were listed on some connection: list them again after a reconnect.
    listed: bool,
    /// The session is a reconnect's: list the tools once it is ready.
    relist: bool,
    /// The transport's authorization context as last seen.
    identity: u64,
}

impl Driver {
    pub(crate) fn new(
        session: Session,
        transport: Arc<dyn Transport>,
        state: watch::Sender<Negotiation>,
        handler: Option<ServerRequestHandler>,
        own_commands: mpsc::WeakUnboundedSender<Command>,
        changes: broadcast::Sender<Commit>,
        link: Link,
    ) -> Self {
        Self {
            session,
            state,
            waiters: FastMap::default(),
            call_ops: FastMap::default(),
            handler,
            own_commands,
            queued: Vec::new(),
            ready: false,
            ever_ready: false,
            paused_since: None,
            last_transport_error: None,
            changes,
            backoff: link.reconnect.clone().map(Backoff::new),
            link,
            listed: false,
            relist: false,
            identity: transport.authorization_context(),
            transport,
        }
    }

    /// The transport now presents another identity (a new bearer token): the session drops
    /// what it kept for the one before. Checked before each command and each answer.
    fn note_identity(&mut self) {
        let identity = self.transport.authorization_context();
        if identity != self.identity {
            self.identity = identity;
            tracing::debug!("the authorization context changed: private cached answers dropped");
            self.session.authorization_changed();
        }
    }

    /// Why the connection ended, for whoever still waits.
    fn lost(&self, may_have_run: bool) -> Error {
        Error::ConnectionLost {
            may_have_run,
            cause: self.last_transport_error.clone(),
        }
    }

    /// Fails everything waiting.
    fn fail_all(&mut self, error: &Error) {
        self.call_ops.clear();
        for (_, waiter) in self.waiters.drain() {
            waiter.fail(error.clone());
        }
        for queued in self.queued.drain(..) {
            fail_command(queued.command, error.clone());
        }
    }

    /// How long a caller waits: a call's own deadline, else the session's request timeout.
    fn patience(&self, options: Option<&CallOptions>) -> Duration {
        options
            .and_then(|o| o.timeout)
            .unwrap_or(self.link.session.request_timeout)
    }

    /// The options of a command that has them (a call).
    fn options_of(command: &Command) -> Option<&CallOptions> {
        match command {
            Command::Call { options, .. } => Some(options),
            _ => None,
        }
    }

    /// Queues a command until the session is ready; its caller waits up to its
    /// [`Driver::patience`].
    fn queue(&mut self, command: Command) {
        let deadline =
            toolwire_session::later(Instant::now(), self.patience(Self::options_of(&command)));
        self.queued.push(Queued { deadline, command });
    }

    /// Fails the queued commands whose callers stopped waiting.
    fn expire_queued(&mut self, now: Instant) {
        let (expired, kept): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut self.queued)
            .into_iter()
            .partition(|q| q.deadline <= now);
        self.queued = kept;
        // Before the first handshake ever finished, what the transport saw of the server is
        // the useful part (a child still installing itself, or waiting on the network).
        let peer = (!self.ever_ready && !expired.is_empty())
            .then(|| self.transport.peer_state())
            .flatten();
        for queued in expired {
            let waited = self.patience(Self::options_of(&queued.command));
            let error = match &peer {
                Some(peer) => Error::Unanswered {
                    method: "the handshake",
                    peer: peer.clone(),
                },
                None => Error::Timeout(waited),
            };
            fail_command(queued.command, error);
        }
    }

    /// The earliest deadline of a queued command.
    fn next_queued_deadline(&self) -> Option<Instant> {
        self.queued.iter().map(|q| q.deadline).min()
    }

    /// Whether a call may be sent again on a new connection: the caller said so, or the tool
    /// (the call's own definition, else the cached one) is read-only or idempotent.
    fn safe_to_repeat(&self, name: &str, options: &CallOptions) -> bool {
        options.retry_safe.unwrap_or_else(|| match &options.tool {
            Some(tool) => tool.is_safe_to_retry(),
            None => self
                .link
                .cache
                .load()
                .get(name)
                .is_some_and(|cached| Tool::is_safe_to_retry(cached.tool())),
        })
    }

    fn issue(&mut self, command: Command) {
        self.note_identity();
        let now = Instant::now();
        match command {
            Command::Call {
                call,
                progress,
                name,
                arguments,
                options,
                input,
                reply,
            } => {
                // Kept when the client reconnects: sent again after a reconnect when it is safe
                // to repeat, or when the dead server never read it.
                let replay = self.backoff.is_some().then(|| {
                    Box::new(Replay {
                        safe: self.safe_to_repeat(&name, &options),
                        name: name.clone(),
                        arguments: arguments.clone(),
                        options: options.clone(),
                        input: input.clone(),
                        deadline: toolwire_session::later(now, self.patience(Some(&options))),
                    })
                });
                let issued = match input {
                    None => self
                        .session
                        .call_tool_shared(&name, arguments, *options, now),
                    Some(input) => self
                        .session
                        .call_tool_with_input(&name, arguments, *options, *input, now),
                };
                match issued {
                    Ok(op) => {
                        self.call_ops.insert(call, op);
                        let waiter = Waiter::Call {
                            call,
                            reply,
                            progress,
                            stale: false,
                            replay,
                        };
                        self.waiters.insert(op, waiter);
                    }
                    Err(e) => drop(reply.send(Err(e.into()))),
                }
            }
            Command::ListTools { mode, reply } => match self.session.list_tools_with(mode, now) {
                Ok(op) => drop(self.waiters.insert(op, Waiter::List(reply))),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Request { issue, reply } => match issue(&mut self.session, now) {
                Ok(op) => drop(self.waiters.insert(op, Waiter::Request(reply))),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Cancel { call } => self.cancel(call),
            // Kept for later sessions too (`Session::carry_into`).
            Command::SetLogLevel { level, reply } => {
                match self.session.change_log_level(level, now) {
                    Ok(Some(op)) => drop(self.waiters.insert(op, Waiter::Request(reply))),
                    // Modern: in force from the next request on.
                    Ok(None) => drop(reply.send(Ok(empty_result()))),
                    Err(e) => drop(reply.send(Err(e.into()))),
                }
            }
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
            .retain(|q| !matches!(q.command, Command::Call { call: queued, .. } if queued == call));
        if let Some(op) = self.call_ops.remove(&call) {
            // The Completed(Cancelled) event that follows finds no one waiting.
            if let Some(id) = self.session.cancel(op, Some("the caller stopped waiting")) {
                self.transport.cancel(&id);
            }
        }
    }

    /// Hands a server request the session let through to the handler, on a task of its own;
    /// its answer comes back as a `Respond` command. (The session refused the rest itself:
    /// unknown, undecodable, undeclared, past [`MAX_SERVER_REQUESTS`], or with no handler.)
    fn serve(&mut self, id: RequestId, request: ServerRequest) {
        let Some(handler) = self.handler.clone() else {
            let error = ErrorObject::new(
                toolwire_types::error::code::METHOD_NOT_FOUND,
                format!(
                    "Method not found: no handler for {} in this client",
                    request.method()
                ),
            );
            if let Err(e) = self.session.respond(&id, Err::<&(), _>(error)) {
                tracing::warn!(error = %e, "could not answer {}", request.method());
            }
            return;
        };
        let commands = self.own_commands.clone();
        tokio::spawn(async move {
            let result = handler(request).await;
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
                    self.ever_ready = true;
                    if let Some(backoff) = &mut self.backoff {
                        backoff.reset();
                    }
                    tracing::debug!(version = %n.version, "connection ready");
                    // Legacy: the session reports ready once the level asked is in force.
                    self.state.send_replace(Negotiation::Ready(Arc::new(*n)));
                    self.link.connection.send_replace(ConnectionState::Ready);
                    if std::mem::take(&mut self.relist) && self.listed {
                        // Nobody waits for it: its `ToolsListed` is announced like any other.
                        if let Err(e) = self.session.list_tools(Instant::now()) {
                            tracing::debug!(error = %e, "listing the tools after a reconnect");
                        }
                    }
                    for queued in std::mem::take(&mut self.queued) {
                        self.issue(queued.command);
                    }
                }
                Event::Failed(e) => {
                    // A server that never answered: say what the transport saw of it (a
                    // child still running, silent on stdout, its last stderr lines).
                    let error = match (&e, self.transport.peer_state()) {
                        (SessionError::Timeout { method }, Some(peer)) => {
                            Error::Unanswered { method, peer }
                        }
                        _ => Error::negotiation(Arc::new(e)),
                    };
                    self.state.send_replace(Negotiation::Failed(error.clone()));
                    self.link.connection.send_replace(ConnectionState::Failed {
                        reason: error.clone(),
                    });
                    self.fail_all(&error);
                }
                Event::Completed { op, result } => match self.waiters.remove(&op) {
                    Some(Waiter::Call {
                        call, reply, stale, ..
                    }) => {
                        self.call_ops.remove(&call);
                        let result = match result {
                            Ok(raw) if stale => Ok(mark_tools_stale(raw)),
                            other => other,
                        };
                        let _ = reply.send(result.map_err(Error::from));
                    }
                    Some(Waiter::Request(reply)) => drop(reply.send(result.map_err(Error::from))),
                    // Walks end as `ToolsListed`, never as `Completed`.
                    Some(waiter @ Waiter::List(_)) => drop(self.waiters.insert(op, waiter)),
                    None => {}
                },
                Event::SettleTimedOut { op } => {
                    if let Some(Waiter::Call { stale, .. }) = self.waiters.get_mut(&op) {
                        *stale = true;
                    }
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
                        self.listed = true;
                        announce(&self.changes, &outcome.commit);
                    }
                    match self.waiters.remove(&op) {
                        Some(Waiter::List(reply)) => drop(reply.send(result.map_err(Error::from))),
                        // Only walks end as `ToolsListed`.
                        Some(other) => drop(self.waiters.insert(op, other)),
                        None => {}
                    }
                }
                Event::ServerRequest { id, request } => self.serve(id, request),
                Event::Progress { op, params } => {
                    if let Some(Waiter::Call {
                        progress: Some(callback),
                        ..
                    }) = self.waiters.get(&op)
                    {
                        callback(&params);
                    }
                }
                Event::Notification(n) => {
                    tracing::debug!(method = %n.method, "notification");
                    // Decoded only for someone who listens.
                    if self.link.notices.receiver_count() > 0 {
                        let _ = self.link.notices.send(Arc::new(crate::Notice::new(n)));
                    }
                }
                Event::Malformed(e) => {
                    tracing::warn!(error = %e, "malformed message from the server")
                }
                Event::CloseStream(id) => self.transport.cancel(&id),
                Event::Renegotiating => {
                    // Commands wait again until the probe's `Ready`.
                    self.ready = false;
                    self.state.send_replace(Negotiation::Pending);
                    self.link
                        .connection
                        .send_replace(ConnectionState::Connecting);
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

    pub(crate) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let error = loop {
            match self.run_connection(&mut commands).await {
                Ended::Close(reply) => {
                    self.shutdown(Error::Closed).await;
                    let _ = reply.send(());
                    break Error::Closed;
                }
                Ended::Dropped => return self.shutdown(Error::Closed).await,
                Ended::Died => {
                    if let Err(error) = self.recover(&mut commands).await {
                        break error;
                    }
                }
            }
        };
        // Commands that arrived as it ended: nobody will issue them.
        commands.close();
        while let Ok(command) = commands.try_recv() {
            fail_command(command, error.clone());
        }
    }

    /// Runs one connection until it ends.
    async fn run_connection(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) -> Ended {
        // One timer for the session's deadlines (its keep-alive among them) and the queued
        // commands', moved when the next one changes (not a new timer per turn of the loop).
        let mut timer = std::pin::pin!(tokio::time::sleep_until(tokio::time::Instant::now()));
        let mut armed: Option<Instant> = None;
        loop {
            self.handle_events();
            if !self.flush().await {
                return Ended::Died;
            }
            self.handle_events();
            self.note_authorizing(Instant::now());
            let wake = match self.paused_since {
                // Deadlines wait for the authorization; look again shortly.
                Some(_) => Some(Instant::now() + AUTHORIZING_POLL),
                None => [self.session.poll_timeout(), self.next_queued_deadline()]
                    .into_iter()
                    .flatten()
                    .min(),
            };
            if wake != armed {
                if let Some(at) = wake {
                    timer.as_mut().reset(at.into());
                }
                armed = wake;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    None => return Ended::Dropped,
                    Some(Command::Close { reply }) => return Ended::Close(reply),
                    Some(Command::Start) => {
                        if matches!(*self.state.borrow(), Negotiation::NotStarted) {
                            self.state.send_replace(Negotiation::Pending);
                            self.link.connection.send_replace(ConnectionState::Connecting);
                            self.session.start(Instant::now());
                        }
                    }
                    Some(command @ (Command::Call { .. } | Command::ListTools { .. } | Command::Request { .. } | Command::SetLogLevel { .. }))
                        if !self.ready =>
                    {
                        self.queue(command);
                    }
                    Some(command) => self.issue(command),
                },
                inbound = self.transport.recv() => {
                    match inbound {
                        Some(Ok(message)) => {
                            self.note_identity();
                            self.session.handle_inbound(&message.body, Instant::now());
                        }
                        Some(Err(TransportError::Request(failure))) => {
                            tracing::debug!(id = %failure.id, error = %failure.cause, "request got no answer");
                            self.session.handle_undelivered(failure, Instant::now());
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "transport error");
                            self.last_transport_error = Some(Arc::new(e));
                        }
                        None => return Ended::Died,
                    }
                }
                () = &mut timer, if armed.is_some() => {
                    // Re-armed next turn, for whatever deadline comes next.
                    armed = None;
                    let now = Instant::now();
                    self.note_authorizing(now);
                    if self.paused_since.is_some() {
                        continue;
                    }
                    self.session.handle_timeout(now);
                    self.expire_queued(now);
                }
            }
        }
    }

    /// Follows the transport's authorizing: while a refusal is being repaired (a person may be
    /// logging in for minutes), no deadline runs; when it ends, every deadline moves by the
    /// time it took, so the probe still finds the right era and calls still get their time.
    fn note_authorizing(&mut self, now: Instant) {
        match (self.transport.authorizing(), self.paused_since) {
            (true, None) => {
                tracing::debug!("authorizing: deadlines wait");
                self.paused_since = Some(now);
            }
            (false, Some(since)) => {
                let by = now.saturating_duration_since(since);
                tracing::debug!(?by, "authorized: deadlines move by the time it took");
                self.paused_since = None;
                self.session.postpone(by);
                for queued in &mut self.queued {
                    queued.deadline = toolwire_session::later(queued.deadline, by);
                }
            }
            _ => {}
        }
    }

    /// The transport died: what was in flight is sent again or failed, then a new connection
    /// is made (at once for the legacy fallback, else after the policy's backoff); the error
    /// that ends the driver instead.
    async fn recover(
        &mut self,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<(), Error> {
        self.drain().await;
        let probing = self.session.is_probing();
        if let Err(e) = self.transport.close().await {
            tracing::debug!(error = %e, "closing the dead transport");
        }
        let cause = self
            .last_transport_error
            .as_ref()
            .map_or_else(|| "the transport closed".to_owned(), ToString::to_string);
        let fallback = probing
            && self.link.connector.is_some()
            && self.link.session.mode == ProtocolMode::Auto
            && !self.link.legacy_only.swap(true, Ordering::SeqCst);
        if fallback {
            tracing::info!(
                "the server ended during the server/discover probe; starting it again with initialize"
            );
        } else if self.backoff.is_none() || self.link.connector.is_none() {
            self.fail_in_flight(false, &[]);
            return Err(self.give_up());
        } else {
            tracing::warn!(cause, "the connection to the MCP server died; reconnecting");
        }
        let unread = self.transport.unread();
        self.fail_in_flight(self.backoff.is_some(), &unread);
        self.ready = false;
        self.state.send_replace(Negotiation::Reconnecting);
        let mut first = fallback;
        loop {
            if !first {
                let Some((attempt, delay)) = self.backoff.as_mut().and_then(Backoff::next) else {
                    tracing::warn!(cause, "giving up reconnecting to the MCP server");
                    return Err(self.give_up());
                };
                self.link
                    .connection
                    .send_replace(ConnectionState::Reconnecting { attempt });
                tracing::info!(attempt, ?delay, "reconnecting to the MCP server");
                if !self.wait(delay, commands).await {
                    return Err(Error::Closed);
                }
            }
            first = false;
            let Some(connector) = self.link.connector.clone() else {
                return Err(self.give_up());
            };
            match connector() {
                Ok(transport) => {
                    // The new session subscribes to what the old one had, at its log level.
                    self.session.carry_into(&mut self.link.session);
                    self.session = self.link.session(transport.carries_headers());
                    self.identity = transport.authorization_context();
                    self.link.transport.send_replace(Some(transport.clone()));
                    self.transport = transport;
                    self.last_transport_error = None;
                    self.relist = true;
                    self.state.send_replace(Negotiation::Pending);
                    self.link
                        .connection
                        .send_replace(ConnectionState::Connecting);
                    self.session.start(Instant::now());
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not start a new connection");
                    self.last_transport_error = Some(Arc::new(e));
                }
            }
        }
    }

    /// Reads what a dead transport still holds (briefly): answers that arrived before the
    /// death reach their callers, and a failed send learns why the peer went away (a stdio
    /// child's exit status says more than a broken pipe).
    async fn drain(&mut self) {
        let transport = self.transport.clone();
        let drain = async {
            while let Some(item) = transport.recv().await {
                match item {
                    Ok(message) => self.session.handle_inbound(&message.body, Instant::now()),
                    Err(TransportError::Request(failure)) => {
                        self.session.handle_undelivered(failure, Instant::now());
                    }
                    Err(e) => self.last_transport_error = Some(Arc::new(e)),
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(3), drain).await;
        self.handle_events();
    }

    /// The connection is over for good: says so (negotiation closed, state `Failed`) and
    /// fails everything still waiting as never sent; the error that ends the driver.
    fn give_up(&mut self) -> Error {
        let error = self.lost(false);
        self.state.send_replace(Negotiation::Closed {
            error: self.last_transport_error.clone(),
        });
        self.link.connection.send_replace(ConnectionState::Failed {
            reason: error.clone(),
        });
        self.fail_all(&error);
        error
    }

    /// The calls in flight on a dead connection: with `replay`, tool listings, calls safe to
    /// repeat and calls the dead server never read (`unread`: they never reached it) wait for
    /// the next connection; every other one fails saying it may have run.
    fn fail_in_flight(&mut self, replay: bool, unread: &[toolwire_transport::RequestId]) {
        self.call_ops.clear();
        let error = self.lost(true);
        let waiters: Vec<(OpId, Waiter)> = self.waiters.drain().collect();
        for (op, waiter) in waiters {
            let never_read = !unread.is_empty()
                && self
                    .session
                    .request_of(op)
                    .is_some_and(|id| unread.contains(&id));
            match waiter {
                Waiter::Call {
                    call,
                    reply,
                    progress,
                    replay: Some(again),
                    ..
                } if replay && (again.safe || never_read) => {
                    tracing::debug!(call, tool = %again.name, never_read, "sending the call again after the reconnect");
                    let Replay {
                        safe: _,
                        name,
                        arguments,
                        options,
                        input,
                        deadline,
                    } = *again;
                    self.queued.push(Queued {
                        deadline,
                        command: Command::Call {
                            call,
                            progress,
                            name,
                            arguments,
                            options,
                            input,
                            reply,
                        },
                    });
                }
                Waiter::List(reply) if replay => self.queue(Command::ListTools {
                    mode: CacheMode::Refresh,
                    reply,
                }),
                other => other.fail(error.clone()),
            }
        }
    }

    /// Waits out a reconnect delay while taking commands (queued, or cancelled) and failing
    /// the queued ones whose callers stop waiting; `false` if the client closed meanwhile.
    async fn wait(
        &mut self,
        delay: Duration,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> bool {
        let until = tokio::time::Instant::now() + delay;
        loop {
            let next = self
                .next_queued_deadline()
                .map_or(until, |at| until.min(at.into()));
            tokio::select! {
                command = commands.recv() => match command {
                    None => {
                        self.shutdown(Error::Closed).await;
                        return false;
                    }
                    Some(Command::Close { reply }) => {
                        self.shutdown(Error::Closed).await;
                        let _ = reply.send(());
                        return false;
                    }
                    Some(Command::Cancel { call }) => self.cancel(call),
                    Some(command @ (Command::Call { .. } | Command::ListTools { .. } | Command::Request { .. } | Command::SetLogLevel { .. })) => {
                        self.queue(command);
                    }
                    // The dead session's server requests cannot be answered any more.
                    Some(Command::Start | Command::Respond { .. }) => {}
                },
                () = tokio::time::sleep_until(next) => {
                    self.expire_queued(Instant::now());
                    if tokio::time::Instant::now() >= until {
                        return true;
                    }
                }
            }
        }
    }

    /// Ends the driver: everything waiting fails with `error`, the transport closes.
    async fn shutdown(&mut self, error: Error) {
        self.fail_all(&error);
        if let Err(e) = self.transport.close().await {
            tracing::debug!(error = %e, "closing the transport");
        }
        self.state.send_replace(Negotiation::Closed {
            error: self.last_transport_error.clone(),
        });
    }
}

/// How often the driver looks whether an authorization under way has ended.
const AUTHORIZING_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// How many server requests (elicitation, sampling, roots) the handler may work on at once
/// (`SessionConfig::max_server_requests` with a handler; without one, 0).
pub(crate) const MAX_SERVER_REQUESTS: usize = 64;

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use serde_json::json;

    use crate::Client;
    use crate::test_peer::{Peer, methods};

    /// SEP-2549: an answer the server did not mark `cacheScope: public` is kept within one
    /// authorization context. When the transport's identity changes (a new bearer token),
    /// private answers are asked again and public ones still serve.
    #[tokio::test(start_paused = true)]
    async fn a_new_identity_asks_again_for_private_answers_and_keeps_public_ones() {
        let (peer, seen) = Peer::new(|method, params| match (method, params["uri"].as_str()) {
            ("resources/read", Some(uri)) => {
                let scope = uri.trim_start_matches("file:///");
                let mut result = json!({"resultType": "complete", "ttlMs": 60_000,
                    "contents": [{"uri": uri, "text": scope}]});
                if scope != "unmarked" {
                    result["cacheScope"] = json!(scope);
                }
                result
            }
            _ => json!({"resultType": "complete"}),
        });
        let identity = peer.identity();
        let client = Client::builder("cache-test", "0").connect(peer).unwrap();
        let uris = ["file:///public", "file:///private", "file:///unmarked"];
        let reads = async |client: &Client| {
            for uri in uris {
                let read = client.read_resource(uri).await.unwrap();
                assert_eq!(read.contents[0].uri(), uri);
            }
        };
        reads(&client).await;
        assert_eq!(methods(&seen).len(), 3);
        // One identity: each answer is fresh, nothing is asked.
        reads(&client).await;
        assert_eq!(methods(&seen).len(), 3, "answered from the cache");

        identity.fetch_add(1, Ordering::SeqCst);
        reads(&client).await;
        let asked: Vec<String> = seen.lock().unwrap()[3..]
            .iter()
            .map(|(_, _, params)| params["uri"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            asked,
            ["file:///private", "file:///unmarked"],
            "a missing scope is private"
        );
        client.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn server_requests_past_the_cap_are_refused_at_once_and_the_rest_answered() {
        let (peer, _) = Peer::new(|_, _| json!({"resultType": "complete"}));
        let inject = peer.injector();
        let answers = peer.answers();
        let release = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        let gate = release.clone();
        let capabilities: toolwire_types::ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {}})).unwrap();
        let client = Client::builder("cap-test", "0")
            .handler(capabilities, move |_| {
                let gate = gate.clone();
                Box::pin(async move {
                    let _ = gate.acquire().await.map(|p| p.forget());
                    Ok(json!({"action": "decline"}))
                })
            })
            .connect(peer)
            .unwrap();
        client.ready().await.unwrap();
        let total = super::MAX_SERVER_REQUESTS + 16;
        for i in 0..total {
            let request = json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "elicitation/create",
                "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}}});
            inject
                .send(toolwire_transport::Inbound::new(
                    serde_json::to_vec(&request).unwrap(),
                ))
                .unwrap();
        }
        let wait_for = async |n: usize| {
            while answers.lock().unwrap().len() < n {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        };
        wait_for(16).await;
        {
            let refused = answers.lock().unwrap().clone();
            assert_eq!(
                refused.len(),
                16,
                "only the excess is answered while the handler works"
            );
            for (k, answer) in refused.iter().enumerate() {
                assert_eq!(answer["id"], 1000 + super::MAX_SERVER_REQUESTS + k);
                assert_eq!(answer["error"]["code"], -32603);
            }
        }
        release.add_permits(total);
        wait_for(total).await;
        let all = answers.lock().unwrap().clone();
        let declined = all
            .iter()
            .filter(|a| a["result"]["action"] == "decline")
            .count();
        assert_eq!(
            declined,
            super::MAX_SERVER_REQUESTS,
            "those within the cap were served"
        );
        client.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_listing_whose_cursor_repeats_ends_instead_of_looping() {
        let (peer, seen) = Peer::new(|method, _| match method {
            "resources/list" => json!({"resultType": "complete",
                "resources": [{"uri": "file:///a", "name": "a"}], "nextCursor": "again"}),
            "prompts/list" => json!({"resultType": "complete",
                "prompts": [{"name": "p"}], "nextCursor": "again"}),
            _ => json!({"resultType": "complete"}),
        });
        let client = Client::builder("walk-test", "0").connect(peer).unwrap();
        let resources = client.list_all_resources().await.unwrap();
        assert_eq!(
            resources.len(),
            2,
            "the first page and the one that repeated its cursor"
        );
        let prompts = client.list_all_prompts().await.unwrap();
        assert_eq!(prompts.len(), 2);
        assert_eq!(
            methods(&seen),
            [
                "resources/list",
                "resources/list",
                "prompts/list",
                "prompts/list"
            ]
        );
        client.close().await;
    }
}

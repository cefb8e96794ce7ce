//! The driver: the task that owns one connection's sans-IO [`Session`] and its transport.
//!
//! Callers send it [`Command`]s over a channel and wait on a oneshot each; it issues them on
//! the session, sends what the session emits exactly as emitted, feeds what the transport
//! receives back in, fires the session's timer, and hands each finished operation to its
//! waiter. The loop: drain events → flush messages → `select!` over commands,
//! `transport.recv()` and the next deadline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use toolwire_cache::{Commit, ListOutcome};
use toolwire_session::{
    CallOptions, Event, InputResponses, Negotiated, OpId, Session, SessionError,
};
use toolwire_transport::{Transport, TransportError};
use toolwire_types::{ErrorObject, JsonObject, RequestId, ServerRequest};

use crate::client::TOOLS_STALE_META;
use crate::{Error, ProgressCallback, ServerRequestHandler};

#[derive(Debug, Clone)]
pub(crate) enum Negotiation {
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

/// Who waits for an operation of the session, and how to answer them.
enum Waiter {
    /// A `tools/call` of the caller's call `call`.
    Call {
        call: u64,
        reply: oneshot::Sender<Result<Box<RawValue>, Error>>,
        progress: Option<ProgressCallback>,
        /// The settle barrier released the result on its timeout: mark it stale.
        stale: bool,
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
    queued: Vec<Command>,
    ready: bool,
    last_transport_error: Option<Arc<TransportError>>,
    /// Where cache changes are announced.
    changes: broadcast::Sender<Commit>,
}

impl Driver {
    pub(crate) fn new(
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
            waiters: FastMap::default(),
            call_ops: FastMap::default(),
            handler,
            own_commands,
            queued: Vec::new(),
            ready: false,
            last_transport_error: None,
            changes,
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
        for (_, waiter) in self.waiters.drain() {
            waiter.fail(error.clone());
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
                input,
                reply,
            } => {
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
                        };
                        self.waiters.insert(op, waiter);
                    }
                    Err(e) => drop(reply.send(Err(e.into()))),
                }
            }
            Command::ListTools { reply } => match self.session.list_tools(now) {
                Ok(op) => drop(self.waiters.insert(op, Waiter::List(reply))),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Request { issue, reply } => match issue(&mut self.session, now) {
                Ok(op) => drop(self.waiters.insert(op, Waiter::Request(reply))),
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
                        announce(&self.changes, &outcome.commit);
                    }
                    match self.waiters.remove(&op) {
                        Some(Waiter::List(reply)) => drop(reply.send(result.map_err(Error::from))),
                        // Only walks end as `ToolsListed`.
                        Some(other) => drop(self.waiters.insert(op, other)),
                        None => {}
                    }
                }
                Event::ServerRequest(request) => self.serve(request),
                Event::Progress { op, params } => {
                    if let Some(Waiter::Call {
                        progress: Some(callback),
                        ..
                    }) = self.waiters.get(&op)
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

    pub(crate) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
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

//! What a server built on this crate provides: the [`Service`] trait and the values it trades.

use std::collections::BTreeSet;
use std::future::Future;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use toolwire_headers::HeaderPlan;

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
    /// The method.
    pub method: &'a str,
    /// Its `params` (`Null` when it had none).
    pub params: &'a Value,
    /// The era it arrived in.
    pub era: Era,
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
}

impl RpcError {
    /// An error without data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
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

/// Where a request's notifications go while it runs (progress, log messages): on its SSE
/// stream over HTTP, on stdout over stdio.
#[derive(Debug, Clone)]
pub struct Notifier(pub(crate) mpsc::UnboundedSender<Value>);

impl Notifier {
    /// Sends a whole JSON-RPC notification (`{"jsonrpc": "2.0", "method": …}`). A client
    /// that went away is not an error: the notification is dropped.
    pub fn send(&self, notification: Value) {
        let _ = self.0.send(notification);
    }

    /// A notifier whose notifications go to `to` (for tests and front ends of your own).
    pub fn new(to: mpsc::UnboundedSender<Value>) -> Self {
        Self(to)
    }
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
}

impl Page {
    /// A page with this status, type and body.
    pub fn new(status: u16, content_type: &'static str, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type,
            body: body.into(),
        }
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

/// The server's own behaviour: tools, resources, prompts, whatever it offers. The protocol
/// layer ([`crate::serve_http`], [`crate::serve_stdio`]) does the rest: eras and versions,
/// sessions, framing, SEP-2243 header checks, listen streams, caching fields.
pub trait Service: Send + Sync + 'static {
    /// Who the server is.
    fn info(&self) -> ServerInfo;

    /// Answers one request. Notifications the work makes go to `notifier`; they reach the
    /// client before the answer.
    fn handle<'a>(
        &'a self,
        request: Request<'a>,
        notifier: &'a Notifier,
    ) -> impl Future<Output = Answer> + Send + 'a;

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

    /// The page at `path` (not the MCP endpoint), for a `GET` over HTTP; None is a 404. None
    /// by default.
    fn page(&self, path: &str) -> Option<Page> {
        let _ = path;
        None
    }

    /// A 2026-07-28 listen stream begins (`on`) or ended (`!on`) asking for updates of these
    /// resources: a service that must subscribe somewhere to hear of them (the gateway, to its
    /// upstreams) does it here. The stream is acknowledged once this resolves, so nothing
    /// after the acknowledgement is missed. Nothing by default; called once per stream each
    /// way.
    fn watch<'a>(
        &'a self,
        resources: &'a BTreeSet<String>,
        on: bool,
    ) -> impl Future<Output = ()> + Send + 'a {
        let _ = (resources, on);
        std::future::ready(())
    }

    /// Changes as they happen. The default has none.
    fn changes(&self) -> broadcast::Receiver<Change> {
        broadcast::channel(1).1
    }

    /// The notification a legacy session hears for `change` (None: it hears nothing). By
    /// default every change: a service with `resources/subscribe` filters updates here.
    fn legacy_notification(&self, change: &Change) -> Option<Value> {
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
            json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                "params": {"elicitationId": id}})
        }
        Change::Log(message) => message.clone(),
    })
}

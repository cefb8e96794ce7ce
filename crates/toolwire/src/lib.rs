//! Toolwire: a Rust client for the Model Context Protocol.
//!
//! ```no_run
//! use serde_json::json;
//! use toolwire::{Client, StdioConfig};
//!
//! # async fn demo() -> Result<(), toolwire::Error> {
//! let client = Client::builder("my-agent", "1.0.0")
//!     .title("My Agent")
//!     .connect_stdio(StdioConfig::new("my-mcp-server", ["--stdio"]))?;
//! client.list_tools().await?;
//! let result = client.call_tool("echo", json!({"text": "hello"})).await?;
//! if result.is_error() {
//!     // A tool error is a result for the model, not an `Err`.
//! }
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! The client negotiates the protocol era on first use (`server/discover` for `2026-07-28`,
//! else `initialize`), shared by every concurrent first caller; keeps the tools it knows in a
//! lock-free cache ([`Client::tools`], [`Client::add_known_tools`]); and computes the SEP-2243
//! headers of every call from that cache, warning where a call would silently go without them.
//!
//! The layers below are separate crates: `toolwire-types` (messages), `toolwire-headers`
//! (SEP-2243), `toolwire-cache`, `toolwire-session` (the sans-IO protocol),
//! `toolwire-transport` (the [`Transport`] trait), `toolwire-stdio` ([`StdioTransport`]),
//! `toolwire-http` (Streamable HTTP, [`HttpTransport`]). This crate drives the session over
//! a transport on tokio and re-exports what a user needs, by name.
//!
//! Over HTTP: `Client::builder(..).connect_http(HttpTransport::builder("http://127.0.0.1:8080/mcp"))`.
//!
//! Status: stdio, Streamable HTTP (both eras), the 2024-11-05 HTTP+SSE transport and custom
//! transports; tools (known tools, search), resources, prompts, completions, skills, MCP Apps,
//! ping and any typed request ([`Client::request`]); progress callbacks, cancellation on drop,
//! a handler for the server's requests (and MRTR `input_required` rounds of `tools/call`,
//! `prompts/get` and `resources/read` through the same handler); tasks followed inside a call;
//! OAuth 2.1 (feature `oauth`); reconnection with a watchable state; a legacy fallback for
//! stdio servers that exit on the `server/discover` probe; structured-output validation,
//! shutdown and reuse, and a [`blocking`] client.
//!
//! # Cargo features
//! - `oauth` (on by default): OAuth 2.1 for HTTP servers through `toolwire-auth`
//!   (`ClientBuilder::oauth`, `Error::Authorization`, the `auth` module). Without it the
//!   client still sends credentials given whole (a bearer token, any `Authorization` value,
//!   or an `Authorizer` of your own) and builds without the OAuth crate.
//! - `otel`: each request's span follows the OpenTelemetry conventions for MCP and its W3C
//!   trace context travels in `_meta` (and as HTTP headers), for a `tracing-opentelemetry`
//!   layer to export.
//!
//! # Dependencies
//! - `jsonschema` without default features: its defaults fetch remote `$ref`s, which the spec
//!   forbids a client to do automatically, and build aws-lc.
//! - `foldhash` (already under the tool cache): the driver's per-call maps, where SipHash cost
//!   more than the lookups.
//! - `toolwire-auth` (feature `oauth`): the OAuth client, as an `Authorizer` of the HTTP
//!   transport.
//! - `ring` (already under rustls and OAuth): SHA-256 of skill files against their manifest.
//! - `yaml-rust2` (no default features: no encoding detection): a `SKILL.md`'s YAML
//!   frontmatter, compared field by field with the listing's; a maintained, pure-Rust YAML 1.2
//!   parser, where `serde_yaml` is unmaintained and its forks unsettled.
//! - `base64` (workspace): blob contents of skill files.
//! - `toolwire-search`: the BM25 index of [`Client::search_tools`] (re-exported as
//!   [`search`]).

//!
//! # Cancel safety
//! Dropping a `call_tool` future cancels the call: where the era and transport allow it the
//! server gets `notifications/cancelled`, and a late answer is discarded. Dropping a
//! `list_tools` future stops waiting; the walk finishes and still lands in the cache.

pub mod apps;
pub mod blocking;
pub use toolwire_search as search;
/// Spans per request (the OpenTelemetry conventions for MCP) and the W3C trace context; OTLP
/// export for applications that enable `toolwire-telemetry`'s `otlp` feature.
pub use toolwire_telemetry as telemetry;
mod client;
mod command;
mod config;
mod driver;
mod error;
mod link;
mod notices;
mod output;
mod reconnect;
mod recovery;
mod skills;
mod tasks;
#[cfg(test)]
mod test_peer;
mod waiters;

pub use client::{Called, Client, RawResult, TOOLS_STALE_META, ToolMatch, tools_may_be_stale};
pub use config::{
    CallHooks, ClientBuilder, Connector, LogCallback, ProgressCallback, ServerRequestHandler,
};
pub use error::{ConnectionError, Error, ErrorChain, InputError, ProtocolError, UsageError};
pub use notices::{Notice, Notifications};
pub use reconnect::{ConnectionState, ReconnectPolicy};
pub use skills::LoadedSkill;
pub use tasks::TaskHandle;

/// OAuth 2.1 (the `toolwire-auth` crate, the `oauth` feature, on by default):
/// [`ClientBuilder::oauth`] takes its [`auth::OAuthConfig`].
#[cfg(feature = "oauth")]
pub use toolwire_auth as auth;
pub use toolwire_cache::{
    CacheConfig, Commit, KnownToolsError, ListOutcome, RejectReason, RejectedTool, ToolSnapshot,
};
pub use toolwire_http::{
    AcceptProfile, AuthRequest, Authorizer, BearerToken, Challenge, Credentials, HttpError,
    HttpExecutor, HttpOrSseTransport, HttpTransport, HttpTransportBuilder, Proxy, Received,
    Refusal, Resend, RetryPolicy, SseTransport, StaticAuthorization, TlsRoots, parse_challenges,
};
pub use toolwire_session::{
    CacheMode, CallOptions, Negotiated, ProtocolMode, RequestError, SessionError, SettleMode,
};
pub use toolwire_stdio::{StderrMode, StdioConfig, StdioTransport};
pub use toolwire_transport::{
    Backoff, BoxFuture, Delays, ExitDescription, Inbound, MessageKind, Outbound, RequestFailure,
    RequestId, RetryClass, SessionStep, Transport, TransportError,
};
pub use toolwire_types::{
    CallToolResult, ClientCapabilities, ContentBlock, CreateMessageParams, CreateMessageResult,
    DecodeError, ElicitAction, ElicitParams, ElicitResult, ErrorObject, Implementation, JsonObject,
    ListRootsResult, LoggingLevel, LoggingMessageParams, ProgressParams, ProtocolVersion, Root,
    Schema, ServerCapabilities, ServerNotification, ServerRequest, Tool,
};

/// Every protocol type (the `toolwire-types` crate), for what the names above leave out: the
/// results of [`Client::read_resource`], [`Client::get_prompt`] and the `list_*` calls, and
/// the method markers [`Client::request`] takes (`types::methods::method::*` with their params,
/// and the [`types::RequestMethod`] and [`types::HasMeta`] traits).
pub use toolwire_types as types;

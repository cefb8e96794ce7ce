//! JSON-RPC 2.0 and Model Context Protocol messages, for every MCP revision from `2024-11-05`
//! to `2026-07-28`.
//!
//! This crate does the JSON shape of MCP and nothing else: no I/O, no clock, no policy. It is
//! the only crate of Toolwire that derives serde; every other crate reads and writes MCP through
//! it.
//!
//! - [`Message::decode`] reads the JSON-RPC envelope (phase one); the dispatch enums
//!   ([`ClientRequest`], [`ServerRequest`], [`ClientNotification`], [`ServerNotification`]) and
//!   [`RequestMethod::decode_result`] decode the typed payload (phase two). No
//!   `#[serde(untagged)]` unions: every error names what is wrong. Each dispatch enum has a
//!   kind by name alone ([`ClientMethod`], …) for a server that decides what to do with a
//!   message before, or instead of, decoding its params.
//! - [`ProtocolVersion`] orders revisions and answers what each one allows.
//! - Every struct keeps the members it does not know in `extra` (and `_meta` keys in
//!   [`Meta::extra`]), so a message from a newer peer survives a decode/encode round trip.
//! - The modern era's per-request envelope is [`Meta`]; its `input_required` results are
//!   [`InputRequiredResult`] inside an [`Outcome`].
//! - A tool's schemas are kept as their compact JSON text ([`Schema`]), about a tenth of what
//!   a decoded tree costs, and decoded where they are read.
//! - Outbound messages encode straight from typed params ([`encode_request`]) without a
//!   `serde_json::Value` round trip.
//!
//! # Example
//!
//! ```
//! use toolwire_types::methods::method::CallTool;
//! use toolwire_types::{Message, Outcome, RequestMethod};
//!
//! let bytes = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
//! let Message::Response(response) = Message::decode(bytes)? else { unreachable!() };
//! let raw = response.payload.expect("a result, not an error");
//! match CallTool::decode_result(&raw)? {
//!     Outcome::Complete(result) => assert_eq!(result.content[0].as_text(), Some("hi")),
//!     Outcome::InputRequired(_) => unreachable!(),
//! }
//! # Ok::<(), toolwire_types::DecodeError>(())
//! ```
//!
//! Not here: the tasks extension (`io.modelcontextprotocol/tasks`; unknown methods decode as
//! `Other` and its fields are kept in `extra`), and OAuth documents.
//!
//! # Dependencies
//! - `serde`, `serde_json` (with `raw_value`, for two-phase decoding without re-parsing into a
//!   `Value`).
//! - `serde_transcode`, to write a tool's schemas as compact text straight from the decoder
//!   ([`Schema`]) behind any deserializer, with no `Value` tree in between; the alternative,
//!   `serde_json`'s `RawValue`, cannot be captured inside structs with a flattened member
//!   (every struct here), and a hand-written transcoder would repeat the crate.
//! - `thiserror`, for the error enums.
//! - `memchr` (already under `serde_json`): its SIMD substring search, prepared once per
//!   needle, for finding a name in a schema's text ([`Schema::mentions`], once per tool a
//!   client caches) and the tool-change members in a call result
//!   ([`ToolChanges::announced_in`], once per call) at several times the speed of `str::find`.

mod apps;
mod capabilities;
mod client_features;
mod common;
mod content;
pub mod error;
mod id;
mod jsonrpc;
mod lifecycle;
mod meta;
pub mod methods;
mod mrtr;
mod notifications;
mod printable;
mod prompts;
mod raw;
mod rendered;
mod resources;
mod schema;
mod skills;
mod tasks;
mod tools;
mod trace;
mod version;

pub use apps::{
    APP_HTML_MIME, UI_EXTENSION, UiCsp, UiPermissions, UiResourceMeta, UiToolMeta,
    ui_extension_settings,
};
pub use capabilities::{
    Capability, ClientCapabilities, ClientToolsCapability, ElicitationCapability,
    ListChangedCapability, ResourcesCapability, RootsCapability, SamplingCapability,
    ServerCapabilities,
};
pub use client_features::{
    CreateMessageParams, CreateMessageResult, ElicitAction, ElicitParams, ElicitResult,
    ElicitationCompleteParams, ListRootsResult, ModelPreferences, Root, SamplingMessage,
};
pub use common::{
    Annotations, CacheHints, CacheScope, Cacheable, EmptyResult, Icon, Implementation, JsonObject,
    LoggingLevel, MetaOnlyParams, OneOrMany, ResultType, Role,
};
pub use content::{
    BinaryContent, BlobResourceContents, ContentBlock, EmbeddedResource, ResourceContents,
    TextContent, TextResourceContents, ToolResultContent, ToolUseContent,
};
pub use error::{
    DecodeError, EncodeError, ErrorObject, MissingClientCapabilityData,
    UnsupportedProtocolVersionData, UrlElicitationRequiredData,
};
pub use id::{ProgressToken, RequestId};
pub use jsonrpc::{
    Frame, JSONRPC_VERSION, Message, MessageKind, Notification, Request, Response, encode_error,
    encode_notification, encode_request, encode_result,
};
pub use lifecycle::{DiscoverParams, DiscoverResult, InitializeParams, InitializeResult};
pub use meta::{HasMeta, Meta, flag_meta, is_reserved_key, key as meta_key};
pub use methods::{
    CachePolicy, ClientMethod, ClientNotice, ClientNotification, ClientRequest, Method,
    NotificationMethod, RequestMethod, ServerMethod, ServerNotice, ServerNotification,
    ServerRequest,
};
pub use mrtr::{
    InputRequest, InputRequiredResult, Outcome, RetryWithInput, decode_outcome, decode_result,
};
pub use notifications::{
    CancelledParams, ListenParams, LoggingMessageParams, ProgressParams, SetLevelParams,
    SubscriptionFilter, SubscriptionsAcknowledgedParams,
};
pub use printable::{printable, redacted_args, redacted_url};
pub use prompts::{
    CompleteParams, CompleteResult, Completion, CompletionArgument, CompletionContext,
    CompletionReference, GetPromptParams, GetPromptResult, ListPromptsResult, Prompt,
    PromptArgument, PromptMessage,
};
pub use raw::{
    CompleteCall, complete_call_result, names_result_type, says_result_type, without_members,
    without_modern_members,
};
pub use rendered::Rendered;
pub use resources::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceParams, ReadResourceResult,
    Resource, ResourceTemplate, ResourceUriParams,
};
pub use schema::{Mention, Schema};
pub use skills::{
    DIRECTORY_MIME_TYPE, GetSkillParams, GetSkillResult, ListSkillsResult, ReadDirectoryParams,
    ReadDirectoryResult, SKILLS_EXTENSION, Skill, SkillFile,
};
pub use tasks::{TASKS_EXTENSION, Task, TaskParams, TaskStatus, UpdateTaskParams};
pub use tools::{
    CallToolParams, CallToolRequestParams, CallToolResult, ListParams, ListToolsResult,
    MalformedTool, Tool, ToolAnnotations, ToolChanges, ToolExecution,
};
pub use trace::TraceContext;
pub use version::{Era, HttpShape, InvalidProtocolVersion, ProtocolVersion};

//! Client and server capabilities, for both eras.

use serde::{Deserialize, Serialize};

use crate::common::JsonObject;

/// What a client supports. Sent in `initialize` (legacy) or in every request's `_meta`
/// (modern).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// Non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// The client can list roots (deprecated in `2026-07-28`, which drops `listChanged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<RootsCapability>,
    /// The client can sample from a model (deprecated in `2026-07-28`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingCapability>,
    /// The client can elicit input from the user; `{}` means form mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapability>,
    /// Task support (`2025-11-25`; an extension in `2026-07-28`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<JsonObject>,
    /// Extensions by `<prefix>/<name>` (`2026-07-28`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<JsonObject>,
    /// Tool-related client behaviour: the `wait_for` barrier of the WebMCP proposal
    /// "Async Dynamic Tool Registration" (not part of the MCP spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ClientToolsCapability>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `roots` client capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootsCapability {
    /// The client notifies when its roots change (legacy only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `sampling` client capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SamplingCapability {
    /// The client honours `includeContext`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<JsonObject>,
    /// The client supports tool use in sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<JsonObject>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `elicitation` client capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationCapability {
    /// Form-mode elicitation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<JsonObject>,
    /// URL-mode elicitation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<JsonObject>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The proposal's `tools` client capability: hold a result until announced tool changes land.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientToolsCapability {
    /// The client waits for announced `registers`/`unregisters`/`updates`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<bool>,
    /// How long the client waits, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_timeout: Option<u64>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// What a server supports (`initialize` result or `server/discover` result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCapabilities {
    /// Non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// The server sends log messages (deprecated in `2026-07-28`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<JsonObject>,
    /// The server offers argument completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<JsonObject>,
    /// The server offers prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListChangedCapability>,
    /// The server offers resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// The server offers tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ListChangedCapability>,
    /// Task support (`2025-11-25`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<JsonObject>,
    /// Extensions by `<prefix>/<name>` (`2026-07-28`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<JsonObject>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ServerCapabilities {
    /// Whether the server announces tool-list changes.
    pub fn tools_list_changed(&self) -> bool {
        self.tools
            .as_ref()
            .and_then(|t| t.list_changed)
            .unwrap_or(false)
    }
}

/// A capability whose only option is `listChanged`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListChangedCapability {
    /// The server sends a list-changed notification when the list changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `resources` server capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesCapability {
    /// The server supports `resources/subscribe` (legacy) or resource subscriptions (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<bool>,
    /// The server sends `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A server capability that a request needs before a client may send it in the legacy era
/// (both sides may use only what was negotiated). Each request method names its own
/// ([`crate::RequestMethod::CAPABILITY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// `tools`.
    Tools,
    /// `resources`.
    Resources,
    /// `resources.subscribe`.
    ResourceSubscribe,
    /// `prompts`.
    Prompts,
    /// `completions`.
    Completions,
    /// `logging`.
    Logging,
    /// An extension, by its identifier under `extensions`: declared in either era, or its
    /// methods are refused locally.
    Extension(&'static str),
    /// The skills extension with `directoryRead: true` (`resources/directory/read`), in
    /// either era.
    SkillsDirectoryRead,
}

impl Capability {
    /// Its name as a path into the capabilities object (`resources.subscribe`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Resources => "resources",
            Self::ResourceSubscribe => "resources.subscribe",
            Self::Prompts => "prompts",
            Self::Completions => "completions",
            Self::Logging => "logging",
            Self::Extension(id) => id,
            Self::SkillsDirectoryRead => "extensions.io.modelcontextprotocol/skills.directoryRead",
        }
    }

    /// Whether `capabilities` declare it.
    pub fn declared_by(self, capabilities: &ServerCapabilities) -> bool {
        match self {
            Self::Tools => capabilities.tools.is_some(),
            Self::Resources => capabilities.resources.is_some(),
            Self::ResourceSubscribe => capabilities
                .resources
                .as_ref()
                .and_then(|r| r.subscribe)
                .unwrap_or(false),
            Self::Prompts => capabilities.prompts.is_some(),
            Self::Completions => capabilities.completions.is_some(),
            Self::Logging => capabilities.logging.is_some(),
            Self::Extension(id) => capabilities
                .extensions
                .as_ref()
                .is_some_and(|e| e.contains_key(id)),
            Self::SkillsDirectoryRead => capabilities
                .extensions
                .as_ref()
                .and_then(|e| e.get(crate::SKILLS_EXTENSION))
                .is_some_and(|skills| skills["directoryRead"] == true),
        }
    }

    /// Whether it is gated in both eras (an extension's methods are refused locally unless
    /// the server declared the extension, whatever the era).
    pub fn gated_in_both_eras(self) -> bool {
        matches!(self, Self::Extension(_) | Self::SkillsDirectoryRead)
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

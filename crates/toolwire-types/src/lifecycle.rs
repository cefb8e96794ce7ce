//! Era negotiation: `initialize` (legacy) and `server/discover` (modern).

use serde::{Deserialize, Serialize};

use crate::common::{CacheScope, Cacheable, JsonObject, ResultType};
use crate::{ClientCapabilities, Implementation, Meta, ProtocolVersion, ServerCapabilities};

/// `initialize` params (legacy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The newest version the client supports.
    pub protocol_version: ProtocolVersion,
    /// The client's capabilities.
    pub capabilities: ClientCapabilities,
    /// The client's implementation info.
    pub client_info: Implementation,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `initialize` result (legacy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The version the server chose.
    pub protocol_version: ProtocolVersion,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's implementation info.
    pub server_info: Implementation,
    /// How to use the server, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl InitializeResult {
    /// A session id carried in the payload rather than in the `Mcp-Session-Id` header, as some
    /// servers do (`sessionId` at the top level or in `_meta`).
    pub fn session_id_in_payload(&self) -> Option<&str> {
        self.extra
            .get("sessionId")
            .or_else(|| self.meta.as_ref()?.extra.get("sessionId"))
            .and_then(serde_json::Value::as_str)
    }
}

/// `server/discover` params (modern): only the `_meta` envelope.
pub type DiscoverParams = crate::common::MetaOnlyParams;

/// `server/discover` result (modern).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// `resultType` (`complete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Every version the server speaks.
    pub supported_versions: Vec<ProtocolVersion>,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// How to use the server, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Server info at the top level, as the conformance harness sends it (the spec puts it in
    /// `_meta`); see [`DiscoverResult::server_info`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Implementation>,
    /// Freshness of this result in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// Who may share this result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata (`io.modelcontextprotocol/serverInfo`).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl DiscoverResult {
    /// The server's implementation info, from `_meta` (the spec) or the top level (seen in the
    /// wild).
    pub fn server_info(&self) -> Option<&Implementation> {
        self.meta
            .as_ref()
            .and_then(|m| m.server_info.as_deref())
            .or(self.server_info.as_ref())
    }
}

impl Cacheable for DiscoverResult {
    fn raw_ttl_ms(&self) -> Option<i64> {
        self.ttl_ms
    }

    fn raw_cache_scope(&self) -> Option<CacheScope> {
        self.cache_scope
    }
}

//! The `_meta` object, including the per-request envelope of `2026-07-28`.

use serde::{Deserialize, Serialize};

use crate::common::{JsonObject, LoggingLevel};
use crate::{
    ClientCapabilities, Implementation, ProgressToken, ProtocolVersion, Rendered, RequestId,
};

/// Reserved `_meta` keys, by name.
pub mod key {
    /// The protocol version of a modern request; MUST equal the `MCP-Protocol-Version` header.
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's capabilities on a modern request.
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The client's implementation info on a modern request.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The requested log level of a modern request (deprecated).
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// The server's implementation info on a modern result.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The subscription a notification belongs to (the `subscriptions/listen` request id).
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// The progress token of a request.
    pub const PROGRESS_TOKEN: &str = "progressToken";
}

/// Whether a `_meta` key is reserved for the protocol: its prefix (before `/`) has
/// `modelcontextprotocol` or `mcp` as its second label (`io.modelcontextprotocol/…`,
/// `dev.mcp/…`). A caller may not set those; the session owns them.
pub fn is_reserved_key(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        matches!(
            prefix.split('.').nth(1),
            Some("modelcontextprotocol" | "mcp")
        )
    })
}

/// `raw` (a JSON-RPC result object) with `_meta.<key>` set to `true`, the rest as it was; `raw`
/// unchanged if it is not an object. For a client's own marks on a result it hands over (the
/// key is the client's, never a reserved one).
pub fn flag_meta(
    raw: Box<serde_json::value::RawValue>,
    key: &str,
) -> Box<serde_json::value::RawValue> {
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(raw.get()) else {
        return raw;
    };
    let Some(object) = value.as_object_mut() else {
        return raw;
    };
    let meta = object
        .entry("_meta")
        .or_insert_with(|| serde_json::Value::Object(JsonObject::new()));
    let Some(meta) = meta.as_object_mut() else {
        return raw;
    };
    meta.insert(key.to_owned(), serde_json::Value::Bool(true));
    serde_json::value::to_raw_value(&value).unwrap_or(raw)
}

/// A `_meta` object: the reserved keys typed, everything else kept in `extra`
/// (W3C trace context, vendor keys).
///
/// The large members are boxed: every message type carries an `Option<Meta>`, and most are
/// absent or small.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `io.modelcontextprotocol/protocolVersion` (modern requests).
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub protocol_version: Option<ProtocolVersion>,
    /// `io.modelcontextprotocol/clientCapabilities` (modern requests). Shared by every request
    /// of a session and rendered once ([`Rendered`]).
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_capabilities: Option<Rendered<ClientCapabilities>>,
    /// `io.modelcontextprotocol/clientInfo` (modern requests), shared and rendered once like
    /// the capabilities.
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_info: Option<Rendered<Implementation>>,
    /// `io.modelcontextprotocol/logLevel` (modern requests; deprecated).
    #[serde(
        rename = "io.modelcontextprotocol/logLevel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub log_level: Option<LoggingLevel>,
    /// `io.modelcontextprotocol/serverInfo` (modern results).
    #[serde(
        rename = "io.modelcontextprotocol/serverInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub server_info: Option<Box<Implementation>>,
    /// `io.modelcontextprotocol/subscriptionId` (notifications on a listen stream).
    #[serde(
        rename = "io.modelcontextprotocol/subscriptionId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscription_id: Option<RequestId>,
    /// `progressToken`: opts a request in to progress notifications.
    #[serde(
        rename = "progressToken",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub progress_token: Option<ProgressToken>,
    /// Every other key, kept verbatim.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Meta {
    /// The first key of [`Meta::extra`] that is reserved for the protocol
    /// ([`is_reserved_key`]), if any.
    pub fn reserved_extra_key(&self) -> Option<&str> {
        self.extra
            .keys()
            .map(String::as_str)
            .find(|k| is_reserved_key(k))
    }

    /// The per-request envelope of a modern request: version, capabilities and client info.
    pub fn modern_envelope(
        version: ProtocolVersion,
        capabilities: ClientCapabilities,
        client_info: Option<Implementation>,
    ) -> Self {
        Self {
            protocol_version: Some(version),
            client_capabilities: Some(Rendered::new(capabilities)),
            client_info: client_info.map(Rendered::new),
            ..Self::default()
        }
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Params that carry a `_meta` object, so a session can put the modern envelope (or a progress
/// token) on any request without a `serde_json::Value` round trip.
pub trait HasMeta {
    /// The params' `_meta`.
    fn meta_mut(&mut self) -> &mut Option<Meta>;
}

macro_rules! has_meta {
    ($($t:ty),* $(,)?) => {$(
        impl HasMeta for $t {
            fn meta_mut(&mut self) -> &mut Option<Meta> {
                &mut self.meta
            }
        }
    )*};
}

has_meta!(
    crate::InitializeParams,
    crate::MetaOnlyParams,
    crate::ListParams,
    crate::CallToolParams,
    crate::ReadResourceParams,
    crate::ResourceUriParams,
    crate::GetPromptParams,
    crate::CompleteParams,
    crate::GetSkillParams,
    crate::ReadDirectoryParams,
    crate::TaskParams,
    crate::UpdateTaskParams,
    crate::SetLevelParams,
    crate::ListenParams,
    crate::CancelledParams,
    crate::ProgressParams,
);

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn flag_meta_adds_the_key_beside_what_meta_held_and_leaves_non_objects_alone() {
        let flagged = super::flag_meta(raw(r#"{"content":[],"_meta":{"a":1}}"#), "x/y");
        let value: serde_json::Value = serde_json::from_str(flagged.get()).unwrap();
        assert_eq!(value["_meta"]["a"], 1);
        assert_eq!(value["_meta"]["x/y"], true);
        assert_eq!(value["content"], serde_json::json!([]));
        let bare = super::flag_meta(raw(r#"{"content":[]}"#), "x/y");
        assert!(bare.get().contains(r#""_meta":{"x/y":true}"#));
        assert_eq!(super::flag_meta(raw("[1]"), "x/y").get(), "[1]");
        assert_eq!(
            super::flag_meta(raw(r#"{"_meta":3}"#), "x/y").get(),
            r#"{"_meta":3}"#
        );
    }
}

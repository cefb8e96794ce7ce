//! Content blocks of tool results, prompts and sampling, and resource contents.

use serde::de::{self, DeserializeOwned};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::common::{Annotations, JsonObject, nullable};
use crate::{Meta, Resource};

/// One block of content, tagged by its `type` member.
///
/// A `type` this crate does not know is kept whole in [`ContentBlock::Unknown`], so a newer
/// server's content survives decoding and re-encoding.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `text`.
    Text(TextContent),
    /// `image`: base64 data with a MIME type.
    Image(BinaryContent),
    /// `audio`: base64 data with a MIME type.
    Audio(BinaryContent),
    /// `resource_link`: a link to a resource the client may read.
    ResourceLink(Resource),
    /// `resource`: an embedded resource.
    Resource(EmbeddedResource),
    /// `tool_use` (sampling with tools, `2025-11-25`).
    ToolUse(ToolUseContent),
    /// `tool_result` (sampling with tools, `2025-11-25`).
    ToolResult(ToolResultContent),
    /// A type this crate does not know, kept verbatim (including its `type` member).
    Unknown(JsonObject),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent {
            text: text.into(),
            annotations: None,
            meta: None,
            extra: JsonObject::new(),
        })
    }

    /// The block's `type` member.
    pub fn kind(&self) -> &str {
        match self {
            Self::Text(_) => "text",
            Self::Image(_) => "image",
            Self::Audio(_) => "audio",
            Self::ResourceLink(_) => "resource_link",
            Self::Resource(_) => "resource",
            Self::ToolUse(_) => "tool_use",
            Self::ToolResult(_) => "tool_result",
            Self::Unknown(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

#[derive(Serialize)]
struct Tagged<'a, T> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(flatten)]
    inner: &'a T,
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kind = self.kind();
        match self {
            Self::Text(c) => Tagged { kind, inner: c }.serialize(serializer),
            Self::Image(c) | Self::Audio(c) => Tagged { kind, inner: c }.serialize(serializer),
            Self::ResourceLink(c) => Tagged { kind, inner: c }.serialize(serializer),
            Self::Resource(c) => Tagged { kind, inner: c }.serialize(serializer),
            Self::ToolUse(c) => Tagged { kind, inner: c }.serialize(serializer),
            Self::ToolResult(c) => Tagged { kind, inner: c }.serialize(serializer),
            Self::Unknown(map) => map.serialize(serializer),
        }
    }
}

fn from_object<T: DeserializeOwned, E: de::Error>(kind: &str, map: JsonObject) -> Result<T, E> {
    serde_json::from_value(Value::Object(map))
        .map_err(|e| E::custom(format_args!("invalid `{kind}` content block: {e}")))
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Two phases: read the tag, then the typed body (no untagged guessing).
        let mut map = JsonObject::deserialize(deserializer)?;
        let kind = match map.get("type") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(de::Error::custom(format_args!(
                    "content block `type` must be a string, found {other}"
                )));
            }
            None => return Err(de::Error::missing_field("type")),
        };
        let known = matches!(
            kind.as_str(),
            "text" | "image" | "audio" | "resource_link" | "resource" | "tool_use" | "tool_result"
        );
        if !known {
            return Ok(Self::Unknown(map));
        }
        map.remove("type");
        Ok(match kind.as_str() {
            "text" => Self::Text(from_object(&kind, map)?),
            "image" => Self::Image(from_object(&kind, map)?),
            "audio" => Self::Audio(from_object(&kind, map)?),
            "resource_link" => Self::ResourceLink(from_object(&kind, map)?),
            "resource" => Self::Resource(from_object(&kind, map)?),
            "tool_use" => Self::ToolUse(from_object(&kind, map)?),
            _ => Self::ToolResult(from_object(&kind, map)?),
        })
    }
}

/// A `text` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// An `image` or `audio` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BinaryContent {
    /// Base64-encoded bytes.
    pub data: String,
    /// MIME type of the bytes.
    pub mime_type: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A `resource` block: resource contents embedded in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The contents.
    pub resource: ResourceContents,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A `tool_use` block in sampling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUseContent {
    /// The tool use id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The tool's arguments.
    pub input: JsonObject,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A `tool_result` block in sampling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultContent {
    /// The id of the `tool_use` this answers.
    pub tool_use_id: String,
    /// The result's content.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Structured result.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub structured_content: Option<Value>,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The contents of a resource: text or a base64 blob, told apart by which member is present.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceContents {
    /// Text contents.
    Text(TextResourceContents),
    /// Binary contents.
    Blob(BlobResourceContents),
}

impl ResourceContents {
    /// The resource's URI.
    pub fn uri(&self) -> &str {
        match self {
            Self::Text(t) => &t.uri,
            Self::Blob(b) => &b.uri,
        }
    }
}

impl Serialize for ResourceContents {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(t) => t.serialize(serializer),
            Self::Blob(b) => b.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ResourceContents {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = JsonObject::deserialize(deserializer)?;
        match (map.contains_key("text"), map.contains_key("blob")) {
            (true, false) => from_object("text resource", map).map(Self::Text),
            (false, true) => from_object("blob resource", map).map(Self::Blob),
            (true, true) => Err(de::Error::custom(
                "resource contents carry both `text` and `blob`",
            )),
            (false, false) => Err(de::Error::custom("resource contents need `text` or `blob`")),
        }
    }
}

/// Text contents of a resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The text.
    pub text: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Binary contents of a resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Base64-encoded bytes.
    pub blob: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_content_types_survive() {
        let v = json!({"type": "hologram", "frames": 3});
        let block: ContentBlock = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(block.kind(), "hologram");
        assert_eq!(serde_json::to_value(&block).unwrap(), v);
    }

    #[test]
    fn malformed_blocks_name_the_problem() {
        let cases = [
            (json!({"text": "no type"}), "missing field `type`"),
            (json!({"type": 3}), "`type` must be a string"),
            (
                json!({"type": "image", "data": "AA=="}),
                "invalid `image` content block",
            ),
            (
                json!({"type": "resource", "resource": {"uri": "a"}}),
                "need `text` or `blob`",
            ),
        ];
        for (input, expected) in cases {
            let err = serde_json::from_value::<ContentBlock>(input.clone()).unwrap_err();
            assert!(err.to_string().contains(expected), "{input}: {err}");
        }
    }
}

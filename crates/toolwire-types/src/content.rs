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
        deserializer.deserialize_map(BlockVisitor)
    }
}

/// Reads a block in two phases, the tag, then the typed body (no untagged guessing).
///
/// The members before `type` (none, from most servers) are kept as values; once `type` names
/// a known kind, the body is decoded from those and then straight from the rest of the map, in
/// one pass. A kind this crate does not know is collected whole. This keeps a `tools/call`
/// answer from being decoded twice (issue #10's per-call profile).
struct BlockVisitor;

/// A block's member name, as the tag search tells them apart.
enum Key {
    Type,
    Other(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl de::Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(if key == "type" {
                    Key::Type
                } else {
                    Key::Other(key.to_owned())
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The members read before `type`, then the rest of the map: a body decodes from both.
struct Resumed<A> {
    before: std::vec::IntoIter<(String, Value)>,
    value: Option<Value>,
    rest: A,
}

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for Resumed<A> {
    type Error = A::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        match self.before.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(de::value::StringDeserializer::new(key))
                    .map(Some)
            }
            None => self.rest.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value).map_err(de::Error::custom),
            None => self.rest.next_value_seed(seed),
        }
    }
}

fn kind_of<E: de::Error>(value: Value) -> Result<String, E> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(E::custom(format_args!(
            "content block `type` must be a string, found {other}"
        ))),
    }
}

/// A known block's body from the members read before `type` and the map's remaining ones.
fn body<'de, T, A>(kind: &str, before: Vec<(String, Value)>, rest: A) -> Result<T, A::Error>
where
    T: Deserialize<'de> + HasExtra,
    A: de::MapAccess<'de>,
{
    let map = Resumed {
        before: before.into_iter(),
        value: None,
        rest,
    };
    let mut block = T::deserialize(de::value::MapAccessDeserializer::new(map))
        .map_err(|e| de::Error::custom(format_args!("invalid `{kind}` content block: {e}")))?;
    if block.extra().remove("type").is_some() {
        return Err(de::Error::duplicate_field("type"));
    }
    Ok(block)
}

impl<'de> de::Visitor<'de> for BlockVisitor {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a content block (an object with a `type`)")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
        let mut before = Vec::new();
        let kind = loop {
            match map.next_key::<Key>()? {
                None => return Err(de::Error::missing_field("type")),
                Some(Key::Type) => break kind_of::<A::Error>(map.next_value()?)?,
                Some(Key::Other(key)) => before.push((key, map.next_value()?)),
            }
        };
        let b = before;
        match kind.as_str() {
            "text" => body(&kind, b, map).map(ContentBlock::Text),
            "image" => body(&kind, b, map).map(ContentBlock::Image),
            "audio" => body(&kind, b, map).map(ContentBlock::Audio),
            "resource_link" => body(&kind, b, map).map(ContentBlock::ResourceLink),
            "resource" => body(&kind, b, map).map(ContentBlock::Resource),
            "tool_use" => body(&kind, b, map).map(ContentBlock::ToolUse),
            "tool_result" => body(&kind, b, map).map(ContentBlock::ToolResult),
            _ => {
                let mut object: JsonObject = b.into_iter().collect();
                object.insert("type".to_owned(), Value::String(kind));
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    object.insert(key, value);
                }
                Ok(ContentBlock::Unknown(object))
            }
        }
    }
}

/// The members a block type does not know, where a duplicate `type` would land.
trait HasExtra {
    fn extra(&mut self) -> &mut JsonObject;
}

macro_rules! has_extra {
    ($($t:ty),*) => {$(
        impl HasExtra for $t {
            fn extra(&mut self) -> &mut JsonObject {
                &mut self.extra
            }
        }
    )*};
}

has_extra!(
    TextContent,
    BinaryContent,
    Resource,
    EmbeddedResource,
    ToolUseContent,
    ToolResultContent
);

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
    fn a_block_decodes_the_same_whatever_the_order_of_its_members() {
        let first: ContentBlock = serde_json::from_str(
            r#"{"type":"text","text":"hi","annotations":{"priority":0.5},"x-extra":1}"#,
        )
        .unwrap();
        let last: ContentBlock = serde_json::from_str(
            r#"{"text":"hi","x-extra":1,"annotations":{"priority":0.5},"type":"text"}"#,
        )
        .unwrap();
        assert_eq!(first, last);
        let ContentBlock::Text(text) = &first else {
            panic!("{first:?}")
        };
        assert_eq!(text.text, "hi");
        assert_eq!(text.extra.get("x-extra"), Some(&json!(1)));
        // From a `Value` as well as from text.
        let from_value: ContentBlock = serde_json::from_value(
            json!({"type": "text", "text": "hi", "annotations": {"priority": 0.5}, "x-extra": 1}),
        )
        .unwrap();
        assert_eq!(from_value, first);
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
            (json!("text"), "a content block"),
        ];
        for (input, expected) in cases {
            let err = serde_json::from_value::<ContentBlock>(input.clone()).unwrap_err();
            assert!(err.to_string().contains(expected), "{input}: {err}");
            let err = serde_json::from_str::<ContentBlock>(&input.to_string()).unwrap_err();
            assert!(err.to_string().contains(expected), "{input}: {err}");
        }
        // `type` twice: the fast path sees the second one among the body's members.
        let err = serde_json::from_str::<ContentBlock>(r#"{"type":"text","text":"a","type":"x"}"#)
            .unwrap_err();
        assert!(err.to_string().contains("duplicate field `type`"), "{err}");
    }
}

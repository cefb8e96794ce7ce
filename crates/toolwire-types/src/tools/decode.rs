//! Hand-written decoders for the tool shapes a client decodes most: a listing's tools and a
//! call's result.
//!
//! A derived decoder for a struct with a flattened `extra` buffers the whole object into
//! serde's private content tree before it reads a single field, and every nested value is
//! then decoded a second time from that tree. These decode in one pass: each member's name
//! is told apart without allocating ([`Key`]), known members go straight into their fields (a
//! member twice is an error, as with a derived decoder), the rest into `extra`. A tool's
//! schemas stream from the text into [`Schema`]'s compact form with no tree at all.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{CallToolResult, ListToolsResult, Tool};
use crate::common::JsonObject;
use crate::schema::Schema;

/// The members a struct's decoder knows, each with a bit of its own (at most 16).
trait Members: Sized + Copy + 'static {
    /// What the struct is, for "expected …" messages.
    const WHAT: &'static str;
    /// Every known member with its name, in bit order.
    const ALL: &'static [(&'static str, Self)];

    fn bit(self) -> u16;

    fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }
}

/// A member name as the decoder reads it: a known member, or any other name (kept).
enum Key<M> {
    Known(M),
    Other(String),
}

impl<'de, M: Members> Deserialize<'de> for Key<M> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor<M>(PhantomData<M>);
        impl<M: Members> Visitor<'_> for NameVisitor<M> {
            type Value = Key<M>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Key<M>, E> {
                Ok(M::named(name).map_or_else(|| Key::Other(name.to_owned()), Key::Known))
            }
            fn visit_string<E: de::Error>(self, name: String) -> Result<Key<M>, E> {
                Ok(M::named(&name).map_or(Key::Other(name), Key::Known))
            }
        }
        deserializer.deserialize_str(NameVisitor(PhantomData))
    }
}

/// The known members seen so far, to refuse one that comes twice.
#[derive(Default)]
struct Seen(u16);

impl Seen {
    fn first<M: Members, E: de::Error>(&mut self, member: M) -> Result<M, E> {
        let bit = member.bit();
        if self.0 & bit != 0 {
            let name = M::ALL
                .iter()
                .find(|(_, m)| m.bit() == bit)
                .map_or("?", |(n, _)| n);
            return Err(E::duplicate_field(name));
        }
        self.0 |= bit;
        Ok(member)
    }
}

/// Reads a map whose members are `M`, handing each known one to `known` and keeping the
/// others in `extra`.
fn members<'de, A, M>(
    mut map: A,
    extra: &mut JsonObject,
    mut known: impl FnMut(M, &mut A) -> Result<(), A::Error>,
) -> Result<(), A::Error>
where
    A: MapAccess<'de>,
    M: Members,
{
    let mut seen = Seen::default();
    while let Some(key) = map.next_key::<Key<M>>()? {
        match key {
            Key::Known(member) => {
                let member = seen.first(member)?;
                known(member, &mut map)?;
            }
            Key::Other(name) => {
                let value = map.next_value()?;
                extra.insert(name, value);
            }
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum ToolMember {
    Name,
    Title,
    Description,
    Icons,
    InputSchema,
    OutputSchema,
    Annotations,
    Execution,
    Meta,
}

impl Members for ToolMember {
    const WHAT: &'static str = "a tool definition";
    const ALL: &'static [(&'static str, Self)] = &[
        ("name", Self::Name),
        ("title", Self::Title),
        ("description", Self::Description),
        ("icons", Self::Icons),
        ("inputSchema", Self::InputSchema),
        ("outputSchema", Self::OutputSchema),
        ("annotations", Self::Annotations),
        ("execution", Self::Execution),
        ("_meta", Self::Meta),
    ];

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// `inputSchema`'s decoder as a seed (it checks that the schema is an object).
struct ObjectSchema;

impl<'de> DeserializeSeed<'de> for ObjectSchema {
    type Value = Schema;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Schema, D::Error> {
        crate::schema::object(deserializer)
    }
}

struct ToolVisitor;

impl<'de> Visitor<'de> for ToolVisitor {
    type Value = Tool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ToolMember::WHAT)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Tool, A::Error> {
        let (mut name, mut input_schema) = (None, None);
        let (mut title, mut description, mut icons, mut output_schema) = (None, None, None, None);
        let (mut annotations, mut execution, mut meta) = (None, None, None);
        let mut extra = JsonObject::new();
        members(map, &mut extra, |member, map: &mut A| {
            match member {
                ToolMember::Name => name = Some(map.next_value()?),
                ToolMember::Title => title = map.next_value()?,
                ToolMember::Description => description = map.next_value()?,
                ToolMember::Icons => icons = map.next_value()?,
                ToolMember::InputSchema => input_schema = Some(map.next_value_seed(ObjectSchema)?),
                ToolMember::OutputSchema => output_schema = map.next_value()?,
                ToolMember::Annotations => annotations = map.next_value()?,
                ToolMember::Execution => execution = map.next_value()?,
                ToolMember::Meta => meta = map.next_value()?,
            }
            Ok(())
        })?;
        Ok(Tool {
            name: name.ok_or_else(|| de::Error::missing_field("name"))?,
            title,
            description,
            icons,
            input_schema: input_schema.ok_or_else(|| de::Error::missing_field("inputSchema"))?,
            output_schema,
            annotations,
            execution,
            meta,
            extra,
        })
    }
}

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ToolVisitor)
    }
}

#[derive(Clone, Copy)]
enum ListMember {
    ResultType,
    Tools,
    NextCursor,
    TtlMs,
    CacheScope,
    Meta,
}

impl Members for ListMember {
    const WHAT: &'static str = "a tools/list result";
    const ALL: &'static [(&'static str, Self)] = &[
        ("resultType", Self::ResultType),
        ("tools", Self::Tools),
        ("nextCursor", Self::NextCursor),
        ("ttlMs", Self::TtlMs),
        ("cacheScope", Self::CacheScope),
        ("_meta", Self::Meta),
    ];

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = ListToolsResult;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ListMember::WHAT)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ListToolsResult, A::Error> {
        let mut tools = None;
        let (mut result_type, mut next_cursor, mut ttl_ms) = (None, None, None);
        let (mut cache_scope, mut meta) = (None, None);
        let mut extra = JsonObject::new();
        members(map, &mut extra, |member, map: &mut A| {
            match member {
                ListMember::ResultType => result_type = map.next_value()?,
                ListMember::Tools => tools = Some(map.next_value()?),
                ListMember::NextCursor => next_cursor = map.next_value()?,
                ListMember::TtlMs => ttl_ms = map.next_value()?,
                ListMember::CacheScope => cache_scope = map.next_value()?,
                ListMember::Meta => meta = map.next_value()?,
            }
            Ok(())
        })?;
        Ok(ListToolsResult {
            result_type,
            tools: tools.ok_or_else(|| de::Error::missing_field("tools"))?,
            next_cursor,
            ttl_ms,
            cache_scope,
            meta,
            extra,
        })
    }
}

impl<'de> Deserialize<'de> for ListToolsResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ListVisitor)
    }
}

#[derive(Clone, Copy)]
enum ResultMember {
    ResultType,
    Content,
    StructuredContent,
    IsError,
    Registers,
    Unregisters,
    Updates,
    Meta,
}

impl Members for ResultMember {
    const WHAT: &'static str = "a tools/call result";
    const ALL: &'static [(&'static str, Self)] = &[
        ("resultType", Self::ResultType),
        ("content", Self::Content),
        ("structuredContent", Self::StructuredContent),
        ("isError", Self::IsError),
        ("registers", Self::Registers),
        ("unregisters", Self::Unregisters),
        ("updates", Self::Updates),
        ("_meta", Self::Meta),
    ];

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// `null` is absent for every member except `structuredContent`, where it is kept.
struct CallToolResultVisitor;

impl<'de> Visitor<'de> for CallToolResultVisitor {
    type Value = CallToolResult;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ResultMember::WHAT)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<CallToolResult, A::Error> {
        let mut result = CallToolResult::new(Vec::new());
        let mut extra = JsonObject::new();
        members(map, &mut extra, |member, map: &mut A| {
            match member {
                ResultMember::ResultType => result.result_type = map.next_value()?,
                ResultMember::Content => result.content = map.next_value()?,
                ResultMember::StructuredContent => {
                    result.structured_content = Some(map.next_value()?)
                }
                ResultMember::IsError => result.is_error = map.next_value()?,
                ResultMember::Registers => result.registers = map.next_value()?,
                ResultMember::Unregisters => result.unregisters = map.next_value()?,
                ResultMember::Updates => result.updates = map.next_value()?,
                ResultMember::Meta => result.meta = map.next_value()?,
            }
            Ok(())
        })?;
        result.extra = extra;
        // `content` is required by the schema, yet servers leave it out next to
        // `structuredContent` (or entirely); rmcp and the Python SDK accept that, and so does
        // this: it is read as no content.
        Ok(result)
    }
}

impl<'de> Deserialize<'de> for CallToolResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(CallToolResultVisitor)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_keeps_unknown_members_and_its_schema_in_the_servers_order() {
        let tool: Tool = serde_json::from_str(
            r#"{"name": "q", "future": [1], "inputSchema": {"type": "object",
                "properties": {"z": {}, "a": {}}}, "title": null, "_meta": {"k": 1}}"#,
        )
        .unwrap();
        assert_eq!(tool.name, "q");
        assert_eq!(tool.title, None);
        assert_eq!(tool.extra["future"], json!([1]));
        assert_eq!(
            tool.input_schema.as_json(),
            r#"{"type":"object","properties":{"z":{},"a":{}}}"#
        );
        assert!(tool.meta.is_some());
        // And back: the same members, the schema as it came.
        let text = serde_json::to_string(&tool).unwrap();
        assert!(text.contains(r#""inputSchema":{"type":"object","properties":{"z":{},"a":{}}}"#));
        assert_eq!(serde_json::from_str::<Tool>(&text).unwrap(), tool);
    }

    #[test]
    fn a_tool_member_twice_or_missing_is_an_error_that_names_it() {
        let twice =
            serde_json::from_str::<Tool>(r#"{"name": "a", "inputSchema": {}, "name": "b"}"#)
                .unwrap_err();
        assert!(
            twice.to_string().contains("duplicate field `name`"),
            "{twice}"
        );
        let missing = serde_json::from_str::<Tool>(r#"{"name": "a"}"#).unwrap_err();
        assert!(
            missing.to_string().contains("missing field `inputSchema`"),
            "{missing}"
        );
        let nameless = serde_json::from_str::<Tool>(r#"{"inputSchema": {}}"#).unwrap_err();
        assert!(
            nameless.to_string().contains("missing field `name`"),
            "{nameless}"
        );
        let array =
            serde_json::from_str::<Tool>(r#"{"name": "a", "inputSchema": []}"#).unwrap_err();
        assert!(
            array.to_string().contains("expected a JSON Schema object"),
            "{array}"
        );
    }

    #[test]
    fn a_tool_decodes_from_a_value_and_inside_a_flattened_struct() {
        let value = json!({"name": "v", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "required": ["n"]}});
        let tool: Tool = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(
            tool.output_schema.as_ref().map(Schema::as_json),
            Some(r#"{"required":["n"],"type":"object"}"#)
        );
        #[derive(Deserialize)]
        struct Holder {
            tools: Vec<Tool>,
            #[serde(flatten)]
            rest: JsonObject,
        }
        let holder: Holder =
            serde_json::from_value(json!({"tools": [value], "other": true})).unwrap();
        assert_eq!(holder.tools, vec![tool]);
        assert_eq!(holder.rest["other"], true);
    }

    #[test]
    fn a_tools_list_page_decodes_its_members_and_keeps_the_rest() {
        let page: ListToolsResult = serde_json::from_str(
            r#"{"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": "2",
                "ttlMs": 500, "cacheScope": "public", "later": 1}"#,
        )
        .unwrap();
        assert_eq!(page.tools.len(), 1);
        assert_eq!(page.next_cursor.as_deref(), Some("2"));
        assert_eq!(page.ttl_ms, Some(500));
        assert_eq!(page.cache_scope, Some(crate::CacheScope::Public));
        assert_eq!(page.extra["later"], 1);
        let missing =
            serde_json::from_str::<ListToolsResult>(r#"{"nextCursor": "2"}"#).unwrap_err();
        assert!(
            missing.to_string().contains("missing field `tools`"),
            "{missing}"
        );
    }
}

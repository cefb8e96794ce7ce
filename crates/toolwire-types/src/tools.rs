//! Tools: definitions, `tools/list`, `tools/call`.

mod decode;

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::{CacheScope, Cacheable, Icon, JsonObject, ResultType};
use crate::{ContentBlock, Meta, Rendered, Schema};

/// A tool the server offers. Decoded by hand (`tools/decode.rs`), in one pass.
///
/// A client keeps thousands of these, so the members most tools leave out (`annotations`,
/// `execution`, `_meta`) are boxed: the struct is 176 bytes rather than 384.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The tool's name (unique per server, case-sensitive).
    pub name: String,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Icons for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// JSON Schema (2020-12 unless `$schema` says otherwise) of the arguments: an object,
    /// never `null`. Kept as its JSON text ([`Schema`]); decode it where it is read.
    pub input_schema: Schema,
    /// JSON Schema of `structuredContent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Schema>,
    /// Behaviour hints; untrusted unless the server is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Box<ToolAnnotations>>,
    /// Task support (`2025-11-25` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<Box<ToolExecution>>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Box<Meta>>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Tool {
    /// A tool with a name and an input schema only.
    pub fn new(name: impl Into<String>, input_schema: JsonObject) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: None,
            icons: None,
            input_schema: Schema::from(input_schema),
            output_schema: None,
            annotations: None,
            execution: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }

    /// Whether repeating a call cannot do harm: annotated `readOnlyHint` or `idempotentHint`.
    pub fn is_safe_to_retry(&self) -> bool {
        self.annotations
            .as_ref()
            .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true))
    }
}

/// Hints about a tool's behaviour.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not modify its environment (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy things (default true; meaningful only if not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no further effect (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool talks to the outside world (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Task support of a tool (`2025-11-25`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecution {
    /// `forbidden` (default), `optional` or `required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_support: Option<String>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Params of the four list methods: an opaque cursor (an empty string is a valid cursor).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListParams {
    /// Where to continue; absent for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `tools/list` result: one page of tools. Decoded by hand (`tools/decode.rs`), in one pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// `resultType` (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The tools on this page.
    pub tools: Vec<Tool>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Freshness in milliseconds (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// Who may share this page (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Cacheable for ListToolsResult {
    fn raw_ttl_ms(&self) -> Option<i64> {
        self.ttl_ms
    }

    fn raw_cache_scope(&self) -> Option<CacheScope> {
        self.cache_scope
    }
}

/// A definition in a `tools/list` page that does not decode as a [`Tool`] (`inputSchema`
/// missing, a member of the wrong type, ...), set aside by [`ListToolsResult::decode_lenient`]
/// so that the rest of the page still counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedTool {
    /// Its position in the page's `tools` array (0-based).
    pub index: usize,
    /// Its `name`, when that much is a string.
    pub name: Option<String>,
    /// What is wrong, as the decoder says it (it names the member).
    pub error: String,
}

/// A decoder's message without its "at line 1 column 71": the position is within one
/// definition's text, which would read as a position in the whole answer.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) if e.line() > 0 => message.to_owned(),
        _ => text,
    }
}

/// The shape of a page with its tools still raw.
#[derive(Deserialize)]
struct RawToolPage {
    tools: Vec<Box<serde_json::value::RawValue>>,
    #[serde(flatten)]
    rest: JsonObject,
}

/// Just a definition's name, to say which tool was malformed.
#[derive(Deserialize)]
struct NameOnly {
    name: String,
}

impl ListToolsResult {
    /// Decodes a `tools/list` result tool by tool: every definition that decodes is in the
    /// page, every one that does not is returned beside it, in page order. For a page that the
    /// strict decoder ([`crate::RequestMethod::decode_result`]) refused: one bad definition
    /// should not hide a server's other tools. It costs a second parse, so it is the fallback,
    /// not the first try.
    ///
    /// Fails, naming what is wrong, when the page itself is malformed: not an object, `tools`
    /// missing or not an array, or any other member of the wrong type.
    pub fn decode_lenient(
        raw: &serde_json::value::RawValue,
    ) -> Result<(Self, Vec<MalformedTool>), crate::DecodeError> {
        let invalid = |source| crate::DecodeError::InvalidResult {
            method: "tools/list".into(),
            source,
        };
        let parts: RawToolPage = serde_json::from_str(raw.get()).map_err(invalid)?;
        let mut rest = parts.rest;
        rest.insert("tools".into(), Value::Array(Vec::new()));
        let mut page: Self = serde_json::from_value(Value::Object(rest)).map_err(invalid)?;
        if page.result_type == Some(ResultType::InputRequired) {
            // As the strict decoder: tools/list has no input_required.
            return Err(crate::DecodeError::UnexpectedInputRequired {
                method: "tools/list".into(),
            });
        }
        let mut malformed = Vec::new();
        for (index, raw) in parts.tools.iter().enumerate() {
            match serde_json::from_str::<Tool>(raw.get()) {
                Ok(tool) => page.tools.push(tool),
                Err(e) => malformed.push(MalformedTool {
                    index,
                    name: serde_json::from_str::<NameOnly>(raw.get())
                        .ok()
                        .map(|n| n.name),
                    error: without_position(&e),
                }),
            }
        }
        Ok((page, malformed))
    }
}

/// `tools/call` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    /// The tool's name.
    pub name: String,
    /// The tool's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// Answers to the server's `inputRequests`, by key (MRTR retry, modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<JsonObject>,
    /// The server's `requestState`, echoed exactly (MRTR retry, modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Metadata (modern envelope, progress token).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `tools/call` params as a client writes them, borrowing what it may send more than once
/// (the arguments, kept for an `input_required` round or a reissue after a header mismatch,
/// and the MRTR answers) and sharing a `_meta` that is the same on many requests (the modern
/// envelope, rendered once: [`Rendered`]). Serialises exactly as [`CallToolParams`] with the
/// same members and no `extra`; encode-only.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolRequestParams<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// The tool's arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<&'a JsonObject>,
    /// Answers to the server's `inputRequests`, by key (MRTR retry, modern).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<&'a JsonObject>,
    /// The server's `requestState`, echoed exactly (MRTR retry, modern).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_state: Option<&'a str>,
    /// Metadata (modern envelope, progress token).
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Rendered<Meta>>,
}

impl CallToolParams {
    /// A call of `name` with `arguments`.
    pub fn new(name: impl Into<String>, arguments: Option<JsonObject>) -> Self {
        Self {
            name: name.into(),
            arguments,
            input_responses: None,
            request_state: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// `tools/call` result of `resultType` `complete`.
///
/// A tool that failed answers with `is_error: true` here; that is a result for the model, not a
/// protocol error.
///
/// Decoded by hand (`tools/decode.rs`): a derived decoder with a flattened `extra`
/// buffers the whole result, content included, before it reads a field, and this is the one
/// result every tool call decodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// `resultType` (modern).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Unstructured result (empty when the server sent none: some send only
    /// `structuredContent`).
    pub content: Vec<ContentBlock>,
    /// Structured result: any JSON value in `2026-07-28` (`null` kept apart from absent), an
    /// object before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the tool failed (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Tools the server expects to register because of this call (WebMCP proposal
    /// "Async Dynamic Tool Registration"; not in the MCP spec).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registers: Option<Vec<String>>,
    /// Tools the server expects to unregister because of this call (same proposal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unregisters: Option<Vec<String>>,
    /// Tools whose definitions the server expects to change because of this call (same
    /// proposal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updates: Option<Vec<String>>,
    /// Metadata.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl CallToolResult {
    /// A successful result with these blocks.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        Self {
            result_type: None,
            content,
            structured_content: None,
            is_error: None,
            registers: None,
            unregisters: None,
            updates: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }

    /// Whether the tool reported failure.
    pub fn is_error(&self) -> bool {
        self.is_error.unwrap_or(false)
    }

    /// Whether the result announces any tool-list change (`registers`, `unregisters`,
    /// `updates`, non-empty).
    pub fn announces_tool_changes(&self) -> bool {
        [&self.registers, &self.unregisters, &self.updates]
            .iter()
            .any(|l| l.as_ref().is_some_and(|v| !v.is_empty()))
    }
}

/// Decodes a `tools/call` result in one pass where it can: a complete result (the common case)
/// decodes once, with its `resultType` read on the way, instead of a first pass that finds the
/// `resultType` and a second that decodes. An `input_required` result, or one that does not
/// decode, takes the general path, whose errors name the problem.
pub(crate) fn decode_call_tool(
    raw: &serde_json::value::RawValue,
) -> Result<crate::Outcome<CallToolResult>, crate::DecodeError> {
    if let Ok(result) = serde_json::from_str::<CallToolResult>(raw.get())
        && matches!(result.result_type, None | Some(ResultType::Complete))
    {
        return Ok(crate::Outcome::Complete(result));
    }
    crate::decode_outcome("tools/call", raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_tool_stays_small_where_it_is_held() {
        // A client holds thousands; a large member added inline costs every one of them.
        assert!(
            size_of::<Tool>() <= 176,
            "Tool grew to {} bytes: box what most tools leave out",
            size_of::<Tool>()
        );
    }

    #[test]
    fn borrowed_call_params_serialise_as_the_owned_ones() {
        let arguments = serde_json::json!({"region": "eu", "n": [1, 2]});
        let arguments = arguments.as_object().unwrap();
        let responses = serde_json::json!({"k": {"action": "accept"}});
        let meta = Meta {
            progress_token: Some(crate::RequestId::Number(3)),
            ..Meta::default()
        };
        let mut owned = CallToolParams::new("t", Some(arguments.clone()));
        owned.input_responses = responses.as_object().cloned();
        owned.request_state = Some("s\"1".into());
        owned.meta = Some(meta.clone());
        let borrowed = CallToolRequestParams {
            name: "t",
            arguments: Some(arguments),
            input_responses: responses.as_object(),
            request_state: Some("s\"1"),
            meta: Some(Rendered::new(meta)),
        };
        assert_eq!(
            serde_json::to_string(&borrowed).unwrap(),
            serde_json::to_string(&owned).unwrap()
        );
        let bare = CallToolRequestParams {
            name: "t",
            arguments: None,
            input_responses: None,
            request_state: None,
            meta: None,
        };
        assert_eq!(
            serde_json::to_string(&bare).unwrap(),
            serde_json::to_string(&CallToolParams::new("t", None)).unwrap()
        );
    }

    #[test]
    fn a_lenient_page_keeps_the_tools_that_decode() {
        let raw = serde_json::value::RawValue::from_string(
            serde_json::json!({
                "tools": [
                    {"name": "good", "inputSchema": {"type": "object"}},
                    {"name": "no_schema"},
                    {"name": 5, "inputSchema": {"type": "object"}},
                    {"name": "bad_title", "title": 7, "inputSchema": {"type": "object"}},
                    {"name": "also_good", "inputSchema": {"type": "object"}}
                ],
                "nextCursor": "c2",
                "x-vendor": true
            })
            .to_string(),
        )
        .unwrap();
        use crate::RequestMethod as _;
        assert!(crate::methods::method::ListTools::decode_result(&raw).is_err());
        let (page, malformed) = ListToolsResult::decode_lenient(&raw).unwrap();
        let names: Vec<_> = page.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["good", "also_good"]);
        assert_eq!(page.next_cursor.as_deref(), Some("c2"));
        assert_eq!(page.extra["x-vendor"], true);
        let found: Vec<_> = malformed
            .iter()
            .map(|m| (m.index, m.name.as_deref()))
            .collect();
        assert_eq!(
            found,
            [(1, Some("no_schema")), (2, None), (3, Some("bad_title"))]
        );
        assert_eq!(malformed[0].error, "missing field `inputSchema`");

        // The page itself malformed: nothing to salvage, and the error says why.
        for bad in [
            r#"{"tools": {}}"#,
            r#"{"nextCursor": 5, "tools": []}"#,
            r#"{"cursor": "x"}"#,
            r#"{"tools": [], "resultType": "later"}"#,
            "[]",
        ] {
            let raw = serde_json::value::RawValue::from_string(bad.into()).unwrap();
            assert!(
                matches!(
                    ListToolsResult::decode_lenient(&raw),
                    Err(crate::DecodeError::InvalidResult { .. })
                ),
                "{bad}"
            );
        }
        let raw = serde_json::value::RawValue::from_string(
            r#"{"tools": [{"name": 1}], "resultType": "input_required"}"#.into(),
        )
        .unwrap();
        assert!(matches!(
            ListToolsResult::decode_lenient(&raw),
            Err(crate::DecodeError::UnexpectedInputRequired { .. })
        ));
    }

    #[test]
    fn a_call_result_decodes_in_one_pass_and_round_trips() {
        let text = r#"{"content":[{"type":"text","text":"ok"}],"structuredContent":null,
            "isError":null,"x-vendor":{"a":1},"registers":["b"],"resultType":"complete",
            "_meta":{"k":"v"}}"#;
        let result: CallToolResult = serde_json::from_str(text).unwrap();
        assert_eq!(result.content.len(), 1);
        assert_eq!(result.structured_content, Some(Value::Null), "null is kept");
        assert_eq!(result.is_error, None);
        assert_eq!(result.registers.as_deref(), Some(&["b".to_owned()][..]));
        assert_eq!(result.result_type, Some(ResultType::Complete));
        assert_eq!(result.extra.get("x-vendor"), Some(&json!({"a": 1})));
        assert!(result.meta.is_some());
        // From a `Value` too, and back to the same JSON (`isError: null` is absent).
        let value: Value = serde_json::from_str(text).unwrap();
        let again: CallToolResult = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(again, result);
        let mut expected = value;
        if let Some(object) = expected.as_object_mut() {
            object.remove("isError");
        }
        assert_eq!(serde_json::to_value(&result).unwrap(), expected);

        let absent: CallToolResult = serde_json::from_str(r#"{"content":[]}"#).unwrap();
        assert_eq!(absent.structured_content, None);
    }

    #[test]
    fn tools_call_outcomes_decode_as_the_general_path_does() {
        use crate::methods::method::CallTool;
        use crate::{DecodeError, Outcome, RequestMethod};
        let decode = |text: &str| {
            let raw = serde_json::value::RawValue::from_string(text.to_owned()).unwrap();
            (
                CallTool::decode_result(&raw),
                crate::decode_outcome::<CallToolResult>("tools/call", &raw),
            )
        };
        for text in [
            r#"{"content":[{"type":"text","text":"a"}]}"#,
            r#"{"resultType":"complete","content":[]}"#,
            r#"{"resultType":"input_required","requestState":"s","inputRequests":{}}"#,
            r#"{"resultType":"input_required","content":[],"requestState":"s"}"#,
        ] {
            let (fast, general) = decode(text);
            assert_eq!(fast.unwrap(), general.unwrap(), "{text}");
        }
        let (fast, _) = decode(r#"{"resultType":"input_required","content":[]}"#);
        assert!(matches!(fast, Ok(Outcome::InputRequired(_))));
        let (fast, _) = decode(r#"{"resultType":"streaming","content":[]}"#);
        assert!(
            matches!(fast, Err(DecodeError::UnknownResultType { .. })),
            "{fast:?}"
        );
        // Without `content`: decoded as none, on both paths.
        for text in [
            r#"{"resultType":"complete"}"#,
            r#"{"resultType":"complete","structuredContent":{"sum":3}}"#,
        ] {
            let (fast, general) = decode(text);
            let fast = fast.unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(fast, general.unwrap(), "{text}");
            let Outcome::Complete(result) = fast else {
                panic!("{text}")
            };
            assert!(result.content.is_empty(), "{text}");
        }
    }

    #[test]
    fn a_result_with_only_structured_content_decodes_with_no_content() {
        let r: CallToolResult = serde_json::from_str(r#"{"structuredContent":{"temp":21}}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(r.content.is_empty());
        assert_eq!(r.structured_content, Some(serde_json::json!({"temp": 21})));
        let r: CallToolResult = serde_json::from_str("{}").unwrap_or_else(|e| panic!("{e}"));
        assert!(r.content.is_empty() && !r.is_error());
    }

    #[test]
    fn a_malformed_call_result_is_an_error_that_names_the_member() {
        let cases = [
            (
                r#"{"content":[],"content":[]}"#,
                "duplicate field `content`",
            ),
            (
                r#"{"content":[],"_meta":{},"_meta":{}}"#,
                "duplicate field `_meta`",
            ),
            (r#"{"content":[],"isError":"yes"}"#, "invalid type"),
            (r#"{"content":[],"resultType":"later"}"#, "unknown variant"),
            (r#"[]"#, "a tools/call result"),
        ];
        for (input, expected) in cases {
            let err = serde_json::from_str::<CallToolResult>(input).unwrap_err();
            assert!(err.to_string().contains(expected), "{input}: {err}");
        }
    }

    #[test]
    fn each_kind_of_announced_tool_change_is_found_and_plain_results_announce_none() {
        let raw = |text: &str| serde_json::value::RawValue::from_string(text.to_owned()).unwrap();
        let names = |n: &[&str]| Some(n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let found = ToolChanges::announced_in(&raw(r#"{"content":[],"registers":["a"]}"#));
        assert_eq!(found.registers, names(&["a"]));
        let found = ToolChanges::announced_in(&raw(r#"{"unregisters":["b"],"content":[]}"#));
        assert_eq!((found.registers, found.unregisters), (None, names(&["b"])));
        let found = ToolChanges::announced_in(&raw(r#"{"content":[],"updates":["c"]}"#));
        assert_eq!(found.updates, names(&["c"]));
        let plain = r#"{"content":[{"type":"text","text":"registers updates"}]}"#;
        assert_eq!(
            ToolChanges::announced_in(&raw(plain)),
            ToolChanges::default()
        );
    }
}

/// The tool changes a `tools/call` result announces (a tool that registers, removes or changes
/// tools says which with its result), read without decoding the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ToolChanges {
    /// Tools it added.
    #[serde(default)]
    pub registers: Option<Vec<String>>,
    /// Tools it removed.
    #[serde(default)]
    pub unregisters: Option<Vec<String>>,
    /// Tools whose definition it changed.
    #[serde(default)]
    pub updates: Option<Vec<String>>,
}

impl ToolChanges {
    /// What `raw` announces; none for a result that announces nothing or does not decode.
    /// Most results announce nothing: the members' names are looked for before any parse (a
    /// false positive costs only the parse).
    pub fn announced_in(raw: &serde_json::value::RawValue) -> Self {
        // `registers"` ends both `"registers"` and `"unregisters"`: two searches, not three,
        // each prepared once.
        static REGISTERS: LazyLock<memchr::memmem::Finder<'static>> =
            LazyLock::new(|| memchr::memmem::Finder::new(b"registers\""));
        static UPDATES: LazyLock<memchr::memmem::Finder<'static>> =
            LazyLock::new(|| memchr::memmem::Finder::new(b"\"updates\""));
        let text = raw.get();
        let may_announce =
            REGISTERS.find(text.as_bytes()).is_some() || UPDATES.find(text.as_bytes()).is_some();
        if may_announce {
            serde_json::from_str(text).unwrap_or_default()
        } else {
            Self::default()
        }
    }
}

//! Progressive discovery: above a size the caller sets, `tools/list` lists three tools in
//! place of every tool — `search_tools` (a ranked search over the merged catalog),
//! `describe_tool` (one tool's whole definition) and `call_tool` (a call by name) — so a
//! model that can take only so many tools (providers cap a request at 128) still reaches all
//! of them. The real tools stay callable by name with `tools/call`; the three are only
//! another way in.
//!
//! A bad argument to one of the three (an empty query, a name no tool has) is a tool error
//! (`isError`), which a model can read and correct, rather than a protocol error.

use std::sync::Mutex;

use serde_json::{Value, json};
use toolwire_server::{Notifier, Reply, Request, RpcError};

use crate::Gateway;

/// When the gateway switches to progressive discovery ([`crate::GatewayBuilder::progressive`]):
/// once the merged catalog holds more than `above_tools` tools, or once its definitions are
/// estimated at more than `above_tokens` tokens (a token taken as four bytes of the
/// definitions' JSON, the usual estimate for English text and JSON). Neither set: never.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progressive {
    /// Above this many tools.
    pub above_tools: Option<usize>,
    /// Above this many estimated tokens of definitions.
    pub above_tokens: Option<usize>,
}

/// The three tools' names.
pub const SEARCH_TOOLS: &str = "search_tools";
/// See [`SEARCH_TOOLS`].
pub const DESCRIBE_TOOL: &str = "describe_tool";
/// See [`SEARCH_TOOLS`].
pub const CALL_TOOL: &str = "call_tool";

/// Matches `search_tools` returns when not told how many.
const DEFAULT_LIMIT: usize = 10;
/// The most it returns.
const MAX_LIMIT: usize = 50;

/// The catalog's size as last measured: (snapshot generation, tools, estimated tokens).
#[derive(Debug, Default)]
pub(crate) struct Sizes(Mutex<Option<(u64, usize, usize)>>);

/// About how many tokens a definition costs a model: its JSON bytes over four.
fn tokens(tool: &toolwire::Tool) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let bytes = tool.name.len()
        + text(&tool.title)
        + text(&tool.description)
        + tool.input_schema.as_json().len()
        + tool.output_schema.as_ref().map_or(0, |s| s.as_json().len())
        // The members' names and punctuation.
        + 48;
    bytes.div_ceil(4)
}

impl Gateway {
    /// Whether `tools/list` lists the three discovery tools now.
    pub(crate) fn progressive_now(&self) -> bool {
        let Progressive {
            above_tools,
            above_tokens,
        } = self.progressive;
        if above_tools.is_none() && above_tokens.is_none() {
            return false;
        }
        let merged = self.host.load();
        let mut sizes = crate::lock(&self.sizes.0);
        let (count, estimate) = match *sizes {
            Some((generation, count, estimate)) if generation == merged.generation() => {
                (count, estimate)
            }
            _ => {
                let estimate = merged.iter().map(|(_, t)| tokens(&t.tool)).sum();
                *sizes = Some((merged.generation(), merged.len(), estimate));
                (merged.len(), estimate)
            }
        };
        above_tools.is_some_and(|limit| count > limit)
            || above_tokens.is_some_and(|limit| estimate > limit)
    }

    /// The `tools/list` answer of progressive discovery: the three tools, one page.
    pub(crate) fn discovery_listing(&self) -> Value {
        let mut listing = self.discovery_tools();
        if let Some(sign_out) = self.access.as_ref().and_then(crate::Access::sign_out_tool)
            && let Some(tools) = listing["tools"].as_array_mut()
        {
            tools.push(sign_out);
        }
        listing
    }

    fn discovery_tools(&self) -> Value {
        let count = self.host.load().len();
        json!({"tools": [
            {
                "name": SEARCH_TOOLS,
                "title": "Search tools",
                "description": format!(
                    "Finds tools among the {count} this gateway serves: the best matches for a \
                     query (words for what you want done), each with its name and description. \
                     Then call {DESCRIBE_TOOL} for a tool's arguments and {CALL_TOOL} to run it."
                ),
                "inputSchema": {"type": "object", "properties": {
                    "query": {"type": "string", "description": "What the tool should do, in a few words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                        "description": format!("At most this many matches (default {DEFAULT_LIMIT}).")}
                }, "required": ["query"]},
                "outputSchema": {"type": "object", "properties": {
                    "tools": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "title": {"type": "string"},
                        "description": {"type": "string"}}, "required": ["name"]}}
                }, "required": ["tools"]},
                "annotations": {"readOnlyHint": true, "openWorldHint": false}
            },
            {
                "name": DESCRIBE_TOOL,
                "title": "Describe a tool",
                "description": format!(
                    "The whole definition of a tool {SEARCH_TOOLS} found: its description and \
                     the JSON Schema of its arguments."
                ),
                "inputSchema": {"type": "object", "properties": {
                    "name": {"type": "string", "description": "The tool's name, as search_tools gave it."}
                }, "required": ["name"]},
                "annotations": {"readOnlyHint": true, "openWorldHint": false}
            },
            {
                "name": CALL_TOOL,
                "title": "Call a tool",
                "description": format!(
                    "Calls a tool by its name (as {SEARCH_TOOLS} gave it) with its arguments \
                     (as {DESCRIBE_TOOL} describes them), and answers with that tool's result."
                ),
                "inputSchema": {"type": "object", "properties": {
                    "name": {"type": "string", "description": "The tool's name."},
                    "arguments": {"type": "object", "description": "The tool's arguments."}
                }, "required": ["name"]}
            }
        ]})
    }

    /// A `tools/call` of one of the three, or `None` for any other name.
    pub(crate) async fn discovery_call(
        &self,
        request: Request<'_>,
        notifier: &Notifier,
        view: &crate::access::View<'_>,
    ) -> Option<Result<Reply, RpcError>> {
        let name = request.params["name"].as_str()?;
        if !matches!(name, SEARCH_TOOLS | DESCRIBE_TOOL | CALL_TOOL) || !self.progressive_now() {
            return None;
        }
        let arguments = &request.params["arguments"];
        Some(match name {
            SEARCH_TOOLS => Ok(Reply::Json(self.search(arguments, view))),
            DESCRIBE_TOOL => Ok(Reply::Json(self.describe(arguments))),
            _ => {
                let Some(target) = arguments["name"].as_str() else {
                    return Some(Ok(Reply::Json(tool_error(
                        "call_tool needs the name of the tool to call",
                    ))));
                };
                if self.host.load().get(target).is_none() {
                    return Some(Ok(Reply::Json(unknown(target))));
                }
                // The call as the client would have made it by name, its `_meta` (progress
                // token, log level, capabilities) kept.
                let mut params = json!({"name": target, "arguments": arguments["arguments"]});
                if let Some(meta) = request.params.get("_meta") {
                    params["_meta"] = meta.clone();
                }
                let mut by_name = request;
                by_name.params = &params;
                self.call(by_name, notifier).await
            }
        })
    }

    fn search(&self, arguments: &Value, view: &crate::access::View<'_>) -> Value {
        let query = arguments["query"].as_str().unwrap_or("").trim();
        if query.is_empty() {
            return tool_error(
                "search_tools needs a query: a few words for what the tool should do",
            );
        }
        let limit = arguments["limit"]
            .as_u64()
            .map_or(DEFAULT_LIMIT, |n| usize::try_from(n).unwrap_or(MAX_LIMIT))
            .clamp(1, MAX_LIMIT);
        let mut found = Vec::new();
        let mut lines = Vec::new();
        // Ranked among every tool, then what the caller may not see is left out (over-asked,
        // so a caller with a narrow view still gets up to `limit` of its own).
        let asked = if view.is_everything() {
            limit
        } else {
            limit.saturating_mul(4).max(50)
        };
        let hits = self.host.search_tools(query, asked);
        let visible = hits
            .iter()
            .filter(|hit| self.tool_allowed(view, &hit.name, &hit.tool))
            .take(limit);
        for hit in visible {
            let (name, tool) = (&*hit.name, &hit.tool.tool);
            let mut entry = json!({ "name": name });
            if let Some(title) = &tool.title {
                entry["title"] = json!(title);
            }
            match &tool.description {
                Some(description) => {
                    entry["description"] = json!(description);
                    lines.push(format!("{name}: {description}"));
                }
                None => lines.push(name.to_owned()),
            }
            found.push(entry);
        }
        let text = if lines.is_empty() {
            format!("No tool matches \"{query}\".")
        } else {
            lines.join("\n")
        };
        json!({"content": [{"type": "text", "text": text}], "structuredContent": {"tools": found}})
    }

    fn describe(&self, arguments: &Value) -> Value {
        let Some(name) = arguments["name"].as_str() else {
            return tool_error("describe_tool needs the name of a tool");
        };
        let merged = self.host.load();
        let Some(definition) = merged.get(name).and_then(|entry| self.listed(name, entry)) else {
            return unknown(name);
        };
        json!({"content": [{"type": "text", "text": definition.to_string()}],
            "structuredContent": definition})
    }
}

/// A result that tells the model what went wrong.
fn tool_error(message: &str) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

fn unknown(name: &str) -> Value {
    tool_error(&format!(
        "No tool is named \"{name}\"; {SEARCH_TOOLS} finds the tools there are."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_costs_a_quarter_of_its_bytes_in_tokens() {
        let mut tool = toolwire::Tool::new("lookup", serde_json::Map::new());
        tool.description = Some("x".repeat(400));
        // 6 (name) + 400 + 2 (`{}`) + 48 = 456 bytes.
        assert_eq!(tokens(&tool), 114);
    }
}

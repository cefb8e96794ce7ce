//! The tool shape both cache benches use.

use serde_json::json;
use toolwire_types::Tool;

/// A realistic tool: a description, three properties, one mirrored into a header.
pub(crate) fn tool(i: usize) -> Tool {
    let mut t = Tool::new(
        format!("tool_{i:05}"),
        json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region", "description": "Target region"},
            "query": {"type": "string", "description": "The SQL query to execute"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000}
        }, "required": ["region", "query"]})
        .as_object()
        .cloned()
        .unwrap_or_default(),
    );
    t.description = Some(format!(
        "Executes a SQL query in a region (tool number {i})"
    ));
    t
}

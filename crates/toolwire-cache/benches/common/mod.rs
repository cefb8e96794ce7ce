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

/// The definitions of real servers' tools (`toolwire-bench/data/catalog.json`: 313 tools of
/// 26 servers from npm and PyPI) as JSON text, repeated under new names up to `n`.
#[allow(dead_code, reason = "each bench uses part of this module")]
pub(crate) fn catalog(n: usize) -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../toolwire-bench/data/catalog.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let catalog: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let tools: Vec<serde_json::Value> = catalog["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["tools"].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(!tools.is_empty(), "the catalog at {path} has tools");
    (0..n)
        .map(|i| {
            let mut tool = tools[i % tools.len()].clone();
            let name = format!("{}_{i:05}", tool["name"].as_str().unwrap_or("tool"));
            tool["name"] = name.into();
            tool.to_string()
        })
        .collect()
}

//! Tool search on the tools of real MCP servers (`data/catalog.json`, made by
//! `cargo xtask catalog` from npm and PyPI): the catalog, its known-item queries and how many
//! of them find their tool. The benchmark's report and the recall test both measure with these.

use toolwire::Tool;
use toolwire::search::ToolIndex;

use crate::known_item_query;

/// The catalog's tools, keyed `server__tool`.
pub fn catalog() -> Result<Vec<(String, Tool)>, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/catalog.json");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let mut tools = Vec::new();
    for server in value["servers"].as_array().ok_or("no servers")? {
        let name = server["server"].as_str().ok_or("a server without a name")?;
        for tool in server["tools"].as_array().ok_or("a server without tools")? {
            let tool: Tool = serde_json::from_value(tool.clone())
                .map_err(|e| format!("a tool of {name}: {e}"))?;
            tools.push((format!("{name}__{}", tool.name), tool));
        }
    }
    Ok(tools)
}

/// Each tool's known-item query ([`known_item_query`]) as (key, query), and how many tools
/// had none.
pub fn known_item_queries(tools: &[(String, Tool)]) -> (Vec<(String, String)>, usize) {
    let mut queries = Vec::new();
    let mut skipped = 0;
    for (key, tool) in tools {
        let server = key.split("__").next().unwrap_or("");
        match tool
            .description
            .as_deref()
            .and_then(|d| known_item_query(server, &tool.name, d))
        {
            Some(query) => queries.push((key.clone(), query)),
            None => skipped += 1,
        }
    }
    (queries, skipped)
}

/// How the queries fared: found first, found in the first five, and those not in the first
/// five.
#[derive(Debug, Default)]
pub struct Recall {
    /// Queries whose tool came first.
    pub at1: usize,
    /// Queries whose tool was in the first five.
    pub at5: usize,
    /// The others, as (key, query).
    pub misses: Vec<(String, String)>,
}

/// Runs each (key, query) on `index` and counts where its tool came.
pub fn recall(index: &ToolIndex<String>, queries: &[(String, String)]) -> Recall {
    let mut out = Recall::default();
    for (key, query) in queries {
        match index.search(query, 5).iter().position(|h| &h.key == key) {
            Some(0) => {
                out.at1 += 1;
                out.at5 += 1;
            }
            Some(_) => out.at5 += 1,
            None => out.misses.push((key.clone(), query.clone())),
        }
    }
    out
}

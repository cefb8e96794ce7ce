//! The tool search's quality, as a test with a floor: on the tools of 26 real MCP servers
//! (`data/catalog.json`, from `cargo xtask catalog`), each known-item query finds its tool in
//! the first five at least 90 % of the time (the report, with the latency at 10,000 tools, is
//! in `docs/benchmarks.md`).

#![allow(clippy::unwrap_used, reason = "tests fail by panicking")]

use serde_json::Value;
use toolwire::Tool;
use toolwire::search::ToolIndex;
use toolwire_bench::known_item_query;

#[test]
fn known_item_queries_find_their_tool_in_the_first_five_at_least_nine_times_in_ten() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/catalog.json");
    let catalog: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut tools = Vec::new();
    for server in catalog["servers"].as_array().unwrap() {
        let name = server["server"].as_str().unwrap();
        for tool in server["tools"].as_array().unwrap() {
            let tool: Tool = serde_json::from_value(tool.clone()).unwrap();
            tools.push((name.to_owned(), tool));
        }
    }
    assert!(tools.len() >= 300, "{} tools", tools.len());
    let index = ToolIndex::new(tools.iter().map(|(s, t)| (format!("{s}__{}", t.name), t)));
    let (mut asked, mut found) = (0usize, 0usize);
    for (server, tool) in &tools {
        let Some(query) = tool
            .description
            .as_deref()
            .and_then(|d| known_item_query(server, &tool.name, d))
        else {
            continue;
        };
        asked += 1;
        let key = format!("{server}__{}", tool.name);
        if index.search(&query, 5).iter().any(|h| h.key == key) {
            found += 1;
        }
    }
    let recall = found as f64 / asked as f64;
    assert!(asked >= 200, "{asked} queries");
    assert!(recall >= 0.9, "recall@5 {recall:.3} ({found} of {asked})");
}

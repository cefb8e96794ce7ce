//! The tool search's quality, as a test with a floor: on the tools of 26 real MCP servers
//! (`data/catalog.json`, from `cargo xtask catalog`), each known-item query finds its tool in
//! the first five at least 90 % of the time (the report, with the latency at 10,000 tools, is
//! in `docs/benchmarks.md`).

#![allow(clippy::unwrap_used, reason = "tests fail by panicking")]

use toolwire::search::ToolIndex;
use toolwire_bench::search::{catalog, known_item_queries, recall};

#[test]
fn known_item_queries_find_their_tool_in_the_first_five_at_least_nine_times_in_ten() {
    let tools = catalog().unwrap();
    assert!(tools.len() >= 300, "{} tools", tools.len());
    let index = ToolIndex::new(tools.iter().map(|(k, t)| (k.clone(), t)));
    let (queries, _) = known_item_queries(&tools);
    let asked = queries.len();
    let found = recall(&index, &queries).at5;
    let recall = found as f64 / asked as f64;
    assert!(asked >= 200, "{asked} queries");
    assert!(recall >= 0.9, "recall@5 {recall:.3} ({found} of {asked})");
}

//! Tool search, measured on the tools of real MCP servers (`data/catalog.json`, made by
//! `cargo xtask catalog` from npm and PyPI): how often a known-item query finds its tool in the
//! first five (recall@5; target ≥ 0.9), and how long a search takes over 10,000 tools (p99;
//! target ≤ 1 ms).

use std::time::{Duration, Instant};

use toolwire::Tool;
use toolwire::search::ToolIndex;
use toolwire_bench::percentile;
use toolwire_bench::search::{catalog, known_item_queries, recall};

use super::Error;

/// What the search section of the report says.
pub(crate) struct SearchReport {
    tools: usize,
    servers: usize,
    queries: usize,
    skipped: usize,
    recall_at_1: f64,
    recall_at_5: f64,
    build_10k: Duration,
    p50: Duration,
    p99: Duration,
    searches: usize,
    misses: Vec<String>,
}

pub(crate) fn measure() -> Result<SearchReport, Error> {
    let tools = catalog()?;
    let servers = {
        let mut s: Vec<&str> = tools
            .iter()
            .filter_map(|(k, _)| k.split("__").next())
            .collect();
        s.dedup();
        s.len()
    };
    let index = ToolIndex::new(tools.iter().map(|(k, t)| (k.clone(), t)));
    let (queries, skipped) = known_item_queries(&tools);
    let found = recall(&index, &queries);
    // 10,000 tools: the catalog again and again under other server names (identical texts:
    // every query matches ~32 times as many tools as in the real catalog, a pessimistic load).
    let copies = 10_000usize.div_ceil(tools.len());
    let large: Vec<(String, &Tool)> = (0..copies)
        .flat_map(|c| tools.iter().map(move |(k, t)| (format!("c{c}_{k}"), t)))
        .take(10_000)
        .collect();
    let started = Instant::now();
    let big = ToolIndex::new(large.iter().map(|(k, t)| (k.clone(), *t)));
    let build_10k = started.elapsed();
    let mut latencies = Vec::new();
    for _ in 0..5 {
        for (_, query) in &queries {
            let t = Instant::now();
            let found = big.search(query, 5);
            latencies.push(t.elapsed());
            std::hint::black_box(found);
        }
    }
    latencies.sort_unstable();
    let n = queries.len().max(1) as f64;
    Ok(SearchReport {
        tools: tools.len(),
        servers,
        queries: queries.len(),
        skipped,
        recall_at_1: found.at1 as f64 / n,
        recall_at_5: found.at5 as f64 / n,
        build_10k,
        p50: percentile(&latencies, 50.0),
        p99: percentile(&latencies, 99.0),
        searches: latencies.len(),
        misses: found
            .misses
            .iter()
            .map(|(key, query)| format!("`{key}` ← \"{query}\""))
            .collect(),
    })
}

impl SearchReport {
    /// The report's section, in Markdown.
    pub(crate) fn markdown(&self) -> String {
        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
        let mut text = format!(
            "### Tool search\n\n\
             `Client::search_tools` / `Host::search_tools` (BM25, `toolwire-search`) on the \
             {tools} tools of {servers} real MCP servers from npm and PyPI \
             (`crates/toolwire-bench/data/catalog.json`, made by `cargo xtask catalog`), keyed \
             `server__tool`. Each tool's known-item query is the first sentence of its \
             description without the words of its own name and server, at most 10 words \
             ({queries} queries; {skipped} tools had fewer than 3 words left). Latency over \
             10,000 tools (the catalog repeated under other server names: identical texts, so \
             each query matches ~32 times as many tools as in the real catalog), {searches} \
             searches.\n\n\
             | measure | result | target |\n|---|---:|---:|\n\
             | recall@5 | {r5:.3} | ≥ 0.9 |\n\
             | recall@1 | {r1:.3} | |\n\
             | search p50 at 10,000 tools | {p50} | |\n\
             | search p99 at 10,000 tools | {p99} | ≤ 1 ms |\n\
             | index build, 10,000 tools | {build} | |\n",
            tools = self.tools,
            servers = self.servers,
            queries = self.queries,
            skipped = self.skipped,
            searches = self.searches,
            r5 = self.recall_at_5,
            r1 = self.recall_at_1,
            p50 = ms(self.p50),
            p99 = ms(self.p99),
            build = ms(self.build_10k),
        );
        if !self.misses.is_empty() {
            text.push_str(&format!(
                "\nQueries whose tool was not in the first five ({}):\n\n",
                self.misses.len()
            ));
            for miss in &self.misses {
                text.push_str(&format!("- {miss}\n"));
            }
        }
        text
    }
}

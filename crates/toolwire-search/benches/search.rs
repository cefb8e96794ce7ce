//! Search latency over a large synthetic catalog (the quality and the p99 at 10,000 tools are
//! measured by `cargo xtask bench` on real servers' tools; this guards the hot path).

#![allow(clippy::unwrap_used, reason = "a bench fails by panicking")]

use criterion::{Criterion, criterion_group, criterion_main};
use toolwire_search::ToolIndex;
use toolwire_types::Tool;

const VERBS: &[&str] = &[
    "create", "list", "get", "update", "delete", "search", "read", "send",
];
const NOUNS: &[&str] = &[
    "issue",
    "file",
    "message",
    "channel",
    "repository",
    "user",
    "record",
    "invoice",
    "page",
    "event",
    "ticket",
    "branch",
];

fn catalog(n: usize) -> Vec<Tool> {
    (0..n)
        .map(|i| {
            let verb = VERBS[i % VERBS.len()];
            let noun = NOUNS[(i / VERBS.len()) % NOUNS.len()];
            let mut tool = Tool::new(
                format!("server{}__{verb}_{noun}_{i}", i % 50),
                Default::default(),
            );
            tool.description = Some(format!("{verb} a {noun} in service number {i}"));
            tool
        })
        .collect()
}

fn search(c: &mut Criterion) {
    let tools = catalog(10_000);
    let index = ToolIndex::new(tools.iter().map(|t| (t.name.clone(), t)));
    assert!(!index.search("delete an invoice", 5).is_empty());
    c.bench_function("search 10k tools, k=5", |b| {
        b.iter(|| index.search("delete an invoice", 5))
    });
}

criterion_group!(benches, search);
criterion_main!(benches);

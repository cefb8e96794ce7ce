//! Memory per cached tool: live heap growth when 10,000 decoded tools move into the cache,
//! measured with a counting allocator (kept out of the timing benches, which it would slow).

#![allow(
    missing_docs,
    clippy::print_stdout,
    clippy::expect_used,
    reason = "bench harness reports on stdout"
)]

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use toolwire_cache::ToolCache;
use toolwire_types::Tool;

mod common;
use common::{catalog, tool};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Live heap bytes now.
fn live() -> isize {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as isize - stats.bytes_deallocated as isize
}

/// Live heap per tool once `tools` (decoded, `N` of them) are in a cache: (total, of which
/// the decoded definitions).
fn measure(make: impl FnOnce() -> Vec<Tool>) -> (isize, isize, usize) {
    let before = live();
    let tools = make();
    let n = tools.len();
    let decoded = live() - before;
    let cache = ToolCache::default();
    let mut listing = cache.begin_listing();
    listing.add_page(tools);
    cache.commit_listing(listing);
    let total = live() - before;
    assert_eq!(cache.load().len(), n);
    (total / n as isize, decoded / n as isize, n)
}

fn main() {
    const N: usize = 10_000;
    let (total, decoded, n) = measure(|| (0..N).map(tool).collect());
    println!(
        "memory: {total} bytes per cached tool ({decoded} of them the decoded definition; the rest plan, entry, map), {n} tools"
    );
    let (total, decoded, n) = measure(|| {
        catalog(N)
            .iter()
            .map(|text| serde_json::from_str(text).expect("a catalog tool decodes"))
            .collect()
    });
    println!(
        "memory, real servers' tools: {total} bytes per cached tool ({decoded} of them the decoded definition), {n} tools"
    );
}

//! Memory per cached tool: live heap growth when 10,000 decoded tools move into the cache,
//! measured with a counting allocator (kept out of the timing benches, which it would slow).

#![allow(
    missing_docs,
    clippy::print_stdout,
    reason = "bench harness reports on stdout"
)]

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use toolwire_cache::ToolCache;
use toolwire_types::Tool;

mod common;
use common::tool;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Live heap bytes now.
fn live() -> isize {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as isize - stats.bytes_deallocated as isize
}

fn main() {
    const N: usize = 10_000;
    let before = live();
    let tools: Vec<Tool> = (0..N).map(tool).collect();
    let decoded = live() - before;
    let cache = ToolCache::default();
    let mut listing = cache.begin_listing();
    listing.add_page(tools);
    cache.commit_listing(listing);
    let total = live() - before;
    println!(
        "memory: {} bytes per cached tool ({} of them the decoded definition; the rest plan, entry, map), {} tools",
        total / N as isize,
        decoded / N as isize,
        cache.load().len()
    );
}

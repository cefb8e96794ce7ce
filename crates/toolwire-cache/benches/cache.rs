//! Criterion benches for the tool cache (targets from issue #4: lookup + header plan fetch
//! ≤ 50 ns and flat from 1 to 2 threads; ingesting a 10,000-tool listing ≤ 20 ms; memory per
//! cached tool reported (in `cache_memory`); an `RwLock<HashMap>` baseline in the same run).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::print_stderr,
    reason = "bench harness"
)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::RwLock;

use criterion::{Criterion, criterion_group, criterion_main};
use toolwire_cache::ToolCache;
use toolwire_headers::HeaderPlan;
use toolwire_test_support::threads::per_thread;
use toolwire_types::Tool;

mod common;
use common::{catalog, tool};

fn bench(c: &mut Criterion) {
    let cache = ToolCache::default();
    let mut listing = cache.begin_listing();
    listing.add_page((0..100).map(tool));
    cache.commit_listing(listing);
    // The baseline uses the cache's hasher, so the comparison is about synchronisation only.
    let baseline: RwLock<HashMap<String, HeaderPlan, foldhash::fast::RandomState>> = RwLock::new(
        (0..100)
            .map(|i| {
                (
                    format!("tool_{i:05}"),
                    HeaderPlan::for_tool(&tool(i)).unwrap(),
                )
            })
            .collect(),
    );

    for threads in [1, 2] {
        c.bench_function(
            &format!("lookup + plan: ToolCache ({threads} thread)"),
            |b| {
                b.iter_custom(|iters| {
                    per_thread(threads, iters, || {
                        let snapshot = cache.load();
                        black_box(
                            snapshot
                                .plan(black_box("tool_00042"))
                                .unwrap()
                                .params()
                                .len(),
                        );
                    })
                })
            },
        );
        c.bench_function(
            &format!("lookup + plan: RwLock<HashMap> ({threads} thread)"),
            |b| {
                b.iter_custom(|iters| {
                    per_thread(threads, iters, || {
                        let map = baseline.read().unwrap();
                        black_box(map.get(black_box("tool_00042")).unwrap().params().len());
                    })
                })
            },
        );
    }

    let ten_thousand: Vec<Tool> = (0..10_000).map(tool).collect();
    let mut group = c.benchmark_group("ingest");
    group.sample_size(10);
    group.bench_function("commit a 10,000-tool listing", |b| {
        b.iter_batched(
            || (ToolCache::default(), ten_thousand.clone()),
            |(cache, tools)| {
                let mut listing = cache.begin_listing();
                listing.add_page(tools);
                cache.commit_listing(listing);
                cache
            },
            criterion::BatchSize::LargeInput,
        )
    });
    // As a client ingests a listing: the page's text decoded, then committed. Real servers'
    // definitions, most without `x-mcp-header`.
    let page = format!("{{\"tools\":[{}]}}", catalog(10_000).join(","));
    group.bench_function("decode a 10,000-tool page of real tools", |b| {
        b.iter_batched(
            || (),
            |()| serde_json::from_str::<toolwire_types::ListToolsResult>(&page).unwrap(),
            criterion::BatchSize::LargeInput,
        )
    });
    group.bench_function("decode and commit a 10,000-tool page of real tools", |b| {
        b.iter_batched(
            ToolCache::default,
            |cache| {
                let page: toolwire_types::ListToolsResult = serde_json::from_str(&page).unwrap();
                let mut listing = cache.begin_listing();
                listing.add_page(page.tools);
                cache.commit_listing(listing);
                cache
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

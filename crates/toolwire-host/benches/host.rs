//! The host's read path and its merge, against its targets: 50 servers × 200 tools in one
//! merged snapshot; a lookup by qualified name on 1 and 2 threads (flat: readers share
//! nothing), and the time from one server's tool change to the merged snapshot that shows it
//! (≤ 2 ms). The servers are one scripted HTTP peer on loopback, each entry its own client.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    reason = "bench harness"
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolwire::{Client, ProtocolMode, ProtocolVersion, Tool};
use toolwire_host::{Host, ServerState, ServersConfig};
use toolwire_test_support::http::{HttpPeer, Reply};
use toolwire_test_support::threads::per_thread;

const SERVERS: usize = 50;
const TOOLS: usize = 200;

/// A modern server with `TOOLS` tools and no list changes of its own.
fn answer(body: &[u8]) -> Reply {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let result = match request["method"].as_str() {
        Some("server/discover") => json!({"supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "bench", "version": "1"}}}),
        Some("tools/list") => {
            let tools: Vec<Value> = (0..TOOLS)
                .map(|i| {
                    json!({"name": format!("tool_{i:03}"),
                    "inputSchema": {"type": "object", "properties": {
                        "region": {"type": "string", "x-mcp-header": "Region"}}}})
                })
                .collect();
            json!({"tools": tools})
        }
        _ => return Reply::status(202),
    };
    let message = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
    Reply::json(200, message.to_string())
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_peer, host) = runtime.block_on(async {
        let peer = HttpPeer::start(|req| answer(&req.body)).await;
        let servers: serde_json::Map<String, Value> = (0..SERVERS)
            .map(|i| {
                (
                    format!("s{i:02}"),
                    json!({"type": "http", "url": peer.url()}),
                )
            })
            .collect();
        let config =
            ServersConfig::parse(&json!({"mcpServers": servers}).to_string(), |_| None).unwrap();
        let client =
            Client::builder("bench", "0").mode(ProtocolMode::Pinned(ProtocolVersion::V2026_07_28));
        let host = Host::builder(client).start(&config).unwrap();
        host.settled(Duration::from_secs(60)).await;
        (peer, host)
    });
    // The set-up is the thing measured: every server up, every tool merged.
    for name in host.servers() {
        assert!(
            matches!(host.state(&name), Some(ServerState::Ready { tools, .. }) if tools == TOOLS),
            "{name}: {:?}",
            host.state(&name)
        );
    }
    assert_eq!(host.load().len(), SERVERS * TOOLS);
    let names: Vec<String> = (0..64)
        .map(|i| format!("s{:02}__tool_{:03}", i % SERVERS, (i * 37) % TOOLS))
        .collect();

    let mut group = c.benchmark_group("host");
    for threads in [1, 2] {
        group.bench_function(format!("lookup/{threads}-thread"), |b| {
            b.iter_custom(|iters| {
                per_thread(threads, iters, || {
                    let tools = host.load();
                    for name in &names[..8] {
                        black_box(tools.get(black_box(name)).is_some());
                    }
                }) / 8
            })
        });
    }
    // One server's tools change (a known tool whose definition alternates between two, so
    // the server keeps its size): until the merged snapshot shows it.
    // Criterion calls the routine more than once: the turn outlives each call, so every add
    // changes the definition (an unchanged one would announce nothing).
    let versions: Vec<Tool> = ["a", "b"]
        .iter()
        .map(|d| {
            serde_json::from_value(
                json!({"name": "extra", "description": d, "inputSchema": {"type": "object"}}),
            )
            .unwrap()
        })
        .collect();
    let mut turn = 0usize;
    group.bench_function("one_server_change_to_merged_snapshot", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let mut changes = host.subscribe();
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    turn += 1;
                    let t0 = Instant::now();
                    host.add_known_tools("s07", [versions[turn % 2].clone()])
                        .unwrap();
                    loop {
                        let change = changes.recv().await.unwrap();
                        if change.server.as_ref() == "s07" {
                            break;
                        }
                    }
                    total += t0.elapsed();
                }
                total
            })
        })
    });
    group.finish();
    runtime.block_on(host.shutdown());
}

criterion_group!(benches, bench);
criterion_main!(benches);

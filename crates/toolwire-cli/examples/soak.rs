//! Memory over a long run: `cargo run --release -p toolwire-cli --example soak [CALLS]`.
//!
//! 64 tasks call `echo` through one client against the reference server in this process
//! (modern era, JSON answers, every 300th POST answered 503 and retried), checking every
//! answer, and print the resident set size every tenth of the run. Flat is the goal: a leak
//! per call shows as steady growth. Linux only (reads `/proc/self/status`).

#![allow(clippy::print_stdout, reason = "an example prints what it measures")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use toolwire::{Client, HttpTransport, RetryPolicy};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let mut options = toolwire_refserver::Options::default();
    options.server.framing = toolwire_refserver::Framing::Json;
    options.faults.fail_503_every = Some(300);
    let server =
        toolwire_refserver::serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), options).await?;
    let client = Client::builder("soak", "0").connect_http(
        HttpTransport::builder(server.url()).retry_policy(RetryPolicy::new(
            5,
            Duration::from_millis(1),
            Duration::from_millis(20),
        )),
    )?;
    client.list_tools().await?;
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    println!("calls,rss_kib,seconds");
    println!("0,{},0.0", rss_kib());
    let step = (total / 10).max(1);
    let tasks: Vec<_> = (0..64)
        .map(|t| {
            let client = client.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let mut i = 0;
                loop {
                    let n = done.fetch_add(1, Ordering::SeqCst);
                    if n >= total {
                        return Ok::<_, toolwire::Error>(());
                    }
                    let text = format!("task {t} call {i}");
                    let r = client.call_tool("echo", json!({ "text": text })).await?;
                    assert_eq!(r.content[0].as_text(), Some(text.as_str()));
                    if (n + 1).is_multiple_of(step) {
                        println!(
                            "{},{},{:.1}",
                            n + 1,
                            rss_kib(),
                            started.elapsed().as_secs_f64()
                        );
                    }
                    i += 1;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    client.close().await;
    Ok(())
}

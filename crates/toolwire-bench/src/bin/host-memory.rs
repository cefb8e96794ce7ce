//! `host-memory FILE`: a [`toolwire_host::Host`] over the servers of the `mcpServers` file
//! `FILE`, in a process that does nothing else, for `cargo xtask bench`'s host memory
//! measurement. Once every server has settled (listed or failed), it prints one JSON line:
//! `{"tools": N, "rss_kib": R, "peak_kib": P}` (the merged tools, the resident set then, and
//! the peak so far; either memory figure `null` where the platform cannot say), and exits.
//!
//! A process of its own, so the figures are the host's and its client's alone: the bench
//! harness around the other measurements holds rmcp, the report and its own allocations.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a measuring tool: its report is its output"
)]

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use toolwire::Client;
use toolwire_host::{Host, ServersConfig};

fn main() -> ExitCode {
    let Some(file) = std::env::args_os().nth(1) else {
        eprintln!("usage: host-memory FILE (an mcpServers file)");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("host-memory: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let config = ServersConfig::load(&file)?;
        let host = Host::builder(Client::builder("toolwire-bench", env!("CARGO_PKG_VERSION")))
            .start(&config)?;
        host.settled(Duration::from_secs(120)).await;
        let tools = host.load().len();
        let (rss, peak) = toolwire_bench::resident(std::process::id());
        let peak = peak.or_else(|| toolwire_bench::usage().ok().map(|u| u.peak_rss_kib));
        host.shutdown().await;
        Ok::<_, Box<dyn std::error::Error>>(
            json!({"tools": tools, "rss_kib": rss, "peak_kib": peak}),
        )
    });
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("host-memory: {e}");
            ExitCode::FAILURE
        }
    }
}

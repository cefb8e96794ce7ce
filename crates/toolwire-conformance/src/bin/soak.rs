//! `toolwire-soak-client URL CALLERS CALLS RATE TOOL...`: the callers of `cargo xtask soak`.
//!
//! `CALLERS` clients of the library call through `URL` (a gateway fleet behind a balancer),
//! half of them in the legacy era (2025-11-25, a session each) and half in 2026-07-28, until
//! `CALLS` calls were made in all, at about `RATE` calls a second together, each call to the
//! next of the `TOOL`s in turn. Every call carries its own id (`CALLER-N`) as the `id`
//! argument of a counting tool (the reference server's `tally`), so the driver can compare
//! what each caller was told with what each upstream recorded as run.
//!
//! While it runs it prints `progress N` on stderr each time another 500 calls are done (the
//! driver samples the replicas' memory at those marks); at the end one JSON object on stdout:
//! the calls made, the ids answered correctly (`ok`), every other call with its class and
//! error (`failed`), the latency percentiles of the answered calls per tool, and each call's start and
//! end in milliseconds since the start for the failures (so the driver can match them with
//! the faults it injected). A call that hangs is cut after 30 s and counted `hung`.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the driver reads the report from stdout and progress from stderr"
)]

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire::{
    Client, ConnectionError, Error, HttpTransport, ProtocolMode, ProtocolVersion, ReconnectPolicy,
};

/// How long one call may take before it counts as hung.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// How often progress is printed, in calls.
const PROGRESS_EVERY: usize = 500;

/// What became of one call.
struct Outcome {
    id: String,
    tool: String,
    era: &'static str,
    /// `ok`, or the failure's class.
    class: &'static str,
    error: String,
    started_ms: u128,
    ended_ms: u128,
    latency_us: u128,
}

/// Sorts a failure into what the caller was told: whether the call may have run.
fn classify(error: &Error) -> &'static str {
    match error {
        Error::Connection(ConnectionError::Lost {
            may_have_run: false,
            ..
        }) => "never-sent",
        Error::Connection(ConnectionError::Lost { .. }) => "may-have-run",
        // An HTTP status and no JSON-RPC answer: a balancer whose replica died under the
        // request (502) had sent it on.
        Error::Connection(ConnectionError::Undelivered(_)) => "undelivered",
        Error::Connection(_) => "connection",
        Error::Server(_) => "server-error",
        Error::Timeout(_) => "timeout",
        Error::Closed => "closed",
        _ => "other",
    }
}

/// The error and its causes on one line.
fn chain(error: &Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn client(url: &str, era: &'static str) -> Result<Client, Error> {
    let version = if era == "legacy" {
        ProtocolVersion::LATEST_LEGACY
    } else {
        ProtocolVersion::V2026_07_28
    };
    Client::builder("toolwire-soak", env!("CARGO_PKG_VERSION"))
        .mode(ProtocolMode::Pinned(version))
        .reconnect(ReconnectPolicy::default())
        .connect_http(HttpTransport::builder(url))
}

/// What every caller shares.
struct Shared {
    url: String,
    tools: Vec<String>,
    callers: usize,
    /// The next call's turn, from 0.
    next: AtomicUsize,
    /// Calls to make in all.
    total: usize,
    /// Between two calls of one caller.
    period: Duration,
    start: Instant,
}

/// One caller: its calls, each at its turn of the shared pace.
async fn caller(n: usize, shared: Arc<Shared>) -> Vec<Outcome> {
    let Shared {
        url,
        tools,
        callers,
        next,
        total,
        period,
        start,
    } = &*shared;
    let (callers, total, period, start) = (*callers, *total, *period, *start);
    let era = if n.is_multiple_of(2) {
        "legacy"
    } else {
        "modern"
    };
    let mut outcomes = Vec::new();
    let client = match client(url, era) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("caller {n}: {}", chain(&e));
            return outcomes;
        }
    };
    // The callers' turns spread over the period, not all at its start.
    let offset = period.mul_f64(n as f64 / f64::from(u32::try_from(callers).unwrap_or(u32::MAX)));
    let mut pace = tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut own = 0usize;
    loop {
        pace.tick().await;
        let turn = next.fetch_add(1, Ordering::SeqCst);
        if turn >= total {
            break;
        }
        own += 1;
        let id = format!("{n}-{own}");
        let tool = &tools[turn % tools.len()];
        let started = Instant::now();
        let answer =
            tokio::time::timeout(CALL_LIMIT, client.call_tool(tool, json!({"id": id}))).await;
        let latency = started.elapsed();
        let (class, error) = match answer {
            Err(_) => ("hung", format!("no answer in {CALL_LIMIT:?}")),
            Ok(Ok(result)) if result.is_error() => (
                "tool-error",
                result
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .unwrap_or("")
                    .to_owned(),
            ),
            Ok(Ok(result)) => match result.content.first().and_then(|c| c.as_text()) {
                Some(said) if said == id => ("ok", String::new()),
                said => ("wrong-answer", format!("answered {said:?}")),
            },
            Ok(Err(e)) => (classify(&e), chain(&e)),
        };
        outcomes.push(Outcome {
            id,
            tool: tool.clone(),
            era,
            class,
            error,
            started_ms: started.duration_since(start).as_millis(),
            ended_ms: start.elapsed().as_millis(),
            latency_us: latency.as_micros(),
        });
        if (turn + 1).is_multiple_of(PROGRESS_EVERY) {
            eprintln!("progress {}", turn + 1);
        }
    }
    client.close().await;
    outcomes
}

fn percentile(sorted: &[u128], p: f64) -> u128 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, callers, calls, rate, tools @ ..] = &args[..] else {
        eprintln!("usage: toolwire-soak-client URL CALLERS CALLS RATE TOOL...");
        return ExitCode::from(2);
    };
    let (Ok(callers), Ok(calls), Ok(rate)) = (
        callers.parse::<usize>(),
        calls.parse::<usize>(),
        rate.parse::<f64>(),
    ) else {
        eprintln!("CALLERS and CALLS are counts, RATE calls a second");
        return ExitCode::from(2);
    };
    if callers == 0 || tools.is_empty() || !rate.is_finite() || rate <= 0.0 {
        eprintln!("at least one caller, one tool and a positive rate");
        return ExitCode::from(2);
    }
    let shared = Arc::new(Shared {
        url: url.clone(),
        tools: tools.to_vec(),
        callers,
        next: AtomicUsize::new(0),
        total: calls,
        period: Duration::from_secs_f64(callers as f64 / rate),
        start: Instant::now(),
    });
    let running: Vec<_> = (0..callers)
        .map(|n| tokio::spawn(caller(n, shared.clone())))
        .collect();
    let mut outcomes = Vec::new();
    for task in running {
        match task.await {
            Ok(done) => outcomes.extend(done),
            Err(e) => eprintln!("a caller failed: {e}"),
        }
    }
    // Latency of the answered calls, per tool.
    let mut latency = serde_json::Map::new();
    for tool in &shared.tools {
        let mut of_tool: Vec<u128> = outcomes
            .iter()
            .filter(|o| o.class == "ok" && &o.tool == tool)
            .map(|o| o.latency_us)
            .collect();
        of_tool.sort_unstable();
        latency.insert(
            tool.clone(),
            json!({"p50_us": percentile(&of_tool, 0.50), "p99_us": percentile(&of_tool, 0.99),
                "max_us": of_tool.last().copied().unwrap_or(0)}),
        );
    }
    let ok: Vec<Value> = outcomes
        .iter()
        .filter(|o| o.class == "ok")
        .map(|o| json!([o.id, o.tool]))
        .collect();
    let failed: Vec<Value> = outcomes
        .iter()
        .filter(|o| o.class != "ok")
        .map(|o| {
            json!({"id": o.id, "tool": o.tool, "era": o.era, "class": o.class, "error": o.error,
                "started_ms": o.started_ms, "ended_ms": o.ended_ms})
        })
        .collect();
    let report = json!({
        "calls": outcomes.len(),
        "elapsed_ms": shared.start.elapsed().as_millis(),
        "ok": ok,
        "failed": failed,
        "latency": latency,
    });
    println!("{report}");
    ExitCode::SUCCESS
}

//! The report of a run: printed, and written between its markers in `docs/benchmarks.md`.

use std::path::Path;
use std::process::Command;

use toolwire_bench::{Measurement, gateway_table, ratios, splice, table, targets};

use super::{Error, search_quality};

/// Prints the report of the runs `best` (the faster of each pair) with the gateway's memory
/// paragraph, and writes it into the file `out` when given.
pub(super) fn write(
    best: &[Measurement],
    memory: &str,
    out: Option<&String>,
    quick: bool,
) -> Result<(), Error> {
    let search = search_quality::measure()?.markdown();
    let report = format!(
        "## Results\n\n{}\n## Ratios\n\n{}\n## The gateway\n\n{}\n## The gateway's targets\n\n{}\n{memory}\n{search}",
        table(best),
        ratios(best),
        gateway_table(best),
        targets(best)
    );
    println!("{report}");
    if let Some(out) = out {
        let section = format!(
            "## Toolwire, rmcp and the floor (`cargo xtask bench`)\n\n\
             The latest run of `{}`, on {}. Toolwire {}, rmcp {} (reqwest {}), hyper {} for the \
             floor. The HTTP cases run against Toolwire's reference server (`toolwire serve \
             --http`, in its own process; JSON answers, and for `http-stall` SSE answers with \
             Nagle's algorithm on), and the `rmcp-server-*` cases against rmcp {}'s Streamable \
             HTTP server (stateless, JSON answers, SEP-2243 headers checked; in its own process); \
             stdio runs `toolwire serve --stdio`, and `rmcp-server-stdio-seq` rmcp's stdio \
             server (`stdio_pipes`). The `-1cpu` cases run the client and every server it \
             reaches on one core: on this shared virtual machine a wake-up across cores costs \
             tens of microseconds and falls on one side of a call or the other by chance; on \
             one core a call's latency is the work of both sides. `floor-tokio` is the stdio \
             floor's pipe driven from a tokio task: what the runtime alone adds. Each (case, client) pair \
             runs twice in a process of its own, interleaved; the table keeps the faster run. \
             Latencies are per call; CPU is the client process's user+system time over the \
             measured calls; peak RSS is the client process's, setup included. How the cases and \
             clients are built: `crates/toolwire-bench/benches/compare.rs`. The targets, what the \
             profiles showed and what remains: [`performance.md`](performance.md).\n\n\
             ### Results\n\n{}\n### Ratios\n\n{}\n### The gateway\n\n`toolwire gateway` \
             (JSON answers, in its own process, `--threads 1`), `mcp-proxy` 0.6 (crates.io; \
             `TOKIO_WORKER_THREADS=1`; the legacy era only, so its cases and their direct runs \
             are 2025-11-25 ones), IBM's ContextForge (`mcp-contextforge-gateway` from PyPI, \
             the release `cargo xtask bench` pins, with its defaults: SQLite, an admin token, \
             Python's runtime; legacy cases, a tenth of the calls; its rows are missing when it \
             could not be installed or started) and the floor proxy (`floor-proxy-*`: a bare hyper reverse \
             proxy on one thread that forwards each request's bytes and reads nothing of MCP, \
             the least a second HTTP hop costs on this machine) in front of the same reference \
             server as the `http-*` cases, called by Toolwire's client; \"direct\" is that \
             client on the server itself in the same run. The gateways run one thread each \
             because the client, the gateway and the server share two cores here. `gateway-jwt-modern-seq` is \
             the gateway requiring an OAuth access token (`--auth-issuer`; a JWT signed ES256, \
             the issuer's key and the verified token cached after the first call), its \
             \"direct\" the same gateway without authentication (`gateway-modern-seq`); \
             `gateway-controlled-modern-seq` is the gateway with traffic control set on its \
             upstream and never tripping (a concurrency cap of 256 with its queue, a circuit \
             breaker), its \"direct\" the same gateway without it. \
             `nginx-*` is Debian's nginx (one worker, a keep-alive pool upstream, buffering off, \
             no access log) in front of the same server: the reverse proxy users put in front of \
             MCP servers. The `*-rmcp-*` cases put the gateway and nginx in front of rmcp's \
             server instead, their \"direct\" the `rmcp-server-*` runs.\n\n{}\n\
             ### The gateway's targets\n\nEach checked in this run: with 64 callers the \
             gateway's throughput against nginx's in front of the same server; one call at a \
             time the p50 each adds over the direct call; on one core the p50 each adds against \
             the floor proxy's.\n\n{}\n{memory}\n{search}",
            if quick {
                "cargo xtask bench --quick"
            } else {
                "cargo xtask bench"
            },
            machine(),
            env!("CARGO_PKG_VERSION"),
            locked_version("rmcp"),
            locked_version("reqwest"),
            locked_version("hyper"),
            locked_version("rmcp"),
            table(best),
            ratios(best),
            gateway_table(best),
            targets(best),
        );
        let doc = std::fs::read_to_string(out).unwrap_or_default();
        std::fs::write(out, splice(&doc, &section))?;
    }
    Ok(())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU".to_owned(), |s| s.trim().to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!("{cores} cores ({cpu}), Linux, {rustc}")
}

/// The version of `name` in the workspace's Cargo.lock.
fn locked_version(name: &str) -> String {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l == format!("name = \"{name}\"")
            && let Some(v) = lines.next().and_then(|v| v.strip_prefix("version = "))
        {
            return v.trim_matches('"').to_owned();
        }
    }
    "?".to_owned()
}

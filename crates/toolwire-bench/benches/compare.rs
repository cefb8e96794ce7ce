//! `cargo xtask bench`: Toolwire against rmcp and the physical floor, on loopback, in one run.
//!
//! ```text
//! cargo bench -p toolwire-bench --bench compare -- --toolwire target/release/toolwire [--out FILE] [--quick]
//! cargo bench -p toolwire-bench --bench compare -- --search   # the tool search section alone
//! ```
//!
//! The parent starts the reference server (`toolwire serve`) as separate processes, then runs
//! every (case, client) pair in a child process of its own (this binary again, with `--run`),
//! twice, interleaved, and keeps the faster of the two runs. Each child measures per-call
//! latency, wall time, its CPU time and its peak RSS, and prints one JSON line.
//!
//! Clients:
//! - `floor`: a bare hyper keep-alive client POSTing pre-built bytes of a valid `tools/call`
//!   (with the SEP-2243 headers in 2026-07-28) and reading the whole body; over stdio, a
//!   blocking newline-JSON pipe.
//! - `floor-tokio` (stdio): the same line written and read back through tokio's child pipes,
//!   from a spawned task as the clients' calls are: what the runtime alone adds to the pipe.
//! - `toolwire`: the public `toolwire` API with its defaults.
//! - `rmcp-default`: rmcp's Streamable HTTP client as `from_uri` builds it (reqwest with idle
//!   pooling turned off: a new connection per call). Over stdio, `rmcp`.
//! - `rmcp-keepalive`: the same with a default `reqwest::Client` (connections reused).
//!
//! Servers: Toolwire's reference server (`toolwire serve`) for every case, and for the
//! sequential HTTP cases also rmcp's Streamable HTTP server, stateless with JSON answers (this
//! binary again, with `--serve-rmcp`; it checks the SEP-2243 headers against the body); over
//! stdio also rmcp's stdio server (`--serve-rmcp-stdio`).
//!
//! Cases:
//! - `http-legacy-seq`: sequential calls in a 2025-11-25 session (JSON answers);
//! - `http-modern-seq`: sequential 2026-07-28 calls with `Mcp-Method`, `Mcp-Name` and
//!   `Mcp-Param-Region` (JSON answers);
//! - `rmcp-server-legacy-seq`, `rmcp-server-modern-seq`: the same two against rmcp's server
//!   (2025-11-25 stateless: no session);
//! - `http-concurrent-64`: 64 callers sharing one client, 2026-07-28;
//! - `stdio-seq`: sequential 2026-07-28 calls over a child's stdin/stdout;
//!   `rmcp-server-stdio-seq` the same with rmcp's server as the child;
//! - `…-1cpu` (stdio, sequential HTTP, through the gateway and the floor proxy): the same with
//!   the client and every server it reaches confined to one core. On this shared virtual
//!   machine a wake-up across cores costs tens of microseconds and falls on one side or the
//!   other by chance, so the other cases move by ±30 % between runs; on one core a call is the
//!   work of both sides, and runs agree to a microsecond.
//! - `http-stall`: a 2025-11-25 session whose server frames each answer as SSE in several
//!   writes with Nagle's algorithm on (`toolwire serve --nagle`): a client that waits for the
//!   body's end stalls on delayed ACKs.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark reports on the terminal"
)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use toolwire_bench::{Measurement, best_runs, usage};

/// The tool every case calls, and its arguments: `region` is annotated with `x-mcp-header`.
const TOOL: &str = "execute_sql";
/// The same tool through the gateway, whose upstream entry is named `ref`.
const GATEWAY_TOOL: &str = "ref__execute_sql";
/// The same tool through `mcp-proxy`, whose backend is named `ref` (its separator is `/`).
const MCP_PROXY_TOOL: &str = "ref/execute_sql";
/// The same tool through ContextForge, whose gateway is named `ref` (it joins with `-` and
/// writes `_` as `-`).
const CONTEXTFORGE_TOOL: &str = "ref-execute-sql";

/// The name a case calls the tool by.
fn tool(case: &str) -> &'static str {
    if case.starts_with("gateway") {
        GATEWAY_TOOL
    } else if case.starts_with("mcp-proxy") {
        MCP_PROXY_TOOL
    } else if case.starts_with("contextforge") {
        CONTEXTFORGE_TOOL
    } else {
        TOOL
    }
}
const REGION: &str = "us-west-2";
const QUERY: &str = "SELECT 1";
const EXPECTED: &str = "region=us-west-2 rows=1 query=SELECT 1";

type Error = Box<dyn std::error::Error + Send + Sync>;

/// How many calls each case measures (after a warm-up of a tenth as many).
#[derive(Clone, Copy)]
struct Sizes {
    sequential: usize,
    concurrent_per_task: usize,
    stdio: usize,
    stall: usize,
}

const FULL: Sizes = Sizes {
    sequential: 3000,
    concurrent_per_task: 100,
    stdio: 5000,
    stall: 100,
};
const QUICK: Sizes = Sizes {
    sequential: 300,
    concurrent_per_task: 10,
    stdio: 500,
    stall: 20,
};
const TASKS: usize = 64;

fn arguments() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("region".into(), REGION.into());
    m.insert("query".into(), QUERY.into());
    m
}

// ---------------------------------------------------------------------------------------------
// The child: one client, one case.

/// What a child is asked to run.
struct Job {
    case: String,
    client: String,
    /// A URL, or the program of a stdio server (see [`stdio_args`]).
    target: String,
    calls: usize,
    tasks: usize,
    /// An access token the client presents (the token-checking case).
    bearer: Option<String>,
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "floor", "version": "0"}
    })
}

/// Checks a result's first text block.
fn check_text(text: Option<&str>) -> Result<(), Error> {
    match text {
        Some(EXPECTED) => Ok(()),
        other => Err(format!("unexpected result: {other:?}").into()),
    }
}

/// Runs `calls` calls of `call` on each of `tasks` tasks (after a warm-up), timing each.
async fn measure<F, Fut>(job: &Job, call: F) -> Result<Measurement, Error>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), Error>> + Send,
{
    let call = Arc::new(call);
    for _ in 0..(job.calls / 10).max(10) {
        call().await?;
    }
    let before = usage()?;
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..job.tasks {
        let call = Arc::clone(&call);
        let calls = job.calls;
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(calls);
            for _ in 0..calls {
                let t = Instant::now();
                call().await?;
                latencies.push(t.elapsed());
            }
            Ok::<_, Error>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for h in handles {
        latencies.extend(h.await??);
    }
    finish(job, latencies, start, before)
}

/// The measurement of calls that started at `start`, with the CPU used since `before`.
fn finish(
    job: &Job,
    latencies: Vec<Duration>,
    start: Instant,
    before: toolwire_bench::Usage,
) -> Result<Measurement, Error> {
    let wall = start.elapsed();
    let after = usage()?;
    Ok(Measurement::new(
        &job.case,
        &job.client,
        latencies,
        wall,
        after.cpu.saturating_sub(before.cpu),
        after.peak_rss_kib,
    ))
}

/// The Toolwire client, with its defaults.
async fn toolwire(job: &Job) -> Result<Measurement, Error> {
    let legacy = job.case.contains("legacy") || job.case.contains("stall");
    let mode = if legacy {
        toolwire::ProtocolMode::Pinned(toolwire::ProtocolVersion::V2025_11_25)
    } else {
        toolwire::ProtocolMode::Pinned(toolwire::ProtocolVersion::V2026_07_28)
    };
    let builder = toolwire::Client::builder("toolwire-bench", "0").mode(mode);
    let client = if let Some(args) = stdio_args(&job.case) {
        builder.connect_stdio(toolwire::StdioConfig::new(
            job.target.as_str(),
            args.iter().copied(),
        ))?
    } else {
        let mut http = toolwire::HttpTransport::builder(job.target.as_str());
        if let Some(token) = &job.bearer {
            http = http.credentials(token.as_str());
        }
        builder.connect_http(http)?
    };
    client.list_tools().await?;
    let client = Arc::new(client);
    let calls = Arc::clone(&client);
    let name = tool(&job.case);
    let m = measure(job, move || {
        let client = Arc::clone(&calls);
        async move {
            let result = client.call_tool(name, Value::Object(arguments())).await?;
            check_text(result.content.first().and_then(|c| match c {
                toolwire::ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            }))
        }
    })
    .await;
    client.close().await;
    m
}

/// The rmcp client over Streamable HTTP or a child process.
async fn rmcp_client(job: &Job) -> Result<Measurement, Error> {
    use rmcp::model::{CallToolRequestParams, ProtocolVersion};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let legacy = job.case.contains("legacy") || job.case.contains("stall");
    let lifecycle = if legacy {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    };
    let client = if let Some(args) = stdio_args(&job.case) {
        let mut command = tokio::process::Command::new(&job.target);
        command.args(args);
        let transport = rmcp::transport::TokioChildProcess::new(command)?;
        ().serve_with_lifecycle(transport, lifecycle).await?
    } else if job.client == "rmcp-keepalive" {
        let transport = StreamableHttpClientTransport::with_client(
            reqwest::Client::new(),
            StreamableHttpClientTransportConfig::with_uri(job.target.as_str()),
        );
        ().serve_with_lifecycle(transport, lifecycle).await?
    } else {
        let transport = StreamableHttpClientTransport::from_uri(job.target.as_str());
        ().serve_with_lifecycle(transport, lifecycle).await?
    };
    client.list_all_tools().await?;
    let peer = client.peer().clone();
    let name = tool(&job.case);
    let m = measure(job, move || {
        let peer = peer.clone();
        async move {
            let mut params = CallToolRequestParams::new(name);
            params.arguments = Some(arguments());
            let result = peer.call_tool(params).await?;
            check_text(
                result
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.as_str()),
            )
        }
    })
    .await;
    let _ = client.cancel().await;
    m
}

fn run_child(job: &Job) -> Result<Measurement, Error> {
    // On one core: this process, and the stdio server it starts (HTTP servers were started so
    // by the parent).
    if job.case.ends_with(toolwire_bench::ONE_CPU) {
        return toolwire_bench::on_one_cpu(|| measure_client(job));
    }
    measure_client(job)
}

fn measure_client(job: &Job) -> Result<Measurement, Error> {
    if job.client == "floor"
        && let Some(args) = stdio_args(&job.case)
    {
        return floor_stdio(job, args);
    }
    // `BENCH_CURRENT_THREAD=1` runs a client on one thread: with no wake-ups between threads,
    // what remains between two clients is their own work (a diagnosis knob, not a case).
    let runtime = if std::env::var_os("BENCH_CURRENT_THREAD").is_some() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
    };
    runtime.block_on(async {
        match job.client.as_str() {
            "floor" => floor_http(job).await,
            "floor-tokio" => floor_stdio_tokio(job).await,
            "toolwire" => toolwire(job).await,
            _ => rmcp_client(job).await,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// The parent: servers, the schedule, the report.

/// A server process, killed when dropped.
struct Server {
    child: std::process::Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Toolwire's reference server over HTTP on a free loopback port.
fn serve(toolwire: &Path, extra: &[&str]) -> Result<Server, Error> {
    let mut command = Command::new(toolwire);
    command.args(["serve", "--http", "127.0.0.1:0"]).args(extra);
    start_server(command)
}

/// Starts this binary with `args` as a server (rmcp's, the floor proxy).
fn serve_self(args: &[&str]) -> Result<Server, Error> {
    let mut command = Command::new(std::env::current_exe()?);
    command.args(args);
    start_server(command)
}

/// Starts a server that prints `… URL` as its first line on stderr.
fn start_server(mut command: Command) -> Result<Server, Error> {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    // The line that says where it listens (the CLI's own lines start with its name, this
    // binary's servers say they are listening); a gateway's upstreams may log before it.
    if let Some(stderr) = child.stderr.take() {
        let mut stderr = BufReader::new(stderr);
        let listens =
            |line: &str| line.starts_with("toolwire") || line.contains(" listening on http");
        while stderr.read_line(&mut line)? > 0 && !listens(&line) {
            line.clear();
        }
    }
    let url = line.trim().rsplit(' ').next().unwrap_or("").to_owned();
    if !url.starts_with("http://") {
        let _ = child.kill();
        return Err(format!("the server did not start: {line}").into());
    }
    Ok(Server { child, url })
}

/// Where a child finds the access token it presents (never on its command line).
const TOKEN_VAR: &str = "TOOLWIRE_BENCH_TOKEN";

fn run_job(job: &Job) -> Result<Measurement, Error> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    if let Some(token) = &job.bearer {
        command.env(TOKEN_VAR, token);
    }
    let output = command
        .args([
            "--run",
            &job.case,
            &job.client,
            &job.target,
            &job.calls.to_string(),
            &job.tasks.to_string(),
        ])
        .stderr(Stdio::inherit())
        .output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last().unwrap_or("");
    let value: Value = serde_json::from_str(line)
        .map_err(|e| format!("{} {}: {e}: {text}", job.case, job.client))?;
    Measurement::from_json(&value).ok_or_else(|| format!("bad measurement: {line}").into())
}

/// A job of the schedule: case, client, target, calls per task, tasks.
type Planned = (&'static str, &'static str, String, usize, usize);

fn parent(args: &[String]) -> Result<(), Error> {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let toolwire = PathBuf::from(flag("--toolwire").ok_or("--toolwire PATH is required")?);
    let quick = args.iter().any(|a| a == "--quick");
    let sizes = if quick { QUICK } else { FULL };
    let fast = serve(&toolwire, &["--json-responses"])?;
    let stalling = serve(&toolwire, &["--nagle", "--eras", "legacy"])?;
    let rmcp_server = rmcp_server::start()?;
    let through = gateway(&toolwire, &fast.url, "bench-gateway.json")?;
    let through_rmcp = gateway(&toolwire, &rmcp_server.url, "bench-gateway-rmcp.json")?;
    // The same gateway with traffic control set and never tripping: what the controls cost.
    let controlled = gateway_controlled(&toolwire, &fast.url, "bench-gateway-controlled.json")?;
    // nginx in front of either server, when `cargo xtask bench` found or installed it.
    let (nginx, nginx_rmcp) = match flag("--nginx") {
        Some(bin) => (
            Some(nginx::start(Path::new(bin), &fast.url, "bench-nginx")?),
            Some(nginx::start(
                Path::new(bin),
                &rmcp_server.url,
                "bench-nginx-rmcp",
            )?),
        ),
        None => (None, None),
    };
    // The floor of any gateway: bytes forwarded by a bare hyper proxy.
    let floor_proxy = floor_proxy::start(&fast.url)?;
    // The same gateway checking a JWT access token (its key cached after the first call).
    let issuer = issuer::start()?;
    let guarded = gateway_with_tokens(&toolwire, &fast.url, &issuer.url, issuer::AUDIENCE)?;
    // `mcp-proxy` 0.6 in front of the same server, when `cargo xtask bench` installed it.
    let proxy = match flag("--mcp-proxy") {
        Some(bin) => Some(mcp_proxy(Path::new(bin), &fast.url)?),
        None => None,
    };
    // ContextForge in front of the same server, when `cargo xtask bench` installed it; a
    // failure to start leaves its rows out, said on stderr.
    // The server, the floor proxy and the gateway again, on one core (`-1cpu` cases).
    let (fast_1cpu, floor_proxy_1cpu, through_1cpu, controlled_1cpu) =
        toolwire_bench::on_one_cpu(|| {
            let fast = serve(&toolwire, &["--json-responses"])?;
            let floor_proxy = floor_proxy::start(&fast.url)?;
            let through = gateway(&toolwire, &fast.url, "bench-gateway-1cpu.json")?;
            let controlled =
                gateway_controlled(&toolwire, &fast.url, "bench-controlled-1cpu.json")?;
            Ok::<_, Error>((fast, floor_proxy, through, controlled))
        })?;
    let forge = flag("--contextforge").and_then(|bin| {
        contextforge::start(Path::new(bin), &fast.url)
            .map_err(|e| eprintln!("  ContextForge left out: {e}"))
            .ok()
    });
    let bin = toolwire.display().to_string();
    let http = ["floor", "toolwire", "rmcp-default", "rmcp-keepalive"];
    let mut jobs: Vec<Planned> = Vec::new();
    for case in ["http-legacy-seq", "http-modern-seq"] {
        for client in http {
            jobs.push((case, client, fast.url.clone(), sizes.sequential, 1));
        }
    }
    for case in ["rmcp-server-legacy-seq", "rmcp-server-modern-seq"] {
        for client in http {
            jobs.push((case, client, rmcp_server.url.clone(), sizes.sequential, 1));
        }
    }
    for client in http {
        jobs.push((
            "http-concurrent-64",
            client,
            fast.url.clone(),
            sizes.concurrent_per_task,
            TASKS,
        ));
    }
    // Over stdio, the same server as HTTP and rmcp's: the floor is a blocking pipe, and on
    // tokio (`floor-tokio`) what a runtime alone adds to it.
    let this = std::env::current_exe()?.display().to_string();
    for (case, server) in [
        ("stdio-seq", &bin),
        ("stdio-seq-1cpu", &bin),
        ("rmcp-server-stdio-seq", &this),
        ("rmcp-server-stdio-seq-1cpu", &this),
    ] {
        for client in ["floor", "floor-tokio", "toolwire", "rmcp"] {
            jobs.push((case, client, server.clone(), sizes.stdio, 1));
        }
    }
    // The gateway in front of the same server as the http-* cases: what it adds.
    for case in ["gateway-legacy-seq", "gateway-modern-seq"] {
        jobs.push((case, "toolwire", through.url.clone(), sizes.sequential, 1));
    }
    for case in ["floor-proxy-legacy-seq", "floor-proxy-modern-seq"] {
        jobs.push((
            case,
            "toolwire",
            floor_proxy.url.clone(),
            sizes.sequential,
            1,
        ));
    }
    // The same on one core: the client's work over the floor, and what the gateway and the
    // floor proxy add, without the wake-ups between cores.
    for (case, url) in [
        ("http-legacy-seq-1cpu", &fast_1cpu.url),
        ("http-modern-seq-1cpu", &fast_1cpu.url),
        ("floor-proxy-legacy-seq-1cpu", &floor_proxy_1cpu.url),
        ("floor-proxy-modern-seq-1cpu", &floor_proxy_1cpu.url),
        ("gateway-legacy-seq-1cpu", &through_1cpu.url),
        ("gateway-modern-seq-1cpu", &through_1cpu.url),
        ("gateway-controlled-modern-seq-1cpu", &controlled_1cpu.url),
    ] {
        // The HTTP floor beside the client on the server itself.
        let clients: &[&'static str] = if case.starts_with("http") {
            &["floor", "toolwire"]
        } else {
            &["toolwire"]
        };
        for &client in clients {
            jobs.push((case, client, url.clone(), sizes.sequential, 1));
        }
    }
    jobs.push((
        "gateway-controlled-modern-seq",
        "toolwire",
        controlled.url.clone(),
        sizes.sequential,
        1,
    ));
    jobs.push((
        "gateway-jwt-modern-seq",
        "toolwire",
        guarded.url.clone(),
        sizes.sequential,
        1,
    ));
    for (case, url) in [
        ("gateway-concurrent-64", &through.url),
        ("gateway-legacy-concurrent-64", &through.url),
        ("http-legacy-concurrent-64", &fast.url),
        ("floor-proxy-concurrent-64", &floor_proxy.url),
        ("floor-proxy-legacy-concurrent-64", &floor_proxy.url),
    ] {
        jobs.push((
            case,
            "toolwire",
            url.clone(),
            sizes.concurrent_per_task,
            TASKS,
        ));
    }
    jobs.extend(nginx::jobs(
        &nginx::Hops {
            nginx: nginx.as_ref().map(|n| n.url.as_str()),
            nginx_rmcp: nginx_rmcp.as_ref().map(|n| n.url.as_str()),
            gateway_rmcp: &through_rmcp.url,
            rmcp: &rmcp_server.url,
        },
        sizes,
    ));
    // `mcp-proxy` speaks the legacy era only.
    if let Some(proxy) = &proxy {
        jobs.push((
            "mcp-proxy-legacy-seq",
            "toolwire",
            proxy.url.clone(),
            sizes.sequential,
            1,
        ));
        jobs.push((
            "mcp-proxy-legacy-concurrent-64",
            "toolwire",
            proxy.url.clone(),
            sizes.concurrent_per_task,
            TASKS,
        ));
    }
    // ContextForge is ten times slower: a tenth of the calls; the legacy era, as for
    // `mcp-proxy`.
    if let Some(forge) = &forge {
        let url = forge.server.url.clone();
        jobs.push((
            "contextforge-legacy-seq",
            "toolwire",
            url.clone(),
            sizes.sequential / 10,
            1,
        ));
        jobs.push((
            "contextforge-legacy-concurrent-64",
            "toolwire",
            url,
            (sizes.concurrent_per_task / 10).max(1),
            TASKS,
        ));
    }
    for client in ["toolwire", "rmcp-default", "rmcp-keepalive", "floor"] {
        jobs.push(("http-stall", client, stalling.url.clone(), sizes.stall, 1));
    }
    let mut runs = Vec::new();
    for round in 0..2 {
        // The second round runs the clients of each case in reverse order.
        let order: Vec<_> = if round == 0 {
            jobs.iter().collect()
        } else {
            let mut by_case: Vec<Vec<&Planned>> = Vec::new();
            for j in &jobs {
                match by_case.last_mut() {
                    Some(group) if group[0].0 == j.0 => group.push(j),
                    _ => by_case.push(vec![j]),
                }
            }
            by_case
                .into_iter()
                .flat_map(|g| g.into_iter().rev())
                .collect()
        };
        for (case, client, target, calls, tasks) in order {
            let job = Job {
                case: (*case).to_owned(),
                client: (*client).to_owned(),
                target: target.clone(),
                calls: *calls,
                tasks: *tasks,
                bearer: if case.starts_with("contextforge") {
                    forge.as_ref().map(|f| f.token.clone())
                } else {
                    case.contains("jwt").then(|| issuer.token.clone())
                },
            };
            let m = match run_job(&job) {
                Ok(m) => m,
                // A peer outside the project failing leaves its row out, not the run.
                Err(e) if case.starts_with("contextforge") || case.starts_with("mcp-proxy") => {
                    eprintln!("  {case} left out: {e}");
                    continue;
                }
                Err(e) => return Err(e),
            };
            eprintln!(
                "  round {} {case:20} {client:15} {:>8.0} calls/s  mean {:>7.0} µs  p99 {:>7.0} µs  max {:>8.0} µs",
                round + 1,
                m.calls_per_s(),
                m.mean.as_secs_f64() * 1e6,
                m.p99.as_secs_f64() * 1e6,
                m.max.as_secs_f64() * 1e6
            );
            runs.push(m);
        }
    }
    drop((
        controlled_1cpu,
        through_1cpu,
        floor_proxy_1cpu,
        fast_1cpu,
        through,
        through_rmcp,
        controlled,
        nginx,
        nginx_rmcp,
        guarded,
        proxy,
        forge,
        floor_proxy,
        fast,
        stalling,
        rmcp_server,
    ));
    let memory = gateway_memory(&toolwire)?;
    eprintln!("  {memory}");
    let best = best_runs(&runs);
    report::write(&best, &memory, flag("--out"), quick)
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; ignore it.
    let args: Vec<String> = args.into_iter().filter(|a| a != "--bench").collect();
    let outcome = if args.first().map(String::as_str) == Some("--serve-rmcp") {
        rmcp_server::run()
    } else if args.first().map(String::as_str) == Some("--serve-rmcp-stdio") {
        rmcp_server::run_stdio()
    } else if let [flag, upstream] = args.as_slice()
        && flag == "--serve-floor-proxy"
    {
        floor_proxy::run(upstream)
    } else if args.first().map(String::as_str) == Some("--search") {
        // The tool search section alone (no servers, no clients).
        search_quality::measure().map(|r| println!("{}", r.markdown()))
    } else if args.first().map(String::as_str) == Some("--run") {
        let job = match args.as_slice() {
            [_, case, client, target, calls, tasks] => Job {
                case: case.clone(),
                client: client.clone(),
                target: target.clone(),
                calls: calls.parse().unwrap_or(0),
                tasks: tasks.parse().unwrap_or(1),
                bearer: std::env::var(TOKEN_VAR).ok(),
            },
            _ => {
                eprintln!("usage: compare --run CASE CLIENT TARGET CALLS TASKS");
                return std::process::ExitCode::from(2);
            }
        };
        run_child(&job).map(|m| println!("{}", m.to_json()))
    } else {
        parent(&args)
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compare: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The floors: bytes built once, sent and read back.
#[path = "compare/floors.rs"]
mod floors;
use floors::{floor_http, floor_stdio, floor_stdio_tokio, stdio_args};

/// The report: printed, and spliced into `docs/benchmarks.md`.
#[path = "compare/report.rs"]
mod report;

/// ContextForge, for the `contextforge-*` cases.
#[path = "compare/contextforge.rs"]
mod contextforge;

#[path = "compare/search_quality.rs"]
mod search_quality;

/// rmcp's Streamable HTTP server with the bench's tool, for the `rmcp-server-*` cases.
#[path = "compare/rmcp_server.rs"]
mod rmcp_server;

/// A reverse proxy that forwards bytes, for the `floor-proxy-*` cases.
#[path = "compare/floor_proxy.rs"]
mod floor_proxy;

#[path = "compare/gateways.rs"]
mod gateways;
use gateways::{gateway, gateway_controlled, gateway_memory, gateway_with_tokens, mcp_proxy};
#[path = "compare/issuer.rs"]
mod issuer;
/// nginx in front of either server, and the gateway in front of rmcp's.
#[path = "compare/nginx.rs"]
mod nginx;

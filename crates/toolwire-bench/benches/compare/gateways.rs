//! The gateways in front of the reference server: Toolwire's (`toolwire gateway`) and
//! `mcp-proxy` 0.6, started for the latency cases, and the gateway's memory over many
//! upstreams.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{Error, Server, serve, start_server};

/// Starts `toolwire gateway` over HTTP (JSON answers) in front of `upstream`, named `ref`, its
/// configuration in `file` (a gateway of its own each: a gateway reloads a file that changes).
pub(super) fn gateway(toolwire: &Path, upstream: &str, file: &str) -> Result<Server, Error> {
    let servers = json!({"ref": {"url": upstream}});
    start_gateway(toolwire, file, &servers)
}

/// The same with traffic control on every upstream, set so that it never trips: a
/// concurrency cap above the callers with its queue, and a circuit breaker.
pub(super) fn gateway_controlled(
    toolwire: &Path,
    upstream: &str,
    file: &str,
) -> Result<Server, Error> {
    let servers = json!({"ref": {"url": upstream}});
    let traffic = json!({"*": {"maxConcurrent": 256, "queue": 256, "breakerFailures": 5}});
    start_gateway_with_section(
        toolwire,
        file,
        &servers,
        Some(&json!({ "traffic": traffic })),
        &[],
    )
}

/// The same, accepting only access tokens of `issuer` for `audience`.
pub(super) fn gateway_with_tokens(
    toolwire: &Path,
    upstream: &str,
    issuer: &str,
    audience: &str,
) -> Result<Server, Error> {
    let servers = json!({"ref": {"url": upstream}});
    let flags = ["--auth-issuer", issuer, "--public-url", audience];
    start_gateway_with(toolwire, "bench-gateway-jwt.json", &servers, &flags)
}

/// Starts `toolwire gateway` over HTTP (JSON answers) over the entries `servers` (an
/// `mcpServers` object), written to `file` in cargo's scratch folder.
fn start_gateway(toolwire: &Path, file: &str, servers: &Value) -> Result<Server, Error> {
    start_gateway_with(toolwire, file, servers, &[])
}

/// [`start_gateway`] with more flags.
fn start_gateway_with(
    toolwire: &Path,
    file: &str,
    servers: &Value,
    flags: &[&str],
) -> Result<Server, Error> {
    start_gateway_with_section(toolwire, file, servers, None, flags)
}

/// [`start_gateway_with`] with the file's `gateway` section.
fn start_gateway_with_section(
    toolwire: &Path,
    file: &str,
    servers: &Value,
    section: Option<&Value>,
    flags: &[&str],
) -> Result<Server, Error> {
    let config = config_file(file);
    let mut text = json!({ "mcpServers": servers });
    if let Some(section) = section {
        text["gateway"] = section.clone();
    }
    std::fs::write(&config, text.to_string())?;
    let mut command = Command::new(toolwire);
    command
        .args(["gateway", "--config"])
        .arg(&config)
        .args([
            "--http",
            "127.0.0.1:0",
            "--json-responses",
            "--threads",
            "1",
        ])
        .args(flags)
        .env("TOOLWIRE_TRUST", "1");
    start_server(command)
}

/// Starts `mcp-proxy` (the binary at `bin`, 0.6) over HTTP in front of `upstream`, its
/// backend named `ref`, logging warnings only (its default logs every message at debug).
pub(super) fn mcp_proxy(bin: &Path, upstream: &str) -> Result<Server, Error> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-mcp-proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nname = \"bench\"\nseparator = \"/\"\n[proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\
             [observability]\nlog_level = \"warn\"\n\
             [[backends]]\nname = \"ref\"\ntransport = \"http\"\nurl = \"{upstream}\"\n"
        ),
    )?;
    // One worker thread, as the gateway runs (`#[tokio::main]` reads this variable).
    let child = Command::new(bin)
        .env("TOKIO_WORKER_THREADS", "1")
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}/"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("mcp-proxy did not listen within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(server)
}

/// Where a config file named `file` is written for a run.
fn config_file(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(file)
}

/// The memory measurements' `mcpServers` file (the gateway's, then the host's).
const GATEWAY_MEMORY_FILE: &str = "bench-gateway-memory.json";

/// Upstreams and tools per upstream of the gateway's memory measurement.
const MEMORY_UPSTREAMS: usize = 50;
const MEMORY_TOOLS: usize = 200;

/// The gateway's memory with [`MEMORY_UPSTREAMS`] upstreams of [`MEMORY_TOOLS`] tools each
/// (every entry the same reference server with that many synthetic tools more, so one server
/// process serves them all): its resident set once every upstream is ready and listed, read
/// from `/proc` (Linux); then a host's alone over the same entries ([`host_memory`]). Two
/// markdown paragraphs.
pub(super) fn gateway_memory(toolwire: &Path) -> Result<String, Error> {
    let synthetic = MEMORY_TOOLS.to_string();
    let upstream = serve(
        toolwire,
        &["--json-responses", "--synthetic-tools", &synthetic],
    )?;
    let entries: Map<String, Value> = (0..MEMORY_UPSTREAMS)
        .map(|n| (format!("u{n:02}"), json!({"url": upstream.url})))
        .collect();
    let gateway = start_gateway(toolwire, GATEWAY_MEMORY_FILE, &Value::Object(entries))?;
    let addr = gateway
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // Ready: every upstream listed with all its tools.
    let deadline = Instant::now() + Duration::from_secs(120);
    let tools = loop {
        let (status, body) = http_get(&addr, "/readyz")?;
        let servers: Value = serde_json::from_str(&body).unwrap_or_default();
        let counts: Vec<u64> = servers["servers"]
            .as_object()
            .map(|s| s.values().filter_map(|v| v["tools"].as_u64()).collect())
            .unwrap_or_default();
        if status == 200
            && counts.len() == MEMORY_UPSTREAMS
            && counts.iter().all(|&c| c >= MEMORY_TOOLS as u64)
        {
            break counts.iter().sum::<u64>();
        }
        if Instant::now() > deadline {
            return Err(format!("the gateway was not ready in 120 s: {status} {body}").into());
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (rss, peak) = toolwire_bench::resident(gateway.child.id());
    let per_tool = rss.map(|kb| kb as f64 * 1024.0 / tools as f64);
    drop(gateway);
    let host = host_memory(&config_file(GATEWAY_MEMORY_FILE))?;
    let mb = |kb: Option<u64>| {
        kb.map_or("not measured".into(), |kb| {
            format!("{:.1} MB", kb as f64 / 1024.0)
        })
    };
    Ok(format!(
        "With {MEMORY_UPSTREAMS} upstreams of {MEMORY_TOOLS} tools each ({tools} tools merged, \
         the reference server's own among them), once every upstream is listed: resident set \
         **{}**, peak {} (target ≤ 64 MB), about {} per tool.\n\n\
         A host over the same {MEMORY_UPSTREAMS} entries (`toolwire_host::Host`, in a process \
         of its own that does nothing else: `toolwire-bench`'s `host-memory`), once every \
         server has settled ({} tools): resident set **{}**, peak {} (target ≤ 32 MB).\n",
        mb(rss),
        mb(peak),
        per_tool.map_or("—".into(), |b| format!("{:.1} KB", b / 1024.0)),
        host.tools,
        mb(host.rss_kib),
        mb(host.peak_kib),
    ))
}

/// What `host-memory` reports.
struct HostMemory {
    tools: u64,
    rss_kib: Option<u64>,
    peak_kib: Option<u64>,
}

/// Runs `host-memory` (this package's binary) over the `mcpServers` file `config`.
fn host_memory(config: &Path) -> Result<HostMemory, Error> {
    let out = Command::new(env!("CARGO_BIN_EXE_host-memory"))
        .arg(config)
        .env("TOOLWIRE_TRUST", "1")
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "host-memory failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let line: Value = serde_json::from_slice(&out.stdout)?;
    Ok(HostMemory {
        tools: line["tools"].as_u64().unwrap_or(0),
        rss_kib: line["rss_kib"].as_u64(),
        peak_kib: line["peak_kib"].as_u64(),
    })
}

/// `GET path` on `addr` (HTTP/1.0, so the body arrives whole): the status and the body.
fn http_get(addr: &str, path: &str) -> Result<(u16, String), Error> {
    http(addr, "GET", path, "", "")
}

/// A `method` request on `addr` with `headers` (each line ending in CRLF) and `body`, over
/// HTTP/1.0 (the body arrives whole): the status and the body.
pub(super) fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> Result<(u16, String), Error> {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(addr)?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nhost: {addr}\r\n{headers}content-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    Ok((status, body))
}

//! `cargo xtask interop`: the `toolwire` CLI and library against real MCP servers nobody on
//! this team wrote, on loopback.
//!
//! 1. Installs the peers into the cache folder `cargo xtask conformance` uses
//!    (`$TOOLWIRE_PEERS`, else `~/.cache/toolwire-peers`), from the package registries only:
//!    PyPI `mcp` 2.3 (in a venv), `@modelcontextprotocol/server` 2.4 (the TypeScript SDK v2),
//!    `@modelcontextprotocol/server-everything` 2026.8.31, `@modelcontextprotocol/sdk` 1.32.2
//!    (its OAuth example), `@modelcontextprotocol/server-basic-vanillajs` 2.0.3 (an MCP Apps
//!    example of the `ext-apps` project), and Debian's nginx and tinyproxy (with `apt-get`, when they are
//!    missing and this runs as root).
//! 2. Starts them: the Python `MCPServer` (`xtask/interop/py_server.py`) over HTTP with SSE
//!    answers and again with JSON answers, the TypeScript SDK v2 server
//!    (`xtask/interop/ts_server.mjs`) and server-everything over HTTP, and an nginx that routes
//!    POSTs on `Mcp-Param-Region` (`eu-*` to Python, `us-*` to TypeScript, the rest to Python);
//!    the Python server again over the 2024-11-05 HTTP+SSE transport; a tinyproxy that wants
//!    basic credentials; the TypeScript SDK's OAuth-protected example with its authorization
//!    server (for `toolwire login`).
//! 3. Runs the checks. Each asserts on what the server saw or answered: the peers' `seen` tool
//!    returns the headers that arrived, server-everything's tools quote what this client's
//!    handlers answered, and nginx's access log shows where each request went.
//!    `toolwire gateway` fronts server-everything, the Python server and the reference server
//!    for the Python and TypeScript SDKs' clients and the CLI (`interop/gateway.rs`).
//! 4. Prints the table and writes it to `docs/interop.md`. Any failed check fails the run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::conformance::{cache_dir, install_node, installed_npm_version, npm_install};

mod gateway;
mod gateway_auth;
pub(crate) mod soak;
mod startup;

const PY_MCP: &str = "2.3.0";
const TS_SERVER: &str = "@modelcontextprotocol/server@2.4.0";
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// An MCP Apps server from the `ext-apps` examples: a tool with an HTML view.
const EXT_APPS: &str = "@modelcontextprotocol/server-basic-vanillajs@2.0.3";
/// The TypeScript SDK v1, for its OAuth example: an MCP server and a separate authorization
/// server (dynamic registration, PKCE, auto-approving `/authorize`), strict about RFC 8707.
const TS_OAUTH: &str = "@modelcontextprotocol/sdk@1.32.2";
/// That example, inside the package.
const TS_OAUTH_SERVER: &str =
    "node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js";
/// How long one CLI or client run may take before it counts as hung.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// One check's outcome: a row of the table.
struct Row {
    peer: &'static str,
    via: &'static str,
    check: String,
    ok: bool,
    detail: String,
}

/// The servers this run started; stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Default)]
struct Processes(Vec<Child>);

impl Processes {
    fn spawn(&mut self, command: &mut Command, log: &Path) -> Result<(), String> {
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{command:?}: {e}"))?;
        self.0.push(child);
        Ok(())
    }

    /// Kills the `n`-th process spawned (SIGKILL: no chance to finish what it holds).
    fn kill(&mut self, n: usize) -> Result<(), String> {
        let child = self.0.get_mut(n).ok_or("no such process")?;
        child.kill().map_err(|e| e.to_string())?;
        child.wait().map(drop).map_err(|e| e.to_string())
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        stop(&mut self.0);
    }
}

/// Stops `children`: SIGTERM to each, up to 5 s in all for them to exit, then SIGKILL to
/// those still there, each reaped. One already reaped (killed by a check or a fault) gets no
/// signal: its pid may be another process's by now.
fn stop(children: &mut [std::process::Child]) {
    for child in children.iter_mut() {
        if matches!(child.try_wait(), Ok(None)) {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for child in children {
        while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A fresh session key for a fleet of gateways, from the operating system's random source,
/// in `dir/session.key` (0600).
fn session_key_file(dir: &Path) -> Result<PathBuf, String> {
    let (ok, key, err) =
        run_limited(Command::new("sh").args(["-c", "head -c32 /dev/urandom | base64"]));
    if !ok {
        return Err(format!("a session key: {err}"));
    }
    let key_file = dir.join("session.key");
    std::fs::write(&key_file, key).map_err(|e| e.to_string())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| e.to_string())?;
    }
    Ok(key_file)
}

/// A port nothing listens on right now.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Polls `ready` every 100 ms for up to 30 s; the log at `log` in the error if it never is.
fn wait_until(ready: impl Fn() -> bool, failure: &str, log: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(log).unwrap_or_default();
    Err(format!("{failure}:\n{log}"))
}

/// Waits until something accepts connections on `port`.
fn wait_for_port(port: u16, what: &str, log: &Path) -> Result<(), String> {
    wait_until(
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
        &format!("{what} did not listen on {port}"),
        log,
    )
}

/// Waits until a gateway on `port` says it is ready (`/readyz` answers 200: every upstream it
/// needs tried), as a load balancer's readiness check would before sending it traffic.
fn wait_ready(port: u16, what: &str, log: &Path) -> Result<(), String> {
    let ready = || -> Option<()> {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            stream,
            "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        answer.starts_with("HTTP/1.1 200").then_some(())
    };
    wait_until(
        || ready().is_some(),
        &format!("{what} on {port} was not ready in 30 s"),
        log,
    )
}

/// Runs a command to its end (killed after [`RUN_LIMIT`]): (success, stdout, stderr).
fn run_limited(command: &mut Command) -> (bool, String, String) {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return (false, String::new(), format!("{command:?}: {e}")),
    };
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = out.join().unwrap_or_default();
    let mut err = err.join().unwrap_or_default();
    if status.is_none() {
        err.push_str(&format!("killed after {RUN_LIMIT:?}"));
    }
    (status.is_some_and(|s| s.success()), out, err)
}

/// The PATH with node 22 first, and the installed Python interpreter.
struct Peers {
    cache: PathBuf,
    path: String,
    python: PathBuf,
    nginx: PathBuf,
    tinyproxy: PathBuf,
}

fn install(root: &Path) -> Result<Peers, String> {
    let cache = cache_dir();
    let path = install_node(&cache)?;
    for (dir, spec) in [
        ("tsv2", TS_SERVER),
        ("everything", EVERYTHING),
        ("extapps", EXT_APPS),
        ("tsoauth", TS_OAUTH),
    ] {
        let (package, version) = spec.rsplit_once('@').ok_or("bad package spec")?;
        if installed_npm_version(&cache.join(dir), package).as_deref() != Some(version) {
            npm_install(&cache.join(dir), spec)?;
        }
    }
    // The TypeScript server resolves its imports from the folder it sits in.
    std::fs::copy(
        root.join("xtask/interop/ts_server.mjs"),
        cache.join("tsv2/ts_server.mjs"),
    )
    .map_err(|e| format!("ts_server.mjs: {e}"))?;

    let venv = cache.join("venv");
    let python = venv.join("bin/python");
    crate::conformance::pip_ensure(root, &venv, "mcp", PY_MCP)?;

    let nginx = debian("nginx")?;
    let tinyproxy = debian("tinyproxy")?;
    Ok(Peers {
        cache,
        path,
        python,
        nginx,
        tinyproxy,
    })
}

/// A Debian package's program of the same name, installed with `apt-get` when missing.
fn debian(program: &str) -> Result<PathBuf, String> {
    debian_package(program, program)
}

/// `program` (a name looked for in the usual folders, or an absolute path), installed from
/// Debian's `package` when it is missing.
pub(crate) fn debian_package(program: &str, package: &str) -> Result<PathBuf, String> {
    let find = || {
        if Path::new(program).is_absolute() {
            return Some(PathBuf::from(program)).filter(|p| p.exists());
        }
        ["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(program))
            .find(|p| p.exists())
    };
    find()
        .or_else(|| {
            eprintln!("==> apt-get install {package}");
            let apt = |args: &[&str]| {
                Command::new("apt-get")
                    .args(args)
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            let _ = apt(&["update", "-qq"]);
            let _ = apt(&["install", "-y", "-qq", package]);
            find()
        })
        .ok_or(format!(
            "{program} is not installed and `apt-get install {package}` did not install it (it needs root)"
        ))
}

/// The tinyproxy configuration: loopback only, basic credentials `mcp:secret`, each request
/// logged.
fn tinyproxy_conf(port: u16, dir: &Path) -> String {
    format!(
        "Port {port}\nListen 127.0.0.1\nTimeout 60\nLogFile \"{}/tinyproxy.log\"\nLogLevel Info\n\
         MaxClients 20\nAllow 127.0.0.1\nBasicAuth mcp secret\nDisableViaHeader Yes\n",
        dir.display()
    )
}

/// What every nginx configuration here starts with: one worker in the foreground, files in
/// its prefix folder, room for 4,096 connections (a legacy caller's open stream holds two;
/// at 128, 32 callers of a fleet had their connections reset).
const NGINX_HEAD: &str = "worker_processes 1;\ndaemon off;\npid nginx.pid;\nerror_log error.log info;\nevents { worker_connections 4096; }";

/// The temporary folders of an nginx `http` block, inside its prefix folder.
const NGINX_TEMP: &str = "client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; fastcgi_temp_path tmp/fastcgi; uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi;";

/// The nginx configuration: POSTs routed on `Mcp-Param-Region`, each request logged with the
/// headers it carried and the upstream it went to.
fn nginx_conf(port: u16, eu: u16, us: u16, default: u16) -> String {
    format!(
        r#"{NGINX_HEAD}
http {{
    {NGINX_TEMP}
    log_format routed '$request_method|$http_mcp_method|$http_mcp_name|$http_mcp_param_region|$upstream_addr|$status';
    access_log access.log routed;
    map "$request_method:$http_mcp_param_region" $mcp_upstream {{
        default        mcp_default;
        "~^POST:eu-"   mcp_eu;
        "~^POST:us-"   mcp_us;
    }}
    upstream mcp_eu      {{ server 127.0.0.1:{eu}; }}
    upstream mcp_us      {{ server 127.0.0.1:{us}; }}
    upstream mcp_default {{ server 127.0.0.1:{default}; }}
    server {{
        listen 127.0.0.1:{port};
        location /mcp {{
            proxy_pass http://$mcp_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 1h;
            add_header X-Routed-To $mcp_upstream always;
        }}
    }}
}}
"#
    )
}

/// The servers, by role, and where they listen.
struct Running {
    _processes: Processes,
    /// The Python SDK's MCP server with its own authorization server, and its log (each
    /// refresh is a `refreshed` line).
    py_oauth: String,
    py_oauth_log: PathBuf,
    py: String,
    py_json: String,
    ts: String,
    everything: String,
    nginx: String,
    nginx_dir: PathBuf,
    py_port: u16,
    ts_port: u16,
    /// The Python server over the 2024-11-05 HTTP+SSE transport.
    py_sse: String,
    tinyproxy: String,
    tinyproxy_dir: PathBuf,
    /// The TypeScript SDK's OAuth-protected example (`localhost`, as its metadata name it).
    ts_oauth: String,
    /// The Python SDK's OAuth server again, its MCP endpoint plain http, its issuer
    /// `https://` at `py_tls_issuer` with a certificate signed by `py_tls_ca`.
    py_tls: String,
    py_tls_issuer: String,
    py_tls_ca: PathBuf,
    py_tls_log: PathBuf,
}

fn start(root: &Path, peers: &Peers) -> Result<Running, String> {
    let logs = peers.cache.join("results/interop");
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let mut processes = Processes::default();
    let py_script = root.join("xtask/interop/py_server.py");
    let everything_js = peers
        .cache
        .join("everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let [
        py_port,
        py_json_port,
        ts_port,
        ev_port,
        nginx_port,
        py_sse_port,
        tinyproxy_port,
        oauth_port,
        oauth_as_port,
        py_oauth_port,
        py_tls_port,
        py_tls_issuer_port,
    ] = [
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
    ];
    let mut starts: Vec<(&str, u16, Command)> = Vec::new();
    let mut py = Command::new(&peers.python);
    py.arg(&py_script).args(["http", &py_port.to_string()]);
    starts.push(("python-sse", py_port, py));
    let mut py_json = Command::new(&peers.python);
    py_json
        .arg(&py_script)
        .args(["http", &py_json_port.to_string(), "json"]);
    starts.push(("python-json", py_json_port, py_json));
    let mut py_sse = Command::new(&peers.python);
    py_sse
        .arg(&py_script)
        .args(["sse", &py_sse_port.to_string()]);
    starts.push(("python-legacy-sse", py_sse_port, py_sse));
    let mut ts = Command::new("node");
    ts.args(["ts_server.mjs", "http", &ts_port.to_string()])
        .current_dir(peers.cache.join("tsv2"))
        .env("PATH", &peers.path);
    starts.push(("typescript", ts_port, ts));
    let mut ev = Command::new("node");
    ev.arg(&everything_js)
        .arg("streamableHttp")
        .env("PORT", ev_port.to_string())
        .env("PATH", &peers.path);
    starts.push(("everything", ev_port, ev));

    let nginx_dir = peers.cache.join("nginx");
    std::fs::create_dir_all(nginx_dir.join("tmp")).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(nginx_dir.join("access.log"));
    std::fs::write(
        nginx_dir.join("mcp-route.conf"),
        nginx_conf(nginx_port, py_port, ts_port, py_port),
    )
    .map_err(|e| e.to_string())?;
    let mut nginx = Command::new(&peers.nginx);
    nginx
        .arg("-p")
        .arg(format!("{}/", nginx_dir.display()))
        .args(["-c", "mcp-route.conf"]);
    starts.push(("nginx", nginx_port, nginx));

    let tinyproxy_dir = peers.cache.join("tinyproxy");
    std::fs::create_dir_all(&tinyproxy_dir).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(tinyproxy_dir.join("tinyproxy.log"));
    std::fs::write(
        tinyproxy_dir.join("tinyproxy.conf"),
        tinyproxy_conf(tinyproxy_port, &tinyproxy_dir),
    )
    .map_err(|e| e.to_string())?;
    let mut tinyproxy = Command::new(&peers.tinyproxy);
    tinyproxy
        .arg("-d")
        .arg("-c")
        .arg(tinyproxy_dir.join("tinyproxy.conf"));
    starts.push(("tinyproxy", tinyproxy_port, tinyproxy));

    let mut ts_oauth = Command::new("node");
    ts_oauth
        .args([TS_OAUTH_SERVER, "--oauth", "--oauth-strict"])
        .current_dir(peers.cache.join("tsoauth"))
        .env("MCP_PORT", oauth_port.to_string())
        .env("MCP_AUTH_PORT", oauth_as_port.to_string())
        .env("PATH", &peers.path);
    starts.push(("typescript-oauth", oauth_port, ts_oauth));

    // The Python SDK as its own authorization server; access tokens live 3 s.
    let mut py_oauth = Command::new(&peers.python);
    py_oauth
        .arg(root.join("xtask/interop/py_oauth_server.py"))
        .args([&py_oauth_port.to_string(), "3"]);
    starts.push(("python-oauth", py_oauth_port, py_oauth));
    // And again with its authorization server at an https issuer (its own throwaway CA),
    // the MCP endpoint staying plain http: the set-up in which a proxy must tunnel OAuth.
    let py_tls_dir = peers.cache.join("py-oauth-tls");
    let _ = std::fs::remove_dir_all(&py_tls_dir);
    let mut py_tls = Command::new(&peers.python);
    py_tls
        .arg(root.join("xtask/interop/py_oauth_server.py"))
        .args([
            &py_tls_port.to_string(),
            "3",
            &py_tls_issuer_port.to_string(),
        ])
        .arg(&py_tls_dir);
    starts.push(("python-oauth-tls", py_tls_port, py_tls));

    for (name, _, command) in &mut starts {
        processes.spawn(command, &logs.join(format!("{name}.log")))?;
    }
    for (name, port, _) in &starts {
        wait_for_port(*port, name, &logs.join(format!("{name}.log")))?;
    }
    wait_for_port(
        py_tls_issuer_port,
        "python-oauth-tls (its https issuer)",
        &logs.join("python-oauth-tls.log"),
    )?;
    let url = |port: u16| format!("http://127.0.0.1:{port}/mcp");
    Ok(Running {
        _processes: processes,
        py: url(py_port),
        py_json: url(py_json_port),
        ts: url(ts_port),
        everything: url(ev_port),
        nginx: url(nginx_port),
        nginx_dir,
        py_port,
        ts_port,
        py_sse: format!("http://127.0.0.1:{py_sse_port}/sse"),
        tinyproxy: format!("127.0.0.1:{tinyproxy_port}"),
        tinyproxy_dir,
        ts_oauth: format!("http://localhost:{oauth_port}/mcp"),
        py_oauth: url(py_oauth_port),
        py_oauth_log: logs.join("python-oauth.log"),
        py_tls: url(py_tls_port),
        py_tls_issuer: format!("127.0.0.1:{py_tls_issuer_port}"),
        py_tls_ca: py_tls_dir.join("ca.pem"),
        py_tls_log: logs.join("python-oauth-tls.log"),
    })
}

/// Where the `toolwire` CLI talks to: a URL or a child's command line.
enum Target<'a> {
    Url(&'a str),
    Stdio(String),
}

/// Runs the CLI with `--json` and parses what it printed.
fn cli(
    bin: &Path,
    target: &Target<'_>,
    protocol: &str,
    args: &[&str],
    cwd: &Path,
) -> Result<Value, String> {
    let mut command = Command::new(bin);
    match target {
        Target::Url(url) => command.args(["--url", url]),
        Target::Stdio(line) => command.args(["--stdio", line]),
    };
    command
        .args(["--protocol", protocol, "--timeout", "30", "--json"])
        .args(args)
        .current_dir(cwd);
    json_of(&mut command, &args.join(" "))
}

/// Runs a `toolwire … --json` command and parses what it printed; `what` names it in errors.
fn json_of(command: &mut Command, what: &str) -> Result<Value, String> {
    let (ok, out, err) = run_limited(command);
    if !ok {
        return Err(format!("toolwire {what}: {}", err.trim()));
    }
    serde_json::from_str(&out).map_err(|e| format!("toolwire {what}: {e}: {out}"))
}

/// The first text block of a tool result.
fn first_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or("")
}

/// A `seen` tool's report, parsed.
fn seen_report(result: &Value) -> Value {
    serde_json::from_str(first_text(result)).unwrap_or(Value::Null)
}

/// The ext-apps example over stdio: `apps list` names its tool's `ui://` view, and `apps get`
/// reads it as an HTML document of the MCP Apps profile.
fn apps_check(bin: &Path, peers: &Peers, cwd: &Path) -> Result<(bool, String), String> {
    let server = Target::Stdio(format!(
        "node {} --stdio",
        peers
            .cache
            .join("extapps/node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js")
            .display()
    ));
    let listed = cli(bin, &server, "auto", &["apps", "list"], cwd)?;
    let app = &listed["apps"][0];
    let (tool, uri) = (
        app["tool"].as_str().unwrap_or(""),
        app["ui"]["resourceUri"].as_str().unwrap_or(""),
    );
    let view = cli(bin, &server, "auto", &["apps", "get", tool], cwd)?;
    let html = view["html"].as_str().unwrap_or("");
    Ok((
        uri.starts_with("ui://") && view["uri"] == uri && html.starts_with("<!DOCTYPE html>"),
        format!(
            "{tool}: {uri}, {} bytes of HTML, meta {}",
            html.len(),
            view["meta"]
        ),
    ))
}

/// Pushes a row from an outcome that is either a verdict with detail or an error.
fn push(
    rows: &mut Vec<Row>,
    peer: &'static str,
    via: &'static str,
    check: &str,
    outcome: Result<(bool, String), String>,
) {
    let (ok, detail) = outcome.unwrap_or_else(|e| (false, e));
    let mark = if ok { "ok" } else { "FAILED" };
    eprintln!("  {mark:6} {peer} {via} {check}: {}", one_line(&detail));
    if !ok {
        // The cause of a failure is often at its end (a Python traceback's last line): the
        // whole of it, indented, beside the one-line summary.
        for line in detail.lines() {
            eprintln!("           | {line}");
        }
    }
    rows.push(Row {
        peer,
        via,
        check: check.to_owned(),
        ok,
        detail,
    });
}

fn one_line(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

/// A peer with a `seen` tool: its label in the table and the name it gives as `serverInfo`.
struct Peer {
    label: &'static str,
    server: &'static str,
}

const PYTHON: Peer = Peer {
    label: "Python mcp 2.3 (MCPServer)",
    server: "py-peer",
};
const TYPESCRIPT: Peer = Peer {
    label: "TypeScript SDK v2 2.4 (createMcpHandler)",
    server: "ts-v2-peer",
};

/// The legacy and modern checks every `seen`-carrying peer gets over one target.
fn seen_checks(
    rows: &mut Vec<Row>,
    bin: &Path,
    peer: &Peer,
    via: &'static str,
    target: &Target<'_>,
    cwd: &Path,
    http: bool,
) {
    // 2026-07-28: the header the server saw is the encoded argument, and the argument arrived.
    let outcome = cli(
        bin,
        target,
        "2026-07-28",
        &["tools", "call", "seen", "region=Zürich"],
        cwd,
    )
    .map(|r| {
        let seen = seen_report(&r);
        let headers = &seen["headers"];
        let ok = seen["region"] == "Zürich"
            && if http {
                headers["mcp-param-region"] == "=?base64?WsO8cmljaA==?="
                    && headers["mcp-method"] == "tools/call"
                    && headers["mcp-name"] == "seen"
                    && headers["mcp-protocol-version"] == "2026-07-28"
            } else {
                true
            };
        (ok, seen.to_string())
    });
    let name = if http {
        "2026-07-28 tools/call: Mcp-Method, Mcp-Name, base64 Mcp-Param-Region as the server saw them"
    } else {
        "2026-07-28 tools/call with a non-ASCII argument"
    };
    push(rows, peer.label, via, name, outcome);

    let outcome = cli(
        bin,
        target,
        "2026-07-28",
        &["tools", "call", "add", "a=2", "b=40"],
        cwd,
    )
    .map(|r| {
        (
            first_text(&r) == "42" && r["resultType"] == "complete",
            r.to_string(),
        )
    });
    push(
        rows,
        peer.label,
        via,
        "2026-07-28 tools/call add (schema-typed integers)",
        outcome,
    );

    let outcome = cli(bin, target, "2025-11-25", &["info"], cwd).map(|r| {
        (
            r["protocolVersion"] == "2025-11-25" && r["serverInfo"]["name"] == peer.server,
            r.to_string(),
        )
    });
    push(rows, peer.label, via, "2025-11-25 initialize", outcome);

    let outcome = cli(
        bin,
        target,
        "2025-11-25",
        &["tools", "call", "seen", "region=eu-west1"],
        cwd,
    )
    .map(|r| {
        let seen = seen_report(&r);
        let headers = &seen["headers"];
        // Legacy requests carry no SEP-2243 headers; they are a 2026-07-28 feature.
        let ok = seen["region"] == "eu-west1"
            && (!http
                || (headers["mcp-protocol-version"] == "2025-11-25"
                    && headers["mcp-param-region"].is_null()
                    && headers["mcp-method"].is_null()));
        (ok, seen.to_string())
    });
    push(
        rows,
        peer.label,
        via,
        "2025-11-25 tools/call: no SEP-2243 headers in the legacy era",
        outcome,
    );
}

/// A raw HTTP POST on loopback: (status, body). The negative control needs a request the
/// client would never send.
fn raw_post(url: &str, headers: &[(&str, &str)], body: &str) -> Result<(u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or("not an http URL")?;
    let (authority, path) = rest.split_once('/').ok_or("no path")?;
    let mut stream = TcpStream::connect(authority).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no HTTP status in {response:?}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    Ok((status, body))
}

/// The server really checks `Mcp-Param-Region` against the body, so a call that went through
/// proves the client's header was right.
fn oracle_check(url: &str) -> Result<(bool, String), String> {
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"seen","arguments":{{"region":"eu-west1"}},{meta}}}}}"#
    );
    let (status, answer) = raw_post(
        url,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "seen"),
            ("Mcp-Param-Region", "us-east1"),
        ],
        &body,
    )?;
    Ok((
        status == 400 && answer.contains("-32020"),
        format!("{status} {}", one_line(&answer)),
    ))
}

/// What nginx's access log says about the requests carrying `region`.
fn routed(nginx_dir: &Path, region: &str) -> Vec<String> {
    std::fs::read_to_string(nginx_dir.join("access.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split('|').nth(3) == Some(region))
        .map(str::to_owned)
        .collect()
}

fn nginx_checks(rows: &mut Vec<Row>, bin: &Path, running: &Running, cwd: &Path) {
    let via = "HTTP via nginx";
    let target = Target::Url(&running.nginx);
    for (region, server, port) in [
        ("eu-west1", "py-peer", running.py_port),
        ("us-east1", "ts-v2-peer", running.ts_port),
    ] {
        let arg = format!("region={region}");
        let outcome = cli(
            bin,
            &target,
            "2026-07-28",
            &["tools", "call", "seen", &arg],
            cwd,
        )
        .map(|r| {
            let seen = seen_report(&r);
            // Give nginx a moment to write its log line.
            std::thread::sleep(Duration::from_millis(200));
            let lines = routed(&running.nginx_dir, region);
            let upstream = format!("127.0.0.1:{port}");
            let ok = seen["server"] == server
                && seen["headers"]["mcp-param-region"] == region
                && !lines.is_empty()
                && lines
                    .iter()
                    .all(|l| l.starts_with("POST|tools/call|seen|") && l.contains(&upstream));
            (
                ok,
                format!(
                    "answered by {}; access log: {}",
                    seen["server"],
                    lines.join("; ")
                ),
            )
        });
        push(
            rows,
            "nginx 1.22 routing on Mcp-Param-Region",
            via,
            &format!("{region} is routed to {server}"),
            outcome,
        );
    }
    // A legacy session through the proxy: SSE answers and the GET stream pass through.
    let outcome = cli(
        bin,
        &target,
        "2025-11-25",
        &["tools", "call", "add", "a=2", "b=3"],
        cwd,
    )
    .map(|r| (first_text(&r) == "5", r.to_string()));
    push(
        rows,
        "nginx 1.22 routing on Mcp-Param-Region",
        via,
        "a 2025-11-25 session (SSE) through the default route",
        outcome,
    );
}

/// Runs `toolwire-interop-client` with `args` and pushes each JSON check line it prints as a
/// row of `peer` over `via`.
fn client_checks(
    rows: &mut Vec<Row>,
    client: &Path,
    peer: &'static str,
    via: &'static str,
    args: &[&str],
    path: &str,
) {
    let mut command = Command::new(client);
    command.args(args).env("PATH", path);
    let (_, out, err) = run_limited(&mut command);
    let mut any = false;
    for line in out.lines() {
        let Ok(check) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        any = true;
        let name = check["check"].as_str().unwrap_or("?").to_owned();
        let detail = check["detail"].as_str().unwrap_or("").to_owned();
        push(rows, peer, via, &name, Ok((check["ok"] == true, detail)));
    }
    if !any {
        push(
            rows,
            peer,
            via,
            "the client ran",
            Err(err.trim().to_owned()),
        );
    }
}

/// One `mcpServers` file naming server-everything over stdio and the Python server over HTTP:
/// `tools list` through the CLI's host shows both servers' tools, and a call to each reaches
/// its server (server-everything echoes the message, the Python `where` tool the region).
fn host_check(
    bin: &Path,
    py_url: &str,
    everything_js: &Path,
    peers: &Peers,
) -> Result<(bool, String), String> {
    let file = peers.cache.join("results/interop/mcp.json");
    let config = serde_json::json!({"mcpServers": {
        "everything": {"command": "node", "args": [everything_js.display().to_string(), "stdio"]},
        "python": {"type": "http", "url": py_url},
    }});
    std::fs::write(&file, config.to_string()).map_err(|e| format!("{}: {e}", file.display()))?;
    let run = |args: &[&str]| -> Result<Value, String> {
        let mut command = Command::new(bin);
        command
            .args([
                "--config",
                &file.display().to_string(),
                "--timeout",
                "30",
                "--json",
            ])
            .args(args)
            .env("PATH", &peers.path)
            // A file the run wrote itself, trusted the way scripts and CI do.
            .env("TOOLWIRE_TRUST", "1");
        json_of(&mut command, &args.join(" "))
    };
    let listed = run(&["tools", "list"])?;
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    let echo = run(&[
        "tools",
        "call",
        "everything__echo",
        "message=through the host",
    ])?;
    let place = run(&["tools", "call", "python__where", "region=eu-west-1"])?;
    let ok = names.contains(&"everything__echo")
        && names.contains(&"python__where")
        && first_text(&echo).contains("through the host")
        && first_text(&place).contains("eu-west-1");
    Ok((
        ok,
        format!(
            "{} tools listed; everything__echo: {}; python__where: {}",
            names.len(),
            first_text(&echo),
            first_text(&place)
        ),
    ))
}

/// The Python server over the 2024-11-05 HTTP+SSE transport: reached by the fallback from
/// Streamable HTTP (`--url` of its SSE URL) and as a `type: "sse"` entry of an mcpServers file.
fn legacy_sse_checks(rows: &mut Vec<Row>, bin: &Path, running: &Running, peers: &Peers) {
    let peer = "Python mcp 2.3 (SSE transport)";
    let cwd = &peers.cache;
    let outcome = cli(
        bin,
        &Target::Url(&running.py_sse),
        "auto",
        &["tools", "call", "add", "a=2", "b=40"],
        cwd,
    )
    .map(|r| (first_text(&r) == "42", r.to_string()));
    push(
        rows,
        peer,
        "HTTP+SSE (2024-11-05)",
        "--url of the SSE endpoint: the POST is refused, the client falls back to the SSE stream and calls add",
        outcome,
    );

    let file = peers.cache.join("results/interop/sse.json");
    let outcome = (|| {
        let config =
            serde_json::json!({"mcpServers": {"legacy": {"type": "sse", "url": running.py_sse}}});
        std::fs::write(&file, config.to_string())
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let mut command = Command::new(bin);
        command
            .args([
                "--config",
                &file.display().to_string(),
                "--server",
                "legacy",
            ])
            .args([
                "--timeout",
                "30",
                "--json",
                "tools",
                "call",
                "where",
                "region=eu-west-1",
            ])
            .current_dir(cwd);
        let r = json_of(&mut command, "--config sse.json --server legacy")?;
        Ok((first_text(&r).contains("region=eu-west-1"), r.to_string()))
    })();
    push(
        rows,
        peer,
        "mcpServers file",
        "a type \"sse\" entry connects over the SSE transport and calls where",
        outcome,
    );
}

/// tinyproxy from Debian, wanting credentials: requests to the Python server go through it in
/// absolute form with `Proxy-Authorization` (given by `--proxy`, or by `HTTP_PROXY`), as its
/// log shows; without credentials it refuses.
fn proxy_checks(rows: &mut Vec<Row>, bin: &Path, running: &Running, cwd: &Path) {
    let peer = "tinyproxy 1.11 (HTTP proxy, basic auth)";
    let through = |env: Option<&str>, proxy_arg: Option<&str>| -> Result<Value, String> {
        let mut command = Command::new(bin);
        for name in [
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ] {
            command.env_remove(name);
        }
        command.args(["--url", &running.py]);
        if let Some(proxy) = proxy_arg {
            command.args(["--proxy", proxy]);
        }
        if let Some(proxy) = env {
            command.env("HTTP_PROXY", proxy);
        }
        command
            .args([
                "--timeout",
                "30",
                "--json",
                "tools",
                "call",
                "add",
                "a=20",
                "b=22",
            ])
            .current_dir(cwd);
        json_of(&mut command, "tools call add")
    };
    let logged = || {
        std::thread::sleep(Duration::from_millis(200));
        std::fs::read_to_string(running.tinyproxy_dir.join("tinyproxy.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&format!("POST {} ", running.py)))
            .count()
    };
    let with_credentials = format!("http://mcp:secret@{}", running.tinyproxy);
    for (env, arg, via, check) in [
        (
            None,
            Some(&with_credentials),
            "HTTP via --proxy",
            "tools/call through the proxy, credentials from the URL",
        ),
        (
            Some(&with_credentials),
            None,
            "HTTP via HTTP_PROXY",
            "the environment's proxy is used by default",
        ),
    ] {
        let before = logged();
        let outcome = through(env.map(String::as_str), arg.map(String::as_str)).map(|r| {
            let requests = logged() - before;
            (
                first_text(&r) == "42" && requests > 0,
                format!("{}; {requests} requests in tinyproxy's log", first_text(&r)),
            )
        });
        push(rows, peer, via, check, outcome);
    }

    let outcome = match through(None, Some(&format!("http://{}", running.tinyproxy))) {
        Ok(r) => Ok((false, format!("went through without credentials: {r}"))),
        Err(e) => Ok((e.contains("407"), e)),
    };
    push(
        rows,
        peer,
        "HTTP via --proxy",
        "without credentials the proxy's 407 is the error",
        outcome,
    );
}

fn table(rows: &[Row]) -> String {
    let mut t = String::from("| server | via | check | result |\n|---|---|---|---|\n");
    for r in rows {
        let result = if r.ok {
            "pass".to_owned()
        } else {
            format!("**FAIL**: {}", one_line(&r.detail).replace('|', "\\|"))
        };
        t.push_str(&format!(
            "| {} | {} | {} | {result} |\n",
            r.peer, r.via, r.check
        ));
    }
    t
}

/// Past the Python OAuth peer's 3 s access tokens, `add 2 3`: it must answer 5, and the
/// server's `log` must show a refresh.
fn call_after_expiry(
    toolwire: impl Fn(&[&str]) -> (bool, String, String),
    log: &Path,
) -> Result<(bool, String), String> {
    std::thread::sleep(Duration::from_secs(4));
    let (ok, out, err) = toolwire(&["--json", "tools", "call", "add", "a=2", "b=3"]);
    let refreshed = std::fs::read_to_string(log)
        .map(|log| log.lines().filter(|l| l.trim() == "refreshed").count())
        .unwrap_or(0);
    serde_json::from_str::<Value>(&out)
        .map(|v| {
            let text = v["content"][0]["text"].as_str().unwrap_or("").to_owned();
            (
                ok && text == "5" && refreshed >= 1,
                format!("add = {text}; refreshes the server saw: {refreshed}"),
            )
        })
        .map_err(|e| format!("{e}: {} {}", one_line(&out), one_line(&err)))
}

/// A `$BROWSER` that follows the authorization server's auto-approving redirect into the
/// CLI's loopback listener, straight (not through any proxy the environment names).
fn browser(peers: &Peers) -> String {
    format!(
        "{} -c 'import sys, urllib.request as u; u.build_opener(u.ProxyHandler({{}})).open(sys.argv[1], timeout=30).read()'",
        peers.python.display()
    )
}

/// `toolwire login` against the Python SDK's own authorization server, which lists
/// `offline_access` and refuses any scope a client did not register: the registration must
/// name it. Then a call after the access token expired: the CLI refreshes (the server logs it)
/// and the call goes through.
fn py_oauth_checks(rows: &mut Vec<Row>, bin: &Path, running: &Running, peers: &Peers) {
    let peer = "Python SDK 2.3 as its own authorization server";
    let dir = peers.cache.join("results/interop");
    let credentials = dir.join("py-credentials.json");
    let _ = std::fs::remove_file(&credentials);
    let browser = browser(peers);
    let toolwire = |args: &[&str]| {
        let mut command = Command::new(bin);
        command
            .args(["--timeout", "30", "--url", running.py_oauth.as_str()])
            .args(args)
            .env("TOOLWIRE_CREDENTIALS", &credentials)
            .env("BROWSER", &browser)
            .current_dir(&dir);
        run_limited(&mut command)
    };
    let (ok, out, err) = toolwire(&["--json", "login"]);
    let outcome = serde_json::from_str::<Value>(&out)
        .map(|status| {
            let scope = status["scope"].as_str().unwrap_or("").to_owned();
            (
                ok && scope.split(' ').any(|s| s == "offline_access")
                    && status["refreshable"] == true,
                format!("scope `{scope}`, refreshable {}", status["refreshable"]),
            )
        })
        .map_err(|e| format!("{e}: {} {}", one_line(&out), one_line(&err)));
    push(
        rows,
        peer,
        "CLI login",
        "dynamic registration naming every scope asked (offline_access too), PKCE, a refresh token",
        outcome,
    );
    let outcome = call_after_expiry(toolwire, &running.py_oauth_log);
    push(
        rows,
        peer,
        "CLI, refresh across expiry",
        "a call after the access token expired refreshes it (rotating) and goes through",
        outcome,
    );
}

/// Every byte a client sent through a relay.
type Capture = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

/// A TCP relay on loopback in front of `to`, keeping every byte the client sent through it:
/// the capture of what crossed the wire to the proxy.
fn capturing_relay(to: String) -> Result<(String, Capture), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let at = listener
        .local_addr()
        .map_err(|e| e.to_string())?
        .to_string();
    let captured = Capture::default();
    let keep = captured.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(upstream) = TcpStream::connect(&to) else {
                continue;
            };
            let (Ok(mut client_r), Ok(mut upstream_w)) = (client.try_clone(), upstream.try_clone())
            else {
                continue;
            };
            let (mut client_w, mut upstream_r) = (client, upstream);
            let keep = keep.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 16 * 1024];
                while let Ok(n @ 1..) = client_r.read(&mut buf) {
                    if let Ok(mut all) = keep.lock() {
                        all.extend_from_slice(&buf[..n]);
                    }
                    if upstream_w.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = upstream_w.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut upstream_r, &mut client_w);
                let _ = client_w.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    Ok((at, captured))
}

/// OAuth through the real proxy: the MCP server is plain `http://`, its authorization server
/// `https://`, and `HTTP_PROXY`/`HTTPS_PROXY` name tinyproxy (through a relay that captures
/// what the client sent). Login and a refresh across expiry go through; every request to the
/// authorization server rides a `CONNECT` tunnel (tinyproxy's log shows the tunnels and no
/// absolute-form request to the issuer), and neither the capture nor the log holds the
/// client secret, the refresh token or any token-request field in clear. (The MCP requests
/// themselves carry the access token in clear: that is what an `http://` MCP URL means.)
fn proxy_oauth_checks(rows: &mut Vec<Row>, bin: &Path, running: &Running, peers: &Peers) {
    let peer = "tinyproxy 1.11 + Python SDK 2.3 OAuth (https issuer)";
    let dir = peers.cache.join("results/interop");
    let credentials = dir.join("proxied-credentials.json");
    let _ = std::fs::remove_file(&credentials);
    let (relay, captured) = match capturing_relay(running.tinyproxy.clone()) {
        Ok(relay) => relay,
        Err(e) => {
            push(
                rows,
                peer,
                "HTTP_PROXY + HTTPS_PROXY",
                "the capture relay starts",
                Err(e),
            );
            return;
        }
    };
    let proxy = format!("http://mcp:secret@{relay}");
    // The browser goes straight to the authorization server (trusting its CA through the
    // SSL_CERT_FILE it inherits): only what the client sends is under test.
    let browser = browser(peers);
    let toolwire = |args: &[&str]| {
        let mut command = Command::new(bin);
        for name in ["NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"] {
            command.env_remove(name);
        }
        command
            .args(["--timeout", "30", "--url", running.py_tls.as_str()])
            .args(args)
            .env("HTTP_PROXY", &proxy)
            .env("HTTPS_PROXY", &proxy)
            .env("SSL_CERT_FILE", &running.py_tls_ca)
            .env("TOOLWIRE_CREDENTIALS", &credentials)
            .env("BROWSER", &browser)
            .current_dir(&dir);
        run_limited(&mut command)
    };
    let (ok, out, err) = toolwire(&["--json", "login"]);
    let outcome = serde_json::from_str::<Value>(&out)
        .map(|status| {
            (
                ok && status["refreshable"] == true
                    && status["issuer"] == format!("https://{}", running.py_tls_issuer),
                format!(
                    "issuer {}, refreshable {}",
                    status["issuer"], status["refreshable"]
                ),
            )
        })
        .map_err(|e| format!("{e}: {} {}", one_line(&out), one_line(&err)));
    push(
        rows,
        peer,
        "HTTP_PROXY + HTTPS_PROXY",
        "login through the proxy: metadata, registration and token requests to the https issuer",
        outcome,
    );
    let outcome = call_after_expiry(toolwire, &running.py_tls_log);
    push(
        rows,
        peer,
        "HTTP_PROXY + HTTPS_PROXY",
        "a call after expiry refreshes through the proxy and goes through",
        outcome,
    );

    // What crossed the proxy.
    std::thread::sleep(Duration::from_millis(200));
    let capture = captured
        .lock()
        .map(|c| String::from_utf8_lossy(&c).into_owned())
        .unwrap_or_default();
    let log = std::fs::read_to_string(running.tinyproxy_dir.join("tinyproxy.log"))
        .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned())
        .unwrap_or_default();
    let stored: Value = std::fs::read_to_string(&credentials)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null);
    let entry = &stored["entries"][0];
    // What must not cross in clear, by name (the values themselves are never printed).
    let mut secrets: Vec<(&str, String)> = [
        ("the client secret", &entry["client"]["client_secret"]),
        ("the refresh token", &entry["tokens"]["refresh_token"]),
    ]
    .into_iter()
    .filter_map(|(name, v)| v.as_str().map(|v| (name, v.to_owned())))
    .collect();
    let found_secrets = secrets.len();
    // The names of the token request's and registration's fields, and their paths.
    for field in [
        "grant_type",
        "code_verifier",
        "refresh_token",
        "client_secret",
        "redirect_uri",
        // At a line's start: `Proxy-Authorization: Basic` is the proxy's own.
        "\r\nAuthorization: Basic",
        "/token",
        "/register",
    ] {
        secrets.push((field, field.to_owned()));
    }
    let tunnel = format!("CONNECT {}", running.py_tls_issuer);
    let tunnels_captured = capture.matches(&tunnel).count();
    let tunnels_logged = log.matches(&tunnel).count();
    let absolute = format!("http://{}", running.py_tls_issuer);
    // Header names go out in lower case: compare without case.
    let (capture_lower, log_lower) = (capture.to_lowercase(), log.to_lowercase());
    let in_clear: Vec<String> = secrets
        .iter()
        .filter_map(|(name, s)| {
            let s = s.to_lowercase();
            let capture = capture_lower.contains(&s).then_some("capture");
            let log = log_lower.contains(&s).then_some("proxy log");
            capture
                .or(log)
                .map(|place| format!("{name} in the {place}"))
        })
        .collect();
    let plain_mcp = capture
        .matches(&format!("POST {} ", running.py_tls))
        .count();
    push(
        rows,
        peer,
        "HTTP_PROXY + HTTPS_PROXY",
        "OAuth requests only in CONNECT tunnels; no secret or token-request field in the capture or proxy log",
        Ok((
            found_secrets == 2
                && tunnels_captured >= 3
                && tunnels_logged >= 3
                && plain_mcp > 0
                && in_clear.is_empty()
                && !capture.contains(&absolute)
                && !log.contains(&absolute),
            format!(
                "{tunnels_captured} tunnels captured, {tunnels_logged} logged, {plain_mcp} MCP posts forwarded, {} bytes captured; in clear: {in_clear:?}",
                capture.len(),
            ),
        )),
    );
}

/// The TypeScript SDK's OAuth example: without credentials the CLI says to log in; `login`
/// registers, authorizes through a `$BROWSER` that follows the auto-approving redirect into
/// the loopback listener, and keeps the tokens (0600); a second process lists tools with them,
/// and so does an `mcpServers` entry naming the server; `auth status` shows the login without
/// a token; `logout` forgets it.
fn oauth_checks(rows: &mut Vec<Row>, bin: &Path, running: &Running, peers: &Peers) {
    let peer = "TypeScript SDK 1.32 OAuth example (--oauth-strict)";
    let dir = peers.cache.join("results/interop");
    let credentials = dir.join("credentials.json");
    let _ = std::fs::remove_file(&credentials);
    let browser = browser(peers);
    let cli = |args: &[&str]| {
        let mut command = Command::new(bin);
        command
            .args(["--timeout", "30"])
            .args(args)
            .env("TOOLWIRE_CREDENTIALS", &credentials)
            .env("BROWSER", &browser)
            .current_dir(&dir);
        run_limited(&mut command)
    };
    let toolwire = |args: &[&str]| cli(&[&["--url", running.ts_oauth.as_str()], args].concat());

    let (ok, out, err) = toolwire(&["--json", "tools", "list"]);
    push(
        rows,
        peer,
        "CLI, no credentials",
        "a command without credentials fails (exit 3) and names the login command",
        Ok((
            // Under --json the failure is one document on stdout: exit 3, nothing else.
            !ok && err.contains("login`")
                && serde_json::from_str::<Value>(&out).is_ok_and(|v| v["error"]["exit"] == 3),
            one_line(&err),
        )),
    );

    let (ok, out, err) = toolwire(&["--json", "login"]);
    let outcome = (|| {
        let status: Value = serde_json::from_str(&out).map_err(|e| format!("{e}: {out} {err}"))?;
        #[cfg(unix)]
        let private = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(&credentials)
                .map(|m| m.permissions().mode() & 0o777 == 0o600)
                .unwrap_or(false)
        };
        #[cfg(not(unix))]
        let private = true;
        Ok((
            ok && status["client_id"].is_string() && status["scope"] == "mcp:tools" && private,
            format!("{status}; credentials file 0600: {private}"),
        ))
    })();
    push(
        rows,
        peer,
        "CLI login",
        "dynamic registration, PKCE, the browser's redirect into the loopback listener, tokens kept 0600",
        outcome,
    );

    let (ok, out, err) = toolwire(&["--json", "tools", "list"]);
    let outcome = serde_json::from_str::<Value>(&out)
        .map(|v| {
            let n = v["tools"].as_array().map_or(0, Vec::len);
            (ok && n > 0, format!("{n} tools"))
        })
        .map_err(|e| format!("{e}: {} {}", one_line(&out), one_line(&err)));
    push(
        rows,
        peer,
        "CLI, stored token",
        "a second process lists tools with the stored token, no login",
        outcome,
    );

    let config = dir.join("oauth-mcp.json");
    let outcome = std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {"ts": {"type": "http", "url": running.ts_oauth}}})
            .to_string(),
    )
    .map_err(|e| format!("{}: {e}", config.display()))
    .and_then(|()| {
        let config = config.to_string_lossy();
        let (ok, out, err) = cli(&["--config", &config, "--json", "tools", "list"]);
        let v: Value = serde_json::from_str(&out)
            .map_err(|e| format!("{e}: {} {}", one_line(&out), one_line(&err)))?;
        let n = v["tools"].as_array().map_or(0, Vec::len);
        let state = &v["servers"][0]["state"];
        Ok((
            ok && n > 0 && state == "ready",
            format!("server {state}, {n} tools"),
        ))
    });
    push(
        rows,
        peer,
        "CLI, mcpServers entry",
        "an entry naming the server lists its tools with the stored login (the host's OAuth)",
        outcome,
    );

    let (ok, out, _) = toolwire(&["auth", "status", "--json"]);
    let stored = std::fs::read_to_string(&credentials).unwrap_or_default();
    let token = serde_json::from_str::<Value>(&stored)
        .ok()
        .and_then(|v| {
            v["entries"][0]["tokens"]["access_token"]
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_default();
    push(
        rows,
        peer,
        "CLI auth status",
        "server, issuer, client and scope shown; the token is not",
        Ok((
            ok && out.contains(&running.ts_oauth) && !token.is_empty() && !out.contains(&token),
            one_line(&out),
        )),
    );

    let (ok, _, err) = toolwire(&["logout"]);
    let (_, after, _) = toolwire(&["auth", "status", "--json"]);
    push(
        rows,
        peer,
        "CLI logout",
        "the stored login is forgotten",
        Ok((
            ok && after.contains("\"credentials\":[]"),
            one_line(&format!("{err} {after}")),
        )),
    );
}

pub(crate) fn run(root: &Path, only: Option<&str>) -> Result<(), String> {
    // A developer's run of some groups (`cargo xtask interop gateway,fleet`): the same checks,
    // no table written.
    const GROUPS: [&str; 5] = ["peers", "gateway", "fleet", "startup", "rest"];
    if let Some(unknown) = only.and_then(|only| only.split(',').find(|g| !GROUPS.contains(g))) {
        return Err(format!(
            "no interop group `{unknown}`: the groups are {}",
            GROUPS.join(", ")
        ));
    }
    let wanted = |group: &str| only.is_none_or(|only| only.split(',').any(|g| g == group));
    let peers = install(root)?;
    let target = crate::gate_bins(root, &["toolwire", "toolwire-interop-client"])?;
    let bin = target.join("toolwire");
    let client = target.join("toolwire-interop-client");
    let running = start(root, &peers)?;
    let mut rows = Vec::new();
    let cwd = root;

    if wanted("peers") {
        let py = PYTHON.label;
        seen_checks(
            &mut rows,
            &bin,
            &PYTHON,
            "HTTP, SSE answers",
            &Target::Url(&running.py),
            cwd,
            true,
        );
        push(
            &mut rows,
            py,
            "HTTP, SSE answers",
            "the server rejects a lying Mcp-Param-Region (negative control)",
            oracle_check(&running.py),
        );
        let outcome = cli(
            &bin,
            &Target::Url(&running.py_json),
            "2025-11-25",
            &["info"],
            cwd,
        )
        .and_then(|info| {
            let r = cli(
                &bin,
                &Target::Url(&running.py_json),
                "2025-11-25",
                &["tools", "call", "add", "a=2", "b=3"],
                cwd,
            )?;
            Ok((
                info["sessionId"].is_string() && r["structuredContent"]["result"] == 5,
                format!("session {}; {}", info["sessionId"], r),
            ))
        });
        push(
            &mut rows,
            py,
            "HTTP, JSON answers",
            "2025-11-25 session and tools/call",
            outcome,
        );
        let py_stdio = format!(
            "{} {} stdio",
            peers.python.display(),
            root.join("xtask/interop/py_server.py").display()
        );
        seen_checks(
            &mut rows,
            &bin,
            &PYTHON,
            "stdio",
            &Target::Stdio(py_stdio),
            cwd,
            false,
        );

        let ts = TYPESCRIPT.label;
        seen_checks(
            &mut rows,
            &bin,
            &TYPESCRIPT,
            "HTTP",
            &Target::Url(&running.ts),
            cwd,
            true,
        );
        push(
            &mut rows,
            ts,
            "HTTP",
            "the server rejects a lying Mcp-Param-Region (negative control)",
            oracle_check(&running.ts),
        );
        let ts_stdio = Target::Stdio(format!(
            "node {} stdio",
            peers.cache.join("tsv2/ts_server.mjs").display()
        ));
        let outcome = cli(
            &bin,
            &ts_stdio,
            "2026-07-28",
            &["tools", "call", "where", "region=x y"],
            cwd,
        )
        .map(|r| (first_text(&r) == "region=x y", r.to_string()));
        push(&mut rows, ts, "stdio", "2026-07-28 tools/call", outcome);

        let everything = "server-everything 2026.8.31";
        client_checks(
            &mut rows,
            &client,
            everything,
            "HTTP",
            &["everything", "--url", &running.everything],
            &peers.path,
        );
        let everything_js = peers
            .cache
            .join("everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        client_checks(
            &mut rows,
            &client,
            everything,
            "stdio",
            &[
                "everything",
                "--stdio",
                "node",
                &everything_js.display().to_string(),
                "stdio",
            ],
            &peers.path,
        );
        client_checks(
            &mut rows,
            &client,
            PYTHON.label,
            "HTTP",
            &["logs", "--url", &running.py],
            &peers.path,
        );

        let outcome = host_check(&bin, &running.py, &everything_js, &peers);
        push(
            &mut rows,
            "Python mcp + server-everything",
            "mcpServers file",
            "one config, two servers: listed as server__tool, each call routed",
            outcome,
        );
    }
    if wanted("gateway") {
        gateway::gateway_checks(&mut rows, &bin, &running, &peers, root);
    }
    if wanted("fleet") {
        gateway::fleet_checks(&mut rows, &bin, &running, &peers, root);
    }
    if wanted("startup") {
        startup::startup_checks(&mut rows, &bin, &peers, root);
    }
    if wanted("rest") {
        gateway_auth::gateway_auth_checks(&mut rows, &bin, &peers);
        gateway_auth::ts_oauth_client_check(&mut rows, &bin, &peers);

        push(
            &mut rows,
            "ext-apps basic-vanillajs 2.0.3",
            "stdio",
            "MCP Apps: the tool's view listed, read as text/html;profile=mcp-app HTML",
            apps_check(&bin, &peers, cwd),
        );

        nginx_checks(&mut rows, &bin, &running, cwd);
        legacy_sse_checks(&mut rows, &bin, &running, &peers);
        proxy_checks(&mut rows, &bin, &running, cwd);
        oauth_checks(&mut rows, &bin, &running, &peers);
        py_oauth_checks(&mut rows, &bin, &running, &peers);
        proxy_oauth_checks(&mut rows, &bin, &running, &peers);
    }
    drop(running);

    let table = table(&rows);
    println!("\n{table}");
    let doc = format!(
        "# Interop\n\nThe `toolwire` CLI and library against real MCP servers nobody on this team wrote, \
         as run by `cargo xtask interop` (which installs them from PyPI, the npm registry and Debian \
         into `~/.cache/toolwire-peers` and runs them on loopback). Each check asserts on what the \
         server saw or answered: the `seen` tools of `xtask/interop/` report the headers that \
         arrived, server-everything's tools quote what the client's sampling and elicitation \
         handlers answered, and nginx's access log shows which backend each call reached.\n\n{table}"
    );
    if only.is_none() {
        std::fs::write(root.join("docs/interop.md"), doc)
            .map_err(|e| format!("docs/interop.md: {e}"))?;
    }
    let failed = rows.iter().filter(|r| !r.ok).count();
    eprintln!(
        "interop: {}/{} checks passed",
        rows.len() - failed,
        rows.len()
    );
    if failed == 0 {
        Ok(())
    } else {
        Err(format!("{failed} interop checks failed"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn the_access_log_is_read_by_region() {
        let dir = std::env::temp_dir().join(format!("xtask-interop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("access.log"),
            "POST|server/discover|||127.0.0.1:1|200\nPOST|tools/call|seen|eu-west1|127.0.0.1:1|200\nPOST|tools/call|seen|us-east1|127.0.0.1:2|200\n",
        )
        .unwrap();
        assert_eq!(
            routed(&dir, "us-east1"),
            ["POST|tools/call|seen|us-east1|127.0.0.1:2|200"]
        );
        assert!(routed(&dir, "ap-south1").is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_config_routes_both_regions_and_logs_the_upstream() {
        let conf = nginx_conf(8180, 1, 2, 3);
        assert!(conf.contains("upstream mcp_eu      { server 127.0.0.1:1; }"));
        assert!(conf.contains("upstream mcp_us      { server 127.0.0.1:2; }"));
        assert!(conf.contains("upstream mcp_default { server 127.0.0.1:3; }"));
        assert!(conf.contains("listen 127.0.0.1:8180;"));
        assert!(conf.contains("$http_mcp_param_region|$upstream_addr"));
    }
}

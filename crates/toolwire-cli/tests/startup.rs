//! Servers as they really start: one that reads nothing for its first 8 seconds (a package
//! being fetched, a runtime warming up), and one that exits at once with a reason on stderr;
//! through `--stdio`, a configuration file (the host) and the gateway.

#![cfg(unix)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

use std::time::{Duration, Instant};

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

/// How long the slow server sleeps before it reads its input: past the 5 s era probe.
const SLOW_START_SECS: u32 = 8;

/// The reference server over stdio speaking only `eras`, after its slow start.
fn slow_start(eras: &str) -> String {
    format!("sleep {SLOW_START_SECS}; exec '{BIN}' serve --stdio --eras {eras}")
}

/// A server that says why on stderr and exits 1 before reading anything.
const CRASH: &str = "echo 'KeyError: GITHUB_TOKEN is not set' >&2; exit 1";

/// A reconnect policy would have spent about a minute on a server that exits at start.
const AT_ONCE: Duration = Duration::from_secs(15);

/// An mcpServers file holding `servers`, removed when dropped.
struct File(std::path::PathBuf);

impl Drop for File {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn file(tag: &str, servers: &serde_json::Value) -> File {
    let path = std::env::temp_dir().join(format!(
        "toolwire-cli-startup-{tag}-{}.json",
        std::process::id()
    ));
    std::fs::write(
        &path,
        serde_json::json!({ "mcpServers": servers }).to_string(),
    )
    .unwrap();
    File(path)
}

fn sh(script: &str) -> serde_json::Value {
    serde_json::json!({"command": "sh", "args": ["-c", script]})
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn stdio_servers_of_either_era_that_start_after_8_seconds_connect_in_their_era() {
    for (eras, era) in [("modern", "2026-07-28"), ("legacy", "2025-11-25")] {
        let command = format!("sh -c \"{}\"", slow_start(eras));
        let info = toolwire(&["--stdio", &command, "info"]);
        assert!(info.status.success(), "{eras}: {}", stderr(&info));
        assert!(
            stdout(&info).contains(&format!("protocol version: {era}")),
            "{eras}: {}",
            stdout(&info)
        );
    }
}

#[test]
fn a_config_entry_that_starts_after_8_seconds_is_ready_in_the_modern_era() {
    let config = file(
        "slow",
        &serde_json::json!({"slow": sh(&slow_start("modern"))}),
    );
    let servers = toolwire(&["--config", config.0.to_str().unwrap(), "--json", "servers"]);
    assert!(servers.status.success(), "{}", stderr(&servers));
    let servers = json(&servers);
    let slow = &servers["servers"][0];
    assert_eq!(slow["state"], "ready", "{servers}");
    assert_eq!(slow["protocolVersion"], "2026-07-28", "{servers}");
}

#[test]
fn a_gateway_upstream_that_starts_after_8_seconds_is_listed_and_callable() {
    let config = file(
        "gateway-slow",
        &serde_json::json!({"slow": sh(&slow_start("modern"))}),
    );
    let gateway = format!(
        "env TOOLWIRE_TRUST=1 '{BIN}' gateway --config '{}' --stdio",
        config.0.display()
    );
    let call = toolwire(&[
        "--stdio",
        &gateway,
        "--timeout",
        "60",
        "--json",
        "tools",
        "call",
        "slow__echo",
        "text=late but here",
    ]);
    assert!(call.status.success(), "{}", stderr(&call));
    assert_eq!(json(&call)["content"][0]["text"], "late but here");
}

#[test]
fn a_stdio_server_that_exits_at_start_fails_at_once_with_its_exit_status_and_stderr() {
    let started = Instant::now();
    let list = toolwire(&["--stdio", &format!("sh -c \"{CRASH}\""), "tools", "list"]);
    let took = started.elapsed();
    assert_eq!(list.status.code(), Some(3), "{}", stderr(&list));
    let said = stderr(&list);
    assert!(said.contains("before completing the handshake"), "{said}");
    assert!(said.contains("exit status: 1"), "{said}");
    assert!(said.contains("GITHUB_TOKEN is not set"), "{said}");
    assert!(
        took < AT_ONCE,
        "took {took:?}: restarted as if it had once worked"
    );
}

#[test]
fn a_config_entry_that_exits_at_start_shows_as_failed_with_its_stderr() {
    let config = file(
        "crash",
        &serde_json::json!({"crashy": sh(CRASH), "ok": {"command": BIN, "args": ["serve", "--stdio"]}}),
    );
    let started = Instant::now();
    let servers = toolwire(&["--config", config.0.to_str().unwrap(), "--json", "servers"]);
    let took = started.elapsed();
    let document = json(&servers);
    let by_name = |name: &str| {
        document["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let crashy = by_name("crashy");
    assert_eq!(crashy["state"], "failed", "{document}");
    let reason = crashy["reason"].as_str().unwrap();
    assert!(reason.contains("GITHUB_TOKEN is not set"), "{reason}");
    assert_eq!(by_name("ok")["state"], "ready", "{document}");
    assert!(took < AT_ONCE, "took {took:?}");
}

/// `GET path` on `addr` (HTTP/1.1, one request): the status and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

#[test]
fn a_gateway_retries_an_upstream_that_came_up_late_and_logs_each_step_under_its_name() {
    // A port nobody listens on yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let late = format!("http://127.0.0.1:{port}/mcp");
    let config = file(
        "late",
        &serde_json::json!({"late": {"type": "http", "url": late}, "crashy": sh(CRASH)}),
    );
    let started = Instant::now();
    let gateway = Listening::start(
        Command::new(BIN)
            .args(["gateway", "--config", config.0.to_str().unwrap()])
            .args(["--http", "127.0.0.1:0"])
            .env("TOOLWIRE_TRUST", "1")
            .env_remove("RUST_LOG"),
    );
    let url = gateway.url.clone();
    let logged = |needles: &[&str]| gateway.logged(needles);
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();

    // Both tried and failed: the gateway is ready (its other upstreams would serve), and
    // each failure is logged at the default level under the upstream's name.
    until(Duration::from_secs(15), "both upstreams failed", || {
        let (_, body) = get(&addr, "/readyz");
        let body: Value = serde_json::from_str(&body).unwrap_or_default();
        body["servers"]["late"]["state"] == "failed"
            && body["servers"]["crashy"]["state"] == "failed"
    });
    let (status, body) = get(&addr, "/readyz");
    assert_eq!(status, 200, "{body}");
    until(Duration::from_secs(5), "the failures logged", || {
        logged(&["name=late", "failed"]) && logged(&["name=crashy", "GITHUB_TOKEN is not set"])
    });
    let call = Command::new(BIN)
        .args(["--url", &url, "batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = call.stdin.as_ref().unwrap();
        writeln!(
            stdin,
            r#"{{"tool": "late__echo", "arguments": {{"text": "x"}}}}"#
        )
        .unwrap();
    }
    let call = call.wait_with_output().unwrap();
    let answer = stdout(&call);
    assert!(
        answer.contains("upstream `late` is unavailable (failed)"),
        "{answer}"
    );

    // The upstream comes up 5 s after the gateway: no restart, it is listed and callable.
    std::thread::sleep(Duration::from_secs(5).saturating_sub(started.elapsed()));
    let (child, line) = serve_with(&["--http", &format!("127.0.0.1:{port}")]);
    let _served = Served { child, url: line };
    until(Duration::from_secs(60), "the late upstream listed", || {
        let list = toolwire(&["--url", &url, "--json", "tools", "list"]);
        list.status.success() && tool_names(&json(&list)).contains(&"late__echo")
    });
    let echo = toolwire(&[
        "--url",
        &url,
        "--json",
        "tools",
        "call",
        "late__echo",
        "text=up",
    ]);
    assert!(echo.status.success(), "{}", stderr(&echo));
    assert_eq!(json(&echo)["content"][0]["text"], "up");
    until(Duration::from_secs(5), "its readiness logged", || {
        logged(&["name=late", "ready"])
    });
}

#[test]
fn an_entry_pinned_to_a_legacy_protocol_speaks_it_in_the_host_and_the_gateway() {
    let config = file(
        "pinned",
        &serde_json::json!({"py": {"command": BIN, "args": ["serve", "--stdio"], "protocol": "2025-06-18"}}),
    );
    let servers = toolwire(&["--config", config.0.to_str().unwrap(), "--json", "servers"]);
    assert!(servers.status.success(), "{}", stderr(&servers));
    let servers = json(&servers);
    assert_eq!(
        servers["servers"][0]["protocolVersion"], "2025-06-18",
        "{servers}"
    );
    // Behind the gateway: the upstream's era shows on `/readyz`.
    let (child, line) = spawn_listening(
        "gateway",
        &[
            "--config",
            config.0.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ],
    );
    let _gateway = Served {
        child,
        url: line.clone(),
    };
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    until(
        Duration::from_secs(30),
        "the pinned upstream ready at its version",
        || {
            let (_, body) = get(&addr, "/readyz");
            let body: Value = serde_json::from_str(&body).unwrap_or_default();
            body["servers"]["py"]["version"] == "2025-06-18"
        },
    );
}

#[test]
fn an_sse_entry_whose_url_answers_404_fails_at_once_naming_the_404() {
    let served = serve(&[]);
    // The reference server serves no HTTP+SSE endpoint unless asked: its /sse is a 404.
    let sse = served.url.replace("/mcp", "/sse");
    let config = file(
        "sse-404",
        &serde_json::json!({"old": {"type": "sse", "url": sse}}),
    );
    let started = Instant::now();
    let servers = toolwire(&["--config", config.0.to_str().unwrap(), "--json", "servers"]);
    let took = started.elapsed();
    let document = json(&servers);
    let old = &document["servers"][0];
    assert_eq!(old["state"], "failed", "{document}");
    assert!(
        old["reason"].as_str().unwrap().contains("404"),
        "{document}"
    );
    assert!(took < AT_ONCE, "took {took:?}");
}

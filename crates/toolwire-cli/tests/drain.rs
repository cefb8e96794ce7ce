//! `toolwire gateway` stopped as a service manager stops it: SIGTERM drains (calls in flight
//! complete, new ones are refused with a retryable 503, `/readyz` turns 503 at once), the
//! process exits 0 with its stdio children gone; a second SIGTERM stops at once.

#![cfg(target_os = "linux")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

use std::time::{Duration, Instant};

/// A directory for the test `tag` and, in it, a file naming one stdio upstream (the
/// reference server) `ref`.
fn one_upstream(tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("toolwire-drain-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mcp.json");
    let text =
        serde_json::json!({"mcpServers": {"ref": {"command": BIN, "args": ["serve", "--stdio"]}}});
    std::fs::write(&path, text.to_string()).unwrap();
    (dir, path)
}

/// A gateway over one stdio upstream (the reference server), draining up to `drain` seconds.
fn gateway(tag: &str, drain: &str) -> (Listening, std::path::PathBuf) {
    let (dir, path) = one_upstream(tag);
    let listening = Listening::start(
        Command::new(BIN)
            .args(["gateway", "--config"])
            .arg(&path)
            .args(["--http", "127.0.0.1:0", "--drain-timeout", drain])
            .env("TOOLWIRE_TRUST", "1"),
    );
    (listening, dir)
}

/// A 2026-07-28 `tools/call` of `ref__echo`, as raw HTTP.
fn call(url: &str) -> String {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "ref__echo", "arguments": {"text": "late"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    exchange(
        url,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: {{host}}\r\nConnection: close\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: ref__echo\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: the command may hold spaces, the fields after it do not.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        if after.split_whitespace().nth(1) == Some(pid.to_string().as_str()) {
            found.push(child);
        }
    }
    found
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

fn terminate(pid: u32) {
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Waits up to `limit` for `child` to exit.
fn exit_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let began = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            began.elapsed() < limit,
            "the gateway did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_lets_32_calls_in_flight_complete_refuses_new_ones_and_exits_0_with_no_child_left() {
    let (mut gateway, dir) = gateway("drain", "20");
    let pid = gateway.child.id();
    let url = gateway.url.clone();
    until(Duration::from_secs(30), "the upstream is ready", || {
        get(&url, "/readyz").starts_with("HTTP/1.1 200")
    });
    let upstreams = children(pid);
    assert!(!upstreams.is_empty(), "the stdio upstream runs as a child");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(async {
        let client = toolwire::Client::builder("drain-test", "0")
            .connect_http(toolwire::HttpTransport::builder(&url))
            .unwrap();
        client.ready().await.unwrap();
        client
    });
    // 32 calls of a 2-second tool, each noting when it ended.
    let calls: Vec<_> = (0..32)
        .map(|i| {
            let client = client.clone();
            runtime.spawn(async move {
                let result = client
                    .call_tool(
                        "ref__slow",
                        serde_json::json!({"steps": 1, "delay_ms": 2000}),
                    )
                    .await;
                (i, result, Instant::now())
            })
        })
        .collect();
    // Every call has reached the upstream: the gateway counts it in flight.
    until(Duration::from_secs(10), "32 calls in flight", || {
        get(&url, "/metrics")
            .lines()
            .any(|l| l.starts_with("toolwire_gateway_calls_in_flight ") && l.ends_with(" 32"))
    });
    terminate(pid);
    let signalled = Instant::now();
    until(Duration::from_secs(5), "/readyz says it drains", || {
        let page = get(&url, "/readyz");
        page.starts_with("HTTP/1.1 503") && page.contains("\"draining\":true")
    });
    let refused = call(&url);
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused}"
    );
    let status = exit_within(&mut gateway.child, Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "within the drain deadline"
    );
    for call in calls {
        let (i, result, ended) = runtime.block_on(call).unwrap();
        let result = result.unwrap_or_else(|e| panic!("call {i} failed: {e}"));
        assert_ne!(result.is_error, Some(true), "call {i}: {result:?}");
        assert!(ended > signalled, "call {i} was in flight at the signal");
    }
    for upstream in upstreams {
        until(Duration::from_secs(5), "the stdio upstream is gone", || {
            gone(upstream)
        });
    }
    assert!(
        gateway.logged(&["draining"]),
        "{:?}",
        gateway.said.lock().unwrap()
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_second_sigterm_stops_at_once_with_a_call_still_in_flight() {
    let (mut gateway, dir) = gateway("twice", "60");
    let pid = gateway.child.id();
    let url = gateway.url.clone();
    until(Duration::from_secs(30), "the upstream is ready", || {
        get(&url, "/readyz").starts_with("HTTP/1.1 200")
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let call = runtime.spawn({
        let url = url.clone();
        async move {
            let client = toolwire::Client::builder("drain-test", "0")
                .connect_http(toolwire::HttpTransport::builder(&url))
                .unwrap();
            client
                .call_tool(
                    "ref__slow",
                    serde_json::json!({"steps": 1, "delay_ms": 30000}),
                )
                .await
        }
    });
    until(Duration::from_secs(10), "the call is in flight", || {
        get(&url, "/metrics")
            .lines()
            .any(|l| l.starts_with("toolwire_gateway_calls_in_flight ") && l.ends_with(" 1"))
    });
    terminate(pid);
    until(Duration::from_secs(5), "it drains", || {
        gateway.logged(&["draining"])
    });
    let signalled = Instant::now();
    terminate(pid);
    let status = exit_within(&mut gateway.child, Duration::from_secs(10));
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "the second signal did not wait for the 30-second call"
    );
    assert!(status.success(), "{status:?}");
    assert!(
        gateway.logged(&["stopping at once"]),
        "{:?}",
        gateway.said.lock().unwrap()
    );
    call.abort();
    let _ = std::fs::remove_dir_all(dir);
}

/// Over stdio the same signal drains too: no further request is read, the call in flight
/// answers on stdout, and the process exits 0 although its stdin is still open.
#[test]
fn sigterm_over_stdio_writes_the_answer_in_flight_and_exits_0_with_stdin_still_open() {
    use std::io::{BufRead as _, Write as _};
    let (dir, path) = one_upstream("stdio");
    let mut gateway = Command::new(BIN)
        .args(["gateway", "--stdio", "--config"])
        .arg(&path)
        .env("TOOLWIRE_TRUST", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = collect_stderr(&mut gateway);
    let mut stdin = gateway.stdin.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<serde_json::Value>();
    let stdout = std::io::BufReader::new(gateway.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Ok(message) = serde_json::from_str(&line) {
                let _ = lines_tx.send(message);
            }
        }
    });
    let meta = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "drain-test", "version": "0"}});
    let mut send = |message: serde_json::Value| {
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    // Listed once the upstream is up.
    let began = Instant::now();
    let mut listed = false;
    for id in 100.. {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "ref__slow never listed"
        );
        send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/list",
            "params": {"_meta": meta}}),
        );
        let answer = lines.recv_timeout(Duration::from_secs(10)).unwrap();
        if answer.to_string().contains("ref__slow") {
            listed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(listed);
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "ref__slow", "arguments": {"steps": 1, "delay_ms": 1500}, "_meta": meta}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    terminate(gateway.id());
    let answer = lines.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["content"].is_array(), "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let status = exit_within(&mut gateway, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() >= Duration::from_millis(1000),
        "it waited for the call"
    );
    let said = said.lock().unwrap();
    assert!(
        said.iter().any(|l| l.contains("drained; stopping")),
        "{said:?}"
    );
    drop(stdin);
    let _ = std::fs::remove_dir_all(dir);
}

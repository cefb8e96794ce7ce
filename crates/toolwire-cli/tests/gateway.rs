//! `toolwire gateway` as users run it: over stdio and HTTP, in front of reference servers
//! started as child processes (one per entry, however many clients), its file applied again,
//! its audit lines and threads. What it refuses before serving is in `gateway_check.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

/// The command line that starts the gateway over stdio, for `--stdio` (a child's environment
/// is the client's safe subset, so the file is trusted on the command line).
fn stdio_gateway(config: &Config) -> String {
    format!(
        "env TOOLWIRE_TRUST=1 {BIN} gateway --config {}",
        shlex_quote(config.path.to_str().unwrap())
    ) + " --stdio"
}

fn shlex_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn a_stdio_gateway_serves_both_servers_to_clients_of_both_eras() {
    let config = config("stdio");
    let gateway = stdio_gateway(&config);
    for protocol in ["auto", "2025-06-18"] {
        let list = toolwire(&[
            "--stdio",
            &gateway,
            "--protocol",
            protocol,
            "--json",
            "tools",
            "list",
        ]);
        assert!(
            list.status.success(),
            "{}",
            String::from_utf8_lossy(&list.stderr)
        );
        let list = json(&list);
        let names = tool_names(&list);
        for expected in ["ref__echo", "old__echo", "ref__execute_sql", "old__add"] {
            assert!(names.contains(&expected), "{protocol}: {names:?}");
        }
        let call = toolwire(&[
            "--stdio",
            &gateway,
            "--protocol",
            protocol,
            "--json",
            "tools",
            "call",
            "old__execute_sql",
            "region=eu-west-1",
            "query=SELECT 1",
        ]);
        assert!(
            call.status.success(),
            "{}",
            String::from_utf8_lossy(&call.stderr)
        );
        assert_eq!(
            json(&call)["content"][0]["text"],
            "region=eu-west-1 rows=1 query=SELECT 1"
        );
    }
}

#[test]
fn progressive_above_tools_lists_the_three_discovery_tools_and_they_reach_the_rest() {
    let config = config("progressive");
    let gateway = stdio_gateway(&config) + " --progressive-above-tools 5";
    let list = toolwire(&["--stdio", &gateway, "--json", "tools", "list"]);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    // The CLI lists in name order.
    assert_eq!(
        tool_names(&json(&list)),
        ["call_tool", "describe_tool", "search_tools"]
    );
    let found = toolwire(&[
        "--stdio",
        &gateway,
        "--json",
        "tools",
        "call",
        "search_tools",
        "query=add two integers",
        "limit=1",
    ]);
    assert!(
        found.status.success(),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    let first = &json(&found)["structuredContent"]["tools"][0]["name"];
    assert!(
        first == "ref__add" || first == "old__add",
        "{}",
        json(&found)
    );
}

/// The pids of the children of `parent` (Linux's /proc) whose command line contains `needle`.
#[cfg(target_os = "linux")]
fn children(parent: u32, needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // The parent pid is the 4th field, after the command in parentheses.
            let their_parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            (their_parent == Some(parent) && String::from_utf8_lossy(&cmdline).contains(needle))
                .then_some(pid)
        })
        .collect()
}

/// Whether process `pid` runs (exists and is not a zombie).
#[cfg(target_os = "linux")]
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

#[cfg(target_os = "linux")]
#[test]
fn many_clients_over_http_share_one_child_per_entry_and_none_outlive_the_gateway() {
    let config = config("http");
    let (mut gateway, line) = spawn_listening(
        "gateway",
        &[
            "--config",
            config.path.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ],
    );
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");

    // Twelve clients, each its own session (six of each era), one after another and at once.
    let clients: Vec<std::thread::JoinHandle<Output>> = (0..12)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                let protocol = if i % 2 == 0 { "auto" } else { "2025-06-18" };
                toolwire(&[
                    "--url",
                    &url,
                    "--protocol",
                    protocol,
                    "--json",
                    "tools",
                    "call",
                    "ref__echo",
                    &format!("text=client {i}"),
                ])
            })
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        let out = client.join().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(json(&out)["content"][0]["text"], format!("client {i}"));
    }
    // One child per entry, whatever the number of clients.
    let upstreams = children(gateway.id(), "serve");
    assert_eq!(upstreams.len(), 2, "{upstreams:?}");
    assert!(upstreams.iter().all(|&pid| alive(pid)));

    // SIGTERM, as a service manager stops it: it ends its children and exits.
    let pid = gateway.id();
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = gateway.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // Its upstreams went with it.
    let left: Vec<&u32> = upstreams.iter().filter(|&&pid| alive(pid)).collect();
    assert!(left.is_empty(), "still running: {left:?}");
}

/// A warning about the gateway's own safety is said at the default log level: a session key
/// file other users can read.
#[cfg(unix)]
#[test]
fn a_session_key_file_others_can_read_is_warned_about_without_verbose() {
    use std::os::unix::fs::PermissionsExt as _;
    let config = config("readable-keys");
    let keys = config.dir.join("keys");
    // 32 bytes, base64: a good key, in a file anyone may read.
    std::fs::write(&keys, "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=\n").unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = config.path.to_str().unwrap();
    // Over stdio with no client: it starts, warns, and ends with its input.
    let out = Command::new(BIN)
        .args([
            "gateway",
            "--config",
            path,
            "--session-key-file",
            keys.to_str().unwrap(),
            "--stdio",
        ])
        .env("TOOLWIRE_TRUST", "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("chmod 600"), "{said}");
    assert!(
        !said.contains("QUFBQUFB"),
        "the key itself is never said: {said}"
    );
}

#[test]
fn a_stdio_gateway_asks_its_stdio_client_what_an_upstream_asks_during_a_call() {
    let config = config("ask");
    let gateway = stdio_gateway(&config);
    // The CLI declares URL-mode elicitation only: with no terminal it cancels one, and a form
    // is never put to it.
    for protocol in ["auto", "2025-06-18"] {
        for (server, what, expected) in [
            ("old", "link", "link: cancel"),
            ("ref", "link", "link: cancel"),
            (
                "old",
                "name",
                "did not declare the `elicitation` capability in form mode",
            ),
        ] {
            let call = toolwire(&[
                "--stdio",
                &gateway,
                "--protocol",
                protocol,
                "--json",
                "tools",
                "call",
                &format!("{server}__ask_client"),
                &format!("what={what}"),
            ]);
            let stderr = String::from_utf8_lossy(&call.stderr);
            let said = json(&call)["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(
                said.contains(expected),
                "{protocol} {server} {what}: {said} {stderr}"
            );
        }
    }
}

/// The tool names `url` lists now.
fn listed(url: &str) -> Vec<String> {
    let list = toolwire(&["--url", url, "--json", "tools", "list"]);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    tool_names(&json(&list))
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// Waits up to 15 s for the listing at `url` to satisfy `check`.
fn until_listed(url: &str, what: &str, check: impl Fn(&[String]) -> bool) {
    for _ in 0..60 {
        if check(&listed(url)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    panic!("never listed: {what}: {:?}", listed(url));
}

#[cfg(unix)]
#[test]
fn the_gateway_applies_its_file_again_when_it_changes_and_on_sighup() {
    let config = config("reload");
    let path = config.path.to_str().unwrap();
    let (mut gateway, line) =
        spawn_listening("gateway", &["--config", path, "--http", "127.0.0.1:0"]);
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    until_listed(&url, "both entries", |names| {
        names.iter().any(|n| n == "ref__echo") && names.iter().any(|n| n == "old__echo")
    });
    let only_ref = serde_json::json!({"mcpServers": {
        "ref": {"command": BIN, "args": ["serve", "--stdio"]},
    }});
    std::fs::write(&config.path, only_ref.to_string()).unwrap();
    until_listed(&url, "old gone once the file changed", |names| {
        names.iter().any(|n| n == "ref__echo") && !names.iter().any(|n| n.starts_with("old__"))
    });
    // A file that does not load leaves the running configuration as it is.
    std::fs::write(&config.path, "{ not json").unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(listed(&url).iter().any(|n| n == "ref__echo"));
    // SIGHUP reads it at once (the poll would too, later).
    let with_new = serde_json::json!({"mcpServers": {
        "ref": {"command": BIN, "args": ["serve", "--stdio"]},
        "new": {"command": BIN, "args": ["serve", "--stdio", "--eras", "legacy"]},
    }});
    std::fs::write(&config.path, with_new.to_string()).unwrap();
    let hup = Command::new("kill")
        .args(["-HUP", &gateway.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    until_listed(&url, "new in after SIGHUP", |names| {
        names.iter().any(|n| n == "new__echo")
    });
    let call = toolwire(&[
        "--url",
        &url,
        "--json",
        "tools",
        "call",
        "new__echo",
        "text=reloaded",
    ]);
    assert_eq!(json(&call)["content"][0]["text"], "reloaded");
    let _ = Command::new("kill")
        .args(["-TERM", &gateway.id().to_string()])
        .status();
    assert!(gateway.wait().unwrap().success());
}

#[test]
fn with_an_issuer_a_public_address_is_served_to_callers_with_its_tokens_only() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let issuer = runtime.block_on(toolwire_test_support::issuer::Issuer::start());
    let config = config("issuer");
    let public = "https://gw.example/mcp";
    let (mut gateway, line) = spawn_listening(
        "gateway",
        &[
            "--config",
            config.path.to_str().unwrap(),
            "--http",
            "0.0.0.0:0",
            "--auth-issuer",
            &issuer.url(),
            "--public-url",
            public,
        ],
    );
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/mcp");
    assert!(port.parse::<u16>().is_ok(), "not listening: {line}");
    let url = format!("http://127.0.0.1:{port}/mcp");

    let token = issuer.token("k2", public, "alice", &serde_json::json!({}));
    let with_token = toolwire(&["--url", &url, "--bearer", &token, "--json", "tools", "list"]);
    assert!(
        with_token.status.success(),
        "{}",
        String::from_utf8_lossy(&with_token.stderr)
    );
    assert!(tool_names(&json(&with_token)).contains(&"ref__echo"));

    // Without one, or with one for another resource: refused, and the client says so.
    let foreign = issuer.token(
        "k1",
        "https://other.example/mcp",
        "alice",
        &serde_json::json!({}),
    );
    for args in [
        vec!["--url", url.as_str(), "tools", "list"],
        vec![
            "--url",
            url.as_str(),
            "--bearer",
            foreign.as_str(),
            "tools",
            "list",
        ],
    ] {
        let out = toolwire(&args);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("401") || stderr.to_lowercase().contains("auth"),
            "{stderr}"
        );
        assert!(!stderr.contains(&foreign), "the token was shown: {stderr}");
    }
    let _ = gateway.kill();
    let _ = gateway.wait();
}

#[cfg(unix)]
#[test]
fn a_changed_gateway_section_is_reported_and_applies_only_after_a_restart() {
    let config = config("section");
    let servers = serde_json::json!({
        "ref": {"command": BIN, "args": ["serve", "--stdio"]},
        "old": {"command": BIN, "args": ["serve", "--stdio", "--eras", "legacy"]},
    });
    let with_policy = |tools: &str| {
        serde_json::json!({"mcpServers": servers, "gateway": {"policy": [{"tools": [tools]}]}})
            .to_string()
    };
    std::fs::write(&config.path, with_policy("ref__*")).unwrap();
    let (mut gateway, url, said) = gateway_with_stderr(&config, &[]);
    let only_ref = |names: &[String]| {
        names.iter().any(|n| n == "ref__echo") && !names.iter().any(|n| n.starts_with("old__"))
    };
    until_listed(&url, "the policy's tools only", only_ref);

    std::fs::write(&config.path, with_policy("old__*")).unwrap();
    let hup = Command::new("kill")
        .args(["-HUP", &gateway.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = said
            .recv_timeout(left)
            .expect("the change was never reported");
        if line.contains("\"gateway\" section") && line.contains("restarts") {
            break;
        }
    }
    // The running policy stays the one it started with.
    assert!(only_ref(&listed(&url)));
    let _ = Command::new("kill")
        .args(["-TERM", &gateway.id().to_string()])
        .status();
    assert!(gateway.wait().unwrap().success());
}

/// Starts `toolwire gateway --config FILE --http 127.0.0.1:0` with `extra` flags; its URL and
/// a channel of its stderr lines.
fn gateway_with_stderr(
    config: &Config,
    extra: &[&str],
) -> (
    std::process::Child,
    String,
    std::sync::mpsc::Receiver<String>,
) {
    use std::io::BufRead as _;
    let mut gateway = Command::new(BIN)
        .args(["gateway", "--config", config.path.to_str().unwrap()])
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .env("TOOLWIRE_TRUST", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, said) = std::sync::mpsc::channel();
    let stderr = gateway.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    // The line that says where it listens; the upstreams' log lines may come before it.
    let first = loop {
        let line = said
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap();
        if line.starts_with("toolwire") {
            break line;
        }
    };
    let url = first.trim().rsplit(' ').next().unwrap().to_owned();
    (gateway, url, said)
}

#[test]
fn audit_prints_one_line_per_call_without_verbose_logging() {
    let config = config("audit");
    for audit in [true, false] {
        let flags: &[&str] = if audit { &["--audit"] } else { &[] };
        let (mut gateway, url, said) = gateway_with_stderr(&config, flags);
        let call = toolwire(&[
            "--url",
            &url,
            "--json",
            "tools",
            "call",
            "ref__echo",
            "text=x",
        ]);
        assert!(
            call.status.success(),
            "{}",
            String::from_utf8_lossy(&call.stderr)
        );
        // Everything it wrote, to the end of its stderr.
        let _ = gateway.kill();
        let _ = gateway.wait();
        let lines: Vec<String> = said.iter().collect();
        let audited: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains("toolwire_gateway::audit"))
            .collect();
        if audit {
            assert_eq!(audited.len(), 1, "{lines:?}");
            let line = audited[0];
            assert!(
                line.contains(r#"upstream="ref""#)
                    && line.contains(r#"tool="ref__echo""#)
                    && line.contains(r#"outcome="ok""#),
                "{line}"
            );
            assert!(
                !line.contains("text=x") && !line.contains("\"x\""),
                "arguments logged: {line}"
            );
            // Nothing else at info without -v but the upstreams' changes of state.
            assert!(
                lines.iter().all(|l| !l.contains(" INFO ")
                    || l.contains("audit")
                    || l.contains("toolwire_host")),
                "{lines:?}"
            );
        } else {
            assert!(audited.is_empty(), "{lines:?}");
        }
    }
    // Asked for, the arguments are in the line.
    let (mut gateway, url, said) = gateway_with_stderr(&config, &["--audit", "--audit-arguments"]);
    let call = toolwire(&["--url", &url, "tools", "call", "ref__echo", "text=shown"]);
    assert!(call.status.success());
    let _ = gateway.kill();
    let _ = gateway.wait();
    let lines: Vec<String> = said.iter().collect();
    let line = lines
        .iter()
        .find(|l| l.contains("toolwire_gateway::audit") && l.contains("ref__echo"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(
        line.contains(r#"arguments="{\"text\":\"shown\"}""#),
        "{line}"
    );
}

#[test]
fn upstream_credentials_without_authenticated_callers_are_refused_at_start() {
    let config = config("upstreams");
    let text = serde_json::json!({"mcpServers": {
        "ref": {"command": BIN, "args": ["serve", "--stdio"]},
    }, "gateway": {"upstreams": {"ref": {"credentials": "passthrough", "resource": "http://127.0.0.1:1/mcp"}}}});
    std::fs::write(&config.path, text.to_string()).unwrap();
    let out = toolwire(&[
        "gateway",
        "--config",
        config.path.to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("upstream ref") && stderr.contains("access tokens"),
        "{stderr}"
    );
}

/// The number of threads of process `pid` (Linux's `/proc`).
#[cfg(target_os = "linux")]
fn threads_of(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn threads_sets_how_many_threads_serve_and_one_means_no_workers() {
    let config = config("threads");
    let path = config.path.to_str().unwrap();
    let args = |threads| {
        [
            "--config",
            path,
            "--http",
            "127.0.0.1:0",
            "--threads",
            threads,
        ]
    };
    let start = |threads| {
        let (child, line) = spawn_listening("gateway", &args(threads));
        let url = line.trim().rsplit(' ').next().unwrap().to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{line}");
        (child, url)
    };
    let (mut one, one_url) = start("1");
    let (mut three, three_url) = start("3");
    for url in [&one_url, &three_url] {
        let call = toolwire(&["--url", url, "tools", "call", "ref__echo", "text=threaded"]);
        assert!(
            call.status.success() && stdout(&call).contains("threaded"),
            "{}{}",
            stdout(&call),
            String::from_utf8_lossy(&call.stderr)
        );
    }
    // One: the main thread serves, with at most one helper of the runtime's blocking pool;
    // three: the main thread and three workers (a default of one per CPU would be two here).
    let (on_one, on_three) = (threads_of(one.id()), threads_of(three.id()));
    assert!(on_one <= 2, "--threads 1 runs {on_one} threads");
    assert!(on_three >= 4, "--threads 3 runs {on_three} threads");
    for child in [&mut one, &mut three] {
        let _ = child.kill();
        let _ = child.wait();
    }
    // None is no server at all: refused before anything starts.
    let zero = toolwire(&[&["gateway"][..], &args("0")].concat());
    assert_eq!(zero.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&zero.stderr).contains("--threads"),
        "{}",
        String::from_utf8_lossy(&zero.stderr)
    );
}

//! The `toolwire` binary against the embedded server, a stdio child and an HTTP URL, in both
//! eras: output, JSON documents and exit codes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

#[test]
fn the_readme_call_shows_its_headers_against_the_embedded_server() {
    let o = toolwire(&[
        "tools",
        "call",
        "execute_sql",
        "region=us-west-2",
        "query=SELECT 1",
    ]);
    assert!(o.status.success(), "{o:?}");
    // The headers on stderr; stdout holds the result alone.
    let said = String::from_utf8_lossy(&o.stderr);
    for line in [
        "> MCP-Protocol-Version: 2026-07-28",
        "> Mcp-Method: tools/call",
        "> Mcp-Name: execute_sql",
        "> Mcp-Param-Region: us-west-2",
    ] {
        assert!(said.contains(line), "missing {line:?} in\n{said}");
    }
    assert_eq!(stdout(&o), "region=us-west-2 rows=1 query=SELECT 1\n");
}

#[test]
fn a_scripts_capture_of_a_call_is_its_result_alone() {
    // `add` answers text and structured content: the text says it, once.
    let o = toolwire(&["tools", "call", "add", "a=2", "b=40"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o).trim(), "42", "{}", stdout(&o));
}

#[test]
fn every_command_in_every_setting_and_era() {
    let http = serve(&[]);
    let http_legacy = serve(&["--eras", "legacy", "--json-responses"]);
    let stdio = stdio_server("");
    let stdio_legacy = stdio_server("--eras legacy");
    let settings: Vec<(Vec<&str>, &str)> = vec![
        (vec![], "2026-07-28"),
        (vec!["--protocol", "2025-11-25"], "2025-11-25"),
        (vec!["--url", &http.url], "2026-07-28"),
        (vec!["--url", &http_legacy.url], "2025-11-25"),
        (
            vec!["--url", &http.url, "--protocol", "2025-03-26"],
            "2025-03-26",
        ),
        (vec!["--stdio", &stdio], "2026-07-28"),
        (vec!["--stdio", &stdio_legacy], "2025-11-25"),
        (
            vec!["--stdio", &stdio, "--protocol", "2024-11-05"],
            "2024-11-05",
        ),
    ];
    for (connect, version) in settings {
        let with = |rest: &[&str]| {
            let mut args = connect.clone();
            args.push("--json");
            args.extend_from_slice(rest);
            toolwire(&args)
        };
        let info = with(&["info"]);
        assert!(info.status.success(), "{connect:?}: {info:?}");
        let info = json(&info);
        assert_eq!(info["protocolVersion"], version, "{connect:?}");
        assert_eq!(info["serverInfo"]["name"], "toolwire-refserver");
        // The embedded server and --url are HTTP: legacy sessions there, never over stdio.
        let http_legacy_session = !connect.contains(&"--stdio") && version != "2026-07-28";
        assert_eq!(
            info["sessionId"].is_string(),
            http_legacy_session,
            "{connect:?}: {info}"
        );

        let ping = with(&["ping"]);
        assert!(ping.status.success(), "{connect:?}");
        assert_eq!(json(&ping), serde_json::json!({}));

        let list = json(&with(&["tools", "list"]));
        let names = tool_names(&list);
        assert!(
            names.contains(&"execute_sql") && names.contains(&"slow"),
            "{names:?}"
        );

        let call = with(&["tools", "call", "add", "a=2", "b=40"]);
        assert!(call.status.success(), "{connect:?}: {call:?}");
        assert_eq!(json(&call)["structuredContent"]["sum"], 42, "{connect:?}");
    }
}

#[test]
fn arguments_are_typed_by_the_schema_and_args_json_wins() {
    let o = toolwire(&[
        "--json",
        "tools",
        "call",
        "add",
        "a=1",
        "b=2",
        "--args",
        r#"{"b": 10}"#,
    ]);
    assert_eq!(json(&o)["structuredContent"]["sum"], 11);
    // A nested x-mcp-header argument from --args, with its headers.
    let o = toolwire(&[
        "tools",
        "call",
        "deploy",
        "dry_run=true",
        "--args",
        r#"{"target": {"cluster": "blue", "priority": 3}}"#,
    ]);
    let out = stdout(&o);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("> Mcp-Param-Cluster: blue"), "{said}");
    assert!(said.contains("> Mcp-Param-Priority: 3"), "{said}");
    assert!(
        out.contains("deployed to blue at priority 3 (dry run)"),
        "{out}"
    );
}

#[test]
fn content_is_rendered_for_people() {
    let o = toolwire(&["tools", "call", "sample_content", "kind=mixed"]);
    let out = stdout(&o);
    assert!(out.contains("[image image/png, 70 bytes]"), "{out}");
    assert!(
        out.contains("[resource file:///notes.txt]\nremember the milk"),
        "{out}"
    );
    assert!(
        out.contains("[link report.pdf file:///report.pdf (application/pdf)]"),
        "{out}"
    );
    let o = toolwire(&["tools", "call", "sample_content", "kind=audio"]);
    assert!(
        stdout(&o).contains("[audio audio/wav, 844 bytes]"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_call_to_unlock_files_returns_with_the_new_tools_listed() {
    let o = toolwire(&["--json", "tools", "call", "unlock_files"]);
    let result = json(&o);
    assert_eq!(
        result["registers"],
        serde_json::json!(["read_file", "write_file"])
    );
    assert!(
        result["_meta"]["dev.toolwire/toolsStale"].is_null(),
        "the barrier released it on the list change, not on its timeout: {result}"
    );
}

#[test]
fn exit_codes() {
    // 1: the tool returned isError.
    let o = toolwire(&["tools", "call", "fail"]);
    assert_eq!(o.status.code(), Some(1));
    // 2: usage errors.
    for args in [
        vec!["--protocol", "1999-01-01", "ping"],
        vec!["tools", "call", "echo", "no-equals-sign"],
        vec!["--url", "not a url", "ping"],
        vec!["--header", "Mcp-Session-Id: x", "ping"],
        vec!["--stdio", "unbalanced 'quote", "ping"],
        vec!["frobnicate"],
    ] {
        let o = toolwire(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
    }
    // 3: connection, protocol or server errors, with one line on stderr.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    for args in [
        vec!["--url", url.as_str(), "ping"],
        vec!["tools", "call", "protocol_error"],
        vec!["tools", "call", "no_such_tool"],
    ] {
        let o = toolwire(&args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.starts_with("toolwire: "), "{err}");
    }
}

#[test]
fn known_tools_are_loaded_all_or_nothing() {
    let dir = std::env::temp_dir().join(format!("toolwire-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.json");
    std::fs::write(
        &good,
        r#"[{"name": "execute_sql", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}}}}]"#,
    )
    .unwrap();
    // Known: no listing needed for the headers.
    let o = toolwire(&[
        "--known-tools",
        good.to_str().unwrap(),
        "tools",
        "call",
        "execute_sql",
        "region=eu",
        "query=q",
        "--no-list",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("> Mcp-Param-Region: eu"));

    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"[{"name": "ok_tool", "inputSchema": {"type": "object"}},
            {"name": "broken", "inputSchema": {"type": "object", "properties": {
            "r": {"type": "string", "x-mcp-header": "has space"}}}}]"#,
    )
    .unwrap();
    let o = toolwire(&["--known-tools", bad.to_str().unwrap(), "ping"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("broken"), "the bad tool is named: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tools_list_says_which_tools_it_left_out() {
    let server = stdio_server("--broken-tools");
    let o = toolwire(&["--json", "--stdio", &server, "tools", "list"]);
    assert!(o.status.success(), "{o:?}");
    let list = json(&o);
    let names = tool_names(&list);
    assert!(
        names.contains(&"execute_sql"),
        "the good tools stay: {names:?}"
    );
    assert!(!names.contains(&"no_schema") && !names.contains(&"bad_header"));
    let rejected: Vec<(&str, &str)> = list["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert_eq!(rejected[0].0, "no_schema");
    assert!(rejected[0].1.contains("inputSchema"), "{rejected:?}");
    assert_eq!(rejected[1].0, "bad_header");
    assert!(rejected[1].1.contains("My Region"), "{rejected:?}");

    // Without --json and without -v, the exclusions still reach stderr.
    let o = toolwire(&["--stdio", &server, "tools", "list"]);
    assert!(o.status.success(), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("tool excluded: #") && stderr.contains("`no_schema`"),
        "{stderr}"
    );
    assert!(stderr.contains("`bad_header`"), "{stderr}");
    assert!(stdout(&o).contains("execute_sql"));
}

#[test]
fn timeouts_past_what_a_duration_holds_mean_no_limit_not_a_panic() {
    for timeout in ["1e20", "1e19", "18446744073709551616"] {
        let out = toolwire(&["--timeout", timeout, "--json", "tools", "list"]);
        assert!(
            out.status.success(),
            "--timeout {timeout}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!tool_names(&json(&out)).is_empty());
    }
}

#[test]
fn escape_sequences_from_a_server_reach_the_terminal_as_text() {
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2Jgone";
    let text = format!("text={hostile}");
    let out = toolwire(&["tools", "call", "echo", &text]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = stdout(&out);
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(
        shown.contains("\\u001b]0;pwned\\u0007\\u001b[2Jgone"),
        "{shown}"
    );
    // JSON output stays JSON and keeps the text.
    let out = toolwire(&["--json", "tools", "call", "echo", &text]);
    assert_eq!(json(&out)["content"][0]["text"], hostile);
}

#[test]
fn a_stdio_server_inherits_the_network_settings_but_not_cloud_keys() {
    let out = Command::new(BIN)
        .args([
            "--timeout",
            "1",
            "--stdio",
            r#"sh -c 'echo "ca=${NODE_EXTRA_CA_CERTS:-unset} proxy=${HTTPS_PROXY:-unset} aws=${AWS_SECRET_ACCESS_KEY:-unset}" >&2; exec sleep 30'"#,
            "tools",
            "list",
        ])
        .env("NODE_EXTRA_CA_CERTS", "/etc/corp/ca.pem")
        .env("HTTPS_PROXY", "http://proxy.corp:3128")
        .env("AWS_SECRET_ACCESS_KEY", "cloud-key-value")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("ca=/etc/corp/ca.pem proxy=http://proxy.corp:3128 aws=unset"),
        "{err}"
    );
    assert!(!err.contains("cloud-key-value"), "{err}");
    // A server that never answers the handshake is described, not just timed out.
    assert!(
        err.contains("is still running") && err.contains("has written nothing to stdout"),
        "{err}"
    );
}

#[test]
fn a_reader_that_goes_away_is_not_a_panic() {
    let mut child = Command::new(BIN)
        .args(["--json", "tools", "list"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -c 0`: the reader is gone before anything is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(out.status.code(), Some(101), "{err}");
}

#[test]
fn a_failure_under_json_is_one_json_document_on_stdout_too() {
    // Nothing listens on port 1: a connection failure, exit 3.
    let refused = toolwire(&["--json", "--url", "http://127.0.0.1:1/mcp", "tools", "list"]);
    assert_eq!(refused.status.code(), Some(3));
    let document = json(&refused);
    assert_eq!(document["error"]["exit"], 3, "{document}");
    assert!(
        document["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Connection refused"),
        "{document}"
    );
    // A usage error, exit 2.
    let usage = toolwire(&["--json", "tools", "call", "add", "--args", "{a:1}"]);
    assert_eq!(usage.status.code(), Some(2));
    assert_eq!(json(&usage)["error"]["exit"], 2);
}

#[test]
fn https_to_a_port_that_speaks_plain_http_suggests_http() {
    let served = serve(&[]);
    let https = served.url.replacen("http://", "https://", 1);
    let o = toolwire(&["--url", &https, "tools", "list"]);
    assert_eq!(o.status.code(), Some(3));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("does not seem to speak TLS on this port: try http://"),
        "{said}"
    );
}

#[test]
fn an_option_of_toolwire_after_the_command_works_or_gets_a_tip_and_the_small_conveniences_work() {
    // After a command that talks to a server, it is read as if given before: the embedded
    // server would answer, the port named does not.
    let o = toolwire(&["tools", "list", "--url", "http://127.0.0.1:1/mcp"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let said = String::from_utf8_lossy(&o.stderr);
    // The failure names the URL it could not reach, and why, on one line.
    assert!(
        said.contains("cannot connect to http://127.0.0.1:1/mcp: Connection refused"),
        "{said}"
    );
    // After `serve`, which has options of its own, clap refuses it, with the tip.
    let o = toolwire(&["serve", "--url", "http://127.0.0.1:1/mcp"]);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("tip: `--url` is an option of toolwire itself"),
        "{said}"
    );
    // `--verbose` is -v.
    let o = toolwire(&["--verbose", "tools", "list"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A host name where an address is asked for.
    let (child, line) = serve_with(&["--http", "localhost:0"]);
    let _served = Served {
        child,
        url: line.clone(),
    };
    assert!(line.contains("http://127.0.0.1:"), "{line}");
}

/// Ctrl-C during a call ends the command with 130, and the server hears the call cancelled.
#[cfg(unix)]
#[test]
fn ctrl_c_during_a_call_cancels_it_at_the_server() {
    let log = std::env::temp_dir().join(format!("toolwire-cli-ctrlc-{}.log", std::process::id()));
    let sent = std::env::temp_dir().join(format!("toolwire-cli-ctrlc-{}.in", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&sent);
    // What the client writes is kept as the server reads it, to know when the call went out.
    let server = format!(
        "sh -c 'tee -a {} | {BIN} serve --stdio -vv 2>>{}'",
        sent.display(),
        log.display()
    );
    let child = Command::new(BIN)
        .args([
            "--stdio",
            &server,
            "tools",
            "call",
            "slow",
            "steps=100",
            "delay_ms=100",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the call went out.
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&sent).is_ok_and(|l| l.contains("tools/call")) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the call never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let heard = || std::fs::read_to_string(&log).unwrap_or_default();
    let waited = std::time::Instant::now();
    while !heard().contains("cancelled by the client") {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(5),
            "{}",
            heard()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&sent);
}

#[test]
fn completions_and_the_man_page_name_every_command_and_the_bash_script_parses() {
    let o = toolwire(&["completions", "bash"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bash = String::from_utf8_lossy(&o.stdout).into_owned();
    for word in [
        "tools",
        "gateway",
        "serve",
        "servers",
        "search",
        "import",
        "doctor",
        "--rewire",
        "--healthz",
        "--drain-timeout",
        "--config",
    ] {
        assert!(
            bash.contains(word),
            "{word} missing from the bash completions"
        );
    }
    // bash reads it without a syntax error.
    let dir = std::env::temp_dir().join(format!("toolwire-completions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("toolwire.bash");
    std::fs::write(&script, &bash).unwrap();
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    for (shell, marker) in [
        ("zsh", "#compdef toolwire"),
        ("fish", "complete -c toolwire"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let o = toolwire(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(marker),
            "{shell}"
        );
    }
    let o = toolwire(&["man"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let man = String::from_utf8_lossy(&o.stdout);
    assert!(
        man.starts_with(".ie") || man.contains(".TH toolwire 1"),
        "{man}"
    );
    for section in [
        "toolwire\\-gateway",
        "toolwire\\-tools",
        "toolwire\\-serve",
        "toolwire\\-import",
        "toolwire\\-doctor",
        "\\-\\-drain\\-timeout",
    ] {
        assert!(man.contains(section), "{section} missing from the man page");
    }
    // An unknown shell is a usage error.
    assert_eq!(toolwire(&["completions", "tcsh"]).status.code(), Some(2));
}

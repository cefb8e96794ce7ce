//! The `toolwire` binary against the embedded server, a stdio child and an HTTP URL, in both
//! eras: output, JSON documents and exit codes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// Runs the CLI. The configuration files these tests write stand for the user's own, so
/// they are trusted for the run (`TOOLWIRE_TRUST=1`); trust itself is tested on its own.
fn toolwire(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("TOOLWIRE_TRUST", "1")
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", stdout(o)))
}

/// `toolwire serve --http 127.0.0.1:0 ...` as a child; its URL from the first stderr line.
struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(extra: &[&str]) -> Served {
    let mut child = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().rsplit(' ').next().expect("the URL").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    Served { child, url }
}

/// The names in a `--json tools list` document.
fn tool_names(list: &Value) -> Vec<&str> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

fn stdio_server(extra: &str) -> String {
    format!("'{BIN}' serve --stdio {extra}")
}

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
    let out = stdout(&o);
    for line in [
        "> MCP-Protocol-Version: 2026-07-28",
        "> Mcp-Method: tools/call",
        "> Mcp-Name: execute_sql",
        "> Mcp-Param-Region: us-west-2",
        "region=us-west-2 rows=1 query=SELECT 1",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
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
    assert!(out.contains("> Mcp-Param-Cluster: blue"), "{out}");
    assert!(out.contains("> Mcp-Param-Priority: 3"), "{out}");
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
    assert!(stdout(&o).contains("> Mcp-Param-Region: eu"));

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

/// A configuration file naming the binary's own server over stdio and over HTTP, one that
/// cannot start and one disabled; removed when dropped.
struct ConfigFile {
    path: std::path::PathBuf,
    _served: Served,
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn config_file(tag: &str) -> ConfigFile {
    let served = serve(&[]);
    let text = serde_json::json!({"mcpServers": {
        "local": {"command": BIN, "args": ["serve", "--stdio"]},
        "remote": {"type": "http", "url": served.url, "excludeTools": ["fail", "protocol_*"]},
        "broken": {"command": "/nonexistent/toolwire-cli-test"},
        "off": {"command": BIN, "args": ["serve", "--stdio"], "disabled": true},
    }});
    let path = std::env::temp_dir().join(format!("toolwire-cli-{tag}-{}.json", std::process::id()));
    std::fs::write(&path, text.to_string()).unwrap();
    ConfigFile {
        path,
        _served: served,
    }
}

/// `--config --server` takes the host's path from an entry to a client: an `http` entry whose
/// server only speaks the 2024-11-05 HTTP+SSE transport is reached through the fallback.
#[test]
fn a_config_http_entry_falls_back_to_http_sse_as_the_host_does() {
    let served = serve(&["--sse"]);
    let text = serde_json::json!({"mcpServers": {
        "old": {"type": "http", "url": format!("{}/sse", served.url)},
    }});
    let path =
        std::env::temp_dir().join(format!("toolwire-cli-fallback-{}.json", std::process::id()));
    std::fs::write(&path, text.to_string()).unwrap();
    let config = path.to_str().unwrap();
    let out = toolwire(&[
        "--config", config, "--server", "old", "--json", "tools", "call", "echo", "text=old",
    ]);
    let info = toolwire(&["--config", config, "--server", "old", "--json", "info"]);
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["content"][0]["text"], "old");
    // A legacy era without an `Mcp-Session-Id`: HTTP+SSE, not Streamable HTTP.
    let info = json(&info);
    assert_ne!(info["protocolVersion"], "2026-07-28", "{info}");
    assert!(info["sessionId"].is_null(), "{info}");
}

#[test]
fn a_config_file_drives_one_server_or_every_server() {
    let file = config_file("all");
    let config = file.path.to_str().unwrap();

    // --server: every command as with --stdio.
    let out = toolwire(&[
        "--config", config, "--server", "local", "tools", "call", "echo", "text=hi",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("hi"), "{}", stdout(&out));

    // Routed by qualified name, without --server.
    let out = toolwire(&[
        "--config",
        config,
        "--json",
        "tools",
        "call",
        "remote__echo",
        "text=routed",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["content"][0]["text"], "routed");

    // Every server: merged names, filters applied, the failed one named on stderr, exit 0.
    let out = toolwire(&["--config", config, "tools", "list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = stdout(&out);
    assert!(
        listed.contains("local__echo") && listed.contains("remote__echo"),
        "{listed}"
    );
    assert!(
        !listed.contains("remote__fail") && !listed.contains("off__"),
        "{listed}"
    );
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(errors.contains("server `broken` failed"), "{errors}");

    let out = toolwire(&["--config", config, "--json", "servers"]);
    assert!(out.status.success());
    let doc = json(&out);
    let state = |name: &str| {
        doc["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(state("local")["state"], "ready");
    assert_eq!(state("local")["transport"], "stdio");
    assert_eq!(state("remote")["transport"], "http");
    assert_eq!(state("broken")["state"], "failed");
    assert_eq!(state("off")["state"], "disabled");
    assert!(state("remote")["tools"].as_u64().unwrap() > 3);

    // Usage errors: an unknown server, a bare tool name, a command that needs one server.
    for args in [
        &["--server", "nowhere", "tools", "list"][..],
        &["tools", "call", "echo"][..],
        &["info"][..],
    ] {
        let mut all = vec!["--config", config];
        all.extend_from_slice(args);
        assert_eq!(toolwire(&all).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn no_reachable_server_is_exit_3_and_a_bad_file_is_exit_2() {
    let path = std::env::temp_dir().join(format!("toolwire-cli-none-{}.json", std::process::id()));
    std::fs::write(
        &path,
        r#"{"mcpServers": {"broken": {"command": "/nonexistent/toolwire-cli-test"}}}"#,
    )
    .unwrap();
    let out = toolwire(&["--config", path.to_str().unwrap(), "tools", "list"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&path, r#"{"mcpServers": {"a": {"type": "ws"}}}"#).unwrap();
    let out = toolwire(&["--config", path.to_str().unwrap(), "servers"]);
    assert_eq!(out.status.code(), Some(2));
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(errors.contains("server `a`, key `type`"), "{errors}");
    std::fs::remove_file(&path).unwrap();
}

/// `toolwire --url URL tools list` with `env` set (and the proxy variables of this process
/// removed); whether it succeeded.
fn list_with_env(url: &str, extra: &[&str], env: &[(&str, &str)]) -> bool {
    let mut command = Command::new(BIN);
    for name in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        command.env_remove(name);
    }
    command
        .args(["--url", url])
        .args(extra)
        .args(["tools", "list"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
        .status
        .success()
}

#[test]
fn the_environment_proxy_is_honoured_no_proxy_bypasses_it_and_proxy_overrides_it() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let proxy = runtime.block_on(toolwire_test_support::forward::ForwardProxy::start(None));
    let served = serve(&[]);
    let through = proxy.url(None);

    assert!(list_with_env(&served.url, &[], &[("HTTP_PROXY", &through)]));
    let after_env = proxy.asked().len();
    assert!(after_env > 0, "HTTP_PROXY was not used");
    assert!(
        proxy.asked()[0].line.starts_with("POST http://127.0.0.1:"),
        "{:?}",
        proxy.asked()
    );

    assert!(list_with_env(
        &served.url,
        &[],
        &[("http_proxy", &through), ("NO_PROXY", "127.0.0.1")]
    ));
    assert!(list_with_env(
        &served.url,
        &["--proxy", "none"],
        &[("HTTP_PROXY", &through)]
    ));
    assert_eq!(
        proxy.asked().len(),
        after_env,
        "NO_PROXY or --proxy none went through it"
    );

    assert!(list_with_env(
        &served.url,
        &["--proxy", &proxy.url(Some("u:p"))],
        &[]
    ));
    let asked = proxy.asked();
    assert!(asked.len() > after_env, "--proxy was not used");
    assert_eq!(
        asked.last().unwrap().authorization.as_deref(),
        Some("Basic dTpw")
    );
}

/// `toolwire ARGS batch` with `input` on stdin.
fn batch(args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(args)
        .arg("batch")
        .env("TOOLWIRE_TRUST", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
        .collect()
}

#[test]
fn batch_answers_every_line_in_order_with_the_exit_classes_of_single_commands() {
    let stdio = stdio_server("");
    let input = [
        r#"{"tool": "echo", "arguments": {"text": "first"}}"#,
        r#"{"method": "tools/list", "params": {}}"#,
        "this is not json",
        r#"{"tool": "fail", "arguments": {}}"#,
        r#"{"method": "prompts/get", "params": {"name": "no_such_prompt"}}"#,
        "",
        r#"{"tool": "echo", "arguments": {"text": "last"}}"#,
    ]
    .join("\n");
    let o = batch(&["--stdio", &stdio], &input);
    let answers = lines(&o);
    assert_eq!(
        answers.len(),
        6,
        "one answer a non-empty line: {}",
        stdout(&o)
    );
    assert_eq!(answers[0]["content"][0]["text"], "first");
    assert!(
        answers[1]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(answers[2]["error"]["exit"], 2, "{}", answers[2]);
    assert_eq!(answers[3]["isError"], true, "{}", answers[3]);
    assert_eq!(answers[4]["error"]["exit"], 3, "{}", answers[4]);
    assert!(
        answers[4]["error"]["code"].is_i64(),
        "a server error keeps its code"
    );
    assert_eq!(answers[5]["content"][0]["text"], "last");
    assert_eq!(o.status.code(), Some(3), "the worst line decides");
}

/// The reference server exits after every two calls; the batch's client starts it again, each
/// line gets its own answer, and `-v` says what happened.
#[test]
fn batch_keeps_one_client_that_reconnects_and_says_so_on_verbose() {
    let stdio = stdio_server("--exit-after-calls 2");
    let input: String = (0..5)
        .map(|i| format!("{{\"tool\": \"echo\", \"arguments\": {{\"text\": \"line {i}\"}}}}\n"))
        .collect();
    let o = batch(&["-v", "--stdio", &stdio], &input);
    let answers = lines(&o);
    let texts: Vec<&str> = answers
        .iter()
        .map(|a| a["content"][0]["text"].as_str().unwrap_or("(error)"))
        .collect();
    assert_eq!(
        texts,
        ["line 0", "line 1", "line 2", "line 3", "line 4"],
        "{}\n{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0));
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(log.contains("reconnecting"), "{log}");
}

#[test]
fn batch_over_a_config_routes_tools_by_qualified_name_and_methods_by_server() {
    let file = config_file("batch");
    let config = file.path.to_str().unwrap();
    let input = [
        r#"{"tool": "local__echo", "arguments": {"text": "from local"}}"#,
        r#"{"tool": "remote__echo", "arguments": {"text": "from remote"}}"#,
        r#"{"server": "remote", "method": "tools/list", "params": {}}"#,
        r#"{"method": "tools/list", "params": {}}"#,
        r#"{"tool": "broken__anything", "arguments": {}}"#,
    ]
    .join("\n");
    let o = batch(&["--config", config], &input);
    let answers = lines(&o);
    assert_eq!(answers.len(), 5, "{}", stdout(&o));
    assert_eq!(answers[0]["content"][0]["text"], "from local");
    assert_eq!(answers[1]["content"][0]["text"], "from remote");
    assert!(answers[2]["tools"].is_array(), "{}", answers[2]);
    assert_eq!(
        answers[3]["error"]["exit"], 2,
        "no server named: {}",
        answers[3]
    );
    assert_eq!(answers[4]["error"]["exit"], 3, "{}", answers[4]);
    assert_eq!(o.status.code(), Some(3));
}

/// `watch` prints what the server announces while it runs: here the tool-list change another
/// client's `unlock_files` causes, as one JSON line.
#[test]
fn watch_prints_the_servers_notifications_as_they_come() {
    let served = serve(&[]);
    let watch = Command::new(BIN)
        .args(["--url", &served.url, "--json", "watch", "--for", "8"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Time to connect and open its listen stream.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let trigger = toolwire(&["--url", &served.url, "tools", "call", "unlock_files"]);
    assert!(trigger.status.success(), "{}", stdout(&trigger));
    let o = watch.wait_with_output().unwrap();
    assert!(o.status.success());
    let notices = lines(&o);
    assert!(
        notices
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed"),
        "{}",
        stdout(&o)
    );
    assert!(
        toolwire(&["--log-level", "loud", "ping"]).status.code() == Some(2),
        "a level that does not exist is a usage error"
    );
}

/// `toolwire --protocol PROTOCOL ARGS...` against the embedded server; it must succeed.
fn embedded(protocol: &str, args: &[&str]) -> Output {
    let mut all = vec!["--protocol", protocol];
    all.extend_from_slice(args);
    let o = toolwire(&all);
    assert!(
        o.status.success(),
        "{protocol} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The embedded server's skill, in both eras: listed with its manifest, then loaded by name
/// and by URI (its `SKILL.md` read and checked against the manifest's size and digest).
#[test]
fn skills_of_the_embedded_server_are_listed_and_loaded_in_both_eras() {
    for protocol in ["auto", "2025-11-25"] {
        let run = |args: &[&str]| embedded(protocol, args);
        let listed = json(&run(&["--json", "skills", "list"]));
        let skill = &listed["skills"][0];
        assert_eq!(skill["frontmatter"]["name"], "release-notes", "{protocol}");
        assert_eq!(skill["resources"].as_array().map(Vec::len), Some(3));
        let by_name = stdout(&run(&["skills", "get", "release-notes"]));
        assert!(
            by_name.starts_with("---\nname: release-notes\n"),
            "{by_name}"
        );
        let by_uri = json(&run(&[
            "--json",
            "skills",
            "get",
            "skill://release-notes/SKILL.md",
        ]));
        assert_eq!(by_uri["text"], by_name.as_str(), "{protocol}");
    }
}

/// `watch --resource URI` subscribes before it prints anything (it says so on stderr) and
/// prints the updates of that resource another client's writes cause, in both eras.
#[test]
fn watch_with_a_resource_prints_its_updates_in_both_eras() {
    let served = serve(&[]);
    let trigger = toolwire(&["--url", &served.url, "tools", "call", "unlock_files"]);
    assert!(trigger.status.success(), "{}", stdout(&trigger));
    for protocol in ["auto", "2025-11-25"] {
        let mut watch = Command::new(BIN)
            .args(["--url", &served.url, "--protocol", protocol, "--json"])
            .args(["watch", "--resource", "toolwire://files/w", "--for", "6"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(watch.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        assert_eq!(
            line.trim(),
            "subscribed to toolwire://files/w",
            "{protocol}"
        );
        let write = toolwire(&[
            "--url",
            &served.url,
            "tools",
            "call",
            "write_file",
            "path=w",
            "content=x",
        ]);
        assert!(write.status.success(), "{}", stdout(&write));
        let o = watch.wait_with_output().unwrap();
        assert!(o.status.success(), "{protocol}");
        let updates: Vec<Value> = lines(&o)
            .into_iter()
            .filter(|n| n["method"] == "notifications/resources/updated")
            .collect();
        assert_eq!(updates.len(), 1, "{protocol}: {}", stdout(&o));
        assert_eq!(
            updates[0]["params"]["uri"], "toolwire://files/w",
            "{protocol}"
        );
    }
}

#[test]
fn resources_prompts_and_completions_of_the_embedded_server_in_both_eras() {
    for protocol in ["auto", "2025-11-25"] {
        let run = |args: &[&str]| {
            let mut all = vec!["--json"];
            all.extend_from_slice(args);
            json(&embedded(protocol, &all))
        };
        let listed = run(&["resources", "list"]);
        assert_eq!(
            listed["resources"][0]["uri"], "toolwire://readme",
            "{protocol}"
        );
        let templates = run(&["resources", "templates"]);
        assert_eq!(
            templates["resourceTemplates"][0]["uriTemplate"],
            "toolwire://files/{path}"
        );
        let read = run(&["resources", "read", "toolwire://readme"]);
        assert!(
            read["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("# Toolwire")),
            "{read}"
        );
        let prompts = run(&["prompts", "list"]);
        assert_eq!(prompts["prompts"][0]["name"], "greet");
        let prompt = run(&["prompts", "get", "greet", "who=ferris"]);
        assert_eq!(prompt["messages"][0]["content"]["text"], "Hello, ferris!");
        let completed = run(&["complete", "--prompt", "greet", "who", "f"]);
        assert_eq!(
            completed["completion"]["values"],
            serde_json::json!(["ferris", "friends"])
        );
        // Not found: each era's code, exit 3.
        let o = toolwire(&[
            "--protocol",
            protocol,
            "resources",
            "read",
            "toolwire://nope",
        ]);
        assert_eq!(o.status.code(), Some(3));
        let expected = if protocol == "auto" {
            "-32602"
        } else {
            "-32002"
        };
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(expected),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
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

/// A project directory with an `.mcp.json`, and a state directory for approvals, both
/// outside the user's configuration.
struct Project {
    dir: std::path::PathBuf,
}

impl Project {
    fn new(tag: &str, entries: &Value) -> Self {
        let dir =
            std::env::temp_dir().join(format!("toolwire-cli-trust-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("repo")).unwrap();
        let p = Self { dir };
        p.write(entries);
        p
    }

    fn file(&self) -> std::path::PathBuf {
        self.dir.join("repo").join(".mcp.json")
    }

    fn write(&self, entries: &Value) {
        let text = serde_json::json!({"mcpServers": entries}).to_string();
        std::fs::write(self.file(), text).unwrap();
    }

    /// The CLI with no terminal, its approvals kept in this project's state directory, its
    /// home and configuration directories elsewhere.
    fn run(&self, args: &[&str], trust_env: bool) -> Output {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("XDG_STATE_HOME", self.dir.join("state"))
            .env("XDG_CONFIG_HOME", self.dir.join("config"))
            .env("HOME", self.dir.join("home"))
            .env_remove("TOOLWIRE_TRUST")
            .stdin(Stdio::null());
        if trust_env {
            c.env("TOOLWIRE_TRUST", "1");
        }
        c.output().unwrap()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_projects_file_runs_nothing_and_sends_nothing_until_approved() {
    let marker = std::env::temp_dir().join(format!("toolwire-trust-ran-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let started = format!("touch {}; exec {BIN} serve --stdio", marker.display());
    let p = Project::new(
        "gate",
        &serde_json::json!({"local": {"command": "sh", "args": ["-c", started],
            "env": {"K": "${AWS_SECRET_ACCESS_KEY:-none}"}}}),
    );
    let file = p.file();
    let file = file.to_str().unwrap();
    let refused = p.run(&["--config", file, "tools", "list"], false);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("toolwire trust {file}")), "{err}");
    assert!(
        err.contains("AWS_SECRET_ACCESS_KEY") && err.contains("local: sh"),
        "{err}"
    );
    assert!(!marker.exists(), "nothing was started");

    // Approved once, it runs, now and later.
    let approved = p.run(&["trust", file], false);
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let listed = p.run(&["--config", file, "--json", "tools", "list"], false);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(marker.exists());

    // Changed, it is asked about again.
    p.write(&serde_json::json!({"local": {"command": "sh", "args": ["-c", "exit 1"]}}));
    let changed = p.run(&["--config", file, "tools", "list"], false);
    assert_eq!(changed.status.code(), Some(2));
    // TOOLWIRE_TRUST=1 trusts it for one run.
    let forced = p.run(
        &[
            "--timeout",
            "2",
            "--config",
            file,
            "--server",
            "local",
            "tools",
            "list",
        ],
        true,
    );
    assert_ne!(
        forced.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    let _ = std::fs::remove_file(&marker);
}

#[test]
fn links_only_and_the_users_own_files_need_no_approval() {
    let served = serve(&[]);
    let links = Project::new("links", &serde_json::json!({"remote": {"url": served.url}}));
    let file = links.file();
    let listed = links.run(
        &["--config", file.to_str().unwrap(), "tools", "list"],
        false,
    );
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );

    let own = Project::new("own", &serde_json::json!({}));
    let dir = own.dir.join("config").join("toolwire");
    std::fs::create_dir_all(&dir).unwrap();
    let mine = dir.join("servers.json");
    let text = serde_json::json!({"mcpServers": {"local": {"command": BIN, "args": ["serve", "--stdio"]}}});
    std::fs::write(&mine, text.to_string()).unwrap();
    let listed = own.run(
        &["--config", mine.to_str().unwrap(), "tools", "list"],
        false,
    );
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
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

//! batch (one client for many requests), watch (notifications as they come), and the embedded server's skills, resources, prompts and completions in both eras.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

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
/// client's `unlock_files` causes, as one JSON line. It says `watching` on stderr once nothing
/// announced can be missed, and the change is caused only then.
#[test]
fn watch_prints_the_servers_notifications_as_they_come() {
    let served = serve(&[]);
    let mut watch = Command::new(BIN)
        .args(["--url", &served.url, "--json", "watch", "--for", "5"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(watch.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "watching");
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
    // The listen stream's acknowledgement is the client's business, not a change to show.
    assert!(
        !stdout(&o).contains("subscriptions/acknowledged"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_log_level_that_does_not_exist_is_a_usage_error() {
    let o = toolwire(&["--log-level", "loud", "ping"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
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
            .args(["watch", "--resource", "toolwire://files/w", "--for", "5"])
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

/// `--names provider-safe` over a configuration: every listed name is one LLM providers
/// accept (a server named with a dot gets the documented short form), and `batch` calls a
/// tool by that name.
#[test]
fn provider_safe_names_are_listed_and_called_over_a_config() {
    let path = std::env::temp_dir().join(format!("toolwire-cli-names-{}.json", std::process::id()));
    let text = serde_json::json!({"mcpServers": {
        "files.v2": {"command": BIN, "args": ["serve", "--stdio"]},
    }});
    std::fs::write(&path, text.to_string()).unwrap();
    let config = path.to_str().unwrap();
    let listed = json(&toolwire(&[
        "--config",
        config,
        "--names",
        "provider-safe",
        "--json",
        "tools",
        "list",
    ]));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let echo = toolwire_host::provider_safe("files.v2", "__", "echo");
    assert!(names.contains(&echo.as_str()), "{echo} not in {names:?}");
    assert!(
        names.iter().all(|n| toolwire_host::is_provider_safe(n)),
        "{names:?}"
    );
    let o = batch(
        &["--config", config, "--names", "provider-safe"],
        &format!(r#"{{"tool": "{echo}", "arguments": {{"text": "by its short name"}}}}"#),
    );
    let answers = lines(&o);
    assert_eq!(
        answers[0]["content"][0]["text"],
        "by its short name",
        "{}",
        stdout(&o)
    );
    let refused = toolwire(&["--config", config, "--names", "short", "tools", "list"]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "an unknown naming is a usage error"
    );
    let _ = std::fs::remove_file(&path);
}

/// `serve --unix-socket PATH` listens on a socket, and `--url … --unix-socket PATH` reaches it
/// (as curl's flag does).
#[cfg(unix)]
#[test]
fn the_cli_serves_and_calls_over_a_unix_socket() {
    let path = std::env::temp_dir().join(format!("tw-cli-{}.sock", std::process::id()));
    let (mut child, line) = serve_with(&["--unix-socket", path.to_str().unwrap()]);
    assert!(
        line.contains("http://localhost/mcp") && line.contains("Unix socket"),
        "{line}"
    );
    let socket = path.to_str().unwrap();
    let o = toolwire(&[
        "--url",
        "http://localhost/mcp",
        "--unix-socket",
        socket,
        "tools",
        "call",
        "echo",
        "text=over a socket",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("over a socket"), "{}", stdout(&o));
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
}

/// `tools search QUERY`: the embedded server's tools ranked for a query (`-k` bounds the list),
/// and over a configuration every server's tools under their `server__tool` names.
#[test]
fn tools_search_ranks_one_servers_tools_and_a_configurations() {
    let found = json(&toolwire(&[
        "--json", "tools", "search", "-k", "1", "add", "two", "integers",
    ]));
    let tools = found["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{found}");
    assert_eq!(tools[0]["name"], "add");
    assert!(tools[0]["score"].as_f64().unwrap() > 0.0);
    let text = toolwire(&["tools", "search", "run", "a", "sql", "query"]);
    assert!(
        stdout(&text).starts_with("execute_sql  "),
        "{}",
        stdout(&text)
    );

    let file = config_file("search");
    let config = file.path.to_str().unwrap();
    let found = json(&toolwire(&[
        "--config", config, "--json", "tools", "search", "sql", "query",
    ]));
    let first = &found["tools"][0];
    assert!(
        first["name"] == "local__execute_sql" || first["name"] == "remote__execute_sql",
        "{found}"
    );
    assert_eq!(first["tool"]["name"], "execute_sql");
    assert!(first["score"].as_f64().unwrap() > 0.0);
}

/// `apps list` names the tools with a view; `apps get TOOL --out FILE` writes its HTML byte for
/// byte and says its sandbox on stderr; a tool without a view is a usage error.
#[test]
fn apps_are_listed_and_a_views_html_written_out() {
    let listed = toolwire(&["apps", "list"]);
    assert!(
        stdout(&listed).contains("show_clock  ui://toolwire/clock.html  (model, app)"),
        "{}",
        stdout(&listed)
    );
    let out = std::env::temp_dir().join(format!("toolwire-cli-view-{}.html", std::process::id()));
    let got = toolwire(&["apps", "get", "show_clock", "--out", out.to_str().unwrap()]);
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let html = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert!(
        html.starts_with("<!DOCTYPE html>\n") && html.ends_with("</html>\n"),
        "{html}"
    );
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(
        stderr.contains("csp connect: https://time.example.com"),
        "{stderr}"
    );
    assert!(stderr.contains("permissions: clipboard-write"), "{stderr}");
    assert!(stdout(&got).is_empty(), "the HTML went to the file");
    let none = toolwire(&["apps", "get", "echo"]);
    assert_eq!(none.status.code(), Some(2));
}

#[test]
fn help_says_where_commands_go_without_a_server_the_exit_codes_and_the_default_addresses() {
    let top = stdout(&toolwire(&["--help"]));
    for needle in [
        "embedded reference server",
        "Exit codes: 0",
        "TOOLWIRE_TRUST",
        "SSL_CERT_FILE",
    ] {
        assert!(top.contains(needle), "{needle} in:\n{top}");
    }
    let gateway = stdout(&toolwire(&["gateway", "--help"]));
    assert!(gateway.contains("127.0.0.1:8808"), "{gateway}");
    let serve = stdout(&toolwire(&["serve", "--help"]));
    assert!(serve.contains("127.0.0.1:8080"), "{serve}");
}

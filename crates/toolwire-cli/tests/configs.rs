//! mcpServers files through the CLI (one entry, every entry, a routed call, the HTTP+SSE fallback), exit codes of unreachable servers and bad files, and the environment's proxy.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

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
        &["resources", "read", "toolwire://readme"][..],
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

/// Under a server name too long for `server__tool` to fit, `--names provider-safe` keeps each
/// tool's own name at the end of its listed name, no two alike, and `tools call` reaches a tool
/// by that name, and by an alias the file gives.
#[test]
fn provider_safe_names_under_a_long_server_name_keep_the_tool_and_are_callable() {
    let server = "registry.example.com/acme/mcp-reference-server-for-the-whole-company";
    let path = std::env::temp_dir().join(format!("toolwire-cli-long-{}.json", std::process::id()));
    let text = serde_json::json!({"mcpServers": {
        server: {"command": BIN, "args": ["serve", "--stdio"], "aliases": {"add": "sum_two"}},
    }});
    std::fs::write(&path, text.to_string()).unwrap();
    let config = path.to_str().unwrap();
    let safe = ["--config", config, "--names", "provider-safe"];
    let listed = json(&toolwire(
        &[&safe[..], &["--json", "tools", "list"]].concat(),
    ));
    let entries = listed["tools"].as_array().unwrap();
    assert!(entries.len() > 5, "{listed}");
    let mut seen = std::collections::HashSet::new();
    for entry in entries {
        let (name, tool) = (
            entry["name"].as_str().unwrap(),
            entry["tool"]["name"].as_str().unwrap(),
        );
        assert!(toolwire_host::is_provider_safe(name), "{name}");
        if name != "sum_two" {
            assert!(name.ends_with(&format!("__{tool}")), "{name} lost `{tool}`");
        }
        assert!(seen.insert(name.to_owned()), "{name} twice");
    }
    let echo = toolwire_host::provider_safe(server, "__", "echo");
    let call = toolwire(
        &[
            &safe[..],
            &["--json", "tools", "call", &echo, "text=by its listed name"],
        ]
        .concat(),
    );
    assert!(
        call.status.success(),
        "{}",
        String::from_utf8_lossy(&call.stderr)
    );
    assert_eq!(json(&call)["content"][0]["text"], "by its listed name");
    let sum = toolwire(&[
        "--config", config, "--json", "tools", "call", "sum_two", "a=2", "b=40",
    ]);
    assert!(
        sum.status.success(),
        "{}",
        String::from_utf8_lossy(&sum.stderr)
    );
    assert!(stdout(&sum).contains("42"), "{}", stdout(&sum));
    let _ = std::fs::remove_file(&path);
}

/// The file's own problems, as a user meets them: a syntax error names the file; `gateway
/// --check` needs no approval (it runs nothing), names likely typos of members, and refuses an
/// entry whose program or working directory is not there.
#[test]
fn a_check_names_the_file_its_typos_and_the_entries_that_could_not_start() {
    let dir = std::env::temp_dir().join(format!("toolwire-cli-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let syntax = dir.join("syntax.json");
    std::fs::write(
        &syntax,
        "{\n \"mcpServers\": {\n  \"b\": {\"command\": \"echo\" \"args\": []}\n }\n}\n",
    )
    .unwrap();
    let o = toolwire(&["--config", syntax.to_str().unwrap(), "servers"]);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains(&format!("{}: line 3", syntax.display())),
        "{said}"
    );

    let file = dir.join("mcp.json");
    let text = serde_json::json!({"mcpServers": {
        "a": {"command": "echo", "envv": {"A": "1"}},
        "b": {"command": "/nonexistent/toolwire-check"},
        "c": {"command": "sh", "cwd": "/nonexistent/toolwire-check-dir"},
        "ok": {"command": BIN, "args": ["serve", "--stdio"]},
    }});
    std::fs::write(&file, text.to_string()).unwrap();
    // Not approved: a check still runs, since it starts nothing.
    let check = |file: &std::path::Path| {
        Command::new(BIN)
            .args(["gateway", "--check", file.to_str().unwrap()])
            .env_remove("TOOLWIRE_TRUST")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = check(&file);
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(
        said.contains("server `a`: `envv`") && said.contains("did you mean `env`?"),
        "{said}"
    );
    assert!(
        said.contains("server `b`: `/nonexistent/toolwire-check` is found neither"),
        "{said}"
    );
    assert!(said.contains("server `c`: its working directory"), "{said}");
    assert!(!said.contains("server `ok`"), "{said}");

    let good = dir.join("good.json");
    let text =
        serde_json::json!({"mcpServers": {"ok": {"command": BIN, "args": ["serve", "--stdio"]}}});
    std::fs::write(&good, text.to_string()).unwrap();
    let o = check(&good);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("ready to serve"), "{}", stdout(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `--config` and no `--server`, the read-only views span every server, each item naming
/// its server; a command that must pick one names the servers it may pick.
#[test]
fn resources_prompts_info_and_ping_span_every_server_of_a_config() {
    let path = std::env::temp_dir().join(format!("toolwire-cli-span-{}.json", std::process::id()));
    let text = serde_json::json!({"mcpServers": {
        "new": {"command": BIN, "args": ["serve", "--stdio", "--eras", "modern"]},
        "old": {"command": BIN, "args": ["serve", "--stdio", "--eras", "legacy"]},
    }});
    std::fs::write(&path, text.to_string()).unwrap();
    let config = path.to_str().unwrap();
    let servers_of = |document: &Value, key: &str| -> Vec<String> {
        let mut servers: Vec<String> = document[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["server"].as_str().unwrap().to_owned())
            .collect();
        servers.dedup();
        servers
    };
    for (args, key) in [
        (vec!["resources", "list"], "resources"),
        (vec!["prompts", "list"], "prompts"),
        (vec!["info"], "servers"),
        (vec!["ping"], "pings"),
    ] {
        let o = toolwire(&[&["--config", config, "--json"], &args[..]].concat());
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(servers_of(&json(&o), key), ["new", "old"], "{args:?}");
    }
    let info = json(&toolwire(&["--config", config, "--json", "info"]));
    assert_eq!(info["servers"][0]["protocolVersion"], "2026-07-28");
    assert_eq!(info["servers"][1]["protocolVersion"], "2025-11-25");
    let read = toolwire(&["--config", config, "resources", "read", "toolwire://readme"]);
    assert_eq!(read.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&read.stderr).contains("(one of: new, old)"),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let _ = std::fs::remove_file(&path);
}

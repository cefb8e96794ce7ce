//! `"pinTools"` in a gateway's file: an upstream that changes a tool's description under its
//! users has the tool quarantined (out of the listing, its calls refused naming the change)
//! until `toolwire pins approve` lets the new definition in; the running gateway picks the
//! approval up by itself.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

use std::time::Duration;

#[test]
fn a_description_changed_under_the_gateway_is_quarantined_until_approved_with_toolwire_pins() {
    let dir = std::env::temp_dir().join(format!("toolwire-pins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("mcp.json");
    let text = serde_json::json!({
        "mcpServers": {"ref": {"command": BIN, "args": ["serve", "--stdio"]}},
        "gateway": {"pinTools": "pins.json"}
    });
    std::fs::write(&config, text.to_string()).unwrap();
    let pins = dir.join("pins.json");
    let gateway = Listening::start(
        Command::new(BIN)
            .args(["gateway", "--config"])
            .arg(&config)
            .args(["--http", "127.0.0.1:0"])
            .env("TOOLWIRE_TRUST", "1"),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(async {
        let client = toolwire::Client::builder("pins-test", "0")
            .connect_http(toolwire::HttpTransport::builder(&gateway.url))
            .unwrap();
        client.ready().await.unwrap();
        client
    });
    let echo = |text: &str| {
        runtime.block_on(client.call_tool("ref__echo", serde_json::json!({"text": text})))
    };
    let listed = || {
        runtime
            .block_on(client.list_tools())
            .unwrap()
            .tools
            .iter()
            .any(|t| t.name == "ref__echo")
    };
    // First seen: pinned, listed, callable.
    assert_eq!(echo("one").unwrap().content[0].as_text(), Some("one"));
    assert!(listed());
    let pinned = std::fs::read_to_string(&pins).unwrap();
    assert!(pinned.contains("Returns its text."), "{pinned}");

    runtime
        .block_on(client.call_tool("ref__redefine_echo", serde_json::json!({})))
        .unwrap();
    // The new description is held back: the tool leaves the listing and its calls are refused.
    until(Duration::from_secs(10), "echo is quarantined", || {
        echo("two").is_err_and(|e| e.to_string().contains("changed its definition"))
    });
    let refused = echo("three").unwrap_err().to_string();
    assert!(
        refused.contains("(description)") && refused.contains("toolwire pins approve ref echo"),
        "{refused}"
    );
    assert!(!listed(), "a quarantined tool is not listed");
    assert!(gateway.logged(&["quarantined", "echo"]));
    let metrics = get(&gateway.url, "/metrics");
    assert!(
        metrics.contains(r#"toolwire_gateway_quarantined_tools{upstream="ref"} 1"#),
        "{metrics}"
    );

    let pins_arg = pins.to_str().unwrap();
    let list = toolwire(&["--json", "pins", "--file", pins_arg, "list"]);
    assert!(list.status.success());
    assert_eq!(
        json(&list)["pending"],
        serde_json::json!([{"server": "ref", "tool": "echo", "changed": ["description"]}])
    );
    let approved = toolwire(&["pins", "--file", pins_arg, "approve", "ref", "echo"]);
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    // The running gateway reads the approval and lets the new definition in.
    until(Duration::from_secs(10), "echo is back", || {
        echo("four").is_ok()
    });
    assert!(listed());
    let again = toolwire(&["pins", "--file", pins_arg, "approve", "ref", "echo"]);
    assert_eq!(again.status.code(), Some(2), "nothing is waiting any more");
    drop(gateway);
    let _ = std::fs::remove_dir_all(dir);
}

/// `--pin-tools` on the CLI's own `--config` commands: the first run pins each tool; a tool
/// whose pinned definition differs from the server's is left out of `tools list` (every
/// server at once, through the host, and one entry's client) and its call is refused naming
/// the change, until `toolwire pins approve`.
#[test]
fn pin_tools_holds_a_changed_tool_out_of_the_clis_listing_and_calls_until_approved() {
    let dir = std::env::temp_dir().join(format!("toolwire-cli-pins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("mcp.json");
    let text = serde_json::json!({
        "mcpServers": {"ref": {"command": BIN, "args": ["serve", "--stdio"]}}
    });
    std::fs::write(&config, text.to_string()).unwrap();
    let pins = dir.join("pins.json");
    let (config_arg, pin_arg) = (
        config.to_str().unwrap().to_owned(),
        format!("--pin-tools={}", pins.display()),
    );
    let run = |args: &[&str]| {
        let mut all = vec!["--config", config_arg.as_str(), pin_arg.as_str()];
        all.extend_from_slice(args);
        toolwire(&all)
    };
    let listed = |o: &Output| stdout(o).lines().any(|l| l.starts_with("ref__echo "));

    // First seen: pinned, listed, callable.
    let first = run(&["tools", "list"]);
    assert!(
        first.status.success() && listed(&first),
        "{}",
        stdout(&first)
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&pins).unwrap()).unwrap();
    assert!(
        file["pinned"]["ref"]["echo"]["sha256"].is_string(),
        "{file}"
    );

    // The pin now holds an older definition than the server's.
    let mut file = file;
    file["pinned"]["ref"]["echo"]["sha256"] = serde_json::json!("0".repeat(64));
    file["pinned"]["ref"]["echo"]["definition"]["description"] = serde_json::json!("Old text.");
    std::fs::write(&pins, file.to_string()).unwrap();

    let held = run(&["tools", "list"]);
    assert!(
        held.status.success(),
        "{}",
        String::from_utf8_lossy(&held.stderr)
    );
    assert!(
        !listed(&held),
        "a quarantined tool is not listed: {}",
        stdout(&held)
    );
    assert!(stdout(&held).contains("ref__add "), "the others stay");
    let one = run(&["--server", "ref", "tools", "list"]);
    assert!(one.status.success());
    assert!(
        !stdout(&one).lines().any(|l| l.starts_with("echo ")),
        "{}",
        stdout(&one)
    );
    assert!(
        stdout(&one).lines().any(|l| l.starts_with("add ")),
        "{}",
        stdout(&one)
    );
    let refused = run(&["tools", "call", "ref__echo", "text=hi"]);
    assert_eq!(refused.status.code(), Some(3));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("(description)") && said.contains("toolwire pins approve ref echo"),
        "{said}"
    );
    // A batch through the entry's client is refused the same way, line by line.
    let mut batch = Command::new(BIN)
        .args([
            "--config",
            &config_arg,
            &pin_arg,
            "--server",
            "ref",
            "batch",
        ])
        .env("TOOLWIRE_TRUST", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        batch.stdin.as_mut().unwrap(),
        b"{\"tool\": \"echo\", \"arguments\": {\"text\": \"hi\"}}\n{\"tool\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n",
    )
    .unwrap();
    let batch = batch.wait_with_output().unwrap();
    let lines: Vec<Value> = stdout(&batch)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", stdout(&batch));
    assert!(
        lines[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("toolwire pins approve ref echo")),
        "{}",
        lines[0]
    );
    assert!(lines[1].get("error").is_none(), "{}", lines[1]);
    // Without the flag, nothing is pinned or held.
    let unpinned = toolwire(&[
        "--config",
        &config_arg,
        "tools",
        "call",
        "ref__echo",
        "text=hi",
    ]);
    assert_eq!(stdout(&unpinned).trim(), "hi");

    let approved = toolwire(&[
        "pins",
        "--file",
        pins.to_str().unwrap(),
        "approve",
        "ref",
        "echo",
    ]);
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let called = run(&["tools", "call", "ref__echo", "text=hi"]);
    assert!(
        called.status.success(),
        "{}",
        String::from_utf8_lossy(&called.stderr)
    );
    assert_eq!(stdout(&called).trim(), "hi");
    assert!(listed(&run(&["tools", "list"])));
    let _ = std::fs::remove_dir_all(dir);
}

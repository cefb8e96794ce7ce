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

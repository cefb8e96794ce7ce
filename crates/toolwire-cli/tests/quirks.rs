//! The era-repair switch as users give it: `--era-repair` on `toolwire serve` and
//! `toolwire gateway`, and `"eraRepair": true` in the file's `gateway` section. A 2026-07-28
//! call under `MCP-Protocol-Version: 2025-11-25` (a client sending the version it first
//! negotiated as the header) is refused without it
//! (-32020) and served with it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

/// POSTs the quirky `echo` call to `url`: the status and the body.
fn quirky_echo(url: &str, tool: &str) -> (u16, Value) {
    use std::io::{Read as _, Write as _};
    let rest = url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": {"text": "repaired"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "quirky", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let data = response
        .lines()
        .find_map(|l| {
            l.strip_prefix("data: ")
                .or_else(|| l.starts_with('{').then_some(l))
        })
        .unwrap_or("null");
    (status, serde_json::from_str(data).unwrap_or(Value::Null))
}

#[test]
fn serve_refuses_a_disagreeing_version_header_unless_told_to_repair_it() {
    let strict = serve(&["--json-responses"]);
    let (status, refused) = quirky_echo(&strict.url, "echo");
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], -32020, "{refused}");
    let lenient = serve(&["--json-responses", "--era-repair"]);
    let (status, served) = quirky_echo(&lenient.url, "echo");
    assert_eq!(status, 200, "{served}");
    assert_eq!(
        served["result"]["content"][0]["text"], "repaired",
        "{served}"
    );
}

#[test]
fn a_gateway_repairs_with_the_flag_or_the_files_era_repair() {
    let dir = std::env::temp_dir().join(format!("toolwire-cli-quirks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let servers = serde_json::json!({"ref": {"command": BIN, "args": ["serve", "--stdio"]}});
    for (label, section, flag) in [
        ("strict", serde_json::json!({}), None),
        ("flag", serde_json::json!({}), Some("--era-repair")),
        ("file", serde_json::json!({"eraRepair": true}), None),
    ] {
        let path = dir.join(format!("{label}.json"));
        let file = serde_json::json!({"mcpServers": servers, "gateway": section});
        std::fs::write(&path, file.to_string()).unwrap();
        let mut args = vec![
            "--config",
            path.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
            "--json-responses",
        ];
        args.extend(flag);
        let (child, line) = spawn_listening("gateway", &args);
        let url = line.trim().rsplit(' ').next().unwrap().to_owned();
        let gateway = Served { child, url };
        let (status, answer) = quirky_echo(&gateway.url, "ref__echo");
        if label == "strict" {
            assert_eq!(status, 400, "{label}: {answer}");
            assert_eq!(answer["error"]["code"], -32020, "{label}: {answer}");
        } else {
            assert_eq!(status, 200, "{label}: {answer}");
            assert_eq!(
                answer["result"]["content"][0]["text"], "repaired",
                "{label}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! What `toolwire gateway` refuses before it serves: `--check` of a file (its syntax, traffic
//! settings it cannot use, required entries that are missing or disabled), a public address
//! without authentication, a session key that does not parse.

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
fn check_reads_the_file_and_says_what_it_would_serve() {
    let config = config("check");
    let path = config.path.to_str().unwrap();
    // The file given with --config, or following --check itself.
    let with_config: &[&str] = &["gateway", "--config", path, "--check"];
    let after_check: &[&str] = &["gateway", "--check", path];
    for args in [with_config, after_check] {
        let out = toolwire(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout(&out).contains("2 servers (2 enabled)"),
            "{args:?}: {}",
            stdout(&out)
        );
    }

    // A broken file: exit 2, the problem named.
    std::fs::write(&config.path, r#"{"mcpServers": {"x": {"command": 5}}}"#).unwrap();
    let out = toolwire(&[
        "gateway",
        "--config",
        config.path.to_str().unwrap(),
        "--check",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command"));
}

#[test]
fn check_refuses_traffic_settings_that_cannot_be_used_naming_the_setting() {
    let config = config("traffic");
    let servers = serde_json::json!({"ref": {"command": BIN, "args": ["serve", "--stdio"]}});
    let with = |traffic: serde_json::Value| {
        let text = serde_json::json!({"mcpServers": servers, "gateway": {"traffic": traffic}});
        std::fs::write(&config.path, text.to_string()).unwrap();
        toolwire(&["gateway", "--check", config.path.to_str().unwrap()])
    };
    let usable = with(serde_json::json!({"*": {"maxConcurrent": 8, "breakerFailures": 5}}));
    assert!(
        usable.status.success(),
        "{}",
        String::from_utf8_lossy(&usable.stderr)
    );
    let unusable = with(serde_json::json!({"ref": {"maxConcurrent": 0}}));
    let said = String::from_utf8_lossy(&unusable.stderr);
    assert_eq!(unusable.status.code(), Some(2), "{said}");
    assert!(
        said.contains("gateway.traffic.ref.maxConcurrent: at least 1"),
        "{said}"
    );
}

#[test]
fn check_refuses_required_entries_that_are_missing_or_disabled() {
    let config = config("required");
    let servers = serde_json::json!({
        "ref": {"command": BIN, "args": ["serve", "--stdio"]},
        "off": {"command": BIN, "args": ["serve", "--stdio"], "disabled": true},
    });
    let with = |required: serde_json::Value| {
        let text = serde_json::json!({"mcpServers": servers, "gateway": {"required": required}});
        std::fs::write(&config.path, text.to_string()).unwrap();
        toolwire(&["gateway", "--check", config.path.to_str().unwrap()])
    };
    let usable = with(serde_json::json!(["ref"]));
    assert!(
        usable.status.success(),
        "{}",
        String::from_utf8_lossy(&usable.stderr)
    );
    for (required, said) in [
        ("nope", "gateway.required names `nope`, which has no entry"),
        ("off", "gateway.required names `off`, which is disabled"),
    ] {
        let refused = with(serde_json::json!(["ref", required]));
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
    }
}

#[test]
fn a_public_address_is_refused_without_allow_unauthenticated() {
    let config = config("public");
    let out = toolwire(&[
        "gateway",
        "--config",
        config.path.to_str().unwrap(),
        "--http",
        "0.0.0.0:0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-unauthenticated"), "{stderr}");
}

#[test]
fn a_bad_session_key_is_named_by_where_it_came_from_never_shown() {
    let config = config("keys");
    let keys = config.dir.join("keys");
    std::fs::write(&keys, "c2VjcmV0LXRva2Vu\n").unwrap();
    let out = toolwire(&[
        "gateway",
        "--config",
        config.path.to_str().unwrap(),
        "--session-key-file",
        keys.to_str().unwrap(),
        "--stdio",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--session-key-file"), "{stderr}");
    assert!(stderr.contains("not base64 of 32 bytes"), "{stderr}");
    assert!(!stderr.contains("c2VjcmV0LXRva2Vu"), "{stderr}");
}

#[test]
fn healthz_exits_zero_for_a_live_gateway_and_one_where_none_answers() {
    let config = config("healthz");
    let (mut child, line) = spawn_listening(
        "gateway",
        &[
            "--config",
            config.path.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ],
    );
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .replace("/mcp", "/healthz");
    let live = toolwire(&["gateway", "--healthz", &url]);
    let missing = toolwire(&["gateway", "--healthz", &url.replace("/healthz", "/nothing")]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        live.status.code(),
        Some(0),
        "{line}: {}",
        String::from_utf8_lossy(&live.stderr)
    );
    // A path the gateway does not serve, and a port nobody listens on (bound, then let go).
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("404"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let refused = toolwire(&[
        "gateway",
        "--healthz",
        &format!("http://127.0.0.1:{port}/healthz"),
    ]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("refused"));
}

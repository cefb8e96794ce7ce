//! `toolwire import` over a home directory holding each host's file where the host keeps it
//! (`tests/fixtures/hosts`, one file per host format), then `--rewire` and `--undo`; and
//! `toolwire doctor` on a file with a server that comes up, one that cannot start, and names
//! providers refuse.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

use std::path::{Path, PathBuf};

use serde_json::json;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hosts");

/// The fixture home copied to a temporary folder (rewiring edits it).
fn home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(Path::new(FIXTURES), dir.path());
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// `toolwire ARGS` with `home` as the home directory and no other place set.
fn in_home(home: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("APPDATA")
        .env_remove("CODEX_HOME")
        .env_remove("TOOLWIRE_TRUST")
        .current_dir(home)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn host_files(home: &Path) -> Vec<PathBuf> {
    [
        ".config/Claude/claude_desktop_config.json",
        ".claude.json",
        ".cursor/mcp.json",
        ".config/Code/User/mcp.json",
        ".codeium/windsurf/mcp_config.json",
        ".config/zed/settings.json",
        ".codex/config.toml",
        ".gemini/settings.json",
    ]
    .iter()
    .map(|f| home.join(f))
    .collect()
}

#[test]
fn import_merges_every_hosts_servers_into_one_private_file_naming_duplicates() {
    let home = home();
    let out = in_home(home.path(), &["import", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out);
    let hosts: Vec<&str> = report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(
        hosts,
        [
            "claude-desktop",
            "claude-code",
            "cursor",
            "vscode",
            "windsurf",
            "zed",
            "codex",
            "gemini"
        ]
    );
    let file = home.path().join(".config/toolwire/mcp.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the merged file may hold secrets");
    }
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let servers = merged["mcpServers"].as_object().unwrap();
    let mut names: Vec<&str> = servers.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "context7",
            "docs",
            "events",
            "filesystem",
            "filesystem-gemini",
            "github",
            "linear",
            "notion",
            "perplexity",
            "playwright",
            "postgres",
            "search",
            "sentry",
            "shell"
        ]
    );
    // References stay references; host-only forms become ones the loader reads.
    assert_eq!(
        servers["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${GITHUB_TOKEN}"
    );
    assert_eq!(
        servers["notion"]["headers"]["Authorization"],
        "Bearer ${env:NOTION_TOKEN}"
    );
    assert_eq!(
        servers["perplexity"]["env"]["PERPLEXITY_API_KEY"],
        "${PERPLEXITY_KEY}"
    );
    assert_eq!(
        servers["docs"]["headers"]["Authorization"],
        "Bearer ${DOCS_TOKEN}"
    );
    assert_eq!(servers["docs"]["timeout"], 30000);
    assert_eq!(servers["shell"]["disabled"], true);
    assert_eq!(servers["search"]["headers"]["X-Key"], "${SEARCH_KEY}");
    assert_eq!(
        servers["events"],
        json!({"type": "sse", "url": "https://events.example.com/sse", "timeout": 15000})
    );
    assert_eq!(servers["sentry"]["type"], "sse");
    assert_eq!(
        servers["context7"],
        json!({"url": "https://mcp.context7.com/mcp"})
    );
    // What was found twice, and what could not be imported, is said.
    let host = |name: &str| {
        report["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["host"] == name)
            .unwrap()
            .clone()
    };
    let notes = |name: &str| host(name)["notes"].to_string();
    assert!(
        notes("cursor").contains("github: the same as claude-desktop's"),
        "{}",
        notes("cursor")
    );
    assert!(
        notes("gemini")
            .contains("filesystem: differs from claude-desktop's, imported as filesystem-gemini"),
        "{}",
        notes("gemini")
    );
    assert!(
        notes("vscode").contains("set PERPLEXITY_KEY"),
        "{}",
        notes("vscode")
    );
    assert_eq!(host("windsurf")["skipped"][0]["name"], "broken");
    assert!(
        host("zed")["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("extension")
    );
    // The merged file loads as Toolwire's own, every variable it names being set.
    let loaded =
        toolwire_host::ServersConfig::parse(&std::fs::read_to_string(&file).unwrap(), |_| {
            Some("set".to_owned())
        })
        .unwrap();
    assert_eq!(loaded.servers.len(), 14);
    // Importing again adds nothing and renames nothing.
    let again = in_home(home.path(), &["import", "--json"]);
    let merged_again: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(merged_again, merged, "{}", stdout(&again));
}

#[test]
fn rewire_points_every_host_at_the_gateway_keeping_comments_and_undo_puts_each_file_back() {
    let home = home();
    let before: Vec<Vec<u8>> = host_files(home.path())
        .iter()
        .map(|f| std::fs::read(f).unwrap())
        .collect();
    let out = in_home(home.path(), &["import", "--rewire"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let config = std::fs::canonicalize(home.path().join(".config/toolwire/mcp.json")).unwrap();
    for (file, original) in host_files(home.path()).iter().zip(&before) {
        let backup = PathBuf::from(format!("{}.toolwire-backup", file.display()));
        assert_eq!(
            &std::fs::read(&backup).unwrap(),
            original,
            "{}",
            backup.display()
        );
    }
    // Zed: the imported server gone, the extension's kept, comments and settings untouched.
    let zed = std::fs::read_to_string(home.path().join(".config/zed/settings.json")).unwrap();
    assert!(zed.starts_with("// Zed settings\n"), "{zed}");
    assert!(zed.contains("\"vim_mode\": true"), "{zed}");
    let zed: Value =
        jsonc_parser::parse_to_serde_value(&zed, &jsonc_parser::ParseOptions::default()).unwrap();
    assert!(zed["context_servers"].get("postgres").is_none());
    assert!(zed["context_servers"].get("mcp-server-context7").is_some());
    assert_eq!(
        zed["context_servers"]["toolwire"]["args"],
        json!(["gateway", "--config", config, "--stdio"])
    );
    // Claude Code: its other state kept, the list now the gateway alone.
    let claude: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join(".claude.json")).unwrap())
            .unwrap();
    assert_eq!(claude["numStartups"], 42);
    let list: Vec<&String> = claude["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(list, ["toolwire"]);
    assert_eq!(
        claude["projects"]["/elsewhere"]["mcpServers"]["other-project"]["command"],
        "other"
    );
    // Codex: a table of its own, comments kept.
    let codex = std::fs::read_to_string(home.path().join(".codex/config.toml")).unwrap();
    assert!(
        codex.starts_with("# Codex settings\nmodel = \"gpt-5-codex\""),
        "{codex}"
    );
    assert!(!codex.contains("[mcp_servers.docs]"), "{codex}");
    assert!(codex.contains("[mcp_servers.toolwire]"), "{codex}");
    // Windsurf keeps the entry that could not be imported.
    let windsurf =
        std::fs::read_to_string(home.path().join(".codeium/windsurf/mcp_config.json")).unwrap();
    assert!(windsurf.contains("\"broken\""), "{windsurf}");
    // A server added to a rewired host is imported, but the host is not rewired again: that
    // would lose the backup of the first.
    let cursor = home.path().join(".cursor/mcp.json");
    let text = std::fs::read_to_string(&cursor).unwrap();
    let text = text.replacen(
        "\"mcpServers\": {",
        "\"mcpServers\": {\"added\": {\"command\": \"added\"},",
        1,
    );
    std::fs::write(&cursor, text).unwrap();
    let twice = in_home(home.path(), &["import", "--rewire", "--from", "cursor"]);
    let said = stdout(&twice);
    assert_eq!(twice.status.code(), Some(2), "{said}");
    assert!(said.contains("already rewired"), "{said}");
    // Importing a rewired host finds the gateway's entry and skips it.
    let after = in_home(
        home.path(),
        &["import", "--json", "--out", "-", "--from", "cursor"],
    );
    let merged: Value = serde_json::from_slice(&after.stdout).unwrap();
    let found: Vec<&String> = merged["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(found, ["added"], "{merged}");
    // Undo: every file as it was, no backup left.
    let undone = in_home(home.path(), &["import", "--undo"]);
    assert_eq!(undone.status.code(), Some(0), "{}", stdout(&undone));
    for (file, original) in host_files(home.path()).iter().zip(&before) {
        assert_eq!(
            &std::fs::read(file).unwrap(),
            original,
            "{}",
            file.display()
        );
        assert!(!PathBuf::from(format!("{}.toolwire-backup", file.display())).exists());
    }
}

#[test]
fn import_names_an_unknown_host_and_a_file_it_cannot_read() {
    let home = home();
    let unknown = in_home(home.path(), &["import", "--from", "notepad"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown host `notepad`"));
    std::fs::write(home.path().join("bad.json"), "{ not json").unwrap();
    let bad = in_home(
        home.path(),
        &["import", "--from", "cursor=bad.json", "--out", "out.json"],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", stdout(&bad));
    assert!(stdout(&bad).contains("not valid JSON"), "{}", stdout(&bad));
}

#[test]
fn a_dry_run_hides_written_out_secrets_the_file_written_keeps() {
    let home = home();
    std::fs::write(
        home.path().join("literal.json"),
        json!({"mcpServers": {
            "db": {"command": "db-mcp", "env": {"DB_PASSWORD": "hunter2-literal", "DB_USER": "${DB_USER}"}},
            "api": {"url": "https://user:pw-literal@api.example/mcp?api_key=key-literal",
                "headers": {"Authorization": "Bearer token-literal", "X-Team": "Bearer ${TEAM_TOKEN}"}},
        }})
        .to_string(),
    )
    .unwrap();
    let from = ["--from", "cursor=literal.json", "--out", "out.json"];
    let secrets = [
        "hunter2-literal",
        "pw-literal",
        "key-literal",
        "token-literal",
    ];
    for args in [
        &["import", "--dry-run"][..],
        &["import", "--json", "--dry-run"][..],
    ] {
        let preview = in_home(home.path(), &[args, &from[..]].concat());
        assert_eq!(preview.status.code(), Some(0), "{}", stdout(&preview));
        let said = format!(
            "{}{}",
            stdout(&preview),
            String::from_utf8_lossy(&preview.stderr)
        );
        for secret in secrets {
            assert!(!said.contains(secret), "{args:?} shows {secret}: {said}");
        }
        assert!(
            said.contains("${DB_USER}") && said.contains("Bearer ${TEAM_TOKEN}"),
            "{said}"
        );
        assert!(said.contains("<hidden: kept in the file>"), "{said}");
        assert!(
            !home.path().join("out.json").exists(),
            "a dry run writes nothing"
        );
    }
    let written = in_home(home.path(), &[&["import"][..], &from[..]].concat());
    assert_eq!(written.status.code(), Some(0), "{}", stdout(&written));
    let file = std::fs::read_to_string(home.path().join("out.json")).unwrap();
    for secret in secrets {
        assert!(file.contains(secret), "the file keeps {secret}: {file}");
    }
}

#[test]
fn doctor_reports_each_server_and_what_to_fix_for_the_ones_that_need_it() {
    let dir = tempfile::tempdir().unwrap();
    let long = "a-server-whose-name-is-long-enough-that-its-tools-pass-sixty-four";
    let file = dir.path().join("mcp.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {
            "ref": {"command": BIN, "args": ["serve", "--stdio"]},
            "missing": {"command": "/nonexistent/toolwire-doctor-test"},
            long: {"command": BIN, "args": ["serve", "--stdio"]},
        }})
        .to_string(),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["--json", "doctor", "--config"])
        .arg(&file)
        .args(["--timeout", "20"])
        .env("TOOLWIRE_TRUST", "1")
        .env("HOME", dir.path())
        .env_remove("SSL_CERT_FILE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let report = json(&out);
    let checks = report["checks"].as_array().unwrap();
    let about = |subject: &str| -> Vec<&Value> {
        checks.iter().filter(|c| c["subject"] == subject).collect()
    };
    assert!(
        about("ref")[0]["found"]
            .as_str()
            .unwrap()
            .starts_with("ready: "),
        "{report}"
    );
    assert_eq!(about("ref")[0]["ok"], true);
    let missing = about("missing")[0];
    assert!(
        missing["found"].as_str().unwrap().starts_with("failed: "),
        "{report}"
    );
    assert!(missing["fix"].is_string());
    let names = about("tools")[0];
    assert!(names["found"].as_str().unwrap().contains(long), "{report}");
    assert!(
        names["fix"]
            .as_str()
            .unwrap()
            .contains("--names provider-safe")
    );
    assert_eq!(report["problems"], 2, "{report}");
}

#[test]
fn doctor_starts_nothing_from_a_file_that_is_not_approved() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let file = dir.path().join("mcp.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"s": {"command": "sh", "args": ["-c", format!("touch {}", marker.display())]}}})
            .to_string(),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["doctor", "--config"])
        .arg(&file)
        .env("HOME", dir.path().join("home"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env_remove("TOOLWIRE_TRUST")
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert!(stdout(&out).contains("toolwire trust"), "{}", stdout(&out));
    assert!(
        !marker.exists(),
        "a server of an unapproved file was started"
    );
}

//! A project's mcpServers file acts for nobody until approved: what needs approval, what does not, and toolwire trust.

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

/// A running gateway whose project file changed waits for that change's approval, and applies
/// it once `toolwire trust` gave it: no SIGHUP, no restart.
#[test]
fn a_gateway_applies_an_edit_once_it_is_approved_without_being_told_again() {
    let entry = |name: &str| serde_json::json!({"command": BIN, "args": ["serve", "--stdio"], "env": {"N": name}});
    let p = Project::new("reload", &serde_json::json!({"a": entry("a")}));
    let file = p.file();
    let file = file.to_str().unwrap();
    assert!(p.run(&["trust", file], false).status.success());
    let gateway = Listening::start(
        Command::new(BIN)
            .args(["gateway", "--config", file, "--http", "127.0.0.1:0"])
            .env("XDG_STATE_HOME", p.dir.join("state"))
            .env("XDG_CONFIG_HOME", p.dir.join("config"))
            .env("HOME", p.dir.join("home"))
            .env_remove("TOOLWIRE_TRUST")
            .env_remove("RUST_LOG"),
    );
    let url = gateway.url.clone();
    let heard = |needle: &str| gateway.logged(&[needle]);
    let wait = |what: &str, check: &dyn Fn() -> bool| until(Duration::from_secs(30), what, check);
    let listed = |name: &str| {
        let list = toolwire(&["--url", &url, "--json", "tools", "list"]);
        list.status.success() && tool_names(&json(&list)).contains(&name)
    };
    wait("a listed", &|| listed("a__echo"));

    p.write(&serde_json::json!({"a": entry("a"), "b": entry("b")}));
    wait("the edit refused for approval", &|| heard("not reloaded"));
    assert!(
        heard("toolwire trust"),
        "{:?}",
        gateway.said.lock().unwrap()
    );
    assert!(!listed("b__echo"));
    // The refusal is counted once, though the file is tried again on every poll.
    let counted = |line: &str| get(&url, "/metrics").lines().any(|l| l == line);
    std::thread::sleep(Duration::from_secs(3));
    assert!(counted(
        "toolwire_gateway_reloads_total{outcome=\"refused\"} 1"
    ));
    assert!(p.run(&["trust", file], false).status.success());
    wait("b listed once approved", &|| listed("b__echo"));
    assert!(heard("reloaded"), "{:?}", gateway.said.lock().unwrap());
    assert!(counted(
        "toolwire_gateway_reloads_total{outcome=\"applied\"} 1"
    ));
    assert!(counted(
        "toolwire_gateway_reloaded_entries_total{outcome=\"added\"} 1"
    ));
}

//! `cargo xtask wasm`: the client where JavaScript runs. The sans-IO core is checked for
//! `wasm32-unknown-unknown` (no OS clock behind `std::time::Instant`, no socket: nothing may
//! pull an OS-only crate into it); then `toolwire-web`'s tests run compiled to wasm32 under
//! Node (`wasm-bindgen-test-runner`, installed with `cargo install wasm-bindgen-cli` at the
//! version the lock file names) against the reference server, over Node's own `fetch`.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::{ensure_target, run};

const TARGET: &str = "wasm32-unknown-unknown";

/// The sans-IO core, and the crate that drives it over `fetch`.
const WASM_CRATES: &[&str] = &[
    "toolwire-types",
    "toolwire-wire",
    "toolwire-headers",
    "toolwire-cache",
    "toolwire-session",
    "toolwire-web",
];

pub(crate) fn check(root: &Path) -> Result<(), String> {
    ensure_target(root, TARGET)?;
    let mut args = vec!["check", "--locked", "--target", TARGET];
    for krate in WASM_CRATES {
        args.extend(["-p", krate]);
    }
    run(root, "cargo", &args, &[])?;
    node_tests(root)
}

/// The version of `wasm-bindgen` in the lock file: the test runner must be the same.
fn bindgen_version(root: &Path) -> Result<String, String> {
    let lock =
        std::fs::read_to_string(root.join("Cargo.lock")).map_err(|e| format!("Cargo.lock: {e}"))?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == r#"name = "wasm-bindgen""# {
            let version = lines.next().unwrap_or("");
            if let Some(v) = version.trim().strip_prefix("version = \"") {
                return Ok(v.trim_end_matches('"').to_owned());
            }
        }
    }
    Err("Cargo.lock names no wasm-bindgen".into())
}

/// `wasm-bindgen-test-runner` at `version`, installed unless it is there.
fn ensure_runner(root: &Path, version: &str) -> Result<(), String> {
    let installed = Command::new("wasm-bindgen-test-runner")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(version))
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    // Not `--locked`: the tool's own lock file can name versions the registry mirror lacks.
    run(
        root,
        "cargo",
        &["install", "wasm-bindgen-cli", "--version", version],
        &[],
    )
}

fn node_tests(root: &Path) -> Result<(), String> {
    ensure_runner(root, &bindgen_version(root)?)?;
    // The binary as the workspace's test build makes it (and the gate has made it by now):
    // built on its own, `-p toolwire-cli` resolves other features and rebuilds much of the
    // tree (~110 s).
    run(
        root,
        "cargo",
        &["test", "--locked", "--workspace", "--no-run"],
        &[],
    )?;
    let bin = root.join("target/debug/toolwire");
    let mut server = Command::new(&bin)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let mut line = String::new();
    if let Some(stderr) = server.stderr.take() {
        let _ = BufReader::new(stderr).read_line(&mut line);
    }
    let url = line.trim().rsplit(' ').next().unwrap_or("").to_owned();
    let outcome = if url.starts_with("http://127.0.0.1:") {
        run(
            root,
            "cargo",
            &[
                "test",
                "--locked",
                "--target",
                TARGET,
                "-p",
                "toolwire-web",
                "--test",
                "node",
            ],
            &[
                (
                    "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER",
                    "wasm-bindgen-test-runner",
                ),
                ("TOOLWIRE_WEB_TEST_URL", &url),
            ],
        )
    } else {
        Err(format!(
            "the reference server did not say where it listens: {line}"
        ))
    };
    let _ = server.kill();
    let _ = server.wait();
    outcome
}

//! `cargo xtask conformance`: the official MCP conformance suite against Toolwire.
//!
//! 1. Installs what it needs into a cache folder outside the repository
//!    (`$TOOLWIRE_PEERS`, else `~/.cache/toolwire-peers`): node 22 from the npm registry (the
//!    suite needs it; the machine's node is 20), `@modelcontextprotocol/conformance` 0.1.16
//!    and 0.2.0-alpha.12. Nothing is downloaded from anywhere but the registry.
//! 2. Builds `toolwire-conformance-client` and `toolwire` (dev profile: [`crate::gate_bins`]).
//! 3. Runs the client scenarios of both versions against the client (the auth ones against
//!    both spec versions), and the server scenarios Toolwire's reference server is meant to
//!    pass against `toolwire serve --http --task-fixtures` (the fixture tools the suite's
//!    tasks scenarios call), then the same scenarios through `toolwire gateway` in front of
//!    it (kind `gateway`).
//! 4. Compares the failing checks with the ratchet baseline `xtask/conformance-baseline.txt`:
//!    an unlisted failure fails the run, and so does a listed one that now passes.
//! 5. Prints the table and writes it to `docs/conformance.md`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The suite versions, each in its own folder of the cache.
const SUITES: &[(&str, &str)] = &[("conf1", "0.1.16"), ("conf2", "0.2.0-alpha.12")];

/// Client scenarios without OAuth, per suite version.
const CLIENT_SCENARIOS: &[(&str, &[&str])] = &[
    (
        "0.1.16",
        &[
            "initialize",
            "tools_call",
            "elicitation-sep1034-client-defaults",
            "sse-retry",
        ],
    ),
    (
        "0.2.0-alpha.12",
        &[
            "initialize",
            "tools_call",
            "elicitation-sep1034-client-defaults",
            "sse-retry",
            "request-metadata",
            "sep-2322-client-request-state",
            "http-standard-headers",
            "http-custom-headers",
            "http-invalid-tool-headers",
            "json-schema-ref-no-deref",
            "json-schema-2020-12-preservation",
            "sep-2640-client-no-prefetch",
            "sep-2640-client-verify-digest",
            "sep-2640-client-verify-size",
            "sep-2640-client-verify-frontmatter",
        ],
    ),
];

/// The OAuth client scenarios the 2025 revisions introduced, in both suite versions; those of
/// 0.2.0-alpha.12 run again with `--spec-version 2026-07-28` ([`SUITE_AT_2026`]), where the
/// stateless wire and the SEP-837 and SEP-2350 checks apply.
const AUTH_2025: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
];

/// The other OAuth client scenarios both suite versions have (2025-03-26 fallbacks, draft,
/// extensions).
const AUTH_BOTH: &[&str] = &[
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
];

/// OAuth client scenarios of one suite version only.
const AUTH_ONLY: &[(&str, &[&str])] = &[
    ("0.1.16", &["auth/cross-app-access-complete-flow"]),
    (
        "0.2.0-alpha.12",
        &[
            "auth/authorization-server-migration",
            "auth/iss-supported",
            "auth/iss-not-advertised",
            "auth/iss-supported-missing",
            "auth/iss-wrong-issuer",
            "auth/iss-unexpected",
            "auth/iss-normalized",
            "auth/metadata-issuer-mismatch",
            "auth/enterprise-managed-authorization",
            "auth/dpop",
            "auth/dpop-nonce",
            "auth/wif-jwt-bearer",
        ],
    ),
];

/// Every OAuth client run: (suite, scenario), the suite being `version@spec` for a run with
/// `--spec-version spec`.
fn auth_runs() -> Vec<(&'static str, &'static str)> {
    let mut runs = Vec::new();
    for (suite, only) in AUTH_ONLY {
        for scenario in AUTH_2025.iter().chain(AUTH_BOTH).chain(*only) {
            runs.push((*suite, *scenario));
        }
    }
    runs.extend(AUTH_2025.iter().map(|s| (SUITE_AT_2026, *s)));
    runs
}

/// The spec version the [`AUTH_2025`] scenarios run at again, shown after the suite's version.
const WIRE_2026: &str = "2026-07-28";

/// The suite the second run of [`AUTH_2025`] is in, with the spec version it asks for.
const SUITE_AT_2026: &str = "0.2.0-alpha.12@2026-07-28";

/// Server scenarios the reference server is built to pass. It is not an everything-server:
/// the scenarios that read its fixtures (`test://static-text`, `test_prompt_with_arguments`,
/// …) are not run; those about what it serves in its own way are, and the tasks scenarios on
/// the fixture tools `serve --task-fixtures` adds.
const SERVER_SCENARIOS: &[(&str, &[&str])] = &[
    ("0.1.16", &["tools-list"]),
    (
        "0.2.0-alpha.12",
        &[
            "tools-list",
            "http-header-validation",
            "http-custom-header-server-validation",
            "resources-list",
            "resources-subscribe",
            "resources-unsubscribe",
            "prompts-list",
            "completion-complete",
            "logging-set-level",
            "caching",
            "sep-2640-skills-enumeration",
            "sep-2640-skills-manifest",
            "sep-2640-skills-directory",
            // The tasks extension, on the fixture tools `serve --task-fixtures` adds
            // (`tasks-status-notifications` is left out: the suite skips it, pending a rewrite).
            "tasks-lifecycle",
            "tasks-capability-negotiation",
            "tasks-wire-fields",
            "tasks-request-state-removal",
            "tasks-mrtr-input",
            "tasks-request-headers",
            "tasks-dispatch-and-envelope",
            "tasks-required-task-error",
            "tasks-mrtr-composition",
        ],
    ),
];

/// One scenario's outcome.
struct Outcome {
    suite: &'static str,
    kind: &'static str,
    scenario: &'static str,
    passed: usize,
    total: usize,
    /// Failing (or warning) check ids, and `client-exit` when the client exited non-zero.
    failures: BTreeSet<String>,
}

/// The folder peers are installed into, outside the repository.
pub(crate) fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TOOLWIRE_PEERS") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache").join("toolwire-peers")
}

/// `npm install PACKAGE` in `dir` (initialised first when it is new).
pub(crate) fn npm_install(dir: &Path, package: &str) -> Result<(), String> {
    npm_install_all(dir, &[package], &[])
}

/// `npm install FLAGS... PACKAGES...` in `dir` (initialised first when it is new).
pub(crate) fn npm_install_all(dir: &Path, packages: &[&str], flags: &[&str]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !dir.join("package.json").exists() {
        let status = Command::new("npm")
            .args(["init", "-y"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("npm: {e}"))?;
        if !status.success() {
            return Err(format!("npm init in {} failed", dir.display()));
        }
    }
    let list = packages.join(" ");
    eprintln!("==> npm install {list} (in {})", dir.display());
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund"])
        .args(flags)
        .args(packages)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("npm: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("npm install {list} failed"))
    }
}

/// `pip install -q PINS...` into the venv at `venv` (made first when it is missing).
pub(crate) fn pip_install(root: &Path, venv: &Path, pins: &[&str]) -> Result<(), String> {
    let python = venv.join("bin/python");
    if !python.exists() {
        crate::run(
            root,
            "python3",
            &["-m", "venv", &venv.display().to_string()],
            &[],
        )?;
    }
    let mut args = vec!["-m", "pip", "install", "-q"];
    args.extend_from_slice(pins);
    crate::run(root, &python.display().to_string(), &args, &[])
}

/// `package` at exactly `version` in the venv at `venv`: checked through its metadata, and
/// installed (the venv made first when missing) only when another version or none is there.
pub(crate) fn pip_ensure(
    root: &Path,
    venv: &Path,
    package: &str,
    version: &str,
) -> Result<(), String> {
    let script = format!("import importlib.metadata as m; print(m.version('{package}'))");
    let installed = std::process::Command::new(venv.join("bin/python"))
        .args(["-c", &script])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == version);
    if installed {
        return Ok(());
    }
    pip_install(root, venv, &[&format!("{package}=={version}")])
}

/// The version of `package` installed in `dir`'s `node_modules`, if any.
pub(crate) fn installed_npm_version(dir: &Path, package: &str) -> Option<String> {
    let manifest = dir.join("node_modules").join(package).join("package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    value["version"].as_str().map(str::to_owned)
}

/// Installs node 22 from the npm registry (once); returns the PATH with it first.
pub(crate) fn install_node(cache: &Path) -> Result<String, String> {
    let node = cache.join("node22");
    if !node.join("node_modules/.bin/node").exists() {
        npm_install(&node, "node@22")?;
    }
    let path = std::env::var("PATH").unwrap_or_default();
    Ok(format!(
        "{}:{path}",
        node.join("node_modules/.bin").display()
    ))
}

/// Installs node 22 and both suites (once); returns the PATH to run them with.
fn install(cache: &Path) -> Result<String, String> {
    let path = install_node(cache)?;
    for (dir, version) in SUITES {
        let current = installed_npm_version(&cache.join(dir), "@modelcontextprotocol/conformance");
        if current.as_deref() != Some(version) {
            npm_install(
                &cache.join(dir),
                &format!("@modelcontextprotocol/conformance@{version}"),
            )?;
        }
    }
    Ok(path)
}

/// Reads `checks.json` files under `out` into (passed, total, failing ids).
fn read_checks(out: &Path) -> (usize, usize, BTreeSet<String>) {
    let mut passed = 0;
    let mut total = 0;
    let mut failures = BTreeSet::new();
    // `<out>/<run>/checks.json`, or `<out>/auth/<run>/checks.json` for `auth/…` scenarios.
    let mut files = Vec::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "checks.json") {
                files.push(path);
            }
        }
    }
    for file in files {
        // A file the suite wrote but that says nothing readable is a failure, not nothing.
        let checks = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok());
        let Some(Value::Array(checks)) = checks else {
            total += 1;
            failures.insert(format!("{} (not a JSON array of checks)", file.display()));
            continue;
        };
        for check in checks {
            let id = check["id"].as_str().unwrap_or("?").to_owned();
            match check["status"].as_str() {
                Some("SUCCESS") => {
                    passed += 1;
                    total += 1;
                }
                Some("FAILURE" | "WARNING") => {
                    total += 1;
                    failures.insert(id);
                }
                // Neither passed nor failed, by the suite's own account.
                Some("INFO" | "SKIPPED") => {}
                // A status this gate does not know (or none) is not a pass it can vouch for.
                other => {
                    total += 1;
                    failures.insert(format!("{id} (status {})", other.unwrap_or("missing")));
                }
            }
        }
    }
    (passed, total, failures)
}

/// Runs one scenario. `suite` is the suite's version, or `version@spec` to run it with
/// `--spec-version spec`.
fn run_scenario(
    cache: &Path,
    path: &str,
    suite: &'static str,
    kind: &'static str,
    scenario: &'static str,
    target: &[&str],
) -> Result<Outcome, String> {
    let (version, spec) = match suite.split_once('@') {
        Some((v, s)) => (v, Some(s)),
        None => (suite, None),
    };
    let dir = SUITES
        .iter()
        .find(|(_, v)| *v == version)
        .map(|(d, _)| cache.join(d))
        .ok_or("unknown suite")?;
    let out = cache.join("results").join(format!(
        "{}-{kind}-{}",
        suite.replace('@', "-at-"),
        scenario.replace('/', "_")
    ));
    let _ = std::fs::remove_dir_all(&out);
    let mut args = vec!["conformance", kind];
    args.extend_from_slice(target);
    let out_arg = out.display().to_string();
    args.extend_from_slice(&["--scenario", scenario, "-o", &out_arg]);
    if let Some(spec) = spec {
        args.extend_from_slice(&["--spec-version", spec]);
    }
    let output = Command::new("npx")
        .args(&args)
        .current_dir(&dir)
        .env("PATH", path)
        .output()
        .map_err(|e| format!("npx conformance: {e}"))?;
    let (passed, total, mut failures) = read_checks(&out);
    let log = String::from_utf8_lossy(&output.stderr);
    // The suite waives the exit code for scenarios where refusing is the point (a wrong
    // issuer, a resource mismatch): its own verdict says whether the exit counted.
    let exited =
        log.contains("CLIENT EXITED WITH ERROR") || log.contains("Client exited with code 1");
    if exited && !log.contains("OVERALL: PASSED") {
        failures.insert("client-exit".into());
    }
    // A scenario that ran no check proved nothing, whatever its exit code (a renamed or
    // empty scenario would otherwise pass silently).
    if total == 0 {
        failures.insert("no-checks".into());
    }
    Ok(Outcome {
        suite,
        kind,
        scenario,
        passed,
        total,
        failures,
    })
}

/// A server process of the run, ended when dropped (also when the run fails half-way).
struct Started(std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` (`toolwire serve` or `toolwire gateway` on `127.0.0.1:0`) and returns it
/// with the URL its first stderr line names; `what` names it in the error.
fn start_announcing(mut command: Command, what: &str) -> Result<(Started, String), String> {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let mut line = String::new();
    // The line that says where it listens (the CLI's own lines start with its name); a
    // gateway's upstreams may log before it.
    if let Some(stderr) = child.stderr.take() {
        let mut stderr = BufReader::new(stderr);
        while stderr.read_line(&mut line).is_ok_and(|n| n > 0) && !line.starts_with("toolwire") {
            line.clear();
        }
    }
    let started = Started(child);
    let url = line.trim().rsplit(' ').next().unwrap_or("").to_owned();
    if !url.starts_with("http://") {
        return Err(format!("{what} did not start: {line}"));
    }
    Ok((started, url))
}

/// `toolwire serve --http 127.0.0.1:0 --task-fixtures`.
fn refserver_command(bin: &Path) -> Command {
    let mut command = Command::new(bin);
    command.args(["serve", "--http", "127.0.0.1:0", "--task-fixtures"]);
    command
}

/// `toolwire gateway --http 127.0.0.1:0` in front of the reference server at `upstream` (the
/// entry `ref`), its configuration written under `cache`.
fn gateway_command(bin: &Path, upstream: &str, cache: &Path) -> Result<Command, String> {
    let config = cache.join("results/gateway.json");
    if let Some(dir) = config.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    // The tasks scenarios call the fixture tools by their own names: aliases give them those
    // names through the gateway.
    let fixtures = [
        "greet",
        "slow_compute",
        "failing_job",
        "protocol_error_job",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
    ];
    let aliases: serde_json::Map<String, serde_json::Value> = fixtures
        .iter()
        .map(|name| ((*name).to_owned(), serde_json::json!(name)))
        .collect();
    let text = serde_json::json!({"mcpServers": {"ref": {"url": upstream, "aliases": aliases}}})
        .to_string();
    std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
    let mut command = Command::new(bin);
    command
        .args(["gateway", "--config"])
        .arg(&config)
        .args(["--http", "127.0.0.1:0"])
        .env("TOOLWIRE_TRUST", "1");
    Ok(command)
}

/// The ratchet baseline: `suite kind scenario check  # why`.
fn read_baseline(root: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(root.join("xtask/conformance-baseline.txt"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_owned())
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn table(outcomes: &[Outcome]) -> String {
    let mut t = String::from(
        "| suite | kind | scenario | checks passed | failing checks |\n|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let failing = if o.failures.is_empty() {
            "—".to_owned()
        } else {
            o.failures.iter().cloned().collect::<Vec<_>>().join(", ")
        };
        t.push_str(&format!(
            "| {} | {} | `{}` | {}/{} | {} |\n",
            o.suite, o.kind, o.scenario, o.passed, o.total, failing
        ));
    }
    t
}

pub(crate) fn run(root: &Path) -> Result<(), String> {
    let cache = cache_dir();
    let path = install(&cache)?;
    let target = crate::gate_bins(root, &["toolwire-conformance-client", "toolwire"])?;
    let client = target.join("toolwire-conformance-client");
    let client_arg = client.display().to_string();
    let mut outcomes = Vec::new();
    let plain = CLIENT_SCENARIOS
        .iter()
        .flat_map(|(suite, scenarios)| scenarios.iter().map(move |s| (*suite, *s)));
    for (suite, scenario) in plain.chain(auth_runs()) {
        eprintln!("==> conformance {suite} client {scenario}");
        outcomes.push(run_scenario(
            &cache,
            &path,
            suite,
            "client",
            scenario,
            &["--command", &client_arg],
        )?);
    }
    // The server scenarios against the reference server, then again through
    // `toolwire gateway` in front of it (kind `gateway`).
    let toolwire = target.join("toolwire");
    let (_server, url) = start_announcing(refserver_command(&toolwire), "the reference server")?;
    let mut _gateway = None;
    for kind in ["server", "gateway"] {
        let url = if kind == "gateway" {
            let command = gateway_command(&toolwire, &url, &cache)?;
            let (started, gateway_url) = start_announcing(command, "the gateway")?;
            _gateway = Some(started);
            gateway_url
        } else {
            url.clone()
        };
        for (suite, scenarios) in SERVER_SCENARIOS {
            for scenario in *scenarios {
                eprintln!("==> conformance {suite} {kind} {scenario}");
                let mut o =
                    run_scenario(&cache, &path, suite, "server", scenario, &["--url", &url])?;
                o.kind = kind;
                outcomes.push(o);
            }
        }
    }

    let baseline = read_baseline(root);
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for o in &outcomes {
        for check in &o.failures {
            let key = format!("{} {} {} {}", o.suite, o.kind, o.scenario, check);
            if !baseline.contains(&key) {
                problems.push(format!("new failure: {key}"));
            }
            seen.insert(key);
        }
    }
    for entry in &baseline {
        if !seen.contains(entry) {
            problems.push(format!("passes now, remove it from the baseline: {entry}"));
        }
    }
    let table = table(&outcomes);
    println!("\n{table}");
    let doc = format!(
        "# Conformance\n\nThe official MCP conformance suite against Toolwire, as run by `cargo xtask conformance` \
         (which installs node 22 and the suite from the npm registry into `~/.cache/toolwire-peers`). \
         Client scenarios drive `toolwire-conformance-client` (the public `toolwire` API only); server \
         scenarios test the reference server (`toolwire serve --http --task-fixtures`), which is \
         not an everything-server: it runs the scenarios about what it serves in its own way \
         (tools, SEP-2243 headers, resource lists and subscriptions, prompt lists, completions, \
         logging, caching hints, skills), not those that read an everything-server's fixtures, \
         except the tasks extension's, whose tools `--task-fixtures` adds (the suite skips \
         `tasks-status-notifications`, so it is not run). The rows of kind `gateway` run the same \
         server scenarios against `toolwire gateway` in front of the reference server (its tools \
         named `ref__…`, the tasks fixtures by aliases under their own names). The OAuth \
         scenarios (`auth/*`) run with the suite's defaults, and those of the 2025 revisions again \
         with `--spec-version {WIRE_2026}` (suite `…@{WIRE_2026}`). Failing checks must be listed, \
         with a reason, in `xtask/conformance-baseline.txt`; the goal is an empty baseline.\n\n{table}"
    );
    std::fs::write(root.join("docs/conformance.md"), doc)
        .map_err(|e| format!("docs/conformance.md: {e}"))?;
    let total: usize = outcomes.iter().map(|o| o.total).sum();
    let passed: usize = outcomes.iter().map(|o| o.passed).sum();
    eprintln!(
        "conformance: {passed}/{total} checks passed in {} scenarios",
        outcomes.len()
    );
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn every_auth_scenario_runs_once_per_suite_and_the_2025_ones_again_on_the_2026_wire() {
        let runs = auth_runs();
        let unique: BTreeSet<_> = runs.iter().collect();
        assert_eq!(unique.len(), runs.len(), "no run twice");
        for scenario in AUTH_2025 {
            let suites: Vec<&str> = runs
                .iter()
                .filter(|(_, s)| s == scenario)
                .map(|(suite, _)| *suite)
                .collect();
            assert_eq!(
                suites,
                ["0.1.16", "0.2.0-alpha.12", SUITE_AT_2026],
                "{scenario}"
            );
        }
        assert!(runs.contains(&("0.2.0-alpha.12", "auth/dpop")));
        assert!(!runs.contains(&("0.1.16", "auth/dpop")));
    }

    #[test]
    fn reads_checks_and_counts_failures_and_warnings() {
        let dir = std::env::temp_dir().join(format!("xtask-conf-{}", std::process::id()));
        let run = dir.join("initialize-2026");
        std::fs::create_dir_all(&run).unwrap();
        // An `auth/…` scenario's checks sit one folder deeper.
        let nested = dir.join("auth").join("metadata-default-2026");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::write(
            nested.join("checks.json"),
            r#"[{"id":"f","status":"SUCCESS"},{"id":"g","status":"WARNING"}]"#,
        )
        .unwrap();
        std::fs::write(
            run.join("checks.json"),
            r#"[{"id":"a","status":"SUCCESS"},{"id":"b","status":"FAILURE"},
                {"id":"c","status":"WARNING"},{"id":"d","status":"INFO"},{"id":"e","status":"SKIPPED"}]"#,
        )
        .unwrap();
        let (passed, total, failures) = read_checks(&dir);
        assert_eq!((passed, total), (2, 5));
        assert_eq!(failures.into_iter().collect::<Vec<_>>(), ["b", "c", "g"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unknown_status_a_missing_one_and_an_unreadable_file_are_failures() {
        let dir = std::env::temp_dir().join(format!("xtask-conf-odd-{}", std::process::id()));
        let (run, broken) = (dir.join("tools-call"), dir.join("broken"));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::create_dir_all(&broken).unwrap();
        std::fs::write(
            run.join("checks.json"),
            r#"[{"id":"a","status":"SUCCESS"},{"id":"b","status":"ERROR"},{"id":"c"}]"#,
        )
        .unwrap();
        std::fs::write(broken.join("checks.json"), "{not json").unwrap();
        let (passed, total, failures) = read_checks(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((passed, total), (1, 4));
        let failures: Vec<String> = failures.into_iter().collect();
        assert!(
            failures.contains(&"b (status ERROR)".to_owned()),
            "{failures:?}"
        );
        assert!(
            failures.contains(&"c (status missing)".to_owned()),
            "{failures:?}"
        );
        assert!(
            failures
                .iter()
                .any(|f| f.contains("broken") && f.contains("not a JSON array")),
            "{failures:?}"
        );
    }
}

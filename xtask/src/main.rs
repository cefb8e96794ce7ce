//! Toolwire's project automation, run as `cargo xtask <command>`.
//!
//! - `ci`: everything CI checks, in order, stopping at the first failure: the toolchain against
//!   the MSRV, `cargo fmt --check`, clippy with `-D warnings` (and the facade again without
//!   its `oauth` feature), the tests (nextest, then README's `cargo test --workspace`),
//!   rustdoc with `-D warnings`, the criterion benches once each in test mode, a
//!   build of the comparison bench, `windows`, `wasm`, each fuzz target built and
//!   run for 15 s (cargo-fuzz), `cargo deny check`, `cargo package` of every crate meant for
//!   users (with the metadata crates.io shows),
//!   `tidy`, `deploy`, `image`, the official conformance suite (`conformance`), the real peers
//!   (`interop`) and the fleet soak's short run (`soak --short`).
//! - `tidy`: the architecture checks of `ARCHITECTURE.md` (see [`tidy`]).
//! - `package`: the crates meant for users packed as crates.io would take them (see
//!   [`package`]).
//! - `deploy`: the sample gateway file, the Kubernetes manifests and the Compose file read by
//!   the tools that read them (see [`deploy`]).
//! - `image`: the static distribution binary and the gateway's image, built and checked (see
//!   [`image`]).
//! - `conformance`: the official MCP conformance suite, client and server scenarios, with a
//!   ratchet baseline (see [`conformance`]).
//! - `bench`: Toolwire against rmcp and the physical floor, and its gateway against
//!   `mcp-proxy` (crates.io), ContextForge (PyPI) and Debian's nginx, each installed once,
//!   side by side in one run; writes `docs/benchmarks.md` (`--quick` for a short run).
//!   See `crates/toolwire-bench`.
//! - `windows`: the workspace checked for `x86_64-pc-windows-gnu`, and the stdio transport's
//!   tests run under Wine.
//! - `wasm`: the sans-IO core (types, wire, headers, cache, session) checked for
//!   `wasm32-unknown-unknown`.
//! - `interop`: the CLI and library against real servers (Python `mcp`, the TypeScript SDK v2,
//!   server-everything) and an nginx routing on `Mcp-Param-Region` (see [`interop`]);
//!   `interop GROUP,…` runs some groups (`peers`, `gateway`, `fleet`, `startup`, `rest`) and
//!   leaves `docs/interop.md` alone.
//! - `soak`: a gateway fleet (three replicas behind nginx, per-user logins in Redis) under
//!   20,000 calls while a replica is killed every 20 s, Redis once, and a stdio upstream exits
//!   every 500 calls, proved to lose nothing and run nothing twice; writes `docs/soak.md` (`--short`, CI's: 4,000 calls). See
//!   [`interop::soak`].
//! - `catalog`: the tools of real MCP servers from npm and PyPI, listed with the CLI into
//!   `crates/toolwire-bench/data/catalog.json` for the tool search benchmark (see [`catalog`]).
//!
//! Plain `std::process::Command` and `serde_json` only: xtask must build fast on a fresh
//! machine.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool reports on the terminal"
)]

mod catalog;
mod conformance;
mod deploy;
mod image;
mod interop;
mod tidy;
mod wasm;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(&root),
        Some("tidy") => tidy::run(&root),
        Some("conformance") => conformance::run(&root),
        Some("interop") => interop::run(&root, args.get(1).map(String::as_str)),
        Some("deploy") => deploy::check(&root),
        Some("package") => package(&root),
        Some("image") => image::check(&root),
        Some("bench") => bench(&root, args.iter().any(|a| a == "--quick")),
        Some("windows") => windows_check(&root),
        Some("wasm") => wasm::check(&root),
        Some("catalog") => catalog::run(&root),
        Some("soak") => interop::soak::run(&root, args.iter().any(|a| a == "--short")),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci|tidy|deploy|package|image|conformance|interop [GROUP,…]|windows|wasm|soak [--short]|bench [--quick]|catalog>"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    // xtask lives in <root>/xtask.
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or(manifest.clone(), Path::to_path_buf)
}

/// Builds `bins` (release, locked) and returns the folder they are in.
pub(crate) fn release_bins(root: &Path, bins: &[&str]) -> Result<PathBuf, String> {
    build_bins(root, bins, true)
}

/// Builds `bins` in the dev profile (locked) and returns the folder they are in: what the
/// conformance suite, interop and the short soak run. By then the gate has built every
/// workspace crate and dependency in this profile for its tests, so these binaries cost about
/// a minute and a half here, where a release build of them took eleven to twelve (most of it
/// again for dependencies). Nothing these steps check depends on speed, and the dev profile
/// keeps overflow checks and debug assertions on while real peers drive the code. The binary
/// users get is checked by `cargo xtask image` (the `dist` profile).
pub(crate) fn gate_bins(root: &Path, bins: &[&str]) -> Result<PathBuf, String> {
    build_bins(root, bins, false)
}

fn build_bins(root: &Path, bins: &[&str], release: bool) -> Result<PathBuf, String> {
    let mut args = vec!["build", "--locked"];
    if release {
        args.push("--release");
    }
    for bin in bins {
        args.extend(["--bin", bin]);
    }
    run(root, "cargo", &args, &[])?;
    Ok(std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join(if release { "release" } else { "debug" }))
}

/// Announces and times one of the gate's own steps (`cargo xtask NAME`), as [`execute`] does a
/// command's.
fn step(name: &str, body: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    eprintln!("\n==> cargo xtask {name}");
    let started = Instant::now();
    let result = body();
    eprintln!(
        "    (cargo xtask {name}: {:.1}s)",
        started.elapsed().as_secs_f64()
    );
    result
}

/// Runs a command in the workspace root and fails with its name when it fails.
pub(crate) fn run(
    root: &Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(), String> {
    execute(root, program, args, env, false).map(drop)
}

/// [`run`], returning what the command wrote to stdout (stderr still goes to the terminal).
pub(crate) fn run_for_stdout(root: &Path, program: &str, args: &[&str]) -> Result<String, String> {
    execute(root, program, args, &[], true)
}

/// Announces, runs and times a command; its stdout is captured and returned when
/// `capture_stdout`, else it goes to the terminal (and the result is empty).
fn execute(
    root: &Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
    capture_stdout: bool,
) -> Result<String, String> {
    use std::process::Stdio;

    let shown = format!("{program} {}", args.join(" "));
    eprintln!("\n==> {shown}");
    let started = Instant::now();
    let output = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .stdin(Stdio::inherit())
        .stdout(if capture_stdout {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    eprintln!("    ({:.1}s)", started.elapsed().as_secs_f64());
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!("`{shown}` failed ({})", output.status))
    }
}

/// The counts of nextest's closing `Summary` line.
#[derive(Debug, Default, PartialEq)]
struct TestSummary {
    passed: u64,
    failed: u64,
}

/// Reads `Summary [ 0.09s] 24 tests run: 24 passed, 1 failed, 0 skipped` (the counts after the
/// colon, in any order).
fn parse_summary(line: &str) -> Option<TestSummary> {
    let (_, counts) = line
        .trim_start()
        .strip_prefix("Summary")?
        .split_once("run:")?;
    let mut summary = TestSummary::default();
    for part in counts.split(',') {
        let mut words = part.split_whitespace();
        let n: u64 = words.next()?.parse().ok()?;
        match words.next()? {
            "passed" => summary.passed = n,
            "failed" => summary.failed = n,
            _ => {}
        }
    }
    Some(summary)
}

/// Runs nextest, passing its output through, and returns its summary counts.
fn nextest(root: &Path) -> Result<TestSummary, String> {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let args = [
        "nextest",
        "run",
        "--workspace",
        "--locked",
        "--no-fail-fast",
    ];
    eprintln!("\n==> cargo {}", args.join(" "));
    let mut child = Command::new("cargo")
        .args(args)
        .current_dir(root)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start nextest: {e}"))?;
    let mut summary = None;
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(std::io::stderr(), "{line}");
            if let Some(s) = parse_summary(&line) {
                summary = Some(s);
            }
        }
    }
    let status = child.wait().map_err(|e| format!("nextest: {e}"))?;
    match (status.success(), summary) {
        (true, Some(s)) => Ok(s),
        (true, None) => Err("nextest printed no summary line".into()),
        (false, Some(s)) => Err(format!("nextest: {} passed, {} failed", s.passed, s.failed)),
        (false, None) => Err(format!("nextest failed ({status})")),
    }
}

fn ci(root: &Path) -> Result<(), String> {
    check_msrv(root)?;
    run(root, "cargo", &["fmt", "--all", "--check"], &[])?;
    // The workspace, then the facade without OAuth (its `oauth` feature is on by default).
    for what in [
        &["--workspace"][..],
        &["-p", "toolwire", "--no-default-features"][..],
    ] {
        let mut args = vec!["clippy"];
        args.extend_from_slice(what);
        args.extend(["--all-targets", "--locked", "--", "-D", "warnings"]);
        run(root, "cargo", &args, &[])?;
    }
    let summary = nextest(root)?;
    // README's own test command, as README shows it: each test binary's tests share one
    // process there, as they do not under nextest (the doc tests run here too).
    run(root, "cargo", &["test", "--workspace"], &[])?;
    run(
        root,
        "cargo",
        &["doc", "--workspace", "--no-deps", "--locked"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    // The criterion benches once each, in test mode: their set-up asserts what they measure.
    run(
        root,
        "cargo",
        &[
            "test",
            "--benches",
            "-p",
            "toolwire-headers",
            "-p",
            "toolwire-cache",
            "-p",
            "toolwire-session",
            "-p",
            "toolwire-host",
            "-p",
            "toolwire-search",
            "-p",
            "toolwire",
            "--locked",
        ],
        &[],
    )?;
    // The comparison is not run in CI (it needs a quiet machine and minutes), but it must build.
    run(
        root,
        "cargo",
        &["build", "-p", "toolwire-bench", "--benches", "--locked"],
        &[],
    )?;
    windows_check(root)?;
    wasm::check(root)?;
    fuzz_smoke(root)?;
    deny(root)?;
    package(root)?;
    step("tidy", || tidy::run(root))?;
    step("deploy", || deploy::check(root))?;
    step("image", || image::check(root))?;
    step("conformance", || conformance::run(root))?;
    step("interop", || interop::run(root, None))?;
    step("soak --short", || interop::soak::run(root, true))?;
    eprintln!("\nci: all checks passed");
    // The plain closing line CI reads, from nextest's own summary.
    println!(
        "tests: {} passed, {} failed",
        summary.passed, summary.failed
    );
    Ok(())
}

/// The crates meant for users, as crates.io would take them: each names what a registry page
/// shows (description, readme, keywords, categories, licence, repository, MSRV), and
/// `cargo package` packs every one of them (path dependencies with versions, files inside the
/// crate). The packages are not built again from their sources here (`--no-verify`): that is
/// the workspace's own build, minutes more on these machines.
fn package(root: &Path) -> Result<(), String> {
    let metadata = run_for_stdout(
        root,
        "cargo",
        &["metadata", "--no-deps", "--format-version", "1", "--locked"],
    )?;
    let metadata: serde_json::Value =
        serde_json::from_str(&metadata).map_err(|e| format!("cargo metadata: {e}"))?;
    let mut internal = Vec::new();
    let mut missing = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or("?").to_owned();
        // `publish = false` reads as an empty list of registries.
        if package["publish"].as_array().is_some_and(Vec::is_empty) {
            internal.push(name);
            continue;
        }
        for field in [
            "description",
            "readme",
            "keywords",
            "categories",
            "license",
            "repository",
            "rust_version",
        ] {
            let value = &package[field];
            let empty = value.is_null()
                || value.as_str().is_some_and(str::is_empty)
                || value.as_array().is_some_and(Vec::is_empty);
            if empty {
                missing.push(format!("{name}: no `{field}`"));
            }
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "crates meant for users lack what crates.io shows:\n{}",
            missing.join("\n")
        ));
    }
    let mut args = vec![
        "package",
        "--workspace",
        "--no-verify",
        "--locked",
        "--allow-dirty",
    ];
    for name in &internal {
        args.extend(["--exclude", name.as_str()]);
    }
    run(root, "cargo", &args, &[])
}

/// Seconds each fuzz target runs in CI: a smoke test that the targets build with the
/// sanitizer and run clean, not a campaign (those are recorded in `docs/reliability.md`).
const FUZZ_SMOKE_SECONDS: u32 = 15;

/// Builds every fuzz target with cargo-fuzz (libFuzzer and AddressSanitizer; on a stable
/// toolchain through `RUSTC_BOOTSTRAP=1`) and runs each for [`FUZZ_SMOKE_SECONDS`].
fn fuzz_smoke(root: &Path) -> Result<(), String> {
    if !Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Err("cargo-fuzz is missing: cargo install cargo-fuzz --locked".into());
    }
    let fuzz = root.join("fuzz");
    let mut targets: Vec<String> = std::fs::read_dir(fuzz.join("fuzz_targets"))
        .map_err(|e| format!("fuzz/fuzz_targets: {e}"))?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".rs"))
                .map(str::to_owned)
        })
        .collect();
    targets.sort();
    let bootstrap = [("RUSTC_BOOTSTRAP", "1")];
    // Unoptimised (`--dev`): a smoke run wants the targets to run, not many runs, and an
    // optimised build of their dependencies (hyper, rustls, jsonschema) took 5 minutes here.
    run(&fuzz, "cargo", &["fuzz", "build", "--dev"], &bootstrap)?;
    let time = format!("-max_total_time={FUZZ_SMOKE_SECONDS}");
    for target in &targets {
        eprintln!("==> fuzz {target} for {FUZZ_SMOKE_SECONDS} s");
        let output = Command::new("cargo")
            .args(["fuzz", "run", "--dev", target, "--", &time, "-max_len=4096"])
            .current_dir(&fuzz)
            .env("RUSTC_BOOTSTRAP", "1")
            .output()
            .map_err(|e| format!("cargo fuzz run {target}: {e}"))?;
        let log = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!("fuzz target {target} failed:\n{}", tail.join("\n")));
        }
        let done = log
            .lines()
            .find(|l| l.starts_with("Done "))
            .unwrap_or("(no summary)");
        eprintln!("fuzz {target}: {done}");
    }
    Ok(())
}

/// `cargo xtask bench`: `toolwire` (the reference server) and the comparison
/// (`crates/toolwire-bench/benches/compare.rs`) built in release by one `cargo build`, then the
/// comparison run, which writes `docs/benchmarks.md`.
///
/// One build, not `cargo build --bin toolwire` then `cargo bench`: built apart, the two resolve
/// the shared dependencies' features differently and compile them twice (a fresh clone's run
/// took 10 min 26 s that way, 8 min 21 s with one build).
fn bench(root: &Path, quick: bool) -> Result<(), String> {
    let args = [
        "build",
        "--release",
        "--locked",
        "-p",
        "toolwire-cli",
        "--bin",
        "toolwire",
        "-p",
        "toolwire-bench",
        "--bench",
        "compare",
        "--message-format=json-render-diagnostics",
    ];
    let stdout = run_for_stdout(root, "cargo", &args)?;
    let toolwire = built_executable(&stdout, "bin", "toolwire")
        .ok_or("the bench build named no `toolwire` binary")?;
    let compare = built_executable(&stdout, "bench", "compare")
        .ok_or("the bench build named no `compare` bench")?;
    let out = root.join("docs/benchmarks.md").display().to_string();
    let mut args = vec!["--toolwire", toolwire.as_str(), "--out", out.as_str()];
    if quick {
        args.push("--quick");
    }
    // `mcp-proxy` 0.6 (crates.io), the Rust gateway users pick today, side by side with
    // Toolwire's: installed once into the peers' cache. Without it, its rows are left out.
    let dir = conformance::cache_dir().join("mcp-proxy");
    let proxy = dir.join("bin").join("mcp-proxy");
    if !proxy.exists() {
        let root_arg = dir.display().to_string();
        let installed = run(
            root,
            "cargo",
            &[
                "install",
                "mcp-proxy",
                "--version",
                "0.6.0",
                "--locked",
                "--root",
                &root_arg,
            ],
            &[],
        );
        if let Err(e) = installed {
            eprintln!("xtask: mcp-proxy could not be installed ({e}); its rows are left out");
        }
    }
    let proxy = proxy.display().to_string();
    if std::path::Path::new(&proxy).exists() {
        args.extend(["--mcp-proxy", proxy.as_str()]);
    }
    // IBM's ContextForge (`mcp-contextforge-gateway` on PyPI), the Python gateway users pick,
    // pinned, in a venv of its own in the peers' cache (its dependencies are many and would
    // not sit well beside the interop peers'). Without it, its rows are left out.
    let venv = conformance::cache_dir().join("contextforge").join("venv");
    let gateway = venv.join("bin").join("mcpgateway");
    if let Err(e) = conformance::pip_ensure(root, &venv, "mcp-contextforge-gateway", CONTEXTFORGE) {
        eprintln!("xtask: ContextForge could not be installed ({e}); its rows are left out");
    }
    // An install cut short leaves the package's metadata without its program: put it back.
    if venv.exists() && !gateway.exists() {
        let pinned = format!("mcp-contextforge-gateway=={CONTEXTFORGE}");
        let again = conformance::pip_install(
            root,
            &venv,
            &["--force-reinstall", "--no-deps", pinned.as_str()],
        );
        if let Err(e) = again {
            eprintln!("xtask: ContextForge could not be repaired ({e}); its rows are left out");
        }
    }
    let contextforge = venv.join("bin").display().to_string();
    if gateway.exists() {
        args.extend(["--contextforge", contextforge.as_str()]);
    }
    // Debian's nginx, the reverse proxy users put in front of servers: the gateway's targets
    // are set against it. Without it, its rows say "not measured".
    let nginx = interop::debian_package("nginx", "nginx")
        .map_err(|e| eprintln!("xtask: {e}; the nginx rows are left out"))
        .ok()
        .map(|path| path.display().to_string());
    if let Some(nginx) = &nginx {
        args.extend(["--nginx", nginx.as_str()]);
    }
    run(root, &compare, &args, &[])
}

/// The ContextForge release the bench runs.
const CONTEXTFORGE: &str = "1.0.7.post20260921";

/// The executable of the `kind` target `name` among cargo's JSON messages (one per line).
pub(crate) fn built_executable(messages: &str, kind: &str, name: &str) -> Option<String> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        // Not a test harness (`cargo test` builds a bin's own tests under its name too).
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .filter(|m| m["profile"]["test"] != true)
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == kind))
        })
        .find_map(|m| m["executable"].as_str().map(str::to_owned))
}

/// Adds rustup's `target` unless it is installed.
pub(crate) fn ensure_target(root: &Path, target: &str) -> Result<(), String> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == target)
        })
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    run(root, "rustup", &["target", "add", target], &[])
}

/// The Windows build: the workspace checked for `x86_64-pc-windows-gnu` (the target from
/// rustup, and Debian's mingw-w64 C compiler for `ring`'s build script); then the stdio
/// transport's tests (`.cmd` shims, arguments, ending children) run under Debian's Wine.
fn windows_check(root: &Path) -> Result<(), String> {
    const TARGET: &str = "x86_64-pc-windows-gnu";
    ensure_target(root, TARGET)?;
    let gcc = interop::debian_package("x86_64-w64-mingw32-gcc", "gcc-mingw-w64-x86-64")?;
    // MinGW's compiler and linker and Wine leave temporary files behind (`cc*`, `wine-*`):
    // they go to a folder under `target/`, not the shared `/tmp`.
    let tmp = root.join("target").join("wine").join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let tmp = tmp.display().to_string();
    run(
        root,
        "cargo",
        &["check", "--workspace", "--locked", "--target", TARGET],
        &[("TMPDIR", &tmp)],
    )?;
    wine_tests(root, TARGET, &gcc, &tmp)
}

/// The Rust standard library's Windows builds take their random numbers from
/// `bcryptprimitives.dll`'s `ProcessPrng`, which Debian 12's Wine 8.0 lacks: this stand-in
/// answers from `RtlGenRandom` (advapi32), which Wine has.
const PROCESS_PRNG: &str = r#"#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!RtlGenRandom(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
"#;

/// `toolwire-stdio`'s tests for `target`, run under Wine (`wine64` from Debian, its
/// prefix under `target/`), with [`PROCESS_PRNG`] beside the test programs.
fn wine_tests(root: &Path, target: &str, gcc: &Path, tmp: &str) -> Result<(), String> {
    let wine = interop::debian_package("/usr/lib/wine/wine64", "wine64")?;
    let out = root.join("target").join("wine");
    let deps = root.join("target").join(target).join("debug").join("deps");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    std::fs::create_dir_all(&deps).map_err(|e| format!("{}: {e}", deps.display()))?;
    let source = out.join("process_prng.c");
    let def = out.join("bcryptprimitives.def");
    std::fs::write(&source, PROCESS_PRNG).map_err(|e| e.to_string())?;
    std::fs::write(&def, "LIBRARY bcryptprimitives\nEXPORTS\nProcessPrng\n")
        .map_err(|e| e.to_string())?;
    let dll = deps.join("bcryptprimitives.dll");
    let (source, def, dll) = (
        source.display().to_string(),
        def.display().to_string(),
        dll.display().to_string(),
    );
    run(
        root,
        &gcc.display().to_string(),
        &["-shared", "-O2", "-o", &dll, &source, &def, "-ladvapi32"],
        &[("TMPDIR", tmp)],
    )?;
    let prefix = out.join("prefix").display().to_string();
    let runner = wine.display().to_string();
    run(
        root,
        "cargo",
        &[
            "test",
            "-p",
            "toolwire-stdio",
            "--locked",
            // Doctests run from a folder of their own, without the stand-in DLL.
            "--lib",
            "--tests",
            "--target",
            target,
        ],
        &[
            ("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER", &runner),
            ("WINEPREFIX", &prefix),
            ("WINEDEBUG", "-all"),
            ("TMPDIR", tmp),
        ],
    )
}

/// `cargo deny`: licenses, bans and sources always. Advisories need the RustSec database,
/// which is fetched from GitHub; these machines reach only the package registries, so the
/// advisories check runs only where a database is already on disk.
fn deny(root: &Path) -> Result<(), String> {
    run(
        root,
        "cargo",
        &["deny", "--locked", "check", "bans", "licenses", "sources"],
        &[],
    )?;
    if advisory_db_present() {
        run(
            root,
            "cargo",
            &["deny", "--locked", "check", "--disable-fetch", "advisories"],
            &[],
        )
    } else {
        eprintln!(
            "\n==> cargo deny check advisories: NOT RUN (no RustSec database on disk and GitHub is \
             unreachable from this machine)"
        );
        Ok(())
    }
}

/// Whether `$CARGO_HOME/advisory-dbs` holds a cloned database (a failed clone leaves an empty
/// folder behind, which does not count).
fn advisory_db_present() -> bool {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(dbs) = home.map(|h| h.join("advisory-dbs")) else {
        return false;
    };
    std::fs::read_dir(dbs)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| entry.path().join("crates").is_dir())
}

/// The toolchain must be at least the workspace's `rust-version`, the one source of the MSRV.
fn check_msrv(root: &Path) -> Result<(), String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))
        .map_err(|e| format!("cannot read Cargo.toml: {e}"))?;
    let msrv = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = "))
        .map(|v| v.trim_matches('"').to_owned())
        .ok_or("no rust-version in [workspace.package]")?;
    let out = Command::new("rustc")
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    let version = String::from_utf8_lossy(&out.stdout);
    let current = version.split_whitespace().nth(1).unwrap_or("");
    if version_tuple(current) < version_tuple(&msrv) {
        return Err(format!("rustc {current} is older than the MSRV {msrv}"));
    }
    eprintln!("==> rustc {current} (MSRV {msrv})");
    Ok(())
}

fn version_tuple(v: &str) -> Vec<u64> {
    v.split(['.', '-']).map_while(|p| p.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_built_executables_by_kind_and_name() {
        let messages = [
            r#"{"reason":"compiler-artifact","target":{"name":"toolwire","kind":["lib"]},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"toolwire","kind":["bin"]},"executable":"/t/release/toolwire"}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"compare","kind":["bench"]},"executable":"/t/release/deps/compare-1f"}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "not json",
        ]
        .join("\n");
        assert_eq!(
            built_executable(&messages, "bin", "toolwire").as_deref(),
            Some("/t/release/toolwire")
        );
        assert_eq!(
            built_executable(&messages, "bench", "compare").as_deref(),
            Some("/t/release/deps/compare-1f")
        );
        assert_eq!(built_executable(&messages, "bench", "toolwire"), None);
    }

    #[test]
    fn reads_nextest_summaries() {
        let ok = "     Summary [   0.092s] 24 tests run: 24 passed, 0 skipped";
        assert_eq!(
            parse_summary(ok),
            Some(TestSummary {
                passed: 24,
                failed: 0
            })
        );
        let bad = "     Summary [   1.000s] 10 tests run: 7 passed, 3 failed, 1 skipped";
        assert_eq!(
            parse_summary(bad),
            Some(TestSummary {
                passed: 7,
                failed: 3
            })
        );
        assert_eq!(parse_summary("PASS [ 0.1s] (1/2) Summary of things"), None);
    }

    #[test]
    fn compares_versions_numerically() {
        assert!(version_tuple("1.95.0") > version_tuple("1.88"));
        assert!(version_tuple("1.9.0") < version_tuple("1.88"));
    }
}

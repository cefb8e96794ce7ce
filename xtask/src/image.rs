//! `cargo xtask image`: the binary users download and the image the gateway runs from, built
//! and checked as they are used.
//! - `toolwire` installed from the checkout (`cargo install --locked --path`) with the `dist`
//!   profile for `x86_64-unknown-linux-musl` (rustup's target; Debian's `musl-tools` compiles
//!   `ring`'s C);
//! - the binary is static (no program interpreter in its ELF headers), at most
//!   [`MAX_SIZE`] bytes, says its version, and runs README's command against its embedded
//!   server;
//! - the `Containerfile` built with `podman build` (Debian's `podman`); the image's config
//!   checked (non-root user, entrypoint, command, health check, port) and the binary taken
//!   from the image's exported filesystem run. Containers cannot be started on these machines
//!   (crun cannot set rlimits): where `podman run` works, the image's own `--version` runs too.
//!
//! Everything it makes goes under `target/image/` and the image is removed afterwards.

use std::path::Path;
use std::process::Command;

use crate::{ensure_target, interop, run, run_for_stdout};

const TARGET: &str = "x86_64-unknown-linux-musl";
/// The static binary's ceiling: 21 MiB, 0.6 MiB above its size. The glibc `dist` binary's
/// target is 20 MiB; this one carries musl's libc and mimalloc besides. docs/benchmarks.md
/// has where the size goes.
const MAX_SIZE: u64 = 21 * 1024 * 1024;
const TAG: &str = "localhost/toolwire:xtask";

pub(crate) fn check(root: &Path) -> Result<(), String> {
    ensure_target(root, TARGET)?;
    let musl_gcc = interop::debian_package("musl-gcc", "musl-tools")?;
    let musl_gcc = musl_gcc.display().to_string();
    let work = root.join("target").join("image");
    let tmp = work.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let tmp_text = tmp.display().to_string();
    // Installed as README says a user installs it (`cargo install --path` builds in the
    // workspace's target folder, so the image's `COPY` finds the same binary there).
    let install_root = work.join("install");
    let install_root_text = install_root.display().to_string();
    run(
        root,
        "cargo",
        &[
            "install",
            "--locked",
            "--path",
            "crates/toolwire-cli",
            "--profile",
            "dist",
            "--target",
            TARGET,
            "--root",
            &install_root_text,
        ],
        &[
            ("CC_x86_64_unknown_linux_musl", &musl_gcc),
            ("TMPDIR", &tmp_text),
        ],
    )?;
    let binary = install_root.join("bin").join("toolwire");
    let built = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), std::path::PathBuf::from)
        .join(TARGET)
        .join("dist")
        .join("toolwire");
    let bytes = std::fs::read(&binary).map_err(|e| format!("{}: {e}", binary.display()))?;
    let size = bytes.len() as u64;
    eprintln!("    {}: {size} bytes", binary.display());
    if size > MAX_SIZE {
        return Err(format!(
            "{}: {size} bytes, over the {MAX_SIZE} the distribution binary may take",
            binary.display()
        ));
    }
    match interpreter(&bytes) {
        Ok(None) => {}
        Ok(Some(interpreter)) => {
            return Err(format!(
                "{}: not static: it asks for {interpreter}",
                binary.display()
            ));
        }
        Err(e) => return Err(format!("{}: {e}", binary.display())),
    }
    if std::fs::read(&built).ok().as_deref() != Some(bytes.as_slice()) {
        return Err(format!(
            "{} is not the binary `cargo install` put in {}",
            built.display(),
            binary.display()
        ));
    }
    let binary_text = binary.display().to_string();
    says_its_version(root, &binary_text)?;
    let answer = run_for_stdout(
        root,
        &binary_text,
        &[
            "tools",
            "call",
            "execute_sql",
            "region=us-west-2",
            "query=SELECT 1",
        ],
    )?;
    if !answer.contains("SELECT 1") {
        return Err(format!("README's command answered {answer:?}"));
    }

    let podman = interop::debian_package("podman", "podman")?;
    let podman = podman.display().to_string();
    run(
        root,
        &podman,
        &[
            "build",
            "--format",
            "docker",
            "-t",
            TAG,
            "-f",
            "Containerfile",
            ".",
        ],
        &[("TMPDIR", &tmp_text)],
    )?;
    let outcome = image_checks(root, &podman, &work, &bytes);
    // The image is removed whatever the checks found.
    let _ = Command::new(&podman).args(["rmi", "-f", TAG]).output();
    let _ = std::fs::remove_dir_all(&work);
    outcome
}

fn says_its_version(root: &Path, binary: &str) -> Result<(), String> {
    let version = run_for_stdout(root, binary, &["--version"])?;
    let expected = format!("toolwire {}", env!("CARGO_PKG_VERSION"));
    if version.trim() != expected {
        return Err(format!(
            "{binary} --version said {version:?}, not {expected:?}"
        ));
    }
    Ok(())
}

/// The image's config, then its binary: the one built, and it runs.
fn image_checks(root: &Path, podman: &str, work: &Path, built: &[u8]) -> Result<(), String> {
    let inspected = run_for_stdout(root, podman, &["image", "inspect", TAG])?;
    let inspected: serde_json::Value =
        serde_json::from_str(&inspected).map_err(|e| format!("podman image inspect: {e}"))?;
    let config = &inspected[0]["Config"];
    let expect = |what: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(format!(
                "the image's {what} is not as the Containerfile says: {config}"
            ))
        }
    };
    expect("user", config["User"] == "65532:65532")?;
    expect(
        "entrypoint",
        config["Entrypoint"] == serde_json::json!(["/usr/local/bin/toolwire"]),
    )?;
    expect("command", config["Cmd"][0] == "gateway")?;
    expect("port", config["ExposedPorts"].get("8080/tcp").is_some())?;
    // podman puts the health check beside the config, docker inside it.
    let health = match &inspected[0]["Healthcheck"] {
        serde_json::Value::Null => config["Healthcheck"]["Test"].to_string(),
        check => check["Test"].to_string(),
    };
    expect("health check", health.contains("--healthz"))?;

    let created = run_for_stdout(root, podman, &["create", TAG])?;
    let container = created.trim().to_owned();
    let tar = work.join("rootfs.tar");
    let tar_text = tar.display().to_string();
    let exported = run(root, podman, &["export", "-o", &tar_text, &container], &[]);
    let _ = Command::new(podman).args(["rm", &container]).output();
    exported?;
    let rootfs = work.join("rootfs");
    std::fs::create_dir_all(&rootfs).map_err(|e| format!("{}: {e}", rootfs.display()))?;
    run(
        root,
        "tar",
        &["-xf", &tar_text, "-C", &rootfs.display().to_string()],
        &[],
    )?;
    let inside = rootfs.join("usr/local/bin/toolwire");
    let bytes = std::fs::read(&inside).map_err(|e| format!("{}: {e}", inside.display()))?;
    if bytes != built {
        return Err("the image's binary is not the one built".into());
    }
    says_its_version(root, &inside.display().to_string())?;
    let started = Command::new(podman)
        .args(["run", "--rm", TAG, "--version"])
        .output()
        .map_err(|e| format!("podman run: {e}"))?;
    if started.status.success() {
        let said = String::from_utf8_lossy(&started.stdout);
        if !said.starts_with("toolwire ") {
            return Err(format!("the image's `--version` said {said:?}"));
        }
        eprintln!("    podman run: {}", said.trim());
    } else {
        let why = String::from_utf8_lossy(&started.stderr);
        eprintln!(
            "    podman run cannot start containers here ({}): the binary was run from the image's files instead",
            why.lines().next().unwrap_or("no reason given")
        );
    }
    Ok(())
}

/// The program interpreter an ELF64 little-endian executable asks for (`PT_INTERP`), if any.
fn interpreter(elf: &[u8]) -> Result<Option<String>, String> {
    let field = |at: usize, len: usize| -> Result<u64, String> {
        let bytes = elf.get(at..at + len).ok_or("a truncated ELF file")?;
        let mut value = [0u8; 8];
        value[..len].copy_from_slice(bytes);
        Ok(u64::from_le_bytes(value))
    };
    if elf.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let offset = usize::try_from(field(0x20, 8)?).map_err(|e| e.to_string())?;
    let entry_size = usize::try_from(field(0x36, 2)?).map_err(|e| e.to_string())?;
    let count = usize::try_from(field(0x38, 2)?).map_err(|e| e.to_string())?;
    for i in 0..count {
        let header = offset + i * entry_size;
        const PT_INTERP: u64 = 3;
        if field(header, 4)? == PT_INTERP {
            let at = usize::try_from(field(header + 0x08, 8)?).map_err(|e| e.to_string())?;
            let len = usize::try_from(field(header + 0x20, 8)?).map_err(|e| e.to_string())?;
            let path = elf.get(at..at + len).ok_or("a truncated ELF file")?;
            return Ok(Some(
                String::from_utf8_lossy(path)
                    .trim_end_matches('\0')
                    .to_owned(),
            ));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_dynamic_executable_names_its_interpreter_and_garbage_is_refused() {
        let own = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let found = interpreter(&own).unwrap();
        assert!(
            found.is_some_and(|i| i.contains("ld-linux")),
            "a test binary is dynamic"
        );
        assert!(interpreter(b"#!/bin/sh\n").is_err());
    }
}

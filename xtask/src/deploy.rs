//! `cargo xtask deploy`: the files a fleet is deployed from, read by the tools that read them
//! in production, so that a sample that no longer parses or a manifest field that does not
//! exist fails here and not in someone's cluster:
//! - `examples/gateway.json` by `toolwire gateway --check` (syntax, members, each stdio
//!   entry's program);
//! - `deploy/kubernetes/*.yaml` against the Kubernetes API's schemas, strict (an unknown field
//!   is an error): `kubernetes-validate` from PyPI, pinned, in a venv of the peers' cache;
//! - the ConfigMap's `mcp.json` against `examples/gateway.json` (the same servers and policy);
//! - `deploy/compose.yaml` by Debian's `docker-compose config` (its schema and references).

use std::path::Path;

use crate::{built_executable, conformance, interop, run, run_for_stdout};

/// The `kubernetes-validate` release used: its schemas are those of Kubernetes 1.31.
const KUBERNETES_VALIDATE: &str = "1.31.0";

/// The ConfigMap's copy of the sample file, compared with the file as JSON values.
const SAME_FILE: &str = r#"
import json, sys, yaml
with open("deploy/kubernetes/configmap.yaml") as f:
    config_map = yaml.safe_load(f)
with open("examples/gateway.json") as f:
    sample = json.load(f)
if json.loads(config_map["data"]["mcp.json"]) != sample:
    sys.exit("deploy/kubernetes/configmap.yaml: its mcp.json is not examples/gateway.json")
"#;

pub(crate) fn check(root: &Path) -> Result<(), String> {
    // The binary as the workspace's test build makes it (the gate's, already done): built on
    // its own, `-p toolwire-cli` resolves other features and rebuilds much of the tree.
    let built = run_for_stdout(
        root,
        "cargo",
        &[
            "test",
            "--locked",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ],
    )?;
    let toolwire = built_executable(&built, "bin", "toolwire")
        .ok_or("the build named no `toolwire` binary")?;
    // The sample's stdio entry runs `toolwire` itself, found on PATH as in the image.
    let bin_dir = Path::new(&toolwire)
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let path = format!("{bin_dir}:{}", std::env::var("PATH").unwrap_or_default());
    run(
        root,
        &toolwire,
        &["gateway", "--check", "examples/gateway.json"],
        &[("PATH", &path), ("DOCS_MCP_TOKEN", "checked")],
    )?;

    let venv = conformance::cache_dir().join("deploy").join("venv");
    conformance::pip_ensure(root, &venv, "kubernetes-validate", KUBERNETES_VALIDATE)?;
    let mut manifests: Vec<String> = std::fs::read_dir(root.join("deploy/kubernetes"))
        .map_err(|e| format!("deploy/kubernetes: {e}"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.display().to_string())
        .collect();
    manifests.sort();
    if manifests.is_empty() {
        return Err("deploy/kubernetes holds no manifest".into());
    }
    let validate = venv.join("bin/kubernetes-validate").display().to_string();
    let mut args = vec!["--strict", "--quiet"];
    args.extend(manifests.iter().map(String::as_str));
    run(root, &validate, &args, &[])?;
    let python = venv.join("bin/python").display().to_string();
    run(root, &python, &["-c", SAME_FILE], &[])?;

    let compose = interop::debian_package("docker-compose", "docker-compose")?;
    run(
        root,
        &compose.display().to_string(),
        &["-f", "deploy/compose.yaml", "config", "--quiet"],
        &[],
    )
}

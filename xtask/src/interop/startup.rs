//! Servers as they really start, with real peers: the Python SDK's stdio server behind an
//! 8-second start (a package being fetched), through the CLI, an mcpServers file and the
//! gateway; and a Python SDK tool that asks with `ctx.elicit`, which that SDK can do only in
//! the legacy era, behind the gateway with its entry pinned to `2025-11-25`.

use super::gateway::{client_json, spawn_gateway};
use super::*;

const STARTUP: &str = "startup";

/// The Python server over stdio after sleeping 8 s, as a shell command line.
fn slow_python(peers: &Peers, root: &Path) -> String {
    format!(
        "sleep 8; exec {} {} stdio",
        peers.python.display(),
        root.join("xtask/interop/py_server.py").display()
    )
}

pub(super) fn startup_checks(rows: &mut Vec<Row>, bin: &Path, peers: &Peers, root: &Path) {
    let slow = slow_python(peers, root);
    let outcome = cli(
        bin,
        &Target::Stdio(format!("sh -c '{slow}'")),
        "auto",
        &["tools", "call", "add", "a=2", "b=40"],
        root,
    )
    .map(|r| (first_text(&r) == "42", r.to_string()));
    push(
        rows,
        "Python mcp 2.3 server",
        STARTUP,
        "a stdio server that starts after 8 s: `--stdio` calls it",
        outcome,
    );

    let logs = peers.cache.join("results/interop");
    let file = logs.join("startup.json");
    let py_server = root
        .join("xtask/interop/py_server.py")
        .display()
        .to_string();
    let config = serde_json::json!({"mcpServers": {
        "slow": {"command": "sh", "args": ["-c", slow]},
        "pyask": {"command": peers.python.display().to_string(), "args": [py_server, "stdio"],
                  "protocol": "2025-11-25"},
    }});
    let written =
        std::fs::write(&file, config.to_string()).map_err(|e| format!("{}: {e}", file.display()));
    let outcome = written.clone().and_then(|()| {
        let mut command = Command::new(bin);
        command
            .args(["--config", &file.display().to_string(), "--json", "servers"])
            .env("PATH", &peers.path)
            // A file the run wrote itself, trusted the way scripts and CI do.
            .env("TOOLWIRE_TRUST", "1");
        let servers = json_of(&mut command, "servers")?;
        let state = |name: &str| {
            servers["servers"]
                .as_array()
                .and_then(|all| all.iter().find(|s| s["name"] == name))
                .map(|s| (s["state"].clone(), s["protocolVersion"].clone()))
        };
        let (slow, pinned) = (state("slow"), state("pyask"));
        let ok = slow.as_ref().is_some_and(|(s, _)| s == "ready")
            && pinned
                .as_ref()
                .is_some_and(|(s, v)| s == "ready" && v == "2025-11-25");
        Ok((ok, format!("slow {slow:?}; pyask {pinned:?}")))
    });
    push(
        rows,
        "Python mcp 2.3 server",
        STARTUP,
        "an mcpServers file: the slow entry ready, the pinned one at 2025-11-25",
        outcome,
    );

    let gateway = written.and_then(|()| {
        let mut processes = Processes::default();
        let log = logs.join("startup-gateway.log");
        let url = spawn_gateway(&mut processes, bin, &file, free_port()?, peers, &log)?;
        Ok((processes, url))
    });
    let (outcome_slow, outcome_ask) = match &gateway {
        Err(e) => (Err(e.clone()), Err(e.clone())),
        Ok((_, url)) => {
            let slow = cli(
                bin,
                &Target::Url(url),
                "auto",
                &["tools", "call", "slow__add", "a=2", "b=40"],
                root,
            )
            .map(|r| (first_text(&r) == "42", r.to_string()));
            // One caller: over stdio the upstream's question carries nothing that ties it to
            // one of two calls in flight, so the gateway asks no one rather than a guess.
            let ask = client_json(
                Command::new(&peers.python)
                    .arg(root.join("xtask/interop/py_elicit.py"))
                    .args([url.as_str(), "auto", "pyask__ask_client", "Ada"]),
                "py_elicit.py",
            )
            .map(|r| {
                let asked = &r["clients"][0];
                let ok = asked["text"] == "Hello, Ada!"
                    && asked["asked"] == serde_json::json!(["[pyask] What is your name?"]);
                (ok, r.to_string())
            });
            (slow, ask)
        }
    };
    push(
        rows,
        "Python mcp 2.3 server",
        "startup, gateway",
        "an upstream that starts after 8 s: listed and called through the gateway",
        outcome_slow,
    );
    push(
        rows,
        "Python mcp 2.3 server",
        "startup, gateway",
        "a ctx.elicit tool, its entry pinned to 2025-11-25: the caller is asked and answers",
        outcome_ask,
    );
}

//! `toolwire gateway` in front of real servers, reached by real clients: server-everything over
//! stdio, the Python SDK's server over HTTP and the reference server (2026-07-28 only) in one
//! mcpServers file; the Python SDK's client in both eras, the TypeScript SDK's client and the
//! `toolwire` CLI through it. The Python server's `seen` tool says which SEP-2243 headers
//! reached it, through the gateway and directly.

use super::*;

/// The gateway and the reference server it fronts; stopped when dropped.
struct Gateway {
    _processes: Processes,
    url: String,
}

fn start_gateway(
    bin: &Path,
    running: &Running,
    peers: &Peers,
    everything_js: &Path,
) -> Result<Gateway, String> {
    let logs = peers.cache.join("results/interop");
    let mut processes = Processes::default();
    let (ref_port, gateway_port) = (free_port()?, free_port()?);
    let ref_log = logs.join("gateway-refserver.log");
    processes.spawn(
        Command::new(bin).args([
            "serve",
            "--http",
            &format!("127.0.0.1:{ref_port}"),
            "--eras",
            "modern",
        ]),
        &ref_log,
    )?;
    wait_for_port(ref_port, "the reference server", &ref_log)?;
    let file = logs.join("gateway.json");
    let config = serde_json::json!({"mcpServers": {
        "everything": {"command": "node", "args": [everything_js.display().to_string(), "stdio"]},
        "python": {"type": "http", "url": running.py},
        "ref": {"type": "http", "url": format!("http://127.0.0.1:{ref_port}/mcp")},
    }});
    std::fs::write(&file, config.to_string()).map_err(|e| format!("{}: {e}", file.display()))?;
    let log = logs.join("gateway.log");
    processes.spawn(
        Command::new(bin)
            .args(["gateway", "--config", &file.display().to_string()])
            .args(["--http", &format!("127.0.0.1:{gateway_port}"), "-v"])
            .env("PATH", &peers.path)
            // A file the run wrote itself, trusted the way scripts and CI do.
            .env("TOOLWIRE_TRUST", "1"),
        &log,
    )?;
    wait_for_port(gateway_port, "the gateway", &log)?;
    Ok(Gateway {
        _processes: processes,
        url: format!("http://127.0.0.1:{gateway_port}/mcp"),
    })
}

/// Runs a peer's client script and parses the JSON document it printed.
fn client_json(command: &mut Command, what: &str) -> Result<Value, String> {
    let (ok, out, err) = run_limited(command);
    if !ok {
        return Err(format!("{what}: {}", err.trim()));
    }
    let last = out.lines().last().unwrap_or("");
    serde_json::from_str(last).map_err(|e| format!("{what}: {e}: {out}"))
}

fn names(listed: &Value) -> Vec<&str> {
    listed
        .as_array()
        .map(|tools| tools.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Every server's tools are in a listing: one of each.
fn lists_all(tools: &[&str]) -> bool {
    ["everything__echo", "python__where", "ref__execute_sql"]
        .iter()
        .all(|t| tools.contains(t))
}

const GATEWAY: &str = "toolwire gateway";

pub(super) fn gateway_checks(
    rows: &mut Vec<Row>,
    bin: &Path,
    running: &Running,
    peers: &Peers,
    root: &Path,
) {
    let everything_js = peers
        .cache
        .join("everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let gateway = match start_gateway(bin, running, peers, &everything_js) {
        Ok(gateway) => gateway,
        Err(e) => {
            push(rows, GATEWAY, "HTTP", "the gateway starts", Err(e));
            return;
        }
    };
    let url = gateway.url.as_str();

    // The Python SDK's client, each era: every server listed, a call through to server-everything.
    for (mode, era) in [("auto", "2026-07-28"), ("legacy", "initialize")] {
        let outcome = client_json(
            Command::new(&peers.python)
                .arg(root.join("xtask/interop/py_client.py"))
                .args([
                    url,
                    mode,
                    "everything__echo",
                    r#"{"message": "via the gateway"}"#,
                ]),
            "py_client.py",
        )
        .map(|r| {
            let tools = names(&r["tools"]);
            let ok = lists_all(&tools)
                && first_text(&r["result"]).contains("via the gateway")
                && (mode == "legacy") != (r["version"] == "2026-07-28");
            (
                ok,
                format!(
                    "{} {} tools; {}",
                    r["version"],
                    tools.len(),
                    first_text(&r["result"])
                ),
            )
        });
        push(
            rows,
            "Python mcp 2.3 client",
            "gateway, HTTP",
            &format!("{era}: every server's tools listed, everything__echo answered"),
            outcome,
        );
    }

    // The TypeScript SDK's client (v1, the legacy era) to the Python server through the gateway.
    let ts_client = peers.cache.join("tsoauth/ts_client.mjs");
    let outcome = std::fs::copy(root.join("xtask/interop/ts_client.mjs"), &ts_client)
        .map_err(|e| format!("ts_client.mjs: {e}"))
        .and_then(|_| {
            client_json(
                Command::new("node")
                    .arg(&ts_client)
                    .args([url, "python__where", r#"{"region": "eu-west-1"}"#])
                    .current_dir(peers.cache.join("tsoauth"))
                    .env("PATH", &peers.path),
                "ts_client.mjs",
            )
        })
        .map(|r| {
            let tools = names(&r["tools"]);
            let ok = lists_all(&tools)
                && first_text(&r["result"]).contains("eu-west-1")
                && r["server"]["name"] == "toolwire-gateway";
            (
                ok,
                format!("{} tools; {}", tools.len(), first_text(&r["result"])),
            )
        });
    push(
        rows,
        "TypeScript SDK 1.32 client",
        "gateway, HTTP",
        "every server's tools listed, python__where routed",
        outcome,
    );

    // The headers that reach the Python server through the gateway are the ones a direct
    // client sends: Mcp-Name without the gateway's prefix, Mcp-Param-Region from its own
    // definition.
    let seen = |target: &Target<'_>, tool: &str| {
        cli(
            bin,
            target,
            "2026-07-28",
            &["tools", "call", tool, "region=Zürich"],
            root,
        )
        .map(|r| seen_report(&r)["headers"].clone())
    };
    let outcome = seen(&Target::Url(url), "python__seen").and_then(|through| {
        let direct = seen(&Target::Url(&running.py), "seen")?;
        let ok = through == direct
            && through["mcp-name"] == "seen"
            && through["mcp-param-region"] == "=?base64?WsO8cmljaA==?=";
        Ok((ok, format!("through {through}; direct {direct}")))
    });
    push(
        rows,
        "Python mcp 2.3 (MCPServer)",
        "gateway, HTTP",
        "the SEP-2243 headers the server sees equal a direct client's",
        outcome,
    );

    // The reference server checks every header against the body: a call through passes only
    // if the gateway sent them right; in both eras downstream.
    for protocol in ["2026-07-28", "2025-11-25"] {
        let outcome = cli(
            bin,
            &Target::Url(url),
            protocol,
            &[
                "tools",
                "call",
                "ref__execute_sql",
                "region=us-east-1",
                "query=SELECT 1",
            ],
            root,
        )
        .map(|r| {
            (
                first_text(&r) == "region=us-east-1 rows=1 query=SELECT 1",
                first_text(&r).to_owned(),
            )
        });
        push(
            rows,
            "toolwire refserver (2026-07-28 only)",
            "gateway, HTTP",
            &format!("{protocol} client: tools/call checked by the server against its headers"),
            outcome,
        );
    }
}

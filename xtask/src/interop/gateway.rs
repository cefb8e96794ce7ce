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
    let url = spawn_gateway(
        &mut processes,
        bin,
        &file,
        gateway_port,
        peers,
        &logs.join("gateway.log"),
    )?;
    Ok(Gateway {
        _processes: processes,
        url,
    })
}

/// Starts `toolwire gateway` over the mcpServers `file` on `port` (logging to `log`, `-v`),
/// once it listens: its endpoint's URL.
pub(super) fn spawn_gateway(
    processes: &mut Processes,
    bin: &Path,
    file: &Path,
    port: u16,
    peers: &Peers,
    log: &Path,
) -> Result<String, String> {
    processes.spawn(
        Command::new(bin)
            .args(["gateway", "--config", &file.display().to_string()])
            .args(["--http", &format!("127.0.0.1:{port}"), "-v"])
            .env("PATH", &peers.path)
            // A file the run wrote itself, trusted the way scripts and CI do.
            .env("TOOLWIRE_TRUST", "1"),
        log,
    )?;
    wait_for_port(port, "the gateway", log)?;
    Ok(format!("http://127.0.0.1:{port}/mcp"))
}

/// Runs a peer's client script and parses the JSON document it printed.
pub(super) fn client_json(command: &mut Command, what: &str) -> Result<Value, String> {
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

    // The Python SDK's client answering elicitation, each era: two clients at once, each
    // asked by the upstream through the gateway and greeted by its own name (not the other's).
    for (mode, era) in [("auto", "2026-07-28"), ("legacy", "initialize")] {
        let outcome = client_json(
            Command::new(&peers.python)
                .arg(root.join("xtask/interop/py_elicit.py"))
                .args([url, mode, "ref__ask_client"]),
            "py_elicit.py",
        )
        .map(|r| {
            let clients = r["clients"].as_array().cloned().unwrap_or_default();
            let each_own = clients.len() == 2
                && clients.iter().all(|c| {
                    let name = c["name"].as_str().unwrap_or("?");
                    // Asked once, the question attributed to the upstream that asked it.
                    c["text"] == format!("Hello, {name}!")
                        && c["asked"] == serde_json::json!(["[ref] What is your name?"])
                });
            let said: Vec<String> = clients
                .iter()
                .map(|c| format!("{} heard {}", c["name"], c["text"]))
                .collect();
            (each_own, said.join("; "))
        });
        push(
            rows,
            "Python mcp 2.3 client",
            "gateway, HTTP",
            &format!(
                "{era}: an upstream's elicitation reaches the client whose call asked, its answer returns"
            ),
            outcome,
        );
    }

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

/// nginx in front of a gateway fleet: round-robin, no affinity, a keep-alive pool, each
/// request logged with its session id, the replica it reached and the status. Every path
/// goes to the fleet: the endpoint, its metadata, the sign-in pages; under `/cut/`, with a
/// read timeout of one second. A replica that refused a connection is tried again at the
/// next request (`max_fails=0`), as a restarted pod is; a 503 (a replica that cannot resume
/// a stream) is tried at the next replica, as a GET may be.
fn fleet_conf(port: u16, replicas: &[u16]) -> String {
    let servers: String = replicas
        .iter()
        .map(|p| format!("server 127.0.0.1:{p} max_fails=0; "))
        .collect();
    format!(
        r#"{NGINX_HEAD}
http {{
    {NGINX_TEMP}
    log_format fleet '$request_method|$http_mcp_session_id|$upstream_addr|$status';
    access_log access.log fleet;
    upstream fleet {{ {servers}keepalive 32; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://fleet;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_read_timeout 1h;
            proxy_next_upstream error timeout http_503;
        }}
        # The same fleet behind a balancer that gives up on an answer quiet for a second.
        location /cut/ {{
            rewrite ^/cut(/.*)$ $1 break;
            proxy_pass http://fleet;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_read_timeout 1s;
            proxy_next_upstream error timeout http_503;
        }}
    }}
}}
"#
    )
}

/// nginx in front of `replicas` on `port` ([`fleet_conf`], its files in `dir`), started into
/// `processes`: the fleet's endpoint URL once it listens.
pub(super) fn start_fleet_nginx(
    processes: &mut Processes,
    nginx: &Path,
    dir: &Path,
    port: u16,
    replicas: &[u16],
) -> Result<String, String> {
    std::fs::write(dir.join("fleet.conf"), fleet_conf(port, replicas))
        .map_err(|e| e.to_string())?;
    let log = dir.join("nginx.log");
    processes.spawn(
        Command::new(nginx)
            .arg("-p")
            .arg(format!("{}/", dir.display()))
            .args(["-c", "fleet.conf"]),
        &log,
    )?;
    wait_for_port(port, "nginx", &log)?;
    Ok(format!("http://127.0.0.1:{port}/mcp"))
}

/// Three replicas of the gateway sharing a session key behind nginx round-robin: legacy
/// clients (the Python and TypeScript SDKs', the CLI) keep their sessions while their requests
/// land on every replica.
pub(super) fn fleet_checks(
    rows: &mut Vec<Row>,
    bin: &Path,
    running: &Running,
    peers: &Peers,
    root: &Path,
) {
    const FLEET: &str = "3 × toolwire gateway + nginx round-robin";
    let outcome = start_fleet(bin, running, peers).and_then(|fleet| {
        std::fs::copy(
            root.join("xtask/interop/ts_client.mjs"),
            peers.cache.join("tsoauth/ts_client.mjs"),
        )
        .map_err(|e| format!("ts_client.mjs: {e}"))?;
        let py = client_json(
            Command::new(&peers.python)
                .arg(root.join("xtask/interop/py_client.py"))
                .args([&fleet.url, "legacy", "python__where", r#"{"region": "eu-west-1"}"#]),
            "py_client.py",
        )?;
        let ts = client_json(
            Command::new("node")
                .arg(peers.cache.join("tsoauth/ts_client.mjs"))
                .args([&fleet.url, "everything__echo", r#"{"message": "fleet"}"#])
                .current_dir(peers.cache.join("tsoauth"))
                .env("PATH", &peers.path),
            "ts_client.mjs",
        )?;
        let cli = super::cli(
            bin,
            &Target::Url(&fleet.url),
            "2025-11-25",
            &["tools", "call", "ref__echo", "text=fleet"],
            root,
        )?;
        let log = std::fs::read_to_string(fleet.dir.join("access.log")).unwrap_or_default();
        // Per session: the replicas its requests reached, and any failure status.
        let mut spread: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
            std::collections::BTreeMap::new();
        let mut failed = Vec::new();
        for line in log.lines() {
            let fields: Vec<&str> = line.split('|').collect();
            let [method, session, upstream, status] = fields[..] else {
                continue;
            };
            if !matches!(session, "" | "-") {
                spread.entry(session).or_default().insert(upstream);
            }
            if status.starts_with('4') || status.starts_with('5') {
                failed.push(format!("{method} {status} at {upstream}"));
            }
        }
        let sessions = spread.len();
        let widest = spread.values().map(|replicas| replicas.len()).max().unwrap_or(0);
        let ok = first_text(&py["result"]).contains("eu-west-1")
            && first_text(&ts["result"]).contains("fleet")
            && first_text(&cli) == "fleet"
            && sessions >= 3
            && widest == 3
            && failed.is_empty();
        Ok((
            ok,
            format!(
                "{sessions} sessions; the widest reached {widest} replicas; failures {failed:?}; python {}; typescript {}; cli {}",
                first_text(&py["result"]),
                first_text(&ts["result"]),
                first_text(&cli)
            ),
        ))
    });
    push(
        rows,
        FLEET,
        "legacy sessions, no affinity",
        "Python, TypeScript and CLI clients keep their sessions across replicas",
        outcome,
    );
    // One fleet for both: the second kills a replica.
    let mut fleet = start_fleet(bin, running, peers);
    let outcome = fleet
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|fleet| answers_cut_by_the_balancer(fleet, peers, root));
    push(
        rows,
        FLEET,
        "quiet answers cut by the balancer (1 s read timeout)",
        "each call resumed with Last-Event-ID: a replica that did not run it answers 503, nginx tries the next, the one that ran it replays the answer",
        outcome,
    );
    let outcome = fleet
        .as_mut()
        .map_err(|e| e.clone())
        .and_then(|fleet| quiet_answers_replica_killed(fleet, peers, root));
    drop(fleet);
    push(
        rows,
        FLEET,
        "the replica of a quiet answer killed",
        "the call fails within seconds (every replica refuses to resume it), the session's next call is answered",
        outcome,
    );
    let outcome = start_fleet(bin, running, peers)
        .and_then(|mut fleet| replica_killed(&mut fleet, peers, root));
    push(
        rows,
        FLEET,
        "a replica killed mid-run",
        "a legacy session's calls go on at the others; none is lost that was not sent to it",
        outcome,
    );
}

/// A Python client calls 40 times, 100 ms apart, in one legacy session while replica 1 is
/// killed (SIGKILL) once it has answered one of them: every call succeeds but those nginx had
/// already sent to the killed replica (logged there with a 5xx, or, when the answer's head had
/// gone on, with a 200 and an error-log line saying the replica's answer was cut).
fn replica_killed(fleet: &mut Fleet, peers: &Peers, root: &Path) -> Result<(bool, String), String> {
    const CALLS: usize = 40;
    let run = PyRun::start(
        peers,
        root,
        &fleet.url,
        "ref__echo",
        r#"{"text": "fleet"}"#,
        CALLS,
    )?;
    let killed = fleet.replicas[0];
    let at_killed = format!("127.0.0.1:{killed}");
    // Killed once it has answered a call (not at a fixed time: a client slow to start, on a
    // busy machine, had made none a second in, and the replica died having served nothing).
    let answered_one = || {
        std::fs::read_to_string(fleet.dir.join("access.log")).is_ok_and(|log| {
            log.lines()
                .any(|line| line.split('|').nth(2) == Some(at_killed.as_str()))
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !answered_one() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    fleet.processes.kill(1)?;
    let printed = run.printed(std::time::Duration::from_secs(120))?;
    let calls = printed["calls"].as_array().cloned().unwrap_or_default();
    let failed = calls.iter().filter(|c| c.get("error").is_some()).count();
    let log = std::fs::read_to_string(fleet.dir.join("access.log")).unwrap_or_default();
    // Requests nginx had sent to the killed replica and got no whole answer for: those it
    // answered 5xx (cut before the answer's head), and those cut after the head had gone on
    // with a 200 (an SSE answer under way), which only nginx's error log tells apart.
    let cut_before_head = log
        .lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            matches!(fields[..], [_, _, upstream, status]
                if upstream.ends_with(&format!(":{killed}")) && status.starts_with('5'))
        })
        .count();
    let errors = std::fs::read_to_string(fleet.dir.join("error.log")).unwrap_or_default();
    let cut_in_body = cut_in_body(&errors, killed);
    let cut = cut_before_head + cut_in_body;
    // Requests it answered before it died, and those nginx found it dead for and sent on.
    let served = log
        .lines()
        .filter(|line| line.split('|').nth(2) == Some(at_killed.as_str()))
        .count();
    let moved = log
        .lines()
        .filter(|line| {
            line.split('|')
                .nth(2)
                .is_some_and(|u| u.starts_with(&at_killed) && u.contains(','))
        })
        .count();
    let ok = calls.len() == CALLS && failed <= cut && served > 0;
    Ok((
        ok,
        format!(
            "{} of {CALLS} calls answered, {failed} failed; the killed replica answered {served} requests before, {moved} went on to another, {cut_before_head} were cut there before their answer's head and {cut_in_body} after it",
            calls.len() - failed,
        ),
    ))
}

/// `py_client.py` calling `tool` with `arguments` `calls` times, 100 ms apart, in one legacy
/// session at `url`, under way.
struct PyRun {
    pid: u32,
    done: std::sync::mpsc::Receiver<std::io::Result<std::process::Output>>,
}

impl PyRun {
    fn start(
        peers: &Peers,
        root: &Path,
        url: &str,
        tool: &str,
        arguments: &str,
        calls: usize,
    ) -> Result<Self, String> {
        let child = Command::new(&peers.python)
            .arg(root.join("xtask/interop/py_client.py"))
            .args([url, "legacy", tool, arguments, &calls.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("py_client.py: {e}"))?;
        let pid = child.id();
        let (tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || drop(tx.send(child.wait_with_output())));
        Ok(Self { pid, done })
    }

    /// What it printed, once it ended within `deadline` (killed, and an error, if not); an
    /// error too when the client's session itself failed (the SDK raised out of its own
    /// tasks), naming how many calls it made and the innermost exceptions.
    fn printed(self, deadline: std::time::Duration) -> Result<Value, String> {
        let Ok(output) = self.done.recv_timeout(deadline) else {
            let _ = Command::new("kill").arg(self.pid.to_string()).status();
            return Err(format!(
                "py_client.py had not ended after {deadline:?}: a call waits for ever"
            ));
        };
        let output = output.map_err(|e| e.to_string())?;
        let printed: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
            format!(
                "py_client.py printed no JSON ({e}): {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
        match printed["crash"].as_array() {
            Some(leaves) => Err(format!(
                "the client's session failed after {} calls: {}",
                printed["calls"].as_array().map_or(0, Vec::len),
                leaves
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )),
            None => Ok(printed),
        }
    }
}

/// The answers to POSTs through `/cut/` that nginx's error log says it gave up on, quiet for
/// its read timeout: the port of the replica each came from.
fn quiet_cuts(fleet: &Fleet) -> Vec<u16> {
    let errors = std::fs::read_to_string(fleet.dir.join("error.log")).unwrap_or_default();
    answers_cut_mid_way(&errors)
        .filter(|(line, path, _)| line.contains("upstream timed out") && *path == "/cut/mcp")
        .map(|(_, _, port)| port)
        .collect()
}

/// Whether a call `py_client.py` reported was answered by `ref__slow`.
fn slow_answered(call: &Value) -> bool {
    call["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("done after"))
}

/// A Python client calls `ref__slow` (2.5 s without a word) 3 times in one legacy session
/// through `/cut/`, where nginx gives up on an answer quiet for a second: each answer's stream
/// is cut after its priming event, and the SDK resumes it with `Last-Event-ID`. A replica
/// that did not run the call answers 503, on which nginx tries the next
/// (`proxy_next_upstream ... http_503`), until the one that ran it replays the answer: every
/// call is answered, and nginx's error log shows each cut.
fn answers_cut_by_the_balancer(
    fleet: &Fleet,
    peers: &Peers,
    root: &Path,
) -> Result<(bool, String), String> {
    const CALLS: usize = 3;
    let url = fleet.url.replacen("/mcp", "/cut/mcp", 1);
    let run = PyRun::start(
        peers,
        root,
        &url,
        "ref__slow",
        r#"{"steps": 1, "delay_ms": 2500}"#,
        CALLS,
    )?;
    let printed = run.printed(std::time::Duration::from_secs(90))?;
    let calls = printed["calls"].as_array().cloned().unwrap_or_default();
    let answered = calls.iter().filter(|c| slow_answered(c)).count();
    let cut = quiet_cuts(fleet).len();
    Ok((
        answered == CALLS && cut >= CALLS,
        format!("{answered} of {CALLS} answered; nginx cut {cut} quiet answers; calls {calls:?}"),
    ))
}

/// Then, on the same fleet, a call of 4 s through `/cut/`: once nginx has cut its quiet answer,
/// the replica running it is killed (SIGKILL). Its resumption finds no replica that has it:
/// the call fails within seconds (an empty replay once had the SDK reconnect until its
/// session crashed, some 8 minutes later), and the session's next call is answered.
fn quiet_answers_replica_killed(
    fleet: &mut Fleet,
    peers: &Peers,
    root: &Path,
) -> Result<(bool, String), String> {
    let url = fleet.url.replacen("/mcp", "/cut/mcp", 1);
    let before = quiet_cuts(fleet).len();
    let run = PyRun::start(
        peers,
        root,
        &url,
        "ref__slow",
        r#"{"steps": 1, "delay_ms": 4000}"#,
        2,
    )?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let owner = loop {
        if let Some(port) = quiet_cuts(fleet).get(before) {
            break *port;
        }
        if std::time::Instant::now() > deadline {
            return Err("nginx cut no quiet answer within 30 s".to_owned());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let replica = fleet
        .replicas
        .iter()
        .position(|p| *p == owner)
        .ok_or_else(|| format!("the cut answer came from {owner}, no replica"))?;
    // The reference server is process 0, the replicas 1 to 3.
    fleet.processes.kill(replica + 1)?;
    let printed = run.printed(std::time::Duration::from_secs(90))?;
    let calls = printed["calls"].as_array().cloned().unwrap_or_default();
    let ok = calls.len() == 2
        && calls[0]["error"].as_str().is_some_and(|e| !e.is_empty())
        && slow_answered(&calls[1]);
    Ok((
        ok,
        format!(
            "replica {} killed once nginx cut its quiet answer; calls {calls:?}",
            replica + 1
        ),
    ))
}

/// How many answers from the replica on `port` nginx's error log says were cut after their
/// head (nginx had logged them with the replica's status, a 200).
fn cut_in_body(error_log: &str, port: u16) -> usize {
    answers_cut_mid_way(error_log)
        // An error: an answer the client stopped reading is an `[info]` line.
        .filter(|(line, _, from)| line.contains(" [error] ") && *from == port)
        .count()
}

/// The lines of nginx's error log about an answer to a POST (a call; a cut GET is the
/// session's stream, which the client reopens) that nginx stopped reading from a replica
/// mid-way: each line, the request's path and the replica's port.
fn answers_cut_mid_way(error_log: &str) -> impl Iterator<Item = (&str, &str, u16)> {
    error_log.lines().filter_map(|line| {
        if !line.contains("while reading upstream,") {
            return None;
        }
        let (_, request) = line.split_once("request: \"POST ")?;
        let path = request.split(' ').next()?;
        let (_, upstream) = line.split_once("upstream: \"http://127.0.0.1:")?;
        let port = upstream.split(['/', '"']).next()?.parse().ok()?;
        Some((line, path, port))
    })
}

/// The fleet: three replicas and nginx; stopped when dropped.
struct Fleet {
    /// The reference server, the three replicas, nginx, in that order.
    processes: Processes,
    url: String,
    dir: PathBuf,
    /// The replicas' ports.
    replicas: Vec<u16>,
}

fn start_fleet(bin: &Path, running: &Running, peers: &Peers) -> Result<Fleet, String> {
    let dir = peers.cache.join("nginx-fleet");
    std::fs::create_dir_all(dir.join("tmp")).map_err(|e| e.to_string())?;
    // Each fleet's logs are its own: the checks read them.
    let _ = std::fs::remove_file(dir.join("access.log"));
    let _ = std::fs::remove_file(dir.join("error.log"));
    let key_file = session_key_file(&dir)?;
    let everything_js = peers
        .cache
        .join("everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let file = dir.join("fleet.json");
    let (ref_port, nginx_port) = (free_port()?, free_port()?);
    let config = serde_json::json!({"mcpServers": {
        "everything": {"command": "node", "args": [everything_js.display().to_string(), "stdio"]},
        "python": {"type": "http", "url": running.py},
        "ref": {"type": "http", "url": format!("http://127.0.0.1:{ref_port}/mcp")},
    }});
    std::fs::write(&file, config.to_string()).map_err(|e| e.to_string())?;
    let mut processes = Processes::default();
    let ref_log = dir.join("refserver.log");
    processes.spawn(
        Command::new(bin).args(["serve", "--http", &format!("127.0.0.1:{ref_port}")]),
        &ref_log,
    )?;
    wait_for_port(ref_port, "the reference server", &ref_log)?;
    let mut replicas = Vec::new();
    for n in 1..=3 {
        let port = free_port()?;
        let log = dir.join(format!("replica-{n}.log"));
        processes.spawn(
            Command::new(bin)
                .args(["gateway", "--config", &file.display().to_string()])
                .args(["--http", &format!("127.0.0.1:{port}")])
                .arg("--session-key-file")
                .arg(&key_file)
                .env("PATH", &peers.path)
                .env("TOOLWIRE_TRUST", "1"),
            &log,
        )?;
        wait_ready(port, "a gateway replica", &log)?;
        replicas.push(port);
    }
    let url = start_fleet_nginx(&mut processes, &peers.nginx, &dir, nginx_port, &replicas)?;
    Ok(Fleet {
        processes,
        url,
        dir,
        replicas,
    })
}

#[cfg(test)]
mod tests {
    use super::cut_in_body;

    /// Lines as Debian's nginx wrote them when a replica was killed: one answer cut after its
    /// head (counted); a refused connection, another replica's cut, the session's GET stream
    /// cut and a stream the client closed (not).
    #[test]
    fn only_answers_of_that_replica_cut_after_their_head_count() {
        let log = r#"2026/11/30 09:58:01 [error] 4871#4871: *8 upstream prematurely closed connection while reading upstream, client: 127.0.0.1, server: , request: "POST /mcp HTTP/1.1", upstream: "http://127.0.0.1:40885/mcp", host: "127.0.0.1:41637"
2026/11/30 09:58:05 [error] 4871#4871: *45 connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: , request: "POST /mcp HTTP/1.1", upstream: "http://127.0.0.1:40885/mcp", host: "127.0.0.1:41637"
2026/11/30 09:58:06 [error] 4871#4871: *9 upstream prematurely closed connection while reading upstream, client: 127.0.0.1, server: , request: "POST /mcp HTTP/1.1", upstream: "http://127.0.0.1:33957/mcp", host: "127.0.0.1:41637"
2026/11/30 09:58:06 [error] 4871#4871: *6 upstream prematurely closed connection while reading upstream, client: 127.0.0.1, server: , request: "GET /mcp HTTP/1.1", upstream: "http://127.0.0.1:40885/mcp", host: "127.0.0.1:41637"
2026/11/30 09:58:06 [info] 4871#4871: *5 epoll_wait() reported that client prematurely closed connection, so upstream connection is closed too while reading upstream, client: 127.0.0.1, server: , request: "GET /mcp HTTP/1.1", upstream: "http://127.0.0.1:40885/mcp", host: "127.0.0.1:41637""#;
        assert_eq!(cut_in_body(log, 40885), 1);
        assert_eq!(cut_in_body(log, 33957), 1);
        assert_eq!(cut_in_body(log, 37915), 0);
    }
}

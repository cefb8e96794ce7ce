//! `toolwire gateway` as an OAuth resource server in front of a real authorization server:
//! the TypeScript SDK's example authorization server (opaque tokens, its introspection
//! endpoint) names the gateway's callers; `toolwire login` finds it through the gateway's
//! protected resource metadata, logs in, and its token is introspected on the way through.
//! Then the TypeScript SDK's own OAuth client example does the same, driven as its user
//! would: the sign-in link it prints is followed, and a tool is called from its prompt.

use super::*;

const PEER: &str = "toolwire gateway behind the TypeScript SDK's authorization server";

/// The processes of the check; stopped when dropped.
struct Fronted {
    _processes: Processes,
    url: String,
    log: PathBuf,
}

fn start(bin: &Path, peers: &Peers) -> Result<Fronted, String> {
    let logs = peers.cache.join("results/interop");
    let mut processes = Processes::default();
    let (ref_port, gateway_port) = (free_port()?, free_port()?);
    let issuer = ts_authorization_server(peers, &mut processes, &logs.join("gateway-auth-ts.log"))?;
    let ref_log = logs.join("gateway-auth-ref.log");
    processes.spawn(
        Command::new(bin).args(["serve", "--http", &format!("127.0.0.1:{ref_port}")]),
        &ref_log,
    )?;
    wait_for_port(ref_port, "the reference server", &ref_log)?;
    let file = logs.join("gateway-auth.json");
    let config = serde_json::json!({
        "mcpServers": {"ref": {"type": "http", "url": format!("http://127.0.0.1:{ref_port}/mcp")}},
        "gateway": {"introspection": {"issuer": issuer,
            "endpoint": format!("{issuer}introspect"),
            "clientId": "toolwire-gateway", "clientSecretEnv": "GATEWAY_INTROSPECTION_SECRET"}}
    });
    std::fs::write(&file, config.to_string()).map_err(|e| format!("{}: {e}", file.display()))?;
    let log = logs.join("gateway-auth.log");
    processes.spawn(
        Command::new(bin)
            .args(["gateway", "--config", &file.display().to_string()])
            .args(["--http", &format!("127.0.0.1:{gateway_port}"), "-v"])
            // The example's introspection endpoint takes no client authentication; the
            // gateway sends its own all the same.
            .env("GATEWAY_INTROSPECTION_SECRET", "unused-by-this-server")
            .env("TOOLWIRE_TRUST", "1"),
        &log,
    )?;
    wait_for_port(gateway_port, "the gateway", &log)?;
    Ok(Fronted {
        _processes: processes,
        url: format!("http://127.0.0.1:{gateway_port}/mcp"),
        log,
    })
}

/// The TypeScript SDK's example authorization server (dynamic registration, PKCE, an
/// `/authorize` that approves at once, introspection), started into `processes`: its issuer,
/// exactly as its metadata names it. Its own instance, without `--oauth-strict`: its tokens are
/// for the resource the client names (a gateway), not for the example's own MCP endpoint.
pub(super) fn ts_authorization_server(
    peers: &Peers,
    processes: &mut Processes,
    log: &Path,
) -> Result<String, String> {
    let (mcp_port, as_port) = (free_port()?, free_port()?);
    processes.spawn(
        Command::new("node")
            .args([TS_OAUTH_SERVER, "--oauth"])
            .current_dir(peers.cache.join("tsoauth"))
            .env("MCP_PORT", mcp_port.to_string())
            .env("MCP_AUTH_PORT", as_port.to_string())
            .env("PATH", &peers.path),
        log,
    )?;
    wait_for_port(as_port, "the TypeScript authorization server", log)?;
    Ok(format!("http://localhost:{as_port}/"))
}

pub(super) fn gateway_auth_checks(rows: &mut Vec<Row>, bin: &Path, peers: &Peers) {
    let fronted = match start(bin, peers) {
        Ok(fronted) => fronted,
        Err(e) => {
            push(
                rows,
                PEER,
                "HTTP",
                "the gateway starts with introspection",
                Err(e),
            );
            return;
        }
    };
    let dir = peers.cache.join("results/interop");
    let credentials = dir.join("gateway-credentials.json");
    let _ = std::fs::remove_file(&credentials);
    let browser = browser(peers);
    let toolwire = |args: &[&str]| {
        let mut command = Command::new(bin);
        command
            .args(["--timeout", "30", "--url", fronted.url.as_str()])
            .args(args)
            .env("TOOLWIRE_CREDENTIALS", &credentials)
            .env("BROWSER", &browser)
            .current_dir(&dir);
        run_limited(&mut command)
    };

    let (ok, out, err) = toolwire(&["--json", "tools", "list"]);
    push(
        rows,
        PEER,
        "CLI, no credentials",
        "the gateway answers 401 and the CLI names the login command",
        Ok((
            // Under --json the failure is one document on stdout: exit 3, nothing else.
            !ok && err.contains("login`")
                && serde_json::from_str::<Value>(&out).is_ok_and(|v| v["error"]["exit"] == 3),
            one_line(&err),
        )),
    );

    let (ok, out, err) = toolwire(&["--json", "login"]);
    let outcome = serde_json::from_str::<Value>(&out)
        .map(|status| (ok && status["client_id"].is_string(), format!("{status}")))
        .map_err(|e| format!("{e}: {} {}", one_line(&out), one_line(&err)));
    push(
        rows,
        PEER,
        "CLI login",
        "the authorization server found through the gateway's resource metadata; registration, PKCE, the token kept",
        outcome,
    );

    let (ok, out, err) = toolwire(&[
        "--json",
        "tools",
        "call",
        "ref__execute_sql",
        "region=us-west-2",
        "query=SELECT 1",
    ]);
    let log = std::fs::read_to_string(&fronted.log).unwrap_or_default();
    let audited = log.lines().any(|l| {
        l.contains("toolwire_gateway::audit")
            && l.contains("ref__execute_sql")
            && l.contains("localhost")
    });
    push(
        rows,
        PEER,
        "CLI, introspected token",
        "a call through the gateway with the token the login got: introspected, served, one audit line naming the caller",
        Ok((
            ok && out.contains("region=us-west-2") && audited,
            format!(
                "audit line: {audited}; {} {}",
                one_line(&out),
                one_line(&err)
            ),
        )),
    );
}

/// The TypeScript SDK's interactive OAuth client example, in the package.
const TS_OAUTH_CLIENT: &str =
    "node_modules/@modelcontextprotocol/sdk/dist/esm/examples/client/simpleOAuthClient.js";

/// The TypeScript SDK's OAuth client example against the gateway: the 401 sends it to the
/// gateway's resource metadata and on to the authorization server; the link it prints is
/// followed (the server approves and redirects to the example's own callback listener); from
/// its prompt, a tool is called through the gateway with the token it got.
pub(super) fn ts_oauth_client_check(rows: &mut Vec<Row>, bin: &Path, peers: &Peers) {
    let check = "the SDK's OAuth client example signs in through the gateway's resource metadata and calls a tool";
    let outcome = start(bin, peers).and_then(|fronted| ts_oauth_client(&fronted, peers));
    push(rows, PEER, "TypeScript SDK OAuth client", check, outcome);
}

fn ts_oauth_client(fronted: &Fronted, peers: &Peers) -> Result<(bool, String), String> {
    use std::io::{Read as _, Write as _};
    use std::sync::{Arc, Mutex};
    let mut child = Command::new("node")
        .args([TS_OAUTH_CLIENT, fronted.url.as_str()])
        .current_dir(peers.cache.join("tsoauth"))
        .env("PATH", &peers.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("node: {e}"))?;
    // Everything it prints, as it comes (its prompt ends no line).
    let said = Arc::new(Mutex::new(String::new()));
    for stream in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let said = said.clone();
        std::thread::spawn(move || {
            let mut stream = stream;
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stream.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                if let Ok(mut said) = said.lock() {
                    said.push_str(&String::from_utf8_lossy(&chunk[..n]));
                }
            }
        });
    }
    let text = || said.lock().map(|s| s.clone()).unwrap_or_default();
    // Waits until what it printed after `from` holds `needle`; what it printed since `from`.
    let wait_for = |needle: &str, from: usize| -> Result<String, String> {
        let deadline = Instant::now() + RUN_LIMIT;
        loop {
            let all = text();
            let since = all.get(from..).unwrap_or_default();
            if since.contains(needle) {
                return Ok(since.to_owned());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no {needle:?} within {RUN_LIMIT:?}: {}",
                    one_line(since)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let outcome = (|| {
        let opened = wait_for("authorize:", 0)?;
        let link = opened
            .split("authorize:")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .ok_or("no sign-in link")?
            .to_owned();
        // Marked before the link is followed: the example may connect and print its prompt
        // before the browser stand-in below has even exited.
        let mark = text().len();
        // The user's browser: the authorization server approves and redirects to the
        // example's callback listener.
        let (followed, _, err) = run_limited(
            Command::new(&peers.python).args([
                "-c",
                "import sys, urllib.request as u; u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=30).read()",
                &link,
            ]),
        );
        if !followed {
            return Err(format!(
                "following the sign-in link failed: {}",
                one_line(&err)
            ));
        }
        let signed_in = wait_for("mcp> ", mark)?;
        let mark = mark + signed_in.len();
        let stdin = child.stdin.as_mut().ok_or("no stdin")?;
        stdin
            .write_all(
                b"call ref__execute_sql {\"region\": \"us-west-2\", \"query\": \"SELECT 1\"}\n",
            )
            .map_err(|e| e.to_string())?;
        let answered = wait_for("mcp> ", mark)?;
        let _ = stdin.write_all(b"quit\n");
        let log = std::fs::read_to_string(&fronted.log).unwrap_or_default();
        // The call went through the gateway as an authenticated caller: its audit line.
        let audited = log
            .lines()
            .any(|l| l.contains("toolwire_gateway::audit") && l.contains("ref__execute_sql"));
        Ok((
            answered.contains("region=us-west-2") && audited,
            format!("audit line: {audited}; {}", one_line(&answered)),
        ))
    })();
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

//! `toolwire gateway`: the servers of an mcpServers file as one MCP server, over Streamable
//! HTTP (loopback unless told otherwise), a Unix socket, or stdin/stdout.

use super::*;
use std::sync::Arc;

use toolwire_gateway::Gateway;

/// Runs the gateway until stdin ends (`--stdio`) or the process is interrupted.
pub(crate) async fn run(cli: &Cli, args: &GatewayArgs) -> Result<ExitCode, Failure> {
    if let Some(url) = &args.healthz {
        return healthz(url).await;
    }
    let checked = args.check.as_ref().and_then(Option::as_ref);
    let Some(file) = checked.or(args.file.as_ref()).or(cli.config.as_ref()) else {
        return Err(Failure::Usage("gateway needs --config FILE".into()));
    };
    // A check runs nothing, so the file needs no approval: its problems are all it says.
    let config = if checked.is_some() {
        let config = ServersConfig::load(file).map_err(|e| Failure::Usage(one_line(&e)))?;
        trust::say_typos(&config);
        config
    } else {
        trust::load_config(file)?
    };
    // The upstreams' requests (elicitation, sampling, roots) go to the client whose call they
    // are about, never to this terminal.
    let upstream = toolwire_gateway::upstream_client(client_builder(cli)?);
    // A long-running gateway starts a failed upstream again for as long as it is configured:
    // in a fleet, upstreams come up in any order.
    let mut host = Host::builder(upstream)
        .naming(args.names)
        .restart_failed(Some(toolwire_gateway::RESTART_FAILED))
        .health_check(toolwire_gateway::HEALTH_CHECK);
    if let Some(secs) = args.stop_idle {
        let limit = Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|limit| !limit.is_zero())
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "--stop-idle {secs}: must be a positive number of seconds"
                ))
            })?;
        host = host.stop_idle(limit);
    }
    host.check(&config)
        .map_err(|e| Failure::Usage(one_line(&e)))?;
    let mut access = match &config.gateway {
        Some(section) => toolwire_gateway::AccessConfig::from_json(section)
            .map_err(|e| Failure::Usage(format!("{}: {}", file.display(), one_line(&e))))?,
        None => toolwire_gateway::AccessConfig::default(),
    };
    access
        .authorization_servers
        .extend(args.auth_issuers.iter().cloned());
    if let Some(audience) = &args.auth_audience {
        access.audience = Some(audience.clone());
    }
    if let Some(url) = &args.public_url {
        access.resource = Some(url.clone());
    }
    // An upstream called with its callers' credentials is known by its entry's URL.
    for (name, upstream) in &mut access.upstreams {
        let entry = config.get(name).map(|s| &s.transport);
        match entry {
            None => {
                return Err(Failure::Usage(format!(
                    "{}: gateway.upstreams names `{name}`, which has no entry",
                    file.display()
                )));
            }
            Some(toolwire_host::ServerTransport::Http { url, .. })
                if upstream.resource.is_none() =>
            {
                upstream.resource = Some(url.clone());
            }
            _ => {}
        }
    }
    // Readiness waits for entries that exist and can start.
    let required = access.required.as_deref().unwrap_or_default();
    match toolwire_gateway::required_present(required, &config) {
        Err(toolwire_gateway::ReloadError::RequiredMissing(name)) => {
            return Err(Failure::Usage(format!(
                "{}: gateway.required names `{name}`, which has no entry",
                file.display()
            )));
        }
        Err(toolwire_gateway::ReloadError::RequiredDisabled(name)) => {
            return Err(Failure::Usage(format!(
                "{}: gateway.required names `{name}`, which is disabled: this replica would never be ready",
                file.display()
            )));
        }
        _ => {}
    }
    // Tool definitions pinned, a changed one quarantined until approved (`toolwire pins`).
    let pins = match &access.pin_tools {
        None | Some(toolwire_gateway::PinTools::On(false)) => None,
        Some(toolwire_gateway::PinTools::On(true)) => {
            Some(toolwire_host::PinFile::default_location().ok_or_else(|| {
                Failure::Usage(format!(
                    "{}: gateway.pinTools: no home directory for the default pin file; give its path",
                    file.display()
                ))
            })?)
        }
        Some(toolwire_gateway::PinTools::File(path)) => {
            let folder = file.parent().unwrap_or(std::path::Path::new("."));
            Some(toolwire_host::PinFile::new(folder.join(path)))
        }
    };
    let pin_path = pins.as_ref().map(|p| p.path().to_owned());
    if let Some(pins) = pins {
        host = host.pin_tools(pins);
    }
    let traffic = toolwire_gateway::Traffic::new(&access.traffic)
        .map_err(|e| Failure::Usage(format!("{}: {e}", file.display())))?;
    if args.check.is_some() {
        // What would stop an entry from starting, found without starting it.
        let mut stopped = 0;
        for entry in config.servers.iter().filter(|s| !s.disabled) {
            let Ok(stdio) = entry.stdio_config() else {
                continue;
            };
            if let Err(why) = stdio.preflight() {
                say_err!(
                    "toolwire: {}: server `{}`: {why}",
                    file.display(),
                    entry.name
                );
                stopped += 1;
            }
        }
        if stopped > 0 {
            return Err(Failure::Usage(format!(
                "{}: {stopped} server(s) could not start",
                file.display()
            )));
        }
        let enabled = config.servers.iter().filter(|s| !s.disabled).count();
        say!(
            "{}: {} servers ({enabled} enabled), ready to serve",
            file.display(),
            config.servers.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
        && !args.allow_unauthenticated
        && !access.authenticates()
    {
        return Err(Failure::Usage(format!(
            "--http {addr}: the gateway does not authenticate its callers, so it serves only loopback addresses; give --auth-issuer (or API keys in the file), or --allow-unauthenticated to serve {addr} anyway"
        )));
    }
    if args.stdio && access.authenticates() {
        tracing::warn!(
            "over stdio nobody is authenticated: the caller is whoever started the gateway (the policy's rules without callers apply)"
        );
    }
    let endpoint = match (args.unix_socket.as_ref(), args.http) {
        (Some(_), _) => "http://localhost/mcp".to_owned(),
        (None, Some(addr)) => format!("http://{addr}/mcp"),
        (None, None) => "http://127.0.0.1:8808/mcp".to_owned(),
    };
    if access.authenticates()
        && access.resource.is_none()
        && args.http.is_some_and(|addr| addr.ip().is_unspecified())
    {
        tracing::warn!(
            "tokens must name {endpoint} as their audience: give --public-url with the URL callers use"
        );
    }
    let limits = access.limits.clone();
    let required = access.required.clone();
    let era_repair = args.era_repair || access.era_repair;
    // Upstreams named for per-caller credentials without callers who authenticate are an
    // error `Access::new` reports, never a section quietly ignored.
    let access =
        if access.authenticates() || access.policy.is_some() || !access.upstreams.is_empty() {
            let built = toolwire_gateway::Access::new(&access, &endpoint).await;
            Some(built.map_err(|e| match e {
                toolwire_gateway::AccessError::Config(_) => Failure::Usage(one_line(&e)),
                _ => Failure::Remote(one_line(&e)),
            })?)
        } else {
            None
        };
    let mut options = toolwire_server::Options::default();
    options.allowed_hosts.clone_from(&args.allowed_hosts);
    options.session_keys = session_keys(args.session_key_file.as_deref())?;
    if let Some(limits) = &limits {
        limits.apply(&mut options.limits);
    }
    options.era_repair = era_repair;
    if args.json_responses {
        options.framing = toolwire_server::Framing::Json;
    }
    // Stored logins for the remote entries; a server that needs a new one says so in its state.
    let host = login::stored_logins(host);
    let host = host
        .start(&config)
        .map_err(|e| Failure::Usage(one_line(&e)))?;
    let mut gateway = Gateway::builder(host)
        .progressive(toolwire_gateway::Progressive {
            above_tools: args.progressive_above_tools,
            above_tokens: args.progressive_above_tokens,
        })
        .audit_arguments(args.audit_arguments)
        .traffic(traffic);
    if let Some(required) = required {
        gateway = gateway.required(required);
    }
    if let Some(access) = access {
        gateway = gateway.access(access);
    }
    if let Some(keys) = &options.session_keys {
        gateway = gateway.keys(keys.clone());
    }
    let gateway = gateway.build();
    let reloading = tokio::spawn(reload_on_change(
        gateway.clone(),
        file.to_owned(),
        config.gateway.clone(),
        pin_path,
    ));
    let outcome = serve(&gateway, args, options).await;
    reloading.abort();
    gateway.host().shutdown().await;
    outcome
}

/// The session keys of `--session-key-file`, else of `TOOLWIRE_GATEWAY_SESSION_KEY`, else none.
/// Their text never reaches an error or a log.
fn session_keys(
    file: Option<&std::path::Path>,
) -> Result<Option<toolwire_server::SessionKeys>, Failure> {
    let (text, source) = match file {
        Some(file) => {
            #[cfg(unix)]
            if let Ok(meta) = std::fs::metadata(file) {
                use std::os::unix::fs::PermissionsExt as _;
                if meta.permissions().mode() & 0o077 != 0 {
                    tracing::warn!(file = %file.display(), "the session key file can be read by other users: chmod 600 it");
                }
            }
            let text = std::fs::read_to_string(file).map_err(|e| {
                Failure::Usage(format!("--session-key-file {}: {e}", file.display()))
            })?;
            (text, format!("--session-key-file {}", file.display()))
        }
        None => match std::env::var("TOOLWIRE_GATEWAY_SESSION_KEY") {
            Ok(text) => (text, "TOOLWIRE_GATEWAY_SESSION_KEY".to_owned()),
            Err(_) => return Ok(None),
        },
    };
    toolwire_server::SessionKeys::parse(&text)
        .map(Some)
        .map_err(|e| Failure::Usage(format!("{source}: {e}")))
}

async fn serve(
    gateway: &Arc<Gateway>,
    args: &GatewayArgs,
    options: toolwire_server::Options,
) -> Result<ExitCode, Failure> {
    if args.stdio {
        return serve_stdio(gateway, args, options).await;
    }
    let server = match listen_at(args.unix_socket.as_ref(), args.http, 8808)? {
        #[cfg(unix)]
        Listen::Unix(socket) => toolwire_server::serve_http_unix(&socket, options, gateway.clone())
            .await
            .map_err(|e| Failure::Remote(format!("cannot listen on {}: {e}", socket.display())))?,
        Listen::Tcp(addr) => gateway
            .serve_http(addr, options)
            .await
            .map_err(|e| Failure::Remote(format!("cannot listen on {addr}: {e}")))?,
    };
    say_err!("toolwire gateway on {}", server.url());
    stopped().await;
    // Draining: /readyz turns 503 at once, new requests are refused with a retryable 503,
    // the calls in flight go on up to the deadline; a second signal stops at once.
    let deadline = args.drain_timeout;
    say_err!(
        "toolwire gateway: draining: {} request(s) in flight, new ones refused (up to {} s; a second signal stops at once)",
        server.in_flight(),
        deadline.as_secs_f64()
    );
    gateway.drain();
    tokio::select! {
        drained = server.drain(deadline) => match drained.abandoned {
            0 => say_err!("toolwire gateway: drained; stopping"),
            n => say_err!("toolwire gateway: {n} request(s) still in flight after {} s; stopping", deadline.as_secs_f64()),
        },
        () = stopped() => say_err!("toolwire gateway: stopping at once"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Serves over stdio until stdin ends; a signal drains as over HTTP: new requests are
/// refused, the calls in flight complete up to `--drain-timeout` with their answers written
/// (answers to the gateway's own requests still taken), a second signal stops at once.
async fn serve_stdio(
    gateway: &Arc<Gateway>,
    args: &GatewayArgs,
    options: toolwire_server::Options,
) -> Result<ExitCode, Failure> {
    let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
    let serving = gateway.serve_stdio_until(options, async {
        let _ = stopping.await;
    });
    let mut serving = std::pin::pin!(serving);
    let ended = tokio::select! {
        ended = &mut serving => ended,
        () = stopped() => {
            let deadline = args.drain_timeout;
            say_err!(
                "toolwire gateway: draining: new requests are refused, the calls in flight go on (up to {} s; a second signal stops at once)",
                deadline.as_secs_f64()
            );
            gateway.drain();
            let _ = stop.send(());
            tokio::select! {
                ended = &mut serving => {
                    say_err!("toolwire gateway: drained; stopping");
                    ended
                }
                () = tokio::time::sleep(deadline) => {
                    say_err!("toolwire gateway: calls still in flight after {} s; stopping", deadline.as_secs_f64());
                    Ok(())
                }
                () = stopped() => {
                    say_err!("toolwire gateway: stopping at once");
                    Ok(())
                }
            }
        }
    };
    ended.map_err(|e| Failure::Remote(format!("stdio: {e}")))?;
    Ok(ExitCode::SUCCESS)
}

/// `--healthz URL`: one plain-HTTP GET on a loopback or pod address, its status line read.
/// Written out here (a request line, a status line) rather than with the HTTP client, which
/// brings TLS, proxies and pooling that a probe of the process's own port has no use for.
async fn healthz(url: &str) -> Result<ExitCode, Failure> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let uri: http::Uri = url
        .parse()
        .map_err(|e| Failure::Usage(format!("--healthz {url}: {e}")))?;
    if uri.scheme_str() != Some("http") {
        return Err(Failure::Usage(format!("--healthz {url}: an http:// URL")));
    }
    let host = uri.host().unwrap_or("127.0.0.1").trim_matches(['[', ']']);
    let port = uri.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::new();
        let mut chunk = [0u8; 256];
        while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 4096 {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&chunk[..n]);
        }
        Ok::<_, std::io::Error>(head)
    };
    let head = match tokio::time::timeout(Duration::from_secs(5), ask).await {
        Ok(Ok(head)) => head,
        Ok(Err(e)) => {
            say_err!("toolwire: {url}: {e}");
            return Ok(ExitCode::FAILURE);
        }
        Err(_) => {
            say_err!("toolwire: {url}: no answer within 5 s");
            return Ok(ExitCode::FAILURE);
        }
    };
    let status = String::from_utf8_lossy(&head);
    let status = status.lines().next().unwrap_or_default();
    if status.split(' ').nth(1) == Some("200") {
        Ok(ExitCode::SUCCESS)
    } else {
        say_err!("toolwire: {url}: {status}");
        Ok(ExitCode::FAILURE)
    }
}

/// How often the file is read again to see whether it changed.
const RELOAD_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Applies `file` again on SIGHUP (Unix) and whenever its contents change (read every
/// [`RELOAD_POLL`]): entries added start, removed ones stop, changed ones restart, the others
/// go on untouched. A file that does not load, or that the host refuses, leaves the running
/// configuration as it is and is tried again on every poll until it loads (an approval given
/// with `toolwire trust` changes nothing in the file); stderr says each outcome once.
/// The servers of the file are applied again; its `gateway` section (who may call, with
/// whose credentials) is read at start only: a change of it is reported, not applied. The pin
/// file (`pinTools`) is read on the same polls: a change of it checks every tool again, so an
/// approved tool comes back.
async fn reload_on_change(
    gateway: Arc<Gateway>,
    file: std::path::PathBuf,
    access: Option<serde_json::Value>,
    pins: Option<std::path::PathBuf>,
) {
    // The pin file as last read: a change (an approval, a rejection) re-checks every tool.
    let mut pinned = pins.as_ref().and_then(|p| std::fs::read(p).ok());
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut last = std::fs::read(&file).ok();
    // Why the last attempt was refused, while it was: the file is tried again on every poll
    // (an approval given since changes nothing in it), and the same refusal is said once.
    let mut refused: Option<String> = None;
    loop {
        #[cfg(unix)]
        let asked = match hangup.as_mut() {
            Some(hangup) => tokio::select! {
                _ = hangup.recv() => true,
                () = tokio::time::sleep(RELOAD_POLL) => false,
            },
            None => {
                tokio::time::sleep(RELOAD_POLL).await;
                false
            }
        };
        #[cfg(not(unix))]
        let asked = {
            tokio::time::sleep(RELOAD_POLL).await;
            false
        };
        if let Some(pins) = &pins {
            let now = std::fs::read(pins).ok();
            if now != pinned {
                pinned = now;
                gateway.host().repin();
            }
        }
        let now = std::fs::read(&file).ok();
        if !asked && now == last && refused.is_none() {
            continue;
        }
        let changed = now != last;
        last = now;
        let why = match (asked, changed) {
            (true, _) => "SIGHUP",
            (false, true) => "the file changed",
            (false, false) => "tried again",
        };
        let loaded = trust::load_config_unattended(&file).and_then(|config| {
            if config.gateway != access {
                say_err!(
                    "toolwire gateway: the \"gateway\" section of {} changed; it applies when the gateway restarts",
                    file.display()
                );
            }
            gateway
                .reload(&config)
                .map_err(|e| Failure::Usage(one_line(&e)))
        });
        match loaded {
            Ok(done) => {
                refused = None;
                say_err!(
                    "toolwire gateway: reloaded {} ({why}): {done}",
                    file.display()
                );
            }
            Err(Failure::Usage(e) | Failure::Remote(e)) => {
                if refused.as_ref() != Some(&e) {
                    // Counted once per refusal, as it is said.
                    gateway.reload_refused();
                    say_err!(
                        "toolwire gateway: {} not reloaded ({why}), the running configuration stays: {e}\n(it is tried again every {} s until it loads, or on SIGHUP)",
                        file.display(),
                        RELOAD_POLL.as_secs()
                    );
                }
                refused = Some(e);
            }
        }
    }
}

/// Resolves on Ctrl-C, and on Unix on SIGTERM too (what a service manager sends).
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

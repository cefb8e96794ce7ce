//! From the command line to a client: the shared settings (`--protocol`, `--timeout`,
//! `--header`, `--bearer`, `--proxy`), one `--config` entry through
//! `ServerConfig::connect_with`, every entry through a `Host`, and what `login` is for.

use super::*;

/// The client settings every command shares: `--protocol`, `--timeout`, and the default
/// reconnect policy (a stdio server that dies is started again; `-v` shows it).
pub(crate) fn client_builder(cli: &Cli) -> Result<toolwire::ClientBuilder, Failure> {
    let mut builder = Client::builder("toolwire-cli", env!("CARGO_PKG_VERSION"))
        .mode(mode(&cli.protocol)?)
        .reconnect(ReconnectPolicy::default())
        // The CLI writes views out (`apps get`), so servers may offer their UI tools.
        .apps(true)
        .handler(
            crate::elicit::capabilities(),
            crate::elicit::handler(crate::elicit::interactive(cli)),
        );
    if let Some(level) = &cli.log_level {
        let level: LoggingLevel = serde_json::from_value(json!(level)).map_err(|_| {
            Failure::Usage(format!(
                "--log-level {level}: expected debug, info, notice, warning, error, critical, alert or emergency"
            ))
        })?;
        builder = builder.log_level(level);
    }
    if let Some(secs) = cli.timeout {
        if !(secs.is_finite() && secs > 0.0) {
            return Err(Failure::Usage(format!(
                "--timeout {secs}: must be a positive number"
            )));
        }
        // Past what a Duration holds is "no limit", not a panic.
        let t = Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
        builder = builder.timeouts(t, t.min(Duration::from_secs(5)));
    }
    Ok(builder)
}

/// `--header` and `--bearer` on an HTTP transport's settings.
pub(crate) fn http_options(
    cli: &Cli,
    mut b: toolwire::HttpTransportBuilder,
) -> Result<toolwire::HttpTransportBuilder, Failure> {
    // A private certificate authority is trusted the way curl and Python are told to.
    b = b.tls_roots(toolwire::TlsRoots::from_env());
    for h in &cli.headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| Failure::Usage(format!("--header {h:?}: expected 'Name: value'")))?;
        // A refused header is the error of `build`.
        b = b.header(name.trim(), value.trim());
    }
    if let Some(token) = &cli.bearer {
        // Replaces whatever credentials the settings had (a configured `Authorization`).
        b = b.credentials(token.as_str());
    }
    match cli.proxy.as_deref() {
        Some("none") => b = b.proxy(Proxy::Disabled),
        Some(url) => b = b.proxy(Proxy::Url(url.to_owned())),
        None => {}
    }
    if let Some(socket) = &cli.unix_socket {
        b = b.unix_socket(socket);
    }
    Ok(b)
}

/// `--header` and `--bearer` given for a stdio server are a usage error.
pub(crate) fn stdio_only(cli: &Cli) -> Result<(), Failure> {
    if cli.headers.is_empty() && cli.bearer.is_none() {
        Ok(())
    } else {
        Err(Failure::Usage(
            "--header and --bearer apply to HTTP servers only".into(),
        ))
    }
}

/// Where a stdio child's stderr goes: the log with -v, nowhere without.
pub(crate) fn stderr_mode(cli: &Cli) -> StderrMode {
    if cli.verbose > 0 {
        StderrMode::Tracing
    } else {
        StderrMode::Discard
    }
}

/// `--config FILE`: one entry (`--server`, or the server of a routed `tools call`), or every
/// entry at once (`servers`, `tools list`).
pub(crate) async fn with_config(
    cli: &Cli,
    file: &std::path::Path,
    builder: toolwire::ClientBuilder,
) -> Result<ExitCode, Failure> {
    let config = trust::load_config(file)?;
    let routed = match (&cli.server, &cli.command) {
        (Some(server), _) => Some((server.clone(), None)),
        (
            None,
            Command::Tools {
                command: ToolsCommand::Call { name, .. },
            },
        ) => {
            let (server, tool) = routed_call(cli, &config, name, builder.clone()).await?;
            Some((server, Some(tool)))
        }
        _ => None,
    };
    let Some((server, tool)) = routed else {
        return every_server(cli, &config, builder).await;
    };
    let mut entry = config_entry(&config, &server)?.clone();
    let _ = login::NAMED.set(entry_named(Some(file), &server));
    if cli.timeout.is_some() {
        // `--timeout` wins over the entry's.
        entry.timeout = None;
    }
    if entry.url().is_none() {
        stdio_only(cli)?;
    }
    let pins = crate::pins::of_cli(cli)?;
    // The same path as `Host` takes: Streamable HTTP falls back to HTTP+SSE, and every
    // reconnect is made from the entry's settings.
    let client = entry.connect_with(
        builder,
        |http| remote(cli, &entry, http),
        |stdio| stdio.with_stderr(stderr_mode(cli)),
    )?;
    let checked = match &pins {
        Some(pins) => crate::pins::check(&client, &server, pins).await,
        None => Ok(()),
    };
    let outcome = match checked {
        Ok(()) => session(cli, &client, tool.as_deref()).await,
        Err(e) => Err(e),
    };
    client.close().await;
    outcome
}

/// A host of the file's servers as the command line asks: its naming, and its pins
/// (`--pin-tools`).
fn host_builder(
    cli: &Cli,
    builder: toolwire::ClientBuilder,
) -> Result<toolwire_host::HostBuilder, Failure> {
    let host = Host::builder(builder).naming(cli.names);
    Ok(match crate::pins::of_cli(cli)? {
        Some(pins) => host.pin_tools(pins),
        None => host,
    })
}

/// The entry and tool a `tools call NAME` with `--config` reaches: `SERVER__TOOL` of an entry
/// of the file, an alias the file gives, or else any name the file's servers list under
/// `--names` (a provider-safe short form), which takes starting them to learn.
async fn routed_call(
    cli: &Cli,
    config: &ServersConfig,
    name: &str,
    builder: toolwire::ClientBuilder,
) -> Result<(String, String), Failure> {
    if let Some((server, tool)) = name.split_once(DEFAULT_SEPARATOR)
        && config.get(server).is_some()
    {
        return Ok((server.to_owned(), tool.to_owned()));
    }
    let aliased = config.servers.iter().find_map(|entry| {
        let (tool, _) = entry.aliases.iter().find(|(_, alias)| *alias == name)?;
        Some((entry.name.clone(), tool.clone()))
    });
    if let Some(found) = aliased {
        return Ok(found);
    }
    let host = login::stored_logins(host_builder(cli, builder)?)
        .start(config)
        .map_err(|e| Failure::Usage(one_line(&e)))?;
    host.settled(settle_limit(cli)).await;
    let listed = host
        .load()
        .get(name)
        .map(|t| (t.server.to_string(), t.tool.name.clone()));
    host.shutdown().await;
    listed.ok_or_else(|| {
        Failure::Usage(format!(
            "tools call {name}: no server of the file lists a tool of that name (name it as SERVER{DEFAULT_SEPARATOR}TOOL, give --server, or see `tools list`)"
        ))
    })
}

/// How long a host's servers have to come up: `--timeout`, else a minute.
fn settle_limit(cli: &Cli) -> Duration {
    cli.timeout
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .unwrap_or(Duration::from_secs(60))
}

/// How a command line names one entry of a configuration file.
pub(crate) fn entry_named(file: Option<&std::path::Path>, server: &str) -> String {
    let file = file.map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    format!(
        "--config {} --server {server}",
        shlex::try_quote(&file).unwrap_or_default()
    )
}

/// The entry named `server`, enabled.
pub(crate) fn config_entry<'a>(
    config: &'a ServersConfig,
    server: &str,
) -> Result<&'a ServerConfig, Failure> {
    let file = config
        .file
        .as_deref()
        .map_or_else(String::new, |f| format!(" in {}", f.display()));
    let entry = config
        .get(server)
        .ok_or_else(|| Failure::Usage(format!("no server `{server}`{file}")))?;
    if entry.disabled {
        return Err(Failure::Usage(format!("server `{server}` is disabled")));
    }
    Ok(entry)
}

/// A remote entry's transport settings with the command line's and, unless it carries
/// credentials of its own, the stored OAuth login (its `oauth` settings under the
/// command line's).
pub(crate) fn remote(
    cli: &Cli,
    entry: &ServerConfig,
    b: toolwire::HttpTransportBuilder,
) -> Result<toolwire::HttpTransportBuilder, Failure> {
    let b = http_options(cli, b)?;
    let url = entry.url().unwrap_or_default().to_owned();
    let args = login::LoginArgs::default().or_entry(entry.oauth.as_ref());
    login::stored(&url, b, &args)
}

/// The server a `login` or `logout` is for: `--url`, or a remote `--config` entry without an
/// `Authorization` header; its transport settings and its `oauth` settings.
pub(crate) fn login_target(
    cli: &Cli,
) -> Result<(String, toolwire::HttpTransportBuilder, Option<OAuthEntry>), Failure> {
    match (&cli.url, &cli.config, &cli.server) {
        (Some(url), _, _) => Ok((
            url.clone(),
            http_options(cli, HttpTransport::builder(url.clone()))?,
            None,
        )),
        (None, Some(file), Some(server)) => {
            let config = trust::load_config(file)?;
            let entry = config_entry(&config, server)?;
            let Some(url) = entry.url() else {
                return Err(Failure::Usage(format!(
                    "server `{server}` is a stdio server: it has no login"
                )));
            };
            if entry.has_authorization() {
                return Err(Failure::Usage(format!(
                    "server `{server}` has an Authorization header of its own: it does not use OAuth"
                )));
            }
            let http = http_options(
                cli,
                entry
                    .http_transport()
                    .map_err(|e| Failure::Usage(one_line(&e)))?,
            )?;
            Ok((url.to_owned(), http, entry.oauth.clone()))
        }
        _ => Err(Failure::Usage(
            "login and logout need --url URL, or --config FILE --server NAME".into(),
        )),
    }
}

/// `servers` and `tools list` over every entry of the file, side by side.
pub(crate) async fn every_server(
    cli: &Cli,
    config: &ServersConfig,
    builder: toolwire::ClientBuilder,
) -> Result<ExitCode, Failure> {
    let spans = crate::merged::spans_every_server(&cli.command);
    if !spans
        && !matches!(
            cli.command,
            Command::Servers
                | Command::Batch
                | Command::Tools {
                    command: ToolsCommand::List | ToolsCommand::Search { .. }
                }
        )
    {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        return Err(Failure::Usage(format!(
            "with --config, this command needs --server NAME (one of: {})",
            names.join(", ")
        )));
    }
    // Stored logins for the remote entries; no flow runs for many servers at once.
    let host = login::stored_logins(host_builder(cli, builder)?);
    let host = host
        .start(config)
        .map_err(|e| Failure::Usage(one_line(&e)))?;
    // Every server has until `--timeout` (else a minute) to come up.
    host.settled(settle_limit(cli)).await;
    if matches!(cli.command, Command::Batch) {
        let code = batch::run(batch::Target::Host(&host)).await;
        host.shutdown().await;
        return Ok(code);
    }
    if spans {
        let outcome = crate::merged::run(cli, &host).await;
        host.shutdown().await;
        return outcome;
    }
    let servers: Vec<Value> = config
        .servers
        .iter()
        .map(|entry| {
            let transport = match entry.transport {
                ServerTransport::Stdio { .. } => "stdio",
                ServerTransport::Sse { .. } => "sse",
                _ => "http",
            };
            let (state, era, tools, reason) = match host.state(&entry.name) {
                Some(ServerState::Ready { version, tools }) => {
                    ("ready", Some(version.to_string()), Some(tools), None)
                }
                Some(ServerState::Failed { reason }) => ("failed", None, None, Some(reason)),
                Some(ServerState::NeedsLogin { reason }) => {
                    ("needs-login", None, None, Some(reason))
                }
                Some(ServerState::Reconnecting { .. }) => ("reconnecting", None, None, None),
                Some(ServerState::Disabled) => ("disabled", None, None, None),
                _ => ("starting", None, None, None),
            };
            let mut server = json!({"name": entry.name, "transport": transport, "state": state,
                   "protocolVersion": era, "tools": tools, "reason": reason});
            if state == "needs-login" {
                server["login"] = json!(format!(
                    "toolwire {} login",
                    entry_named(config.file.as_deref(), &entry.name)
                ));
            }
            server
        })
        .collect();
    let failed: Vec<&Value> = servers
        .iter()
        .filter(|s| s["state"] == "failed" || s["state"] == "needs-login")
        .collect();
    let reached = servers.iter().any(|s| s["state"] == "ready");
    let tools = host.tools();
    // What `tools` shows: every tool, or the search's hits with their scores.
    let shown: Vec<(std::sync::Arc<str>, toolwire_host::HostTool, Option<f32>)> = match &cli.command
    {
        Command::Tools {
            command: ToolsCommand::Search { query, limit },
        } => host
            .search_tools(&query.join(" "), *limit)
            .into_iter()
            .map(|m| (m.name, m.tool, Some(m.score)))
            .collect(),
        _ => tools
            .names()
            .into_iter()
            .filter_map(|name| Some((std::sync::Arc::from(name), tools.get(name)?.clone(), None)))
            .collect(),
    };
    let collisions: Vec<String> = tools.collisions().iter().map(ToString::to_string).collect();
    if cli.json {
        let mut document = json!({"servers": servers});
        if !collisions.is_empty() {
            document["collisions"] = json!(collisions);
        }
        if matches!(cli.command, Command::Tools { .. }) {
            let listed: Vec<Value> = shown
                .iter()
                .map(|(name, t, score)| {
                    let mut entry =
                        json!({"name": &**name, "server": &*t.server, "tool": &*t.tool});
                    if let Some(score) = score {
                        entry["score"] = json!(score);
                    }
                    entry
                })
                .collect();
            document["tools"] = Value::Array(listed);
        }
        print_json(&document);
    } else {
        for collision in &collisions {
            say_err!("toolwire: {collision}");
        }
        for s in &failed {
            let name = s["name"].as_str().unwrap_or("");
            match s["login"].as_str() {
                Some(login) => say_err!("toolwire: server `{name}` needs a login: run `{login}`"),
                None => say_err!(
                    "toolwire: server `{name}` failed: {}",
                    s["reason"].as_str().unwrap_or("")
                ),
            }
        }
        if matches!(cli.command, Command::Servers) {
            for s in &servers {
                let detail = match (s["protocolVersion"].as_str(), s["tools"].as_u64()) {
                    (Some(era), Some(n)) => {
                        format!("  {era}  {n} tool{}", if n == 1 { "" } else { "s" })
                    }
                    _ => String::new(),
                };
                say!(
                    "{}  {}  {}{detail}",
                    s["name"].as_str().unwrap_or(""),
                    s["transport"].as_str().unwrap_or(""),
                    s["state"].as_str().unwrap_or("")
                );
            }
        } else {
            for (name, t, _) in &shown {
                let description = t.tool.description.as_deref().unwrap_or_default();
                say!("{name}  {description}");
            }
        }
    }
    host.shutdown().await;
    let enabled = config.servers.iter().any(|s| !s.disabled);
    if enabled && !reached {
        return Err(Failure::Remote("no server could be reached".into()));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn mode(protocol: &str) -> Result<ProtocolMode, Failure> {
    if protocol == "auto" {
        return Ok(ProtocolMode::Auto);
    }
    match ProtocolVersion::new(protocol) {
        Ok(v) if v.is_supported() => Ok(ProtocolMode::Pinned(v)),
        _ => Err(Failure::Usage(format!(
            "--protocol {protocol}: expected auto, 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26 or 2024-11-05"
        ))),
    }
}

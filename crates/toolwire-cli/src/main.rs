//! `toolwire`: list and call the tools of an MCP server from the command line.
//!
//! ```text
//! toolwire [--url URL | --stdio 'CMD ARGS' | --config FILE [--server NAME]]
//!          [--protocol auto|2026-07-28|2025-11-25|2025-06-18|2025-03-26|2024-11-05]
//!          [--header 'Name: value']... [--bearer TOKEN] [--proxy URL|none] [--known-tools FILE]
//!          [--timeout SECS] [--json] [-v|-vv] COMMAND
//! ```
//! With neither `--url` nor `--stdio` nor `--config` it runs against the embedded reference
//! server. With `--config FILE --server NAME` every command talks to that entry of an
//! `mcpServers` file; without `--server`, `servers` and `tools list` take every entry at once
//! and `tools call SERVER__TOOL` routes to its server. `batch` answers one JSON request a line
//! from stdin over one client (see `batch.rs`). Exit
//! codes: 0 success, 1 the tool returned `isError`, 2 usage error, 3 connection, protocol or
//! server error (one line on stderr).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool's output is its interface"
)]

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use base64::Engine as _;
use clap::{Parser, Subcommand};
use serde_json::{Map, Value, json};
use toolwire::{
    CallOptions, CallToolResult, Client, ContentBlock, Error, HttpTransport, LoggingLevel,
    ProtocolMode, ProtocolVersion, Proxy, ReconnectPolicy, ServerNotification, StderrMode,
    StdioConfig, Tool,
};
use toolwire_host::{
    DEFAULT_SEPARATOR, Host, OAuthEntry, ServerConfig, ServerState, ServerTransport, ServersConfig,
};

/// The static build's allocator (why: the `mimalloc` dependency in Cargo.toml).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[macro_use]
mod terminal;
mod args;
mod batch;
mod browse;
mod connect;
mod docs;
mod doctor;
mod elicit;
mod gateway;
mod hints;
mod import;
mod logging;
mod login;
mod merged;
mod pins;
mod render;
mod trust;
mod watch;

use args::*;
use connect::*;
use render::*;

/// Why the command failed, and its exit code.
enum Failure {
    /// Exit 2.
    Usage(String),
    /// Exit 3.
    Remote(String),
}

/// An error and its causes, on one line.
fn one_line(e: &dyn std::error::Error) -> String {
    toolwire::ErrorChain(e).to_string()
}

/// A client that cannot be made: settings the transport refuses (a header, a URL) are the
/// user's to fix; anything else (a command that cannot start) is reported as the server's.
fn not_connected(e: Error) -> Failure {
    match &e {
        Error::Connection(toolwire::ConnectionError::Transport(t))
            if matches!(**t, toolwire::TransportError::Setup(_)) =>
        {
            Failure::Usage(one_line(&e))
        }
        _ => e.into(),
    }
}

impl From<toolwire_host::ConnectError> for Failure {
    fn from(e: toolwire_host::ConnectError) -> Self {
        match e {
            toolwire_host::ConnectError::Client { source, .. } => not_connected(source),
            e => Self::Usage(one_line(&e)),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        match login::explain(&e) {
            Some(hint) => Self::Remote(hint),
            None => Self::Remote(one_line(&e)),
        }
    }
}

/// The runtime a command runs on: a client command on two worker threads; a server (`serve`,
/// `gateway`) on `--threads` of them, by default one per CPU, and with `--threads 1` on the
/// current thread alone (no wake-ups between threads, no work stealing).
fn runtime(command: &Command) -> std::io::Result<tokio::runtime::Runtime> {
    let threads = match command {
        Command::Serve(args) => args.threads,
        Command::Gateway(args) => args.threads,
        _ => Some(2),
    };
    let threads = threads.map_or_else(
        || std::thread::available_parallelism().map_or(2, usize::from),
        usize::from,
    );
    if threads == 1 {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(args::hoisted(std::env::args_os().collect())) {
        Ok(cli) => cli,
        Err(e) => {
            let tip = hints::misplaced_option(&e);
            let _ = e.print();
            if let Some(tip) = tip {
                say_err!("{tip}");
            }
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let gateway = matches!(&cli.command, Command::Gateway(_));
    let level = match cli.verbose {
        // A long-running gateway says what its upstreams do (each state change, under the
        // upstream's name) and every warning about its own settings.
        0 if gateway => tracing::Level::WARN,
        // Without -v stderr carries only the one-line reason of a failure.
        0 => tracing::Level::ERROR,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    // `gateway --audit`: its audit lines at info, whatever the rest is at.
    let audit = matches!(&cli.command, Command::Gateway(args) if args.audit);
    let audit_level = if audit {
        level.max(tracing::Level::INFO)
    } else {
        level
    };
    let filter = logging::filter(level, audit_level, gateway);
    // `RUST_LOG`, as in every tracing program, replaces all of that when it is set.
    let rust_log = std::env::var("RUST_LOG")
        .ok()
        .filter(|directives| !directives.trim().is_empty());
    let env_filter = match rust_log.map(|d| tracing_subscriber::EnvFilter::try_new(&d)) {
        None => None,
        Some(Ok(env_filter)) => Some(env_filter),
        Some(Err(e)) => {
            say_err!("toolwire: RUST_LOG: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime(&cli.command) {
        Ok(r) => r,
        Err(e) => {
            say_err!("toolwire: cannot start the runtime: {e}");
            return ExitCode::from(3);
        }
    };
    #[cfg(feature = "otlp")]
    let otlp = match cli.otlp_endpoint.as_deref().map(|endpoint| {
        let _inside = runtime.enter();
        let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "toolwire".into());
        toolwire_telemetry::Otlp::new(endpoint, &service)
    }) {
        None => None,
        Some(Ok(otlp)) => Some(otlp),
        Some(Err(e)) => {
            say_err!("toolwire: --otlp-endpoint: {e}");
            return ExitCode::from(2);
        }
    };
    {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal());
        let logs = match env_filter {
            Some(env_filter) => logs.with_filter(env_filter).boxed(),
            None => logs.with_filter(filter).boxed(),
        };
        #[cfg(feature = "otlp")]
        let dispatch = logging::dispatch(logs, otlp.as_ref().map(toolwire_telemetry::Otlp::layer));
        #[cfg(not(feature = "otlp"))]
        let dispatch = logging::dispatch(logs, None::<logging::NoCollector>);
        dispatch.init();
    }
    let json = cli.json;
    // Ctrl-C during a client command drops it, and with it the calls in flight: each is
    // cancelled at its server (`notifications/cancelled`, or its request closed), which the
    // drivers get a moment to send. `serve` and `gateway` stop on it themselves.
    let interruptible = !matches!(cli.command, Command::Serve(_) | Command::Gateway(_));
    let mut interrupted = false;
    let outcome = runtime.block_on(async {
        if !interruptible {
            return run(cli).await;
        }
        tokio::select! {
            outcome = run(cli) => outcome,
            Ok(()) = tokio::signal::ctrl_c() => {
                interrupted = true;
                Ok(ExitCode::from(130))
            }
        }
    });
    if interrupted {
        runtime.block_on(async { tokio::time::sleep(CANCEL_GRACE).await });
        say_err!("toolwire: interrupted; what was in flight was cancelled");
    }
    // What is left goes out while the runtime that sends it still runs.
    #[cfg(feature = "otlp")]
    if let Some(otlp) = otlp {
        otlp.shutdown();
    }
    // Not a drop, which would wait for blocking tasks: `serve --stdio` keeps one reading stdin,
    // and a server that is done must exit now, not after the client's next line.
    runtime.shutdown_background();
    let (reason, exit) = match outcome {
        Ok(code) => return code,
        Err(Failure::Usage(reason)) => (reason, 2),
        Err(Failure::Remote(reason)) => match hints::tls_hint(&reason) {
            Some(hint) => (format!("{reason} ({hint})"), 3),
            None => (reason, 3),
        },
    };
    say_err!("toolwire: {reason}");
    // `--json` promises one document on stdout: a failure is one too, as `batch` writes it.
    if json && !terminal::wrote_stdout() {
        render::print_json(&serde_json::json!({"error": {"message": reason, "exit": exit}}));
    }
    ExitCode::from(exit)
}

/// How long an interrupted command leaves its drivers to send the cancellations of the calls
/// it dropped.
const CANCEL_GRACE: Duration = Duration::from_millis(300);

async fn run(cli: Cli) -> Result<ExitCode, Failure> {
    if let Command::Completions { shell } = &cli.command {
        return docs::completions(*shell);
    }
    if let Command::Man = &cli.command {
        return docs::man();
    }
    if let Command::Import(args) = &cli.command {
        return import::run(cli.json, args);
    }
    if let Command::Trust { file } = &cli.command {
        return trust::approve(file);
    }
    if let Command::Pins { file, command } = &cli.command {
        return pins::run(cli.json, file.as_deref(), command);
    }
    if let Command::Serve(args) = &cli.command {
        return serve(args).await;
    }
    if let Command::Gateway(args) = &cli.command {
        return gateway::run(&cli, args).await;
    }
    // One trace per client command: its requests (the handshake among them) are the
    // children of this span.
    let root = toolwire_telemetry::internal("toolwire");
    tracing::Instrument::instrument(client_command(cli), root).await
}

/// Every command that is a client of a server.
async fn client_command(cli: Cli) -> Result<ExitCode, Failure> {
    if let Some(url) = &cli.url {
        let _ = login::NAMED.set(format!("--url {url}"));
    }
    match &cli.command {
        Command::Auth {
            command: AuthCommand::Status,
        } => {
            return login::status(&cli).await.map(|()| ExitCode::SUCCESS);
        }
        Command::Login(args) => {
            let (url, http, entry) = login_target(&cli)?;
            return login::login(&cli, &url, http, &args.or_entry(entry.as_ref()))
                .await
                .map(|()| ExitCode::SUCCESS);
        }
        Command::Logout => {
            let (url, http, _) = login_target(&cli)?;
            return login::logout(&cli, &url, http)
                .await
                .map(|()| ExitCode::SUCCESS);
        }
        _ => {}
    }
    if matches!(cli.command, Command::Doctor) {
        return doctor::run(&cli, client_builder(&cli)?).await;
    }
    if let Some(file) = &cli.config {
        return with_config(&cli, file, client_builder(&cli)?).await;
    }
    if matches!(cli.command, Command::Servers) {
        return Err(Failure::Usage("servers needs --config FILE".into()));
    }
    // The embedded reference server, when no server is named.
    let mut embedded = None;
    let url = match (&cli.url, &cli.stdio) {
        (Some(url), _) => Some(url.clone()),
        (None, Some(_)) => None,
        (None, None) => {
            let server = toolwire_refserver::serve_http(
                SocketAddr::from(([127, 0, 0, 1], 0)),
                toolwire_refserver::Options::default(),
            )
            .await
            .map_err(|e| Failure::Remote(format!("cannot start the embedded server: {e}")))?;
            let url = server.url();
            embedded = Some(server);
            Some(url)
        }
    };
    let builder = client_builder(&cli)?;
    let client = match (&url, &cli.stdio) {
        (Some(url), _) => {
            let mut b = http_options(&cli, HttpTransport::builder(url.clone()))?;
            // OAuth for a server the user named.
            if embedded.is_none() {
                b = login::stored(url, b, &login::LoginArgs::default())?;
            }
            // Streamable HTTP with the HTTP+SSE fallback; a reconnect builds a new transport.
            builder.connect_http(b).map_err(not_connected)?
        }
        (None, Some(command)) => {
            stdio_only(&cli)?;
            let words = shlex::split(command)
                .ok_or_else(|| Failure::Usage(format!("--stdio {command:?}: unbalanced quotes")))?;
            let Some((program, args)) = words.split_first() else {
                return Err(Failure::Usage("--stdio: empty command".into()));
            };
            builder.connect_stdio(StdioConfig::new(program, args).with_stderr(stderr_mode(&cli)))?
        }
        (None, None) => return Err(Failure::Usage("no server".into())),
    };
    let mut outcome = session(&cli, &client, None).await;
    client.close().await;
    if let (Some(url), Err(Failure::Remote(reason))) = (&cli.url, &mut outcome)
        && let Some(said) = hints::unreachable(url, reason)
    {
        *reason = said;
    }
    drop(embedded);
    outcome
}

/// Pre-loads `--known-tools`, then runs the command on one connected client. `tool` replaces
/// the name of `tools call` (a routed `server__tool`).
async fn session(cli: &Cli, client: &Client, tool: Option<&str>) -> Result<ExitCode, Failure> {
    if let Some(path) = &cli.known_tools {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(format!("--known-tools {}: {e}", path.display())))?;
        let tools: Vec<Tool> = serde_json::from_str(&text).map_err(|e| {
            Failure::Usage(format!(
                "--known-tools {}: not a JSON array of tools: {e}",
                path.display()
            ))
        })?;
        client.add_known_tools(tools).map_err(|e| {
            Failure::Usage(format!(
                "--known-tools {}: {}",
                path.display(),
                one_line(&e)
            ))
        })?;
    }
    command(cli, client, tool).await
}

async fn command(cli: &Cli, client: &Client, tool: Option<&str>) -> Result<ExitCode, Failure> {
    match &cli.command {
        Command::Serve(_)
        | Command::Gateway(_)
        | Command::Trust { .. }
        | Command::Pins { .. }
        | Command::Completions { .. }
        | Command::Man
        | Command::Import(_)
        | Command::Doctor
        | Command::Servers
        | Command::Login(_)
        | Command::Logout
        | Command::Auth { .. } => Ok(ExitCode::SUCCESS),
        Command::Batch => Ok(batch::run(batch::Target::Client(client)).await),
        Command::Watch {
            for_secs,
            resources,
        } => watch::watch(cli, client, *for_secs, resources).await,
        Command::Resources { command } => match command {
            ResourcesCommand::List => browse::list_resources(client, false, cli.json).await,
            ResourcesCommand::Templates => browse::list_resources(client, true, cli.json).await,
            ResourcesCommand::Read { uri } => browse::read(client, uri, cli.json).await,
        },
        Command::Apps { command } => match command {
            AppsCommand::List => browse::list_apps(client, cli.json).await,
            AppsCommand::Get { tool, out } => {
                browse::get_app(client, tool, out.as_deref(), cli.json).await
            }
        },
        Command::Skills { command } => match command {
            SkillsCommand::List => browse::list_skills(client, cli.json).await,
            SkillsCommand::Get { skill } => browse::get_skill(client, skill, cli.json).await,
        },
        Command::Prompts { command } => match command {
            PromptsCommand::List => browse::list_prompts(client, cli.json).await,
            PromptsCommand::Get { name, params } => {
                browse::get_prompt(client, name, params, cli.json).await
            }
        },
        Command::Complete {
            prompt,
            resource,
            argument,
            typed,
            context,
        } => {
            let reference = match (prompt, resource) {
                (Some(name), _) => toolwire::types::CompletionReference::prompt(name),
                (None, Some(uri)) => toolwire::types::CompletionReference::resource(uri),
                (None, None) => {
                    return Err(Failure::Usage(
                        "complete needs --prompt or --resource".into(),
                    ));
                }
            };
            browse::complete(client, reference, argument, typed, context, cli.json).await
        }
        Command::Info => {
            let n = client.ready().await?;
            let session = client.mcp_session_id();
            if cli.json {
                print_json(&json!({
                    "protocolVersion": n.version,
                    "serverInfo": n.server_info,
                    "capabilities": n.capabilities,
                    "sessionId": session,
                }));
            } else {
                say!("protocol version: {}", n.version);
                if let Some(info) = &n.server_info {
                    say!("server: {} {}", info.name, info.version);
                }
                say!(
                    "capabilities: {}",
                    serde_json::to_string(&n.capabilities).unwrap_or_default()
                );
                say!("session id: {}", session.as_deref().unwrap_or("(none)"));
                if let Some(instructions) = &n.instructions {
                    say!("instructions: {instructions}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ping => {
            client.ready().await?;
            let started = Instant::now();
            client.ping().await?;
            if cli.json {
                say!("{{}}");
            } else {
                say!("pong in {:.1} ms", started.elapsed().as_secs_f64() * 1000.0);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools {
            command: ToolsCommand::Search { query, limit },
        } => {
            client.list_tools().await?;
            let found = client.search_tools(&query.join(" "), *limit);
            if cli.json {
                let tools: Vec<Value> = found
                    .iter()
                    .map(|m| json!({"name": m.name, "score": m.score, "tool": &*m.tool}))
                    .collect();
                print_json(&json!({ "tools": tools }));
            } else {
                for m in &found {
                    say!(
                        "{}  {}",
                        m.name,
                        m.tool.description.as_deref().unwrap_or_default()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools {
            command: ToolsCommand::List,
        } => {
            let outcome = client.list_tools().await?;
            let snapshot = client.tools();
            // Those `--pin-tools` holds back are left out (said once, on stderr).
            let mut tools: Vec<(&str, &Tool)> = snapshot
                .iter()
                .filter(|(n, _)| !pins::is_held(n))
                .map(|(n, t)| (n, &**t.tool()))
                .collect();
            tools.sort_by(|a, b| a.0.cmp(b.0));
            if cli.json {
                let tools: Vec<&Tool> = tools.iter().map(|(_, t)| *t).collect();
                print_json(&json!({
                    "tools": tools,
                    "rejected": rejections(&outcome.rejected),
                    "unmirrored": rejections(&outcome.unmirrored),
                }));
            } else {
                // Without -v the session's warnings are not printed: say here what the listing
                // left out, or a missing tool would be a silent one.
                for r in &outcome.rejected {
                    say_err!("toolwire: tool excluded: {r}");
                }
                for r in &outcome.unmirrored {
                    say_err!("toolwire: tool kept without Mcp-Param-* headers: {r}");
                }
                for (name, tool) in tools {
                    let headers: Vec<String> = snapshot
                        .plan(name)
                        .map(|p| {
                            p.params()
                                .iter()
                                .map(|h| h.header_name().to_owned())
                                .collect()
                        })
                        .unwrap_or_default();
                    let description = tool.description.as_deref().unwrap_or("");
                    if headers.is_empty() {
                        say!("{name}  {description}");
                    } else {
                        say!("{name}  {description}  [{}]", headers.join(", "));
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools {
            command:
                ToolsCommand::Call {
                    name,
                    params,
                    args,
                    no_list,
                },
        } => {
            pins::refuse_held(tool.unwrap_or(name))?;
            call(
                cli,
                client,
                tool.unwrap_or(name),
                params,
                args.as_deref(),
                *no_list,
            )
            .await
        }
    }
}

/// How long `tools call` waits for the server to confirm the pages of a `-32042` answer when
/// `--timeout` does not say.
const URL_ELICITATION_WAIT: Duration = Duration::from_secs(300);

#[allow(clippy::too_many_arguments, reason = "one command's inputs")]
async fn call(
    cli: &Cli,
    client: &Client,
    name: &str,
    params: &[String],
    args: Option<&str>,
    no_list: bool,
) -> Result<ExitCode, Failure> {
    client.ready().await?;
    if !no_list && !client.tools().contains(name) {
        client.list_tools().await?;
    }
    let snapshot = client.tools();
    let properties = snapshot
        .get(name)
        .and_then(|t| t.tool().input_schema.decode_object().ok())
        .and_then(|mut schema| schema.remove("properties"));
    let mut arguments = Map::new();
    for p in params {
        let (key, raw) = p
            .split_once('=')
            .ok_or_else(|| Failure::Usage(format!("{p:?}: expected KEY=VALUE")))?;
        let schema = properties.as_ref().and_then(|ps| ps.get(key));
        arguments.insert(key.to_owned(), typed(schema, raw));
    }
    if let Some(json) = args {
        let Ok(Value::Object(extra)) = serde_json::from_str::<Value>(json) else {
            return Err(Failure::Usage(format!(
                "--args {json:?}: expected a JSON object"
            )));
        };
        arguments.extend(extra);
    }
    let arguments = Value::Object(arguments);
    let arguments_again = arguments.clone();
    let headers = client.call_headers(name, &arguments).unwrap_or_default();
    let interactive = std::io::stderr().is_terminal() && !cli.json;
    let result = client
        .call_tool_with_progress(name, arguments, CallOptions::default(), move |p| {
            if interactive {
                let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
                let message = terminal::safe(p.message.as_deref().unwrap_or(""));
                eprint!("\r\x1b[2K⠿ {}{total} {message}", p.progress);
            }
        })
        .await;
    if interactive {
        eprint!("\r\x1b[2K");
    }
    let result = match result {
        Err(Error::Input(toolwire::InputError::UrlElicitationRequired {
            elicitations, ..
        })) => {
            // The user completes the pages (at a terminal, with their consent); then once more.
            let wait = cli
                .timeout
                .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
                .unwrap_or(URL_ELICITATION_WAIT);
            if !elicit::complete(client, &elicitations, elicit::interactive(cli), wait).await {
                return Err(Failure::Remote(format!(
                    "`{name}` needs the page(s) above completed first; complete them, then run the command again"
                )));
            }
            client.call_tool(name, arguments_again).await?
        }
        other => other?,
    };
    if cli.json {
        print_json(&serde_json::to_value(&result).unwrap_or(Value::Null));
    } else {
        // The headers on stderr: stdout holds the result alone, for `X=$(toolwire tools call …)`.
        if client.carries_headers() {
            for (n, v) in &headers {
                say_err!("> {n}: {v}");
            }
        }
        render(&result);
    }
    Ok(if result.is_error() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

async fn serve(args: &ServeArgs) -> Result<ExitCode, Failure> {
    let mut options = toolwire_refserver::Options::default();
    options.server.eras = match args.eras.as_str() {
        "both" => toolwire_refserver::Eras::Both,
        "modern" => toolwire_refserver::Eras::Modern,
        "legacy" => toolwire_refserver::Eras::Legacy,
        other => {
            return Err(Failure::Usage(format!(
                "--eras {other}: expected both, modern or legacy"
            )));
        }
    };
    if args.json_responses {
        options.server.framing = toolwire_refserver::Framing::Json;
    }
    options.faults.latency = Duration::from_millis(args.latency_ms);
    options.server.era_repair = args.era_repair;
    options.register_delay = Duration::from_millis(args.register_delay_ms);
    options.faults.reject_accept = args.reject_accept.clone();
    options.faults.fail_429 = args.fail_429;
    options.faults.fail_503 = args.fail_503;
    options.faults.fail_503_every = args.fail_503_every;
    options.faults.session_expiry = args.session_expiry;
    options.faults.cut_sse_every = args.cut_sse_every;
    options.server.nodelay = !args.nagle;
    options.broken_tools = args.broken_tools;
    options.faults.exit_after_calls = args.exit_after_calls;
    options.server.sse = args.sse;
    options.task_fixtures = args.task_fixtures;
    options.synthetic_tools = args.synthetic_tools;
    options.tally.clone_from(&args.tally);
    if args.stdio {
        toolwire_refserver::serve_stdio(options)
            .await
            .map_err(|e| Failure::Remote(format!("stdio: {e}")))?;
        return Ok(ExitCode::SUCCESS);
    }
    let server = match listen_at(args.unix_socket.as_ref(), args.http, 8080)? {
        #[cfg(unix)]
        Listen::Unix(socket) => toolwire_refserver::serve_http_unix(&socket, options)
            .await
            .map_err(|e| Failure::Remote(format!("cannot listen on {}: {e}", socket.display())))?,
        Listen::Tcp(addr) => toolwire_refserver::serve_http(addr, options)
            .await
            .map_err(|e| Failure::Remote(format!("cannot listen on {addr}: {e}")))?,
    };
    match server.unix_socket() {
        Some(socket) => say_err!(
            "toolwire reference server on {} (Unix socket {})",
            server.url(),
            socket.display()
        ),
        None => say_err!("toolwire reference server on {}", server.url()),
    }
    server.wait().await;
    Ok(ExitCode::SUCCESS)
}

/// Where `serve` and `gateway` listen.
enum Listen {
    /// A Unix domain socket.
    #[cfg(unix)]
    Unix(PathBuf),
    /// TCP.
    Tcp(SocketAddr),
}

/// `--unix-socket PATH` (refused where there are none), else `--http ADDR`, else loopback at
/// `port`.
fn listen_at(
    unix_socket: Option<&PathBuf>,
    http: Option<SocketAddr>,
    port: u16,
) -> Result<Listen, Failure> {
    match unix_socket {
        #[cfg(not(unix))]
        Some(_) => Err(Failure::Usage(
            "--unix-socket: this platform has no Unix sockets".into(),
        )),
        #[cfg(unix)]
        Some(socket) => Ok(Listen::Unix(socket.clone())),
        None => {
            Ok(Listen::Tcp(http.unwrap_or_else(|| {
                SocketAddr::from(([127, 0, 0, 1], port))
            })))
        }
    }
}

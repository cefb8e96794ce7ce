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

#[macro_use]
mod terminal;
mod batch;
mod browse;
mod login;
mod trust;

/// List and call the tools of an MCP server (stdio or Streamable HTTP, both protocol eras).
#[derive(Debug, Parser)]
#[command(name = "toolwire", version)]
struct Cli {
    /// The server's Streamable HTTP endpoint.
    #[arg(long, conflicts_with_all = ["stdio", "config"])]
    url: Option<String>,
    /// An `mcpServers` configuration file (the form Claude, Cursor, VS Code, Windsurf and
    /// Gemini CLI write).
    #[arg(long, value_name = "FILE", conflicts_with = "stdio")]
    config: Option<PathBuf>,
    /// With --config: the entry every command talks to.
    #[arg(long, value_name = "NAME", requires = "config")]
    server: Option<String>,
    /// Start the server as a child process: the command line, split like a POSIX shell.
    #[arg(long, value_name = "CMD ARGS")]
    stdio: Option<String>,
    /// The protocol version, or `auto` (probe 2026-07-28, fall back to initialize).
    #[arg(long, default_value = "auto")]
    protocol: String,
    /// An extra HTTP header, `Name: value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// A bearer token for HTTP.
    #[arg(long)]
    bearer: Option<String>,
    /// The HTTP proxy for --url: `http://[user:password@]host:port`, or `none` to go direct
    /// (default: HTTPS_PROXY / HTTP_PROXY / ALL_PROXY and NO_PROXY from the environment).
    #[arg(long, value_name = "URL|none", requires = "url")]
    proxy: Option<String>,
    /// A JSON array of tool definitions to pre-load as known tools.
    #[arg(long, value_name = "FILE")]
    known_tools: Option<PathBuf>,
    /// Request timeout in seconds.
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Ask the server for log messages at this level and above (debug, info, notice,
    /// warning, error, critical, alert, emergency); `watch` prints them.
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Print exactly one JSON document on stdout (anywhere on the command line).
    #[arg(long, global = true)]
    json: bool,
    /// Log to stderr (-v: info and warnings, -vv: debug).
    #[arg(short, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Negotiated version, server info, capabilities, session id.
    Info,
    /// Ping the server.
    Ping,
    /// With --config: every server of the file, its transport, state, era and tool count.
    Servers,
    /// List or call tools.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// List or read the server's resources.
    Resources {
        #[command(subcommand)]
        command: ResourcesCommand,
    },
    /// List or get the server's prompts.
    Prompts {
        #[command(subcommand)]
        command: PromptsCommand,
    },
    /// List the server's skills, or load one (its SKILL.md, checked against the manifest and
    /// the listing).
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// Suggestions for an argument of a prompt or a resource template.
    Complete {
        /// The prompt.
        #[arg(
            long,
            conflicts_with = "resource",
            required_unless_present = "resource"
        )]
        prompt: Option<String>,
        /// The resource template (its URI template).
        #[arg(long)]
        resource: Option<String>,
        /// The argument to complete.
        argument: String,
        /// What has been typed so far.
        #[arg(default_value = "")]
        typed: String,
        /// Other arguments already chosen, as KEY=VALUE.
        #[arg(value_name = "KEY=VALUE")]
        context: Vec<String>,
    },
    /// Print the server's notifications as they come (log messages, list changes, resource
    /// updates, …), one JSON line each with --json, until the server goes or --for passes.
    Watch {
        /// Stop after this many seconds.
        #[arg(long = "for", value_name = "SECS")]
        for_secs: Option<f64>,
        /// Subscribe to updates of this resource first (repeatable).
        #[arg(long = "resource", value_name = "URI")]
        resources: Vec<String>,
    },
    /// Read one JSON request a line from stdin ({"tool": NAME, "arguments": {...}} or
    /// {"method": M, "params": {...}}), print one JSON answer a line, over one client.
    Batch,
    /// Run the reference server.
    Serve(ServeArgs),
    /// Log in to the --url server with OAuth (a browser, a loopback listener), and keep the
    /// credentials for later commands.
    Login(login::LoginArgs),
    /// Forget the --url server's credentials (revoked where the server can).
    Logout,
    /// Stored OAuth credentials.
    Auth {
        #[command(subcommand)]
        command: AuthCommand,
    },
    /// Approve an mcpServers file you did not write (a project's `.mcp.json`): shows the
    /// commands it starts and the environment variables it reads, and remembers its content
    /// as approved (a changed file is asked about again).
    Trust {
        /// The file.
        file: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum AuthCommand {
    /// Server, issuer, client id, scopes and expiry of each stored login (never a token):
    /// of the --url server, or of every server.
    Status,
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// List the server's tools.
    List,
    /// Call a tool: `KEY=VALUE` arguments, typed by the tool's input schema.
    Call {
        /// The tool.
        name: String,
        /// Arguments as KEY=VALUE.
        #[arg(value_name = "KEY=VALUE")]
        params: Vec<String>,
        /// Arguments as a JSON object (wins over KEY=VALUE).
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        /// Do not list tools first, even when the tool is unknown.
        #[arg(long)]
        no_list: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ResourcesCommand {
    /// List the resources.
    List,
    /// List the resource templates.
    Templates,
    /// Read one resource.
    Read {
        /// Its URI.
        uri: String,
    },
}

#[derive(Debug, Subcommand)]
enum SkillsCommand {
    /// List the skills (every page); no skill file is read.
    List,
    /// Load one skill by the URI of its SKILL.md (or its name) and print it.
    Get {
        /// `skill://…/SKILL.md`, or the skill's frontmatter name.
        skill: String,
    },
}

#[derive(Debug, Subcommand)]
enum PromptsCommand {
    /// List the prompts.
    List,
    /// Get a prompt with its arguments.
    Get {
        /// The prompt.
        name: String,
        /// Arguments as KEY=VALUE.
        #[arg(value_name = "KEY=VALUE")]
        params: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Serve Streamable HTTP on this address.
    #[arg(long, conflicts_with = "stdio", value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Serve on stdin/stdout.
    #[arg(long)]
    stdio: bool,
    /// Which eras: both, modern or legacy.
    #[arg(long, default_value = "both")]
    eras: String,
    /// Answer with one JSON body instead of an SSE stream.
    #[arg(long = "json-responses")]
    json_responses: bool,
    /// Latency added to every HTTP answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Delay before unlock_files registers its tools, in milliseconds.
    #[arg(long, default_value_t = 200)]
    register_delay_ms: u64,
    /// Answer 406 to POSTs with exactly this Accept header.
    #[arg(long)]
    reject_accept: Option<String>,
    /// Answer the first N POSTs 429 with Retry-After: 1.
    #[arg(long, default_value_t = 0)]
    fail_429: u64,
    /// Answer the next N POSTs 503.
    #[arg(long, default_value_t = 0)]
    fail_503: u64,
    /// Answer every N-th POST 503.
    #[arg(long)]
    fail_503_every: Option<u64>,
    /// Expire a legacy session after N requests.
    #[arg(long)]
    session_expiry: Option<u64>,
    /// Cut every N-th legacy SSE answer before its answer event.
    #[arg(long)]
    cut_sse_every: Option<u64>,
    /// Leave Nagle's algorithm on.
    #[arg(long)]
    nagle: bool,
    /// Append two broken tool definitions to tools/list (a client should reject both).
    #[arg(long)]
    broken_tools: bool,
    /// With --stdio: exit after answering N tools/call requests (a server that dies).
    #[arg(long, value_name = "N")]
    exit_after_calls: Option<u64>,
    /// With --http: also serve the 2024-11-05 HTTP+SSE transport at /mcp/sse.
    #[arg(long)]
    sse: bool,
    /// Also serve the tools the conformance suite's tasks scenarios call.
    #[arg(long)]
    task_fixtures: bool,
}

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
        Error::Transport(t) if matches!(**t, toolwire::TransportError::Setup(_)) => {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match cli.verbose {
        // Without -v stderr carries only the one-line reason of a failure.
        0 => tracing::Level::ERROR,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            say_err!("toolwire: cannot start the runtime: {e}");
            return ExitCode::from(3);
        }
    };
    let outcome = runtime.block_on(run(cli));
    // Not a drop, which would wait for blocking tasks: `serve --stdio` keeps one reading stdin,
    // and a server that is done must exit now, not after the client's next line.
    runtime.shutdown_background();
    match outcome {
        Ok(code) => code,
        Err(Failure::Usage(reason)) => {
            say_err!("toolwire: {reason}");
            ExitCode::from(2)
        }
        Err(Failure::Remote(reason)) => {
            say_err!("toolwire: {reason}");
            ExitCode::from(3)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, Failure> {
    if let Command::Trust { file } = &cli.command {
        return trust::approve(file);
    }
    if let Command::Serve(args) = &cli.command {
        return serve(args).await;
    }
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
    let outcome = session(&cli, &client, None).await;
    client.close().await;
    drop(embedded);
    outcome
}

/// The client settings every command shares: `--protocol`, `--timeout`, and the default
/// reconnect policy (a stdio server that dies is started again; `-v` shows it).
fn client_builder(cli: &Cli) -> Result<toolwire::ClientBuilder, Failure> {
    let mut builder = Client::builder("toolwire-cli", env!("CARGO_PKG_VERSION"))
        .mode(mode(&cli.protocol)?)
        .reconnect(ReconnectPolicy::default());
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
fn http_options(
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
        b = b.authorization(&format!("Bearer {token}"));
    }
    match cli.proxy.as_deref() {
        Some("none") => b = b.proxy(Proxy::Disabled),
        Some(url) => b = b.proxy(Proxy::Url(url.to_owned())),
        None => {}
    }
    Ok(b)
}

/// `--header` and `--bearer` given for a stdio server are a usage error.
fn stdio_only(cli: &Cli) -> Result<(), Failure> {
    if cli.headers.is_empty() && cli.bearer.is_none() {
        Ok(())
    } else {
        Err(Failure::Usage(
            "--header and --bearer apply to HTTP servers only".into(),
        ))
    }
}

/// Where a stdio child's stderr goes: the log with -v, nowhere without.
fn stderr_mode(cli: &Cli) -> StderrMode {
    if cli.verbose > 0 {
        StderrMode::Tracing
    } else {
        StderrMode::Discard
    }
}

/// `watch`: every notification, as it comes, until the server goes or `for_secs` pass,
/// after subscribing to `resources`.
async fn watch(
    cli: &Cli,
    client: &Client,
    for_secs: Option<f64>,
    resources: &[String],
) -> Result<ExitCode, Failure> {
    let limit = match for_secs {
        Some(s) if s.is_finite() && s > 0.0 => {
            Some(Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX))
        }
        Some(s) => {
            return Err(Failure::Usage(format!(
                "--for {s}: must be a positive number"
            )));
        }
        None => None,
    };
    let mut notifications = client.notifications();
    client.ready().await?;
    for uri in resources {
        client.subscribe_resource(uri).await?;
        // On stderr, so stdout stays the notifications alone; a script waits for it.
        say_err!("subscribed to {uri}");
    }
    // A limit past what the clock holds is no limit.
    let until = limit.and_then(|l| tokio::time::Instant::now().checked_add(l));
    loop {
        let notice = tokio::select! {
            notice = notifications.recv() => notice,
            () = async {
                match until {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => None,
        };
        let Some(notice) = notice else { break };
        let params: Value = notice
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        if cli.json {
            say!("{}", json!({"method": notice.method, "params": params}));
        } else if let ServerNotification::LoggingMessage(log) = &notice.notification {
            let level = serde_json::to_value(log.level).unwrap_or(Value::Null);
            let data = match &log.data {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            say!(
                "[{}] {}{data}",
                level.as_str().unwrap_or("?"),
                log.logger
                    .as_deref()
                    .map(|l| format!("{l}: "))
                    .unwrap_or_default()
            );
        } else {
            say!("{} {params}", notice.method);
        }
    }
    Ok(ExitCode::SUCCESS)
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

/// `--config FILE`: one entry (`--server`, or the server of a routed `tools call`), or every
/// entry at once (`servers`, `tools list`).
async fn with_config(
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
            let (server, tool) = name.split_once(DEFAULT_SEPARATOR).ok_or_else(|| {
                Failure::Usage(format!(
                    "tools call {name}: with --config, name the tool as SERVER{DEFAULT_SEPARATOR}TOOL or give --server"
                ))
            })?;
            Some((server.to_owned(), Some(tool.to_owned())))
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
    // The same path as `Host` takes: Streamable HTTP falls back to HTTP+SSE, and every
    // reconnect is made from the entry's settings.
    let client = entry.connect_with(
        builder,
        |http| remote(cli, &entry, http),
        |stdio| stdio.with_stderr(stderr_mode(cli)),
    )?;
    let outcome = session(cli, &client, tool.as_deref()).await;
    client.close().await;
    outcome
}

/// How a command line names one entry of a configuration file.
fn entry_named(file: Option<&std::path::Path>, server: &str) -> String {
    let file = file.map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    format!(
        "--config {} --server {server}",
        shlex::try_quote(&file).unwrap_or_default()
    )
}

/// The entry named `server`, enabled.
fn config_entry<'a>(config: &'a ServersConfig, server: &str) -> Result<&'a ServerConfig, Failure> {
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
fn remote(
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
fn login_target(
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
async fn every_server(
    cli: &Cli,
    config: &ServersConfig,
    builder: toolwire::ClientBuilder,
) -> Result<ExitCode, Failure> {
    if !matches!(
        cli.command,
        Command::Servers
            | Command::Batch
            | Command::Tools {
                command: ToolsCommand::List
            }
    ) {
        return Err(Failure::Usage(
            "with --config, this command needs --server NAME".into(),
        ));
    }
    // Stored logins for the remote entries; no flow runs for many servers at once.
    let mut host = Host::builder(builder);
    match login::config(&login::LoginArgs::default(), false) {
        Ok(oauth) => host = host.oauth(oauth),
        Err(Failure::Usage(reason) | Failure::Remote(reason)) => {
            tracing::warn!(%reason, "OAuth is off for this command");
        }
    }
    let host = host
        .start(config)
        .map_err(|e| Failure::Usage(one_line(&e)))?;
    host.settled(Duration::from_secs(60)).await;
    if matches!(cli.command, Command::Batch) {
        let code = batch::run(batch::Target::Host(&host)).await;
        host.shutdown().await;
        return Ok(code);
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
    if cli.json {
        let mut document = json!({"servers": servers});
        if matches!(cli.command, Command::Tools { .. }) {
            let listed: Vec<Value> = tools
                .names()
                .into_iter()
                .filter_map(|name| {
                    let t = tools.get(name)?;
                    Some(json!({"name": name, "server": &*t.server, "tool": &*t.tool}))
                })
                .collect();
            document["tools"] = Value::Array(listed);
        }
        print_json(&document);
    } else {
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
                    (Some(era), Some(n)) => format!("  {era}  {n} tools"),
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
            for name in tools.names() {
                let description = tools
                    .get(name)
                    .and_then(|t| t.tool.description.clone())
                    .unwrap_or_default();
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

fn mode(protocol: &str) -> Result<ProtocolMode, Failure> {
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

fn print_json(value: &Value) {
    say!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

async fn command(cli: &Cli, client: &Client, tool: Option<&str>) -> Result<ExitCode, Failure> {
    match &cli.command {
        Command::Serve(_)
        | Command::Trust { .. }
        | Command::Servers
        | Command::Login(_)
        | Command::Logout
        | Command::Auth { .. } => Ok(ExitCode::SUCCESS),
        Command::Batch => Ok(batch::run(batch::Target::Client(client)).await),
        Command::Watch {
            for_secs,
            resources,
        } => watch(cli, client, *for_secs, resources).await,
        Command::Resources { command } => match command {
            ResourcesCommand::List => browse::list_resources(client, false, cli.json).await,
            ResourcesCommand::Templates => browse::list_resources(client, true, cli.json).await,
            ResourcesCommand::Read { uri } => browse::read(client, uri, cli.json).await,
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
            command: ToolsCommand::List,
        } => {
            let outcome = client.list_tools().await?;
            let snapshot = client.tools();
            let mut tools: Vec<(&str, &Tool)> =
                snapshot.iter().map(|(n, t)| (n, &**t.tool())).collect();
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

/// The tools a listing left out (or kept without headers), for `--json`.
fn rejections(items: &[toolwire::RejectedTool]) -> Vec<Value> {
    items
        .iter()
        .map(|r| json!({"index": r.index, "name": r.name, "reason": r.reason.to_string()}))
        .collect()
}

/// A `KEY=VALUE` value typed by the property's schema (integer, number, boolean, string;
/// objects and arrays as JSON).
fn typed(schema: Option<&Value>, raw: &str) -> Value {
    let kind = schema.and_then(|s| s.get("type")).and_then(Value::as_str);
    match kind {
        Some("integer") => raw
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(raw)),
        Some("number") => raw
            .parse::<f64>()
            .ok()
            .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
            .unwrap_or_else(|| Value::from(raw)),
        Some("boolean") => match raw {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::from(raw),
        },
        Some("string") => Value::from(raw),
        _ => serde_json::from_str::<Value>(raw)
            .ok()
            .filter(|v| v.is_object() || v.is_array())
            .unwrap_or_else(|| Value::from(raw)),
    }
}

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
        .and_then(|t| t.tool().input_schema.get("properties").cloned());
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
    let result = result?;
    if cli.json {
        print_json(&serde_json::to_value(&result).unwrap_or(Value::Null));
    } else {
        if client.carries_headers() {
            for (n, v) in &headers {
                say!("> {n}: {v}");
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

fn size(data: &str) -> usize {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map(|b| b.len())
        .unwrap_or(data.len() * 3 / 4)
}

/// Content blocks for people.
fn render(result: &CallToolResult) {
    if result.is_error() {
        say!("(the tool reported an error)");
    }
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => say!("{}", t.text),
            ContentBlock::Image(b) => say!("[image {}, {} bytes]", b.mime_type, size(&b.data)),
            ContentBlock::Audio(b) => say!("[audio {}, {} bytes]", b.mime_type, size(&b.data)),
            ContentBlock::ResourceLink(r) => say!(
                "[link {} {}{}]",
                r.name,
                r.uri,
                r.mime_type
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ),
            ContentBlock::Resource(e) => {
                let value = serde_json::to_value(&e.resource).unwrap_or(Value::Null);
                match value.get("text").and_then(Value::as_str) {
                    Some(text) => say!("[resource {}]\n{text}", e.resource.uri()),
                    None => say!("[resource {}, binary]", e.resource.uri()),
                }
            }
            other => say!(
                "{}",
                serde_json::to_string(other).unwrap_or_else(|_| "[content]".into())
            ),
        }
    }
    if let Some(structured) = &result.structured_content {
        say!(
            "structuredContent: {}",
            serde_json::to_string_pretty(structured).unwrap_or_default()
        );
    }
    for (label, names) in [
        ("registers", &result.registers),
        ("unregisters", &result.unregisters),
        ("updates", &result.updates),
    ] {
        if let Some(names) = names.as_ref().filter(|n| !n.is_empty()) {
            say!("{label}: {}", names.join(", "));
        }
    }
    if toolwire::tools_may_be_stale(result) {
        say!("(the tool list may be stale: the announced changes did not arrive in time)");
    }
}

async fn serve(args: &ServeArgs) -> Result<ExitCode, Failure> {
    let mut options = toolwire_refserver::Options::default();
    options.eras = match args.eras.as_str() {
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
        options.framing = toolwire_refserver::Framing::Json;
    }
    options.latency = Duration::from_millis(args.latency_ms);
    options.register_delay = Duration::from_millis(args.register_delay_ms);
    options.faults.reject_accept = args.reject_accept.clone();
    options.faults.fail_429 = args.fail_429;
    options.faults.fail_503 = args.fail_503;
    options.faults.fail_503_every = args.fail_503_every;
    options.faults.session_expiry = args.session_expiry;
    options.faults.cut_sse_every = args.cut_sse_every;
    options.faults.nagle = args.nagle;
    options.faults.broken_tools = args.broken_tools;
    options.faults.exit_after_calls = args.exit_after_calls;
    options.sse = args.sse;
    options.task_fixtures = args.task_fixtures;
    if args.stdio {
        toolwire_refserver::serve_stdio(options)
            .await
            .map_err(|e| Failure::Remote(format!("stdio: {e}")))?;
        return Ok(ExitCode::SUCCESS);
    }
    let addr = args
        .http
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
    let server = toolwire_refserver::serve_http(addr, options)
        .await
        .map_err(|e| Failure::Remote(format!("cannot listen on {addr}: {e}")))?;
    say_err!("toolwire reference server on {}", server.url());
    server.wait().await;
    Ok(ExitCode::SUCCESS)
}

//! The command line: every flag and subcommand (clap).

use super::*;

/// What `toolwire --help` says after the options: where commands go without a server named,
/// the exit codes, the environment.
const AFTER_HELP: &str = "\
Without --url, --stdio or --config, a command talks to the embedded reference server (a demo
with tools such as echo, add and slow): `toolwire tools list` lists its tools.

Examples (the options naming a server go before or after a command that talks to one):
  toolwire --url https://example.com/mcp tools list
  toolwire --stdio 'npx -y @modelcontextprotocol/server-everything' tools call echo message=hi
  toolwire --config ~/.cursor/mcp.json servers
  toolwire gateway --config mcp.json --http 127.0.0.1:8808

Exit codes: 0 done; 1 the tool answered with an error (isError); 2 a usage or configuration
error; 3 the server failed or could not be reached; 130 interrupted.

Environment: TOOLWIRE_TRUST=1 trusts every configuration file for the run; TOOLWIRE_CREDENTIALS
is the stored-credentials file; SSL_CERT_FILE and SSL_CERT_DIR add certificate authorities;
RUST_LOG sets the log filter (as -v does); TOOLWIRE_GATEWAY_SESSION_KEY seals the gateway's
sessions.";

/// List and call the tools of an MCP server (stdio or Streamable HTTP, both protocol eras).
#[derive(Debug, Parser)]
#[command(name = "toolwire", version, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// The server's Streamable HTTP endpoint.
    #[arg(long, conflicts_with_all = ["stdio", "config"])]
    pub(crate) url: Option<String>,
    /// Reach --url over this Unix domain socket instead of TCP (as curl's --unix-socket: the
    /// URL, such as http://localhost/mcp, still gives the host and path).
    #[arg(long, value_name = "PATH", requires = "url")]
    pub(crate) unix_socket: Option<PathBuf>,
    /// An `mcpServers` configuration file (the form Claude, Cursor, VS Code, Windsurf and
    /// Gemini CLI write).
    #[arg(long, value_name = "FILE", conflicts_with = "stdio")]
    pub(crate) config: Option<PathBuf>,
    /// With --config: the entry every command talks to.
    #[arg(long, value_name = "NAME", requires = "config")]
    pub(crate) server: Option<String>,
    /// With --config: how the servers' tools are named, `qualified` (`server__tool`) or
    /// `provider-safe` (names every LLM provider accepts: `^[A-Za-z0-9_-]{1,64}$`, a stable
    /// short form for the others).
    #[arg(
        long,
        value_name = "NAMING",
        default_value = "qualified",
        requires = "config"
    )]
    pub(crate) names: toolwire_host::Naming,
    /// With --config: pin each server's tool definitions in FILE (default: the one a
    /// gateway's `"pinTools": true` uses). A tool whose definition changed since is not listed
    /// and not called until `toolwire pins approve SERVER TOOL`.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        default_missing_value = "",
        requires = "config"
    )]
    pub(crate) pin_tools: Option<PathBuf>,
    /// Start the server as a child process: the command line, split like a POSIX shell.
    #[arg(long, value_name = "CMD ARGS")]
    pub(crate) stdio: Option<String>,
    /// The protocol version, or `auto` (probe 2026-07-28, fall back to initialize).
    #[arg(long, default_value = "auto")]
    pub(crate) protocol: String,
    /// An extra HTTP header, `Name: value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub(crate) headers: Vec<String>,
    /// A bearer token for HTTP.
    #[arg(long)]
    pub(crate) bearer: Option<String>,
    /// The HTTP proxy for --url: `http://[user:password@]host:port`, or `none` to go direct
    /// (default: HTTPS_PROXY / HTTP_PROXY / ALL_PROXY and NO_PROXY from the environment).
    #[arg(long, value_name = "URL|none", requires = "url")]
    pub(crate) proxy: Option<String>,
    /// A JSON array of tool definitions to pre-load as known tools.
    #[arg(long, value_name = "FILE")]
    pub(crate) known_tools: Option<PathBuf>,
    /// Request timeout in seconds.
    #[arg(long, value_name = "SECS")]
    pub(crate) timeout: Option<f64>,
    /// Ask the server for log messages at this level and above (debug, info, notice,
    /// warning, error, critical, alert, emergency); `watch` prints them.
    #[arg(long, value_name = "LEVEL")]
    pub(crate) log_level: Option<String>,
    /// Print exactly one JSON document on stdout (anywhere on the command line).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Log to stderr (-v: info and warnings, -vv: debug; anywhere on the command line).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    /// Export a trace span per MCP request (client, `serve` and `gateway` alike) over OTLP/HTTP
    /// to this collector: its base URL (`http://localhost:4318`; `/v1/traces` is added) or its
    /// traces URL. The service is named by `OTEL_SERVICE_NAME`, else `toolwire`.
    #[cfg(feature = "otlp")]
    #[arg(long, value_name = "URL", global = true)]
    pub(crate) otlp_endpoint: Option<String>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    /// The MCP Apps views of the server's tools: list them, or write one's HTML out.
    Apps {
        #[command(subcommand)]
        command: AppsCommand,
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
    /// updates, …), one JSON line each with --json, until the server goes or --for passes;
    /// says `watching` on stderr once none can be missed.
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
    /// Serve every server of an mcpServers file as one MCP server (tools named
    /// `server__tool`), to clients of either protocol era.
    Gateway(GatewayArgs),
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
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell) on stdout:
    /// `toolwire completions bash > ~/.local/share/bash-completion/completions/toolwire`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Read the MCP servers of the hosts you use (Claude Desktop, Claude Code, Cursor, VS Code,
    /// Windsurf, Zed, Codex, Gemini CLI) into one mcpServers file; with --rewire, point each
    /// host at Toolwire's gateway over it (--undo puts them back).
    Import(crate::import::ImportArgs),
    /// Check an mcpServers file (--config, default: the one `import` writes) and this
    /// machine: the file's problems, its approval, stored logins, each server reached (its
    /// era and tools), names and descriptions hosts cut or refuse; what to do for each.
    Doctor,
    /// Print the man page (roff) on stdout: `toolwire man > ~/.local/share/man/man1/toolwire.1`.
    Man,
    /// The tool definitions a gateway pinned (`"pinTools"` in its file's gateway section):
    /// list them and the changes held in quarantine, approve a change (the tool comes back)
    /// or reject it.
    Pins {
        /// The pin file (default: $XDG_STATE_HOME/toolwire/pins.json, what `"pinTools": true`
        /// uses).
        #[arg(long, value_name = "FILE")]
        file: Option<std::path::PathBuf>,
        #[command(subcommand)]
        command: PinsCommand,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PinsCommand {
    /// Every server's pinned tools, and each change waiting with the members that changed.
    List,
    /// Pin the changed definition of SERVER's TOOL: the tool is listed and callable again.
    Approve {
        /// The server (its entry's name).
        server: String,
        /// The server's own name for the tool.
        tool: String,
    },
    /// Keep the pin: the tool stays quarantined while its server offers the changed one.
    Reject {
        /// The server (its entry's name).
        server: String,
        /// The server's own name for the tool.
        tool: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AuthCommand {
    /// Server, issuer, client id, scopes and expiry of each stored login (never a token):
    /// of the --url server, or of every server.
    Status,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// List the server's tools.
    List,
    /// The tools most relevant to a query (BM25 over names, titles, descriptions and
    /// parameter names), best first.
    Search {
        /// What the tool should do, in words.
        #[arg(required = true, value_name = "QUERY")]
        query: Vec<String>,
        /// How many tools at most.
        #[arg(long, short = 'k', default_value_t = 5)]
        limit: usize,
    },
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
pub(crate) enum ResourcesCommand {
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
pub(crate) enum SkillsCommand {
    /// List the skills (every page); no skill file is read.
    List,
    /// Load one skill by the URI of its SKILL.md (or its name) and print it.
    Get {
        /// `skill://…/SKILL.md`, or the skill's frontmatter name.
        skill: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AppsCommand {
    /// The tools that have a view: name, view URI, who may call them.
    List,
    /// Read a tool's view (checked: ui://, text/html;profile=mcp-app) and write its HTML;
    /// its Content Security Policy and permissions go to stderr (or into --json).
    Get {
        /// The tool.
        tool: String,
        /// Write the HTML, byte for byte, to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PromptsCommand {
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
pub(crate) struct ServeArgs {
    /// Serve Streamable HTTP on this address (`localhost:8765`, `0.0.0.0:8765`); without
    /// --http or --stdio, `127.0.0.1:8080`.
    #[arg(long, conflicts_with = "stdio", value_name = "ADDR", value_parser = listen_addr)]
    pub(crate) http: Option<SocketAddr>,
    /// Serve a 2026-07-28 request whose MCP-Protocol-Version header names another version
    /// as its body says, instead of refusing it (-32020).
    #[arg(long)]
    pub(crate) era_repair: bool,
    /// Serve Streamable HTTP on this Unix domain socket instead (http://localhost/mcp there).
    #[arg(long, conflicts_with_all = ["stdio", "http"], value_name = "PATH")]
    pub(crate) unix_socket: Option<PathBuf>,
    /// Serve on stdin/stdout.
    #[arg(long)]
    pub(crate) stdio: bool,
    /// Which eras: both, modern or legacy.
    #[arg(long, default_value = "both")]
    pub(crate) eras: String,
    /// Answer with one JSON body instead of an SSE stream.
    #[arg(long = "json-responses")]
    pub(crate) json_responses: bool,
    /// Latency added to every HTTP answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub(crate) latency_ms: u64,
    /// Delay before unlock_files registers its tools, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub(crate) register_delay_ms: u64,
    /// Answer 406 to POSTs with exactly this Accept header.
    #[arg(long)]
    pub(crate) reject_accept: Option<String>,
    /// Answer the first N POSTs 429 with Retry-After: 1.
    #[arg(long, default_value_t = 0)]
    pub(crate) fail_429: u64,
    /// Answer the next N POSTs 503.
    #[arg(long, default_value_t = 0)]
    pub(crate) fail_503: u64,
    /// Answer every N-th POST 503.
    #[arg(long)]
    pub(crate) fail_503_every: Option<u64>,
    /// Expire a legacy session after N requests.
    #[arg(long)]
    pub(crate) session_expiry: Option<u64>,
    /// Cut every N-th legacy SSE answer before its answer event.
    #[arg(long)]
    pub(crate) cut_sse_every: Option<u64>,
    /// Leave Nagle's algorithm on.
    #[arg(long)]
    pub(crate) nagle: bool,
    /// Append two broken tool definitions to tools/list (a client should reject both).
    #[arg(long)]
    pub(crate) broken_tools: bool,
    /// With --stdio: exit after answering N tools/call requests (a server that dies).
    #[arg(long, value_name = "N")]
    pub(crate) exit_after_calls: Option<u64>,
    /// With --http: also serve the 2024-11-05 HTTP+SSE transport at /mcp/sse.
    #[arg(long)]
    pub(crate) sse: bool,
    /// Also serve the tools the conformance suite's tasks scenarios call.
    #[arg(long)]
    pub(crate) task_fixtures: bool,
    /// Also serve N synthetic tools (synthetic_0000, …) of a real tool's size, for load and
    /// memory measurements.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) synthetic_tools: usize,
    /// Also serve a `tally` tool that appends each call's id to FILE, one line each (for
    /// soaks that count which calls ran).
    #[arg(long, value_name = "FILE")]
    pub(crate) tally: Option<PathBuf>,
    /// Threads answering requests (default: one per CPU). 1 runs everything on one thread,
    /// with no wake-ups between threads: the lowest latency where the machine's cores are
    /// shared with the clients and servers it talks to.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) threads: Option<u16>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct GatewayArgs {
    /// Ask a running gateway whether it is alive instead of serving: GET this URL (default
    /// http://127.0.0.1:8080/healthz, the image's address), exit 0 on `200 OK` and 1
    /// otherwise. The image's health check: it has no shell and no curl.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "http://127.0.0.1:8080/healthz", conflicts_with_all = ["http", "unix_socket", "stdio", "check"])]
    pub(crate) healthz: Option<String>,
    /// The mcpServers file whose servers it serves (also accepted before `gateway`).
    #[arg(long = "config", value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// Serve requests that real clients get slightly wrong instead of refusing them: a
    /// 2026-07-28 request whose MCP-Protocol-Version header names the version the client
    /// first negotiated is served as its body says (also `"eraRepair": true` in the file's
    /// gateway section). Each repair is logged once per caller and counted in /metrics.
    #[arg(long)]
    pub(crate) era_repair: bool,
    /// Serve Streamable HTTP on this address (`localhost:9000`, `0.0.0.0:9000`; the endpoint
    /// is /mcp); loopback unless --allow-unauthenticated. Without --http, --unix-socket or
    /// --stdio, `127.0.0.1:8808`.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["stdio", "unix_socket", "check"], value_parser = listen_addr)]
    pub(crate) http: Option<SocketAddr>,
    /// Serve Streamable HTTP on this Unix domain socket (http://localhost/mcp there).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["stdio", "check"])]
    pub(crate) unix_socket: Option<PathBuf>,
    /// Serve on stdin/stdout.
    #[arg(long, conflicts_with = "check")]
    pub(crate) stdio: bool,
    /// Check the file (syntax, entries, names) and exit: 0 when it would serve. Takes the file
    /// itself (`--check FILE`) or the one of --config.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub(crate) check: Option<Option<PathBuf>>,
    /// How tools are named: `qualified` (`server__tool`) or `provider-safe`.
    #[arg(long, value_name = "NAMING", default_value = "qualified")]
    pub(crate) names: toolwire_host::Naming,
    /// Serve on a non-loopback address although the gateway does not authenticate callers
    /// (anyone who reaches the address may call every tool with the gateway's credentials).
    #[arg(long)]
    pub(crate) allow_unauthenticated: bool,
    /// Log one line per call (caller, upstream, tool, outcome, duration) and every refusal of
    /// the policy on stderr, whatever -v says (the `toolwire_gateway::audit` target at info).
    #[arg(long)]
    pub(crate) audit: bool,
    /// Put each call's arguments in its audit line (off by default: arguments may hold what an
    /// audit log must not; credentials never reach it either way).
    #[arg(long)]
    pub(crate) audit_arguments: bool,
    /// Require an OAuth access token (a JWT) from this issuer; its keys are found through its
    /// metadata (repeatable; also the file's `gateway.authorizationServers`).
    #[arg(long = "auth-issuer", value_name = "URL")]
    pub(crate) auth_issuers: Vec<String>,
    /// The audience tokens must name (default: the gateway's public URL).
    #[arg(long, value_name = "URI")]
    pub(crate) auth_audience: Option<String>,
    /// The gateway's MCP endpoint as its callers reach it (default http://ADDR/mcp): what its
    /// tokens are for and its resource metadata names (also `gateway.resource`).
    #[arg(long, value_name = "URL")]
    pub(crate) public_url: Option<String>,
    /// Also accept this host name in Host and Origin on a loopback address (repeatable; for a
    /// local proxy that keeps its own name).
    #[arg(long = "allow-host", value_name = "NAME")]
    pub(crate) allowed_hosts: Vec<String>,
    /// Answer with one JSON body instead of an SSE stream.
    #[arg(long = "json-responses")]
    pub(crate) json_responses: bool,
    /// Seal legacy session ids with the keys in this file (base64 of 32 random bytes, one per
    /// line; the first seals, all open), so every replica given the same file accepts a
    /// session another began. Also TOOLWIRE_GATEWAY_SESSION_KEY.
    #[arg(long, value_name = "FILE")]
    pub(crate) session_key_file: Option<PathBuf>,
    /// On SIGTERM (or Ctrl-C), let the calls in flight complete for up to this many seconds
    /// while new ones are refused (503, Retry-After) and /readyz answers 503; then stop. A
    /// second signal stops at once.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = seconds)]
    pub(crate) drain_timeout: std::time::Duration,
    /// Stop a stdio server's child once nothing used it for this many seconds (its tools stay
    /// listed; the next call starts it again).
    #[arg(long, value_name = "SECS")]
    pub(crate) stop_idle: Option<f64>,
    /// Above this many tools, list `search_tools`, `describe_tool` and `call_tool` in place
    /// of every tool (progressive discovery; the tools stay callable by name).
    #[arg(long, value_name = "N")]
    pub(crate) progressive_above_tools: Option<usize>,
    /// The same, above this estimate of the definitions' tokens (a token per four bytes of
    /// their JSON).
    #[arg(long, value_name = "N")]
    pub(crate) progressive_above_tokens: Option<usize>,
    /// Threads answering requests (default: one per CPU). 1 runs everything on one thread,
    /// with no wake-ups between threads: the lowest latency where the machine's cores are
    /// shared with the clients and servers it talks to.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) threads: Option<u16>,
}

/// An address to listen on: `IP:PORT`, or `HOST:PORT` resolved (`localhost:8808` is
/// `127.0.0.1:8808`; an IPv4 address is preferred where a name has both).
/// A number of seconds (`30`, `0.5`) as a duration.
fn seconds(text: &str) -> Result<std::time::Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|secs| std::time::Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| format!("{text}: expected a number of seconds, 0 or more"))
}

fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let resolved: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(text)
        .map_err(|e| format!("{text}: expected HOST:PORT or IP:PORT ({e})"))?
        .collect();
    resolved
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| resolved.first())
        .copied()
        .ok_or_else(|| format!("{text}: the name resolves to no address"))
}

/// The command line with the options of toolwire itself that were given after a command
/// moved before it, as people write them (`toolwire tools list --config mcp.json`): clap reads
/// an option only on the command that defines it. Moved are the options naming and reaching a
/// server (`--url`, `--config`, `--server`, `--stdio`, `--timeout`, …), after a command that
/// talks to one and does not define the same option itself (`serve`, `gateway`, `trust`,
/// `pins`, `completions`, `man` and `import` talk to none, and some have options of their own under
/// these names); nothing after `--` moves.
pub(crate) fn hoisted(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use clap::CommandFactory as _;
    const OWN_MEANINGS: &[&str] = &[
        "serve",
        "gateway",
        "trust",
        "pins",
        "completions",
        "man",
        "import",
        "help",
    ];
    let top = Cli::command();
    // The top-level options that are not global (clap takes those anywhere already): long
    // name → whether it takes a value.
    let options: std::collections::HashMap<&str, bool> = top
        .get_arguments()
        .filter(|a| !a.is_global_set())
        .filter_map(|a| Some((a.get_long()?, a.get_action().takes_values())))
        .collect();
    let long_of = |token: &str| -> Option<(String, bool)> {
        let name = token.strip_prefix("--")?;
        let (name, inline) = match name.split_once('=') {
            Some((name, _)) => (name, true),
            None => (name, false),
        };
        Some((name.to_owned(), inline))
    };
    let mut args = args.into_iter();
    let mut out: Vec<std::ffi::OsString> = args.next().into_iter().collect();
    // Up to the command: the options before it, with their values.
    let mut command = None;
    while let Some(arg) = args.next() {
        let text = arg.to_str().unwrap_or("").to_owned();
        if !text.starts_with('-') || text == "-" {
            command = Some((arg, text));
            break;
        }
        let takes_value = long_of(&text)
            .is_some_and(|(name, inline)| !inline && options.get(name.as_str()) == Some(&true));
        out.push(arg);
        if takes_value && let Some(value) = args.next() {
            out.push(value);
        }
    }
    let Some((command, name)) = command else {
        return out;
    };
    let rest: Vec<std::ffi::OsString> = args.collect();
    let Some(sub) = top
        .find_subcommand(&name)
        .filter(|_| !OWN_MEANINGS.contains(&name.as_str()))
    else {
        out.push(command);
        out.extend(rest);
        return out;
    };
    // Every long option the command and its own commands define stays where it is.
    let mut own = std::collections::HashSet::new();
    let mut stack = vec![sub];
    while let Some(c) = stack.pop() {
        own.extend(c.get_arguments().filter_map(clap::Arg::get_long));
        stack.extend(c.get_subcommands());
    }
    let (mut moved, mut kept) = (Vec::new(), vec![command]);
    let mut rest = rest.into_iter();
    while let Some(arg) = rest.next() {
        let text = arg.to_str().unwrap_or("").to_owned();
        if text == "--" {
            kept.push(arg);
            kept.extend(rest.by_ref());
            break;
        }
        let hoist = long_of(&text).and_then(|(name, inline)| {
            let takes = *options.get(name.as_str())?;
            (!own.contains(name.as_str())).then_some(takes && !inline)
        });
        match hoist {
            Some(with_value) => {
                moved.push(arg);
                if with_value && let Some(value) = rest.next() {
                    moved.push(value);
                }
            }
            None => kept.push(arg),
        }
    }
    out.extend(moved);
    out.extend(kept);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hoist(line: &str) -> String {
        let args = line.split(' ').map(std::ffi::OsString::from).collect();
        hoisted(args)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn options_of_toolwire_after_a_client_command_move_before_it_with_their_values() {
        assert_eq!(
            hoist("toolwire tools list --config mcp.json --server a"),
            "toolwire --config mcp.json --server a tools list"
        );
        assert_eq!(
            hoist("toolwire -v tools call add a=2 --timeout=5 b=40 --json"),
            "toolwire -v --timeout=5 tools call add a=2 b=40 --json"
        );
        assert_eq!(
            hoist("toolwire --protocol 2025-11-25 info --url http://h/mcp"),
            "toolwire --protocol 2025-11-25 --url http://h/mcp info"
        );
        // Parsed as a user means it, then.
        let cli = Cli::try_parse_from(hoisted(
            "toolwire resources list --config f.json --names provider-safe"
                .split(' ')
                .map(Into::into)
                .collect(),
        ))
        .expect("parses");
        assert_eq!(cli.config.as_deref(), Some(std::path::Path::new("f.json")));
        assert!(matches!(cli.command, Command::Resources { .. }));
    }

    #[test]
    fn a_commands_own_options_tool_arguments_and_what_follows_a_double_dash_stay() {
        for line in [
            // serve and gateway have their own --stdio, --config, --http, --unix-socket.
            "toolwire serve --stdio",
            "toolwire gateway --config mcp.json --http 127.0.0.1:8808",
            "toolwire tools call echo text=--url",
            "toolwire watch --resource toolwire://readme --for 2",
            "toolwire tools call echo -- --url x",
            "toolwire --url http://h/mcp tools list",
        ] {
            assert_eq!(hoist(line), line);
        }
    }
}

//! Many MCP servers from one configuration file: the `mcpServers` format that MCP apps write
//! (Claude Desktop and Code, Cursor, VS Code, Windsurf, Gemini CLI, the MCP Inspector), for the
//! Toolwire client.
//!
//! [`ServersConfig::load`] reads a file and checks all of it before returning anything:
//! - the top-level key `mcpServers`, or `servers` (VS Code); JSON with comments and trailing
//!   commas (VS Code's files are JSONC);
//! - stdio entries (`command`, `args`, `env`, `cwd`) and remote ones (`url`, Windsurf's
//!   `serverUrl`, Gemini CLI's `httpUrl`; `headers`);
//! - `type` optional (inferred from `command` or a URL), spelled `stdio`, `http`,
//!   `streamable-http`, `streamable_http` or `sse` (the legacy HTTP+SSE transport of
//!   2024-11-05);
//! - credentials: an `Authorization` header becomes the transport's credentials (a bearer
//!   token, or the value as written for another scheme); a remote entry without one may use
//!   OAuth, with the draft standard's `oauth: {clientId, scopes, redirectUri}` (refused on a
//!   stdio entry and beside an `Authorization` header) — see [`ServerConfig::oauth_config`]
//!   and [`HostBuilder::oauth`];
//! - `${VAR}`, `${VAR:-default}`, `${env:VAR}` and VS Code's `${workspaceFolder}` (the folder
//!   of the file's project, for [`ServersConfig::load`] and [`ServersConfig::from_text`]) in
//!   `command`, `args`, `env`, `cwd`, the URL,
//!   `headers` and `oauth`; `${input:…}` (VS Code's prompts) and other schemes are an error naming the
//!   server and the key;
//! - `disabled`, `timeout` (milliseconds), and tool filters `includeTools`/`excludeTools` (also
//!   `enabled_tools`/`disabled_tools`) with glob patterns; `aliases` (Toolwire's own:
//!   `{"tool": "name"}`, the name a host and the gateway list the tool by instead of
//!   `server__tool`); `unixSocket` (Toolwire's own) on a
//!   remote entry: the local socket its URL is reached over; unknown members are kept
//!   ([`ServersConfig::likely_typos`] names those that look like typos of one it reads).
//!
//! Every problem names the server and the key, with the line and column for syntax errors; a
//! file with a problem never half-loads. Nothing is started by loading: a server runs only
//! when the caller connects it ([`ServerConfig::stdio_config`],
//! [`ServerConfig::http_transport`]). `env` and `headers` values are never shown in `Debug`.
//!
//! ```
//! use toolwire_host::{ServerTransport, ServersConfig};
//!
//! let text = r#"{
//!   // Claude Code's .mcp.json, with a comment
//!   "mcpServers": {
//!     "github": {"command": "npx", "args": ["-y", "server-github"],
//!                "env": {"GITHUB_TOKEN": "${GH_TOKEN}"}},
//!     "linear": {"type": "http", "url": "https://mcp.linear.app/mcp",
//!                "headers": {"Authorization": "Bearer ${LINEAR_TOKEN:-none}"}},
//!   }
//! }"#;
//! let config = ServersConfig::parse(text, |var| (var == "GH_TOKEN").then(|| "t0k".to_owned()))?;
//! assert_eq!(config.servers.len(), 2);
//! let linear = config.get("linear").unwrap();
//! assert!(matches!(&linear.transport, ServerTransport::Http { url, .. } if url.ends_with("/mcp")));
//! # Ok::<(), toolwire_host::ConfigError>(())
//! ```
//!
//! # Dependencies
//! - `toolwire`: the client whose transports the entries configure.
//! - `jsonc-parser` (dprint's; `serde` feature): JSON with comments and trailing commas, with
//!   the line and column of a syntax error; every other JSON5 extension is switched off.
//! - `glob`: the tool filters' patterns (rust-lang's, no dependencies).
//! - `serde_json`: the parsed file, and the unknown members kept as written.
//! - `ring` (already under rustls): the SHA-256 digest an approved file is remembered by
//!   ([`trust`]).
//! - `tempfile` (already under the credential store): the approvals and pin files written
//!   whole.
//! - `serde_jcs`: RFC 8785's canonical JSON, which a pinned tool definition is digested in
//!   ([`pins`]): a server that reorders members or reformats numbers has not changed a tool,
//!   and hand-writing the scheme's number and key ordering rules would be a place to differ.
//! - `strsim` (already under clap): the known key an unknown one is likely a typo of
//!   ([`ServersConfig::likely_typos`]).
//! - `tracing` (already under the client): each server's changes of state, logged in a span
//!   that names the server, which also names its child's stderr lines and its client's own.

mod config;
mod host;
pub mod names;
pub mod pins;
pub mod trust;

pub use host::{
    DEFAULT_SEPARATOR, Host, HostBuilder, HostChange, HostError, HostMatch, HostTool, HostTools,
    HostToolsRef, Quarantined, RETIRE_GRACE, Reloaded, ServerState,
};
pub use pins::PinFile;

pub use names::{NameCollision, Naming, is_provider_safe, provider_safe};

pub use config::{
    ConfigError, ConnectError, OAuthEntry, Problem, ProblemKind, ServerConfig, ServerTransport,
    ServersConfig, ToolFilter,
};

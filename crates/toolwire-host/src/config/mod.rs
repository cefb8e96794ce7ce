//! The `mcpServers` configuration file, in the forms MCP apps write it.
//!
//! [`ServersConfig::load`] reads one file; [`ServersConfig::parse`] takes its text and an
//! environment lookup (so tests need no process environment). The whole file is checked
//! before anything is returned: a file with a problem never half-loads, and every problem is
//! reported at once, each naming the server and the key (and the line and column for syntax).
//!
//! This module holds what an entry is; `load` reads files into it, `interpolate` fills in
//! `${VAR}`, and `connect` turns an entry into a client.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

mod connect;
mod interpolate;
mod load;

pub use connect::ConnectError;
pub(crate) use interpolate::interpolate;
pub use load::{ConfigError, Problem, ProblemKind};

/// Every server of one configuration file, by name (sorted).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServersConfig {
    /// The file it came from, if it came from one.
    pub file: Option<PathBuf>,
    /// The servers, sorted by name.
    pub servers: Vec<ServerConfig>,
    /// The file's `gateway` member as written (no `${VAR}` filled in), for the gateway that
    /// serves these servers to read its own settings from.
    pub gateway: Option<serde_json::Value>,
}

/// One server entry.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Its name: the key under `mcpServers` (or `servers`).
    pub name: String,
    /// How to reach it.
    pub transport: ServerTransport,
    /// `disabled: true`: loaded, never started.
    pub disabled: bool,
    /// `timeout`, in milliseconds in the file (Gemini CLI's unit): every request's deadline.
    pub timeout: Option<Duration>,
    /// `protocol` (Toolwire's own): `auto` (the default: probe `server/discover`, fall back
    /// to `initialize`) or one version this client speaks, which pins the entry to it, the
    /// caller's own mode notwithstanding. For a server whose newest era cannot do everything
    /// its tools need: a Python SDK tool that asks with `ctx.elicit` can ask only in the legacy
    /// era, so its entry says `"protocol": "2025-11-25"`.
    pub protocol: toolwire::ProtocolMode,
    /// Which of its tools to use (`includeTools`/`enabled_tools`, `excludeTools`/
    /// `disabled_tools`).
    pub tools: ToolFilter,
    /// `oauth` (remote entries only, never beside an `Authorization` header): how to log in
    /// where the server asks for OAuth. A remote entry without it still uses OAuth when the
    /// caller turns it on ([`Self::oauth_config`]).
    pub oauth: Option<OAuthEntry>,
    /// `aliases` (Toolwire's own): tool name → the name a host gives it instead of its
    /// qualified one (used as written, in either [`crate::Naming`]).
    pub aliases: std::collections::BTreeMap<String, String>,
    /// The members this loader does not use (`trust`, `alwaysAllow`, `title`, …), kept as
    /// written.
    pub extra: Map<String, Value>,
}

/// An entry's `oauth` object, as the draft standard `mcp.json` format words it: what to
/// register or log in with. Values may hold `${VAR}`s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OAuthEntry {
    /// `clientId`: a client registered with the authorization server beforehand (no dynamic
    /// registration).
    pub client_id: Option<String>,
    /// `scopes`: asked for when the server's challenge and metadata name none.
    pub scopes: Vec<String>,
    /// `redirectUri`: the redirect URI that client is registered with. Serving it is the
    /// authorization handler's part (the `toolwire` CLI binds a loopback one).
    pub redirect_uri: Option<String>,
    /// `issuer`: the one authorization server that client is registered with; it is never
    /// sent to another.
    pub issuer: Option<String>,
}

/// How a server is reached.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerTransport {
    /// A child process speaking newline-delimited JSON-RPC on stdin and stdout.
    Stdio {
        /// `command`.
        command: String,
        /// `args`.
        args: Vec<String>,
        /// `env`, set for the child on top of the allow-listed environment. Values are never
        /// shown in `Debug`: they are often tokens.
        env: Vec<(String, String)>,
        /// `cwd`.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP (`type` `http`, `streamable-http`, `streamable_http`; `httpUrl`; or a
    /// URL without a `type`).
    Http {
        /// `url`, `serverUrl` or `httpUrl`.
        url: String,
        /// `headers`, sent with every request. Values are never shown in `Debug`.
        headers: Vec<(String, String)>,
        /// `unixSocket` (Toolwire's own key): the Unix domain socket the URL is reached
        /// over instead of TCP, as `curl --unix-socket` (the URL still gives host and path).
        unix_socket: Option<PathBuf>,
    },
    /// The legacy HTTP+SSE transport of `2024-11-05` (`type: "sse"`): the URL is the server's
    /// SSE stream; connect it with `ClientBuilder::connect_sse` and
    /// [`ServerConfig::http_transport`]'s settings.
    Sse {
        /// `url` or `serverUrl`.
        url: String,
        /// `headers`. Values are never shown in `Debug`.
        headers: Vec<(String, String)>,
        /// `unixSocket`, as for [`ServerTransport::Http`].
        unix_socket: Option<PathBuf>,
    },
}

impl fmt::Debug for ServerTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs.iter().map(|(name, _)| format!("{name}=…")).collect()
        };
        match self {
            Self::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", &toolwire::types::redacted_args(args))
                .field("env", &names(env))
                .field("cwd", cwd)
                .finish(),
            Self::Http {
                url,
                headers,
                unix_socket,
            } => f
                .debug_struct("Http")
                .field("url", &toolwire::types::redacted_url(url))
                .field("headers", &names(headers))
                .field("unix_socket", unix_socket)
                .finish(),
            Self::Sse {
                url,
                headers,
                unix_socket,
            } => f
                .debug_struct("Sse")
                .field("url", &toolwire::types::redacted_url(url))
                .field("headers", &names(headers))
                .field("unix_socket", unix_socket)
                .finish(),
        }
    }
}

/// Which tools of a server to use: glob patterns (`*`, `?`, `[…]`) over tool names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolFilter {
    /// Only these (`None`: every tool).
    pub include: Option<Vec<glob::Pattern>>,
    /// Never these, even when included.
    pub exclude: Vec<glob::Pattern>,
}

impl ToolFilter {
    /// Whether the tool named `name` passes.
    pub fn allows(&self, name: &str) -> bool {
        let included = self
            .include
            .as_ref()
            .is_none_or(|patterns| patterns.iter().any(|p| p.matches(name)));
        included && !self.exclude.iter().any(|p| p.matches(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_fill_in_and_unknown_schemes_are_refused() {
        let table: &[(&str, Result<&str, ProblemKind>)] = &[
            ("plain", Ok("plain")),
            ("Bearer ${TOKEN}", Ok("Bearer t0k")),
            ("${env:TOKEN}/x", Ok("t0k/x")),
            ("${MISSING:-fallback}", Ok("fallback")),
            ("${EMPTY:-fallback}", Ok("fallback")),
            ("${EMPTY}", Ok("")),
            ("$TOKEN and $$", Ok("$TOKEN and $$")),
            ("${TOKEN}${TOKEN}", Ok("t0kt0k")),
            (
                "${MISSING}",
                Err(ProblemKind::UnsetVariable("MISSING".into())),
            ),
            (
                "${input:token}",
                Err(ProblemKind::UnsupportedScheme("input".into())),
            ),
            (
                "${op:vault/item}",
                Err(ProblemKind::UnsupportedScheme("op".into())),
            ),
            ("${TOKEN", Err(ProblemKind::MalformedVariable)),
            ("${}", Err(ProblemKind::MalformedVariable)),
        ];
        for (text, expected) in table {
            let got = interpolate(text, &env);
            assert_eq!(
                got.as_deref().map_err(Clone::clone),
                expected.clone(),
                "{text}"
            );
        }
    }

    #[test]
    fn filters_include_then_exclude() {
        let p = |s: &str| glob::Pattern::new(s).unwrap();
        let filter = ToolFilter {
            include: Some(vec![p("read_*"), p("search")]),
            exclude: vec![p("*_secret")],
        };
        assert!(filter.allows("read_file"));
        assert!(filter.allows("search"));
        assert!(!filter.allows("write_file"));
        assert!(!filter.allows("read_secret"));
        assert!(ToolFilter::default().allows("anything"));
    }
}

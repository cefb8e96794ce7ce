//! The `mcpServers` configuration file, in the forms MCP apps write it.
//!
//! [`ServersConfig::load`] reads one file; [`ServersConfig::parse`] takes its text and an
//! environment lookup (so tests need no process environment). The whole file is checked
//! before anything is returned: a file with a problem never half-loads, and every problem is
//! reported at once, each naming the server and the key (and the line and column for syntax).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use toolwire::auth::{OAuthConfig, StaticClient};
use toolwire::{Client, ClientBuilder, HttpTransport, HttpTransportBuilder, StdioConfig};

/// Every server of one configuration file, by name (sorted).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServersConfig {
    /// The file it came from, if it came from one.
    pub file: Option<PathBuf>,
    /// The servers, sorted by name.
    pub servers: Vec<ServerConfig>,
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
    /// Which of its tools to use (`includeTools`/`enabled_tools`, `excludeTools`/
    /// `disabled_tools`).
    pub tools: ToolFilter,
    /// `oauth` (remote entries only, never beside an `Authorization` header): how to log in
    /// where the server asks for OAuth. A remote entry without it still uses OAuth when the
    /// caller turns it on ([`Self::oauth_config`]).
    pub oauth: Option<OAuthEntry>,
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
    },
    /// The legacy HTTP+SSE transport of `2024-11-05` (`type: "sse"`): the URL is the server's
    /// SSE stream; connect it with `ClientBuilder::connect_sse` and
    /// [`ServerConfig::http_transport`]'s settings.
    Sse {
        /// `url` or `serverUrl`.
        url: String,
        /// `headers`. Values are never shown in `Debug`.
        headers: Vec<(String, String)>,
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
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", &toolwire::types::redacted_url(url))
                .field("headers", &names(headers))
                .finish(),
            Self::Sse { url, headers } => f
                .debug_struct("Sse")
                .field("url", &toolwire::types::redacted_url(url))
                .field("headers", &names(headers))
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

/// Why a server entry cannot be connected as it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The entry is not of the kind asked for (an HTTP entry asked for its stdio settings).
    #[error("server `{server}` is not a {wanted} server")]
    WrongTransport {
        /// The server.
        server: String,
        /// What was asked for.
        wanted: &'static str,
    },
    /// The client refused the entry's settings (a header or URL its transport refuses, a
    /// stdio command that cannot be started).
    #[error("server `{server}`")]
    Client {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: toolwire::Error,
    },
}

impl ServerConfig {
    /// The stdio settings of a `Stdio` entry: its command, arguments, `env` on top of the
    /// allow-listed environment, and `cwd`.
    pub fn stdio_config(&self) -> Result<StdioConfig, ConnectError> {
        match &self.transport {
            ServerTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut config = StdioConfig::new(command, args);
                for (name, value) in env {
                    config = config.with_env(name, value);
                }
                if let Some(cwd) = cwd {
                    config = config.with_cwd(cwd);
                }
                Ok(config)
            }
            _ => Err(ConnectError::WrongTransport {
                server: self.name.clone(),
                wanted: "stdio",
            }),
        }
    }

    /// The HTTP transport settings of an `Http` or `Sse` entry: its URL and `headers` (a
    /// header the transport refuses is the error of its `build`). An `Authorization` header
    /// becomes the transport's credentials (`HttpTransportBuilder::authorization`: a bearer
    /// token, or the value as written for another scheme), never shown in `Debug` or logs;
    /// one that fills in empty (`Bearer ${TOKEN:-}` without a token) is left out. An `Sse` entry's settings
    /// are built with `build_sse` (or connected with `ClientBuilder::connect_sse`). TLS
    /// roots are [`TlsRoots::from_env`](toolwire::TlsRoots::from_env): the bundle that
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR` name, Mozilla's otherwise.
    pub fn http_transport(&self) -> Result<HttpTransportBuilder, ConnectError> {
        match &self.transport {
            ServerTransport::Http { url, headers } | ServerTransport::Sse { url, headers } => {
                let mut builder =
                    HttpTransport::builder(url.as_str()).tls_roots(toolwire::TlsRoots::from_env());
                for (name, value) in headers {
                    builder = if !name.eq_ignore_ascii_case("authorization") {
                        builder.header(name, value)
                    } else if credentials(name, value) {
                        // The transport owns `Authorization`: credentials given whole.
                        builder.authorization(value)
                    } else {
                        builder
                    };
                }
                Ok(builder)
            }
            ServerTransport::Stdio { .. } => Err(ConnectError::WrongTransport {
                server: self.name.clone(),
                wanted: "HTTP",
            }),
        }
    }
}

impl ServerConfig {
    /// Connects the entry with `client`'s settings, the one way from an entry to a client
    /// (`Host` and the CLI take it): a stdio entry starts its command now (a command that
    /// cannot start is the error here); an `http` entry speaks Streamable HTTP and falls
    /// back to the 2024-11-05 HTTP+SSE transport when the server refuses it
    /// (`ClientBuilder::connect_http`); an `sse` entry speaks HTTP+SSE. The entry's
    /// `timeout`, when set, replaces `client`'s. Every later connection (after a death, with
    /// `client`'s reconnect policy, or after `Client::disconnect`) is made from the same
    /// settings.
    pub fn connect(&self, client: ClientBuilder) -> Result<Client, ConnectError> {
        self.connect_with(client, Ok::<_, ConnectError>, |stdio| stdio)
    }

    /// [`ServerConfig::connect`] with the caller's changes to the transport settings:
    /// `http` edits a remote entry's (headers, proxy, TLS roots, credentials: the CLI applies
    /// its flags there), `stdio` a stdio entry's (where the child's stderr goes).
    pub fn connect_with<E: From<ConnectError>>(
        &self,
        mut client: ClientBuilder,
        http: impl FnOnce(HttpTransportBuilder) -> Result<HttpTransportBuilder, E>,
        stdio: impl FnOnce(StdioConfig) -> StdioConfig,
    ) -> Result<Client, E> {
        if let Some(timeout) = self.timeout {
            client = client.timeouts(timeout, timeout.min(Duration::from_secs(5)));
        }
        let refused = |source| ConnectError::Client {
            server: self.name.clone(),
            source,
        };
        let connected = match &self.transport {
            ServerTransport::Stdio { .. } => client.connect_stdio(stdio(self.stdio_config()?)),
            ServerTransport::Http { .. } => client.connect_http(http(self.http_transport()?)?),
            ServerTransport::Sse { .. } => client.connect_sse(http(self.http_transport()?)?),
        };
        Ok(connected.map_err(refused)?)
    }

    /// The URL of a remote entry.
    pub fn url(&self) -> Option<&str> {
        match &self.transport {
            ServerTransport::Http { url, .. } | ServerTransport::Sse { url, .. } => Some(url),
            ServerTransport::Stdio { .. } => None,
        }
    }

    /// Whether the entry carries credentials of its own: an `Authorization` header that does
    /// not fill in empty.
    pub fn has_authorization(&self) -> bool {
        match &self.transport {
            ServerTransport::Http { headers, .. } | ServerTransport::Sse { headers, .. } => {
                carries_credentials(headers)
            }
            ServerTransport::Stdio { .. } => false,
        }
    }

    /// The OAuth settings for this entry, on top of `base` (its store and handler): the
    /// entry's `clientId` as a pre-registered client and its `scopes`, where it has them.
    /// `None` for a stdio entry and for one with an `Authorization` header of its own: those
    /// are not authorized by OAuth.
    pub fn oauth_config(&self, base: OAuthConfig) -> Option<OAuthConfig> {
        if self.url().is_none() || self.has_authorization() {
            return None;
        }
        let Some(entry) = &self.oauth else {
            return Some(base);
        };
        let mut config = base;
        if let Some(id) = &entry.client_id {
            let mut client = StaticClient::new(id);
            if let Some(issuer) = &entry.issuer {
                client = client.issuer(issuer);
            }
            config = config.static_client(client);
        }
        if !entry.scopes.is_empty() {
            config = config.scopes(entry.scopes.iter().cloned());
        }
        Some(config)
    }
}

/// Whether a header carries credentials: an `Authorization` whose value is more than blank or
/// a bare `Bearer` (what `Bearer ${TOKEN:-}` fills in to without a token).
fn credentials(name: &str, value: &str) -> bool {
    let value = value.trim();
    name.eq_ignore_ascii_case("authorization")
        && !value.is_empty()
        && !value.eq_ignore_ascii_case("bearer")
}

/// Whether any of an entry's headers carries credentials.
fn carries_credentials(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(name, value)| credentials(name, value))
}

/// Why a configuration file was refused: every problem found, each with where it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}", .file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file was read and has problems; nothing of it was loaded.
    #[error("{}: {}", file_name(.file.as_deref()), list(.problems))]
    Invalid {
        /// The file, if there was one.
        file: Option<PathBuf>,
        /// Every problem, in the order of the file.
        problems: Vec<Problem>,
    },
}

fn file_name(file: Option<&Path>) -> String {
    file.map_or_else(
        || "the configuration".to_owned(),
        |f| f.display().to_string(),
    )
}

fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ConfigError {
    /// The problems of an `Invalid` file (none for a file that could not be read).
    pub fn problems(&self) -> &[Problem] {
        match self {
            Self::Invalid { problems, .. } => problems,
            Self::Read { .. } => &[],
        }
    }
}

/// One problem of a configuration file, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// The server entry, when the problem is inside one.
    pub server: Option<String>,
    /// The key, as a path inside the entry (`env.TOKEN`, `args[1]`).
    pub key: Option<String>,
    /// Line and column (1-based), when the parser knows them.
    pub position: Option<(usize, usize)>,
    /// What is wrong.
    pub kind: ProblemKind,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((line, column)) = self.position {
            write!(f, "line {line}, column {column}: ")?;
        }
        match (&self.server, &self.key) {
            (Some(server), Some(key)) => write!(f, "server `{server}`, key `{key}`: ")?,
            (Some(server), None) => write!(f, "server `{server}`: ")?,
            (None, Some(key)) => write!(f, "key `{key}`: ")?,
            (None, None) => {}
        }
        write!(f, "{}", self.kind)
    }
}

/// What is wrong, for [`Problem`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProblemKind {
    /// Not JSON (with comments and trailing commas allowed).
    #[error("not JSON: {0}")]
    Syntax(String),
    /// The file is not a JSON object.
    #[error("the file must be a JSON object")]
    NotAnObject,
    /// Neither `mcpServers` nor `servers` is there.
    #[error("no `mcpServers` (or `servers`) object")]
    NoServers,
    /// A member has the wrong JSON type.
    #[error("must be {0}")]
    WrongType(&'static str),
    /// An entry has neither `command` nor a URL.
    #[error("needs `command` (stdio) or `url` (HTTP)")]
    NoTransport,
    /// An entry has both `command` and a URL.
    #[error("has both `command` and a URL; a server is one or the other")]
    BothTransports,
    /// An unknown `type`.
    #[error(
        "unknown type {0:?} (known: \"stdio\", \"http\", \"streamable-http\", \"streamable_http\", \"sse\")"
    )]
    UnknownType(String),
    /// The `type` and the members disagree (`type: "stdio"` with only a URL).
    #[error("type {0:?} needs {1}")]
    TypeMismatch(String, &'static str),
    /// `${VAR}` names a variable that is not set (and gives no `:-default`).
    #[error("the environment variable `{0}` is not set")]
    UnsetVariable(String),
    /// `${input:…}` (VS Code's prompt) or another scheme this loader cannot fill in.
    #[error(
        "`${{{0}:…}}` cannot be filled in here (only ${{VAR}}, ${{VAR:-default}} and ${{env:VAR}})"
    )]
    UnsupportedScheme(String),
    /// A `${` without its `}`, or an empty name.
    #[error("malformed `${{…}}`")]
    MalformedVariable,
    /// A tool filter pattern that is not a valid glob.
    #[error("{0:?} is not a valid glob pattern")]
    BadPattern(String),
    /// `oauth` on a stdio entry: OAuth authorizes HTTP requests.
    #[error("`oauth` is for remote (HTTP) servers only")]
    OAuthOnStdio,
    /// `oauth` beside an `Authorization` header: two ways to authorize, and the header would
    /// hide the login.
    #[error("`oauth` and an `Authorization` header both authorize requests; keep one")]
    OAuthWithAuthorization,
}

/// The members the loader reads; everything else is kept in [`ServerConfig::extra`].
const KNOWN: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "serverUrl",
    "httpUrl",
    "headers",
    "disabled",
    "timeout",
    "includeTools",
    "excludeTools",
    "enabled_tools",
    "disabled_tools",
    "oauth",
];

impl ServersConfig {
    /// Reads and checks `file`, filling `${VAR}`s from this process's environment. The caller
    /// vouches for the file: see [`crate::trust`] for files a project brought.
    pub fn load(file: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let file = file.as_ref();
        let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Read {
            file: file.to_owned(),
            source,
        })?;
        Self::from_text(file, &text)
    }

    /// Checks `text`, read from `file` (named in errors and kept), filling `${VAR}`s from
    /// this process's environment: for a caller that read the file itself (to check whether
    /// it may be trusted, [`crate::trust`]) and must use exactly what it checked.
    pub fn from_text(file: impl AsRef<Path>, text: &str) -> Result<Self, ConfigError> {
        let file = file.as_ref();
        let mut config =
            Self::parse(text, |name| std::env::var(name).ok()).map_err(|e| match e {
                ConfigError::Invalid { problems, .. } => ConfigError::Invalid {
                    file: Some(file.to_owned()),
                    problems,
                },
                other => other,
            })?;
        config.file = Some(file.to_owned());
        Ok(config)
    }

    /// Checks the text of a configuration, filling `${VAR}`s through `env`.
    pub fn parse(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let options = jsonc_parser::ParseOptions {
            allow_comments: true,
            allow_trailing_commas: true,
            allow_loose_object_property_names: false,
            allow_missing_commas: false,
            allow_single_quoted_strings: false,
            allow_hexadecimal_numbers: false,
            allow_unary_plus_numbers: false,
            allow_bare_decimal_point_numbers: false,
            allow_non_finite_numbers: false,
            allow_extended_string_escapes: false,
        };
        let invalid = |problems| ConfigError::Invalid {
            file: None,
            problems,
        };
        let root: Value = jsonc_parser::parse_to_serde_value(text, &options).map_err(|e| {
            invalid(vec![Problem {
                server: None,
                key: None,
                position: Some((e.line_display(), e.column_display())),
                kind: ProblemKind::Syntax(e.kind().to_string()),
            }])
        })?;
        let mut reader = Reader {
            env: &env,
            problems: Vec::new(),
        };
        let servers = reader.root(&root);
        if reader.problems.is_empty() {
            Ok(Self {
                file: None,
                servers,
            })
        } else {
            Err(invalid(reader.problems))
        }
    }

    /// The server named `name`.
    pub fn get(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// One pass over the parsed file, collecting every problem.
struct Reader<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    problems: Vec<Problem>,
}

impl Reader<'_> {
    fn problem(&mut self, server: Option<&str>, key: Option<&str>, kind: ProblemKind) {
        self.problems.push(Problem {
            server: server.map(str::to_owned),
            key: key.map(str::to_owned),
            position: None,
            kind,
        });
    }

    fn root(&mut self, root: &Value) -> Vec<ServerConfig> {
        let Some(root) = root.as_object() else {
            self.problem(None, None, ProblemKind::NotAnObject);
            return Vec::new();
        };
        let (key, servers) = match (root.get("mcpServers"), root.get("servers")) {
            (Some(servers), _) => ("mcpServers", servers),
            (None, Some(servers)) => ("servers", servers),
            (None, None) => {
                self.problem(None, None, ProblemKind::NoServers);
                return Vec::new();
            }
        };
        let Some(servers) = servers.as_object() else {
            self.problem(None, Some(key), ProblemKind::WrongType("an object"));
            return Vec::new();
        };
        let sorted: BTreeMap<&String, &Value> = servers.iter().collect();
        sorted
            .into_iter()
            .filter_map(|(name, entry)| self.server(name, entry))
            .collect()
    }

    fn server(&mut self, name: &str, entry: &Value) -> Option<ServerConfig> {
        let Some(entry) = entry.as_object() else {
            self.problem(Some(name), None, ProblemKind::WrongType("an object"));
            return None;
        };
        let before = self.problems.len();
        let transport = self.transport(name, entry);
        let disabled = self.boolean(name, entry, "disabled").unwrap_or(false);
        let timeout = match entry.get("timeout") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(ms) => Some(Duration::from_millis(ms)),
                None => {
                    self.problem(
                        Some(name),
                        Some("timeout"),
                        ProblemKind::WrongType("a whole number of milliseconds"),
                    );
                    None
                }
            },
        };
        let include = self.patterns(name, entry, &["includeTools", "enabled_tools"]);
        let exclude = self
            .patterns(name, entry, &["excludeTools", "disabled_tools"])
            .unwrap_or_default();
        let oauth = self.oauth(name, entry, transport.as_ref());
        let extra = entry
            .iter()
            .filter(|(k, _)| !KNOWN.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let transport = transport?;
        (self.problems.len() == before).then(|| ServerConfig {
            name: name.to_owned(),
            transport,
            disabled,
            timeout,
            tools: ToolFilter { include, exclude },
            oauth,
            extra,
        })
    }

    /// `oauth: {clientId?, scopes?, redirectUri?, issuer?}`, on a remote entry without an
    /// `Authorization` header.
    fn oauth(
        &mut self,
        name: &str,
        entry: &Map<String, Value>,
        transport: Option<&ServerTransport>,
    ) -> Option<OAuthEntry> {
        let value = entry.get("oauth").filter(|v| !v.is_null())?;
        let Some(object) = value.as_object() else {
            self.problem(
                Some(name),
                Some("oauth"),
                ProblemKind::WrongType("an object"),
            );
            return None;
        };
        match transport {
            Some(ServerTransport::Stdio { .. }) => {
                self.problem(Some(name), Some("oauth"), ProblemKind::OAuthOnStdio);
                return None;
            }
            Some(ServerTransport::Http { headers, .. } | ServerTransport::Sse { headers, .. })
                if carries_credentials(headers) =>
            {
                self.problem(
                    Some(name),
                    Some("oauth"),
                    ProblemKind::OAuthWithAuthorization,
                );
                return None;
            }
            _ => {}
        }
        // Each member filled in, a problem named by its whole key (`oauth.clientId`).
        let text = |reader: &mut Self, key: &str| -> Option<String> {
            let path = format!("oauth.{key}");
            match object.get(key) {
                None | Some(Value::Null) => None,
                Some(Value::String(v)) => reader.fill(name, &path, v),
                Some(_) => {
                    reader.problem(Some(name), Some(&path), ProblemKind::WrongType("a string"));
                    None
                }
            }
        };
        let client_id = text(self, "clientId");
        let redirect_uri = text(self, "redirectUri");
        let issuer = text(self, "issuer");
        let scopes = match object.get("scopes") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    self.fill(
                        name,
                        &format!("oauth.scopes[{i}]"),
                        v.as_str().unwrap_or(""),
                    )
                })
                .collect(),
            Some(_) => {
                self.problem(
                    Some(name),
                    Some("oauth.scopes"),
                    ProblemKind::WrongType("an array of strings"),
                );
                Vec::new()
            }
        };
        Some(OAuthEntry {
            client_id,
            scopes,
            redirect_uri,
            issuer,
        })
    }

    fn transport(&mut self, name: &str, entry: &Map<String, Value>) -> Option<ServerTransport> {
        let kind = match entry.get("type") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) => match t.as_str() {
                "stdio" => Some(Kind::Stdio),
                "http" | "streamable-http" | "streamable_http" => Some(Kind::Http),
                "sse" => Some(Kind::Sse),
                other => {
                    self.problem(
                        Some(name),
                        Some("type"),
                        ProblemKind::UnknownType(other.to_owned()),
                    );
                    return None;
                }
            },
            Some(_) => {
                self.problem(Some(name), Some("type"), ProblemKind::WrongType("a string"));
                return None;
            }
        };
        let command = self.string(name, entry, "command");
        // `httpUrl` is Gemini CLI's Streamable HTTP URL; `serverUrl` is Windsurf's.
        let url_key = ["httpUrl", "url", "serverUrl"]
            .into_iter()
            .find(|k| entry.get(*k).is_some_and(|v| !v.is_null()));
        let url = url_key.and_then(|k| self.string(name, entry, k).map(|u| (k, u)));
        let type_name = |k: &Kind| match k {
            Kind::Stdio => "stdio",
            Kind::Http => "http",
            Kind::Sse => "sse",
        };
        let kind = match (kind, &command, &url) {
            (_, Some(_), Some(_)) => {
                self.problem(Some(name), None, ProblemKind::BothTransports);
                return None;
            }
            (None, None, None) => {
                self.problem(Some(name), None, ProblemKind::NoTransport);
                return None;
            }
            (Some(Kind::Stdio), None, _) => {
                self.problem(
                    Some(name),
                    Some("type"),
                    ProblemKind::TypeMismatch("stdio".into(), "`command`"),
                );
                return None;
            }
            (Some(k @ (Kind::Http | Kind::Sse)), Some(_), _) => {
                self.problem(
                    Some(name),
                    Some("type"),
                    ProblemKind::TypeMismatch(type_name(&k).into(), "a URL, not `command`"),
                );
                return None;
            }
            (Some(k), _, _) => k,
            (None, Some(_), None) => Kind::Stdio,
            (None, None, Some(_)) => Kind::Http,
        };
        match kind {
            Kind::Stdio => {
                let command = self.fill(name, "command", &command?)?;
                let args = self.strings(name, entry, "args").unwrap_or_default();
                let args = args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| self.fill(name, &format!("args[{i}]"), a))
                    .collect::<Option<Vec<_>>>()?;
                let env = self.map(name, entry, "env")?;
                let cwd = self.string(name, entry, "cwd").map(PathBuf::from);
                Some(ServerTransport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                })
            }
            Kind::Http | Kind::Sse => {
                let (key, url) = url?;
                let url = self.fill(name, key, &url)?;
                let headers = self.map(name, entry, "headers")?;
                Some(if matches!(kind, Kind::Sse) {
                    ServerTransport::Sse { url, headers }
                } else {
                    ServerTransport::Http { url, headers }
                })
            }
        }
    }

    fn string(&mut self, name: &str, entry: &Map<String, Value>, key: &str) -> Option<String> {
        match entry.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.problem(Some(name), Some(key), ProblemKind::WrongType("a string"));
                None
            }
        }
    }

    fn boolean(&mut self, name: &str, entry: &Map<String, Value>, key: &str) -> Option<bool> {
        match entry.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => {
                self.problem(
                    Some(name),
                    Some(key),
                    ProblemKind::WrongType("true or false"),
                );
                None
            }
        }
    }

    fn strings(
        &mut self,
        name: &str,
        entry: &Map<String, Value>,
        key: &str,
    ) -> Option<Vec<String>> {
        let value = entry.get(key).filter(|v| !v.is_null())?;
        let items = value.as_array().and_then(|items| {
            items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        });
        if items.is_none() {
            self.problem(
                Some(name),
                Some(key),
                ProblemKind::WrongType("an array of strings"),
            );
        }
        items
    }

    /// A string → string object (`env`, `headers`), its values filled in; `Some(empty)` when
    /// absent, `None` after a problem.
    fn map(
        &mut self,
        name: &str,
        entry: &Map<String, Value>,
        key: &str,
    ) -> Option<Vec<(String, String)>> {
        let Some(value) = entry.get(key).filter(|v| !v.is_null()) else {
            return Some(Vec::new());
        };
        let Some(object) = value.as_object() else {
            self.problem(
                Some(name),
                Some(key),
                ProblemKind::WrongType("an object of strings"),
            );
            return None;
        };
        let mut out = Vec::with_capacity(object.len());
        let mut ok = true;
        for (k, v) in object {
            let path = format!("{key}.{k}");
            match v.as_str() {
                Some(text) => match self.fill(name, &path, text) {
                    Some(filled) => out.push((k.clone(), filled)),
                    None => ok = false,
                },
                None => {
                    self.problem(Some(name), Some(&path), ProblemKind::WrongType("a string"));
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    fn patterns(
        &mut self,
        name: &str,
        entry: &Map<String, Value>,
        keys: &[&str],
    ) -> Option<Vec<glob::Pattern>> {
        let key = keys
            .iter()
            .find(|k| entry.get(**k).is_some_and(|v| !v.is_null()))?;
        let texts = self.strings(name, entry, key)?;
        let mut patterns = Vec::with_capacity(texts.len());
        for text in texts {
            match glob::Pattern::new(&text) {
                Ok(p) => patterns.push(p),
                Err(_) => self.problem(Some(name), Some(key), ProblemKind::BadPattern(text)),
            }
        }
        Some(patterns)
    }

    /// Fills in `${VAR}`, `${VAR:-default}` and `${env:VAR}`; a `$` not followed by `{` is
    /// kept as it is.
    fn fill(&mut self, name: &str, key: &str, text: &str) -> Option<String> {
        match interpolate(text, self.env) {
            Ok(filled) => Some(filled),
            Err(kind) => {
                self.problem(Some(name), Some(key), kind);
                None
            }
        }
    }
}

enum Kind {
    Stdio,
    Http,
    Sse,
}

/// `${VAR}`, `${VAR:-default}` (the default when `VAR` is unset or empty) and `${env:VAR}`.
pub(crate) fn interpolate(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ProblemKind> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(ProblemKind::MalformedVariable)?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let name = match name.split_once(':') {
            Some(("env", var)) => var,
            Some((scheme, _)) => return Err(ProblemKind::UnsupportedScheme(scheme.to_owned())),
            None => name,
        };
        if name.is_empty() {
            return Err(ProblemKind::MalformedVariable);
        }
        match (env(name).filter(|v| !v.is_empty()), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) if env(name).is_some() => {}
            (None, None) => return Err(ProblemKind::UnsetVariable(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
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

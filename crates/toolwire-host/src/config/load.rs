//! Reading a file: [`ServersConfig::load`] and [`ServersConfig::parse`], and every
//! [`Problem`] they report.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::connect::carries_credentials;
use super::*;

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

impl ConfigError {
    /// This error, naming `file` as where its problems are (unless it names one already).
    pub fn in_file(self, file: &Path) -> Self {
        match self {
            Self::Invalid {
                file: None,
                problems,
            } => Self::Invalid {
                file: Some(file.to_owned()),
                problems,
            },
            other => other,
        }
    }
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
    /// `unixSocket` on a stdio entry: a socket carries HTTP.
    #[error("`unixSocket` is for remote (HTTP) servers only")]
    UnixSocketOnStdio,
    /// `oauth` on a stdio entry: OAuth authorizes HTTP requests.
    #[error("`oauth` is for remote (HTTP) servers only")]
    OAuthOnStdio,
    /// `oauth` beside an `Authorization` header: two ways to authorize, and the header would
    /// hide the login.
    #[error("`oauth` and an `Authorization` header both authorize requests; keep one")]
    OAuthWithAuthorization,
}

/// VS Code's variable for the folder of the project a file belongs to, filled in by
/// [`ServersConfig::from_text`] and [`ServersConfig::load`].
const WORKSPACE_FOLDER: &str = "workspaceFolder";

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
    "unixSocket",
    "disabled",
    "timeout",
    "protocol",
    "includeTools",
    "excludeTools",
    "enabled_tools",
    "disabled_tools",
    "oauth",
    "aliases",
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
        // VS Code's `${workspaceFolder}`: the folder the file's project is (a file under
        // `.vscode/` belongs to the folder above), unless the environment names one.
        let folder = file.parent().map(|dir| match dir.file_name() {
            Some(name) if name == ".vscode" => dir.parent().unwrap_or(dir),
            _ => dir,
        });
        let folder = folder.map(|f| {
            std::path::absolute(f)
                .unwrap_or_else(|_| f.to_owned())
                .display()
                .to_string()
        });
        let env = |name: &str| {
            std::env::var(name)
                .ok()
                .or_else(|| (name == WORKSPACE_FOLDER).then(|| folder.clone()).flatten())
        };
        let mut config = Self::parse(text, env).map_err(|e| e.in_file(file))?;
        config.file = Some(file.to_owned());
        Ok(config)
    }

    /// The members of the entries that are likely typos of a member this loader reads
    /// (`envv`, `disable`, `Command`): each entry's name, the member, and the member it is
    /// probably meant to be. They are kept and ignored, as every member the loader does not
    /// read (other applications' own, such as `alwaysAllow`, pass unremarked); a caller shows
    /// these, since the entry will not do what its author meant.
    pub fn likely_typos(&self) -> Vec<(String, String, &'static str)> {
        let mut found = Vec::new();
        for server in &self.servers {
            for key in server.extra.keys() {
                let meant = KNOWN.iter().copied().find(|known| {
                    // A short name is one edit from many words: one edit is a typo there.
                    let edits = if known.len() > 3 { 2 } else { 1 };
                    key.eq_ignore_ascii_case(known)
                        || strsim::damerau_levenshtein(key, known) <= edits
                });
                if let Some(meant) = meant {
                    found.push((server.name.clone(), key.clone(), meant));
                }
            }
        }
        found
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
                gateway: root.get("gateway").cloned(),
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
        let protocol = self.protocol(name, entry);
        let include = self.patterns(name, entry, &["includeTools", "enabled_tools"]);
        let exclude = self
            .patterns(name, entry, &["excludeTools", "disabled_tools"])
            .unwrap_or_default();
        let oauth = self.oauth(name, entry, transport.as_ref());
        let aliases = self.aliases(name, entry);
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
            protocol,
            tools: ToolFilter { include, exclude },
            oauth,
            aliases,
            extra,
        })
    }

    /// `aliases: {"tool": "name"}` (Toolwire's own): the name a host gives each of these
    /// tools instead of its qualified one. Every value a non-empty string without whitespace.
    fn aliases(&mut self, name: &str, entry: &Map<String, Value>) -> BTreeMap<String, String> {
        let mut aliases = BTreeMap::new();
        match entry.get("aliases") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (tool, alias) in map {
                    match alias.as_str() {
                        Some(alias)
                            if !alias.is_empty() && !alias.chars().any(char::is_whitespace) =>
                        {
                            aliases.insert(tool.clone(), alias.to_owned());
                        }
                        _ => self.problem(
                            Some(name),
                            Some("aliases"),
                            ProblemKind::WrongType(
                                "an object of tool names to new names (non-empty, no whitespace)",
                            ),
                        ),
                    }
                }
            }
            Some(_) => self.problem(
                Some(name),
                Some("aliases"),
                ProblemKind::WrongType("an object of tool names to new names"),
            ),
        }
        aliases
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
                let cwd = match self.string(name, entry, "cwd") {
                    Some(cwd) => Some(PathBuf::from(self.fill(name, "cwd", &cwd)?)),
                    None => None,
                };
                if entry.get("unixSocket").is_some_and(|v| !v.is_null()) {
                    self.problem(
                        Some(name),
                        Some("unixSocket"),
                        ProblemKind::UnixSocketOnStdio,
                    );
                }
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
                let unix_socket = match self.string(name, entry, "unixSocket") {
                    Some(path) => Some(PathBuf::from(self.fill(name, "unixSocket", &path)?)),
                    None => None,
                };
                Some(if matches!(kind, Kind::Sse) {
                    ServerTransport::Sse {
                        url,
                        headers,
                        unix_socket,
                    }
                } else {
                    ServerTransport::Http {
                        url,
                        headers,
                        unix_socket,
                    }
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

    /// `protocol`: `auto`, or a version this client speaks (anything else is a problem).
    fn protocol(&mut self, name: &str, entry: &Map<String, Value>) -> toolwire::ProtocolMode {
        let pinned = match entry.get("protocol") {
            None | Some(Value::Null) => return toolwire::ProtocolMode::Auto,
            Some(Value::String(s)) if s == "auto" => return toolwire::ProtocolMode::Auto,
            Some(Value::String(s)) => toolwire::ProtocolVersion::new(s.as_str())
                .ok()
                .filter(toolwire::ProtocolVersion::is_supported),
            Some(_) => None,
        };
        match pinned {
            Some(version) => toolwire::ProtocolMode::Pinned(version),
            None => {
                self.problem(
                    Some(name),
                    Some("protocol"),
                    ProblemKind::WrongType(
                        "\"auto\" or a version this client speaks: 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05",
                    ),
                );
                toolwire::ProtocolMode::Auto
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

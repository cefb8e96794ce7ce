//! The MCP hosts people use: where each keeps its list of servers, the shape of that list,
//! and how one of its entries reads as an `mcpServers` entry Toolwire loads.
//!
//! Every host's list is an object of entries by name. Claude Desktop, Claude Code, Cursor,
//! Windsurf and Gemini CLI call it `mcpServers`; VS Code `servers`; Zed `context_servers`
//! inside its settings; Codex `mcp_servers` in TOML. Their entries differ in a few members
//! (a URL under `serverUrl` or `httpUrl`, Zed's command object, Codex's header variables),
//! which [`entry`] turns into the members Toolwire's loader reads. Values are copied as
//! written: a secret that was a `${VAR}` reference stays one, and host-only variables
//! (VS Code's `${input:…}`, Cursor's `${userHome}`) become environment references with a note.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// A host whose server list can be read (and rewired).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum HostApp {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    VsCode,
    Windsurf,
    Zed,
    Codex,
    Gemini,
}

impl HostApp {
    /// Every host, in the order their entries are merged.
    pub(crate) const ALL: [Self; 8] = [
        Self::ClaudeDesktop,
        Self::ClaudeCode,
        Self::Cursor,
        Self::VsCode,
        Self::Windsurf,
        Self::Zed,
        Self::Codex,
        Self::Gemini,
    ];

    /// The name on the command line (`--from cursor`) and in suffixes of renamed entries.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::ClaudeDesktop => "claude-desktop",
            Self::ClaudeCode => "claude-code",
            Self::Cursor => "cursor",
            Self::VsCode => "vscode",
            Self::Windsurf => "windsurf",
            Self::Zed => "zed",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.name() == name)
    }

    /// The file's format.
    pub(crate) fn is_toml(self) -> bool {
        self == Self::Codex
    }

    /// The member holding the server list, at the file's top level (Claude Code also keeps a
    /// list per project: [`Self::list_paths`]).
    pub(crate) fn list_key(self) -> &'static str {
        match self {
            Self::VsCode => "servers",
            Self::Zed => "context_servers",
            Self::Codex => "mcp_servers",
            _ => "mcpServers",
        }
    }

    /// Where the lists of this host are in its file: members from the root. Claude Code's
    /// `~/.claude.json` has the user's list at the top and one per project under
    /// `projects.<dir>`; the list of the current directory's project is read too. VS Code
    /// kept its list in `settings.json` under `mcp` before it had `mcp.json`.
    pub(crate) fn list_paths(self, cwd: Option<&Path>) -> Vec<Vec<String>> {
        let mut paths = vec![vec![self.list_key().to_owned()]];
        if self == Self::VsCode {
            paths.push(vec!["mcp".to_owned(), "servers".to_owned()]);
        }
        if self == Self::ClaudeCode
            && let Some(cwd) = cwd
        {
            paths.push(vec![
                "projects".to_owned(),
                cwd.to_string_lossy().into_owned(),
                "mcpServers".to_owned(),
            ]);
        }
        paths
    }

    /// The file this host keeps its servers in, where it usually is: the first of the
    /// usual places that exists, else the first of them.
    pub(crate) fn usual_file(self, places: &Places) -> Option<PathBuf> {
        let candidates = self.candidates(places);
        candidates
            .iter()
            .find(|p| p.is_file())
            .or(candidates.first())
            .cloned()
    }

    fn candidates(self, places: &Places) -> Vec<PathBuf> {
        let home = places.home.as_deref();
        let at_home = |rel: &str| home.map(|h| h.join(rel));
        // The platform's folder for applications' settings: `~/.config` (or
        // `$XDG_CONFIG_HOME`) on Linux, `~/Library/Application Support` on macOS, `%APPDATA%`
        // on Windows.
        let app_dirs: Vec<PathBuf> = [
            places.config.clone(),
            at_home(".config"),
            at_home("Library/Application Support"),
            places.appdata.clone(),
        ]
        .into_iter()
        .flatten()
        .collect();
        let in_app_dirs = |rel: &str| app_dirs.iter().map(|d| d.join(rel)).collect::<Vec<_>>();
        match self {
            Self::ClaudeDesktop => in_app_dirs("Claude/claude_desktop_config.json"),
            Self::ClaudeCode => at_home(".claude.json").into_iter().collect(),
            Self::Cursor => at_home(".cursor/mcp.json").into_iter().collect(),
            Self::VsCode => {
                let mut files = in_app_dirs("Code/User/mcp.json");
                files.extend(in_app_dirs("Code/User/settings.json"));
                files
            }
            Self::Windsurf => at_home(".codeium/windsurf/mcp_config.json")
                .into_iter()
                .collect(),
            // Zed keeps `~/.config/zed` on macOS too.
            Self::Zed => {
                let mut files = in_app_dirs("zed/settings.json");
                files.extend(in_app_dirs("Zed/settings.json"));
                files
            }
            Self::Codex => match &places.codex_home {
                Some(dir) => vec![dir.join("config.toml")],
                None => at_home(".codex/config.toml").into_iter().collect(),
            },
            Self::Gemini => at_home(".gemini/settings.json").into_iter().collect(),
        }
    }
}

/// The folders the hosts' files are found from, read from the environment once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Places {
    pub(crate) home: Option<PathBuf>,
    pub(crate) config: Option<PathBuf>,
    pub(crate) appdata: Option<PathBuf>,
    pub(crate) codex_home: Option<PathBuf>,
}

impl Places {
    pub(crate) fn from_env() -> Self {
        let dir = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Self {
            home: dir("HOME").or_else(|| dir("USERPROFILE")),
            config: dir("XDG_CONFIG_HOME"),
            appdata: dir("APPDATA"),
            codex_home: dir("CODEX_HOME"),
        }
    }
}

/// Why a file could not be read as a host's list.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("cannot read {}: {source}", .file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not valid {format}: {reason}", .file.display())]
    Syntax {
        file: PathBuf,
        format: &'static str,
        reason: String,
    },
}

/// A host's file read whole into JSON (TOML tables as objects).
pub(crate) fn read_file(host: HostApp, file: &Path) -> Result<Value, ReadError> {
    let text = std::fs::read_to_string(file).map_err(|source| ReadError::Io {
        file: file.to_owned(),
        source,
    })?;
    parse(host, file, &text)
}

pub(crate) fn parse(host: HostApp, file: &Path, text: &str) -> Result<Value, ReadError> {
    let syntax = |format, reason: String| ReadError::Syntax {
        file: file.to_owned(),
        format,
        reason,
    };
    if host.is_toml() {
        let document: toml_edit::DocumentMut = text
            .parse()
            .map_err(|e: toml_edit::TomlError| syntax("TOML", e.message().to_owned()))?;
        return Ok(toml_table(document.as_table()));
    }
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    jsonc_parser::parse_to_serde_value::<Value>(text, &jsonc_parser::ParseOptions::default())
        .map_err(|e| syntax("JSON", e.to_string()))
}

fn toml_table(table: &dyn toml_edit::TableLike) -> Value {
    Value::Object(
        table
            .iter()
            .map(|(k, item)| (k.to_owned(), toml_item(item)))
            .collect(),
    )
}

fn toml_item(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::None => Value::Null,
        toml_edit::Item::Value(v) => toml_value(v),
        toml_edit::Item::Table(t) => toml_table(t),
        toml_edit::Item::ArrayOfTables(a) => {
            Value::Array(a.iter().map(|t| toml_table(t)).collect())
        }
    }
}

fn toml_value(value: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match value {
        T::String(s) => Value::String(s.value().clone()),
        T::Integer(i) => json!(*i.value()),
        T::Float(f) => json!(*f.value()),
        T::Boolean(b) => json!(*b.value()),
        T::Datetime(d) => Value::String(d.value().to_string()),
        T::Array(a) => Value::Array(a.iter().map(toml_value).collect()),
        T::InlineTable(t) => toml_table(t),
    }
}

/// The list at `path` in a host's document, if there is one.
pub(crate) fn list_at<'a>(document: &'a Value, path: &[String]) -> Option<&'a Map<String, Value>> {
    path.iter()
        .try_fold(document, |v, key| v.get(key))?
        .as_object()
}

/// One entry of a host's list as Toolwire reads it, or why it cannot be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    /// The entry, and what a person should know about it (a variable renamed, a member not
    /// carried over).
    Imported { entry: Value, notes: Vec<String> },
    /// Not imported, and why.
    Skipped(String),
}

/// The members that mean the same in every host and in Toolwire's file.
const CARRIED: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "headers",
    "disabled",
    "timeout",
    "includeTools",
    "excludeTools",
    "enabled_tools",
    "disabled_tools",
    "oauth",
    "protocol",
    "aliases",
];

/// Host-only members that steer the host's own interface and mean nothing to Toolwire.
const HOST_ONLY: &[&str] = &[
    "alwaysAllow",
    "autoApprove",
    "trust",
    "description",
    "icon",
    "gallery",
    "version",
    "dev",
    "source",
    "startup_timeout_sec",
    "startup_timeout_ms",
    "env_vars",
    "disabledTools",
];

/// `raw`, host `host`'s entry, as an entry of Toolwire's file.
pub(crate) fn entry(host: HostApp, raw: &Value) -> Entry {
    let Some(raw) = raw.as_object() else {
        return Entry::Skipped("not an object".into());
    };
    if is_toolwire_gateway(raw) {
        return Entry::Skipped("Toolwire's own gateway (a rewired host)".into());
    }
    let mut notes = Vec::new();
    let mut raw = raw.clone();
    match host {
        HostApp::Zed => {
            if let Some(reason) = zed(&mut raw) {
                return Entry::Skipped(reason);
            }
        }
        HostApp::Codex => codex(&mut raw, &mut notes),
        HostApp::Gemini => {
            // Gemini CLI's `url` is an HTTP+SSE endpoint; `httpUrl` a Streamable HTTP one.
            if let Some(url) = raw.remove("httpUrl") {
                raw.insert("url".into(), url);
            } else if raw.contains_key("url") && !raw.contains_key("type") {
                raw.insert("type".into(), json!("sse"));
            }
        }
        HostApp::Windsurf => {
            if let Some(url) = raw.remove("serverUrl") {
                raw.insert("url".into(), url);
            }
        }
        _ => {}
    }
    if let Some(url) = raw.remove("serverUrl").or_else(|| raw.remove("httpUrl")) {
        raw.entry("url").or_insert(url);
    }
    let mut out = Map::new();
    for (key, value) in raw {
        match key.as_str() {
            "type" => {
                // Toolwire infers stdio and HTTP from `command` and `url`; only SSE is said.
                if value.as_str() == Some("sse") {
                    out.insert(key, value);
                }
            }
            "url" => {
                out.insert(key, value);
            }
            k if CARRIED.contains(&k) => {
                out.insert(key, value);
            }
            "enabled" => {
                if value == Value::Bool(false) {
                    out.insert("disabled".into(), json!(true));
                }
            }
            "envFile" => notes.push(format!(
                "`envFile` ({}) is not read: copy its variables into `env`",
                value.as_str().unwrap_or("?")
            )),
            k if HOST_ONLY.contains(&k) => {}
            _ => notes.push(format!("`{key}` is not carried over")),
        }
    }
    if !out.contains_key("command") && !out.contains_key("url") {
        return Entry::Skipped("neither a command nor a URL".into());
    }
    let mut entry = Value::Object(out);
    if host == HostApp::Gemini {
        rewrite_strings(&mut entry, &mut bare_variables);
    }
    rewrite_strings(&mut entry, &mut |s| variables(s, &mut notes));
    notes.dedup();
    Entry::Imported { entry, notes }
}

/// Zed's entries: `command` is a string (with `args` and `env` beside it) or, in older
/// settings, an object `{path, args, env}`; `enabled: false` turns one off. An extension's
/// server has only `settings`: the extension starts it, so there is nothing to import.
fn zed(raw: &mut Map<String, Value>) -> Option<String> {
    if let Some(Value::Object(command)) = raw.get("command").cloned() {
        raw.remove("command");
        for (from, to) in [("path", "command"), ("args", "args"), ("env", "env")] {
            if let Some(v) = command.get(from) {
                raw.insert(to.into(), v.clone());
            }
        }
    }
    raw.remove("settings");
    if !raw.contains_key("command") && !raw.contains_key("url") {
        return Some("a Zed extension's server (the extension starts it): add it by hand".into());
    }
    None
}

/// Codex's entries: the bearer token and headers named by environment variable become
/// `${VAR}` headers; `tool_timeout_sec` the request deadline in milliseconds.
fn codex(raw: &mut Map<String, Value>, notes: &mut Vec<String>) {
    let mut headers = match raw.remove("http_headers") {
        Some(Value::Object(h)) => h,
        _ => Map::new(),
    };
    if let Some(Value::Object(from_env)) = raw.remove("env_http_headers") {
        for (name, var) in from_env {
            if let Some(var) = var.as_str() {
                headers.insert(name, json!(format!("${{{var}}}")));
            }
        }
    }
    if let Some(var) = raw.remove("bearer_token_env_var")
        && let Some(var) = var.as_str()
    {
        headers.insert("Authorization".into(), json!(format!("Bearer ${{{var}}}")));
    }
    if let Some(token) = raw.remove("bearer_token")
        && let Some(token) = token.as_str()
    {
        headers.insert("Authorization".into(), json!(format!("Bearer {token}")));
    }
    if !headers.is_empty() {
        raw.insert("headers".into(), Value::Object(headers));
    }
    if let Some(secs) = raw.remove("tool_timeout_sec") {
        match secs.as_f64() {
            Some(secs) if secs > 0.0 => {
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a positive number of seconds, in milliseconds"
                )]
                let ms = (secs * 1000.0).round() as u64;
                raw.insert("timeout".into(), json!(ms));
            }
            _ => notes.push("`tool_timeout_sec` is not a positive number: dropped".into()),
        }
    }
}

/// A rewired host's entry: `toolwire gateway --stdio` (any path, any file).
fn is_toolwire_gateway(raw: &Map<String, Value>) -> bool {
    let command = match raw.get("command") {
        Some(Value::String(c)) => c.as_str(),
        Some(Value::Object(o)) => o.get("path").and_then(Value::as_str).unwrap_or(""),
        _ => return false,
    };
    let program = Path::new(command)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args = raw.get("args").and_then(Value::as_array);
    program == "toolwire" && args.is_some_and(|a| a.iter().any(|v| v.as_str() == Some("gateway")))
}

fn rewrite_strings(value: &mut Value, f: &mut dyn FnMut(&str) -> Option<String>) {
    match value {
        Value::String(s) => {
            if let Some(new) = f(s) {
                *s = new;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_strings(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| rewrite_strings(v, f)),
        _ => {}
    }
}

/// The host-only variables of `text` as Toolwire's: `${input:id}` (VS Code asks for it) becomes
/// `${ID}` read from the environment, `${userHome}` becomes `${HOME}`; `${workspaceFolder}`
/// has no meaning outside the editor and is left for a person to replace. `None`: unchanged.
fn variables(text: &str, notes: &mut Vec<String>) -> Option<String> {
    if !text.contains("${") {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let inner = &after[..end];
        let replaced = if let Some(id) = inner.strip_prefix("input:") {
            let var = environment_name(id);
            notes.push(format!(
                "VS Code's input `{id}` is read from the environment as ${{{var}}}: set {var}"
            ));
            Some(var)
        } else if inner == "userHome" {
            Some("HOME".to_owned())
        } else {
            if inner.starts_with("workspaceFolder") {
                notes.push(format!(
                    "`${{{inner}}}` is the editor's open folder: replace it with a path"
                ));
            }
            None
        };
        match replaced {
            Some(var) => {
                changed = true;
                out.push_str("${");
                out.push_str(&var);
                out.push('}');
            }
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// Gemini CLI's `$VAR` as `${VAR}`. `None`: unchanged.
fn bare_variables(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 2);
    let mut chars = text.char_indices().peekable();
    let mut changed = false;
    while let Some((_, c)) = chars.next() {
        let starts_name = chars
            .peek()
            .is_some_and(|(_, n)| n.is_ascii_alphabetic() || *n == '_');
        if c != '$' || !starts_name {
            out.push(c);
            continue;
        }
        out.push_str("${");
        while let Some((_, n)) = chars.next_if(|(_, n)| n.is_ascii_alphanumeric() || *n == '_') {
            out.push(n);
        }
        out.push('}');
        changed = true;
    }
    changed.then_some(out)
}

/// `github-token` → `GITHUB_TOKEN`.
fn environment_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imported(host: HostApp, raw: Value) -> (Value, Vec<String>) {
        match entry(host, &raw) {
            Entry::Imported { entry, notes } => (entry, notes),
            Entry::Skipped(why) => panic!("skipped: {why}"),
        }
    }

    #[test]
    fn windsurf_server_url_and_gemini_http_url_become_url() {
        let (e, _) = imported(
            HostApp::Windsurf,
            json!({"serverUrl": "https://a.example/mcp"}),
        );
        assert_eq!(e, json!({"url": "https://a.example/mcp"}));
        let (e, _) = imported(HostApp::Gemini, json!({"httpUrl": "https://b.example/mcp"}));
        assert_eq!(e, json!({"url": "https://b.example/mcp"}));
    }

    #[test]
    fn gemini_bare_variables_become_braced_ones() {
        let (e, _) = imported(
            HostApp::Gemini,
            json!({"command": "s", "env": {"A": "$KEY", "B": "x-${ALREADY}", "C": "$5 off"}}),
        );
        assert_eq!(
            e["env"],
            json!({"A": "${KEY}", "B": "x-${ALREADY}", "C": "$5 off"})
        );
    }

    #[test]
    fn gemini_url_is_an_sse_endpoint() {
        let (e, _) = imported(HostApp::Gemini, json!({"url": "https://c.example/sse"}));
        assert_eq!(e, json!({"url": "https://c.example/sse", "type": "sse"}));
    }

    #[test]
    fn zed_command_object_is_flattened_and_extension_servers_are_skipped() {
        let (e, _) = imported(
            HostApp::Zed,
            json!({"source": "custom", "command": {"path": "npx", "args": ["-y", "srv"], "env": {"K": "${K}"}}}),
        );
        assert_eq!(
            e,
            json!({"command": "npx", "args": ["-y", "srv"], "env": {"K": "${K}"}})
        );
        let skipped = entry(
            HostApp::Zed,
            &json!({"source": "extension", "settings": {"x": 1}}),
        );
        assert!(matches!(skipped, Entry::Skipped(why) if why.contains("extension")));
    }

    #[test]
    fn codex_header_variables_become_references_and_timeout_milliseconds() {
        let (e, notes) = imported(
            HostApp::Codex,
            json!({"url": "https://d.example/mcp", "bearer_token_env_var": "D_TOKEN",
                   "env_http_headers": {"X-Org": "D_ORG"}, "http_headers": {"X-Static": "1"},
                   "tool_timeout_sec": 2.5, "enabled": false, "startup_timeout_sec": 20}),
        );
        assert_eq!(
            e,
            json!({"url": "https://d.example/mcp", "disabled": true, "timeout": 2500,
                   "headers": {"Authorization": "Bearer ${D_TOKEN}", "X-Org": "${D_ORG}", "X-Static": "1"}})
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn vscode_inputs_become_environment_variables_with_a_note() {
        let (e, notes) = imported(
            HostApp::VsCode,
            json!({"type": "stdio", "command": "srv", "env": {"TOKEN": "${input:github-token}"},
                   "envFile": "${workspaceFolder}/.env"}),
        );
        assert_eq!(
            e,
            json!({"command": "srv", "env": {"TOKEN": "${GITHUB_TOKEN}"}})
        );
        assert!(
            notes.iter().any(|n| n.contains("set GITHUB_TOKEN")),
            "{notes:?}"
        );
        assert!(notes.iter().any(|n| n.contains("envFile")), "{notes:?}");
    }

    #[test]
    fn references_the_loader_reads_are_kept_as_written() {
        let (e, notes) = imported(
            HostApp::Cursor,
            json!({"url": "https://e.example/mcp",
                   "headers": {"Authorization": "Bearer ${env:E_TOKEN}", "X-Home": "${userHome}/x",
                               "X-Default": "${E_ORG:-acme}"}}),
        );
        assert_eq!(
            e["headers"],
            json!({"Authorization": "Bearer ${env:E_TOKEN}", "X-Home": "${HOME}/x",
                   "X-Default": "${E_ORG:-acme}"})
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn a_rewired_hosts_gateway_entry_is_not_imported_again() {
        let skipped = entry(
            HostApp::Cursor,
            &json!({"command": "/usr/local/bin/toolwire", "args": ["gateway", "--config", "x", "--stdio"]}),
        );
        assert!(matches!(skipped, Entry::Skipped(why) if why.contains("gateway")));
    }

    #[test]
    fn an_entry_without_command_or_url_is_skipped_with_its_reason() {
        let skipped = entry(HostApp::ClaudeDesktop, &json!({"args": ["x"]}));
        assert_eq!(
            skipped,
            Entry::Skipped("neither a command nor a URL".into())
        );
    }

    #[test]
    fn codex_toml_reads_as_json_tables() {
        let text = "model = \"x\"\n[mcp_servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"fs\"]\n[mcp_servers.files.env]\nROOT = \"/srv\"\n";
        let doc = parse(HostApp::Codex, Path::new("config.toml"), text).expect("parses");
        assert_eq!(
            doc["mcp_servers"]["files"],
            json!({"command": "npx", "args": ["-y", "fs"], "env": {"ROOT": "/srv"}})
        );
    }
}

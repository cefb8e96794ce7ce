//! `toolwire import`: the MCP servers of the hosts a person uses (Claude Desktop, Claude Code,
//! Cursor, VS Code, Windsurf, Zed, Codex, Gemini CLI), read from where each keeps them, merged
//! into one `mcpServers` file; with `--rewire`, each host then reaches those servers through
//! Toolwire's gateway over that file, and `--undo` puts every host's file back.
//!
//! The merge keeps what the file held and adds each host's entries in [`HostApp::ALL`]'s
//! order. An entry found twice under one name is kept once when both are the same and under
//! `NAME-HOST` when they differ; either way the report names it. Each entry is checked by the
//! loader before it is added (a file with one bad entry would load none), and what the host
//! wrote is copied as written: secrets that were `${VAR}` references stay references. The
//! file is written 0600, as it may hold secrets a host kept in its own file.
//!
//! `hosts` knows the hosts' files and entries; `rewire` edits a host's file in place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use crate::Failure;

mod hosts;
mod rewire;

use hosts::Entry;
pub(crate) use hosts::HostApp;
pub(crate) use hosts::Places;
use rewire::Gateway;

/// `--from HOST[=FILE]`.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    host: HostApp,
    file: Option<PathBuf>,
}

/// Parses `--from`'s value.
pub(crate) fn source(text: &str) -> Result<Source, String> {
    let (name, file) = match text.split_once('=') {
        Some((name, file)) => (name, Some(PathBuf::from(file))),
        None => (text, None),
    };
    let host = HostApp::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = HostApp::ALL.iter().map(|h| h.name()).collect();
        format!("unknown host `{name}` (one of: {})", names.join(", "))
    })?;
    Ok(Source { host, file })
}

/// The options of `toolwire import`.
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// A host to read: claude-desktop, claude-code, cursor, vscode, windsurf, zed, codex or
    /// gemini, with its file if it is not in the usual place (`cursor=./.cursor/mcp.json`).
    /// Repeatable; default: every host whose file is in its usual place.
    #[arg(long = "from", value_name = "HOST[=FILE]", value_parser = source)]
    pub(crate) from: Vec<Source>,
    /// The mcpServers file written, merged with what it holds (`-`: printed, not written;
    /// default: $XDG_CONFIG_HOME/toolwire/mcp.json).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Then point each host read at Toolwire's gateway over that file
    /// (`toolwire gateway --config FILE --stdio`) instead of the servers imported from it,
    /// after keeping its file as FILE.toolwire-backup.
    #[arg(long, conflicts_with = "undo")]
    pub(crate) rewire: bool,
    /// With --rewire: point the hosts at the gateway at this URL (one you run with
    /// `toolwire gateway --http`) instead of starting one each.
    #[arg(long, value_name = "URL", requires = "rewire")]
    pub(crate) gateway_url: Option<String>,
    /// Put each host's file back as it was before --rewire.
    #[arg(long)]
    pub(crate) undo: bool,
    /// Say what would be written and changed, and write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// What happened to one host's file.
#[derive(Debug, Default)]
struct HostReport {
    host: &'static str,
    file: PathBuf,
    imported: Vec<String>,
    skipped: Vec<(String, String)>,
    notes: Vec<String>,
    error: Option<String>,
    rewired: Option<String>,
}

impl HostReport {
    fn json(&self) -> Value {
        let skipped: Vec<Value> = self
            .skipped
            .iter()
            .map(|(name, reason)| json!({"name": name, "reason": reason}))
            .collect();
        json!({"host": self.host, "file": self.file, "imported": self.imported,
               "skipped": skipped, "notes": self.notes, "error": self.error,
               "rewired": self.rewired})
    }
}

/// The file written when `--out` is not given.
pub(crate) fn default_out(places: &Places) -> Option<PathBuf> {
    places
        .config
        .clone()
        .or_else(|| places.home.as_ref().map(|h| h.join(".config")))
        .map(|dir| dir.join("toolwire").join("mcp.json"))
}

pub(crate) fn run(json_out: bool, args: &ImportArgs) -> Result<ExitCode, Failure> {
    let places = Places::from_env();
    let cwd = std::env::current_dir().ok();
    let sources: Vec<(HostApp, PathBuf)> = if args.from.is_empty() {
        HostApp::ALL
            .into_iter()
            .filter_map(|h| Some((h, h.usual_file(&places).filter(|f| f.is_file())?)))
            .collect()
    } else {
        args.from
            .iter()
            .map(|s| {
                let file = s.file.clone().or_else(|| s.host.usual_file(&places));
                file.map(|f| (s.host, f)).ok_or_else(|| {
                    Failure::Usage(format!(
                        "no home directory to find {}'s file in: give --from {}=FILE",
                        s.host.name(),
                        s.host.name()
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    if args.undo {
        return undo(json_out, args.dry_run, &sources);
    }
    if sources.is_empty() {
        return Err(Failure::Usage(
            "no host's server list found in its usual place: name one with --from HOST=FILE".into(),
        ));
    }
    let stdout = args.out.as_deref() == Some(Path::new("-"));
    if stdout && args.rewire {
        return Err(Failure::Usage(
            "--rewire needs a file to point the hosts at: give --out FILE, not -".into(),
        ));
    }
    let out = match &args.out {
        Some(out) => out.clone(),
        None => default_out(&places).ok_or_else(|| {
            Failure::Usage("no home directory for the default file: give --out FILE".into())
        })?,
    };
    let mut document = if stdout { json!({}) } else { existing(&out)? };
    let mut merged = Merge::from_document(&mut document);
    let mut reports = Vec::new();
    let mut removed: Vec<(HostApp, PathBuf, Box<rewire::Taken>)> = Vec::new();
    for (host, file) in &sources {
        let mut report = HostReport {
            host: host.name(),
            file: file.clone(),
            ..HostReport::default()
        };
        let read = match hosts::read_file(*host, file) {
            Ok(read) => read,
            Err(e) => {
                report.error = Some(e.to_string());
                reports.push(report);
                continue;
            }
        };
        let mut taken = Vec::new();
        for path in host.list_paths(cwd.as_deref()) {
            let Some(list) = hosts::list_at(&read, &path) else {
                continue;
            };
            let mut names = Vec::new();
            for (name, raw) in list {
                match hosts::entry(*host, raw) {
                    Entry::Skipped(reason) => report.skipped.push((name.clone(), reason)),
                    Entry::Imported { entry, notes } => {
                        if let Err(problem) = loads(name, &entry) {
                            report.skipped.push((name.clone(), problem));
                            continue;
                        }
                        report
                            .notes
                            .extend(notes.into_iter().map(|n| format!("{name}: {n}")));
                        match merged.add(name, entry, host.name()) {
                            Added::New => {}
                            Added::Same(origin) => report
                                .notes
                                .push(format!("{name}: the same as {origin}'s, kept once")),
                            Added::Renamed(new, origin) => report.notes.push(format!(
                                "{name}: differs from {origin}'s, imported as {new}"
                            )),
                        }
                        report.imported.push(name.clone());
                        names.push(name.clone());
                    }
                }
            }
            if !names.is_empty() {
                taken.push((path, names));
            }
        }
        if !taken.is_empty() {
            removed.push((*host, file.clone(), taken.into_boxed_slice()));
        }
        reports.push(report);
    }
    let count = merged.servers.len();
    merged.into_document(&mut document);
    let text = serde_json::to_string_pretty(&document)
        .map_err(|e| Failure::Usage(format!("the merged file: {e}")))?
        + "\n";
    if stdout {
        say_part!("{text}");
    } else if !args.dry_run {
        write_whole(&out, &text, true)
            .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", out.display())))?;
    }
    if args.rewire && !args.dry_run {
        let out = std::fs::canonicalize(&out).unwrap_or(out.clone());
        let exe = std::env::current_exe()
            .map_err(|e| Failure::Usage(format!("where toolwire is: {e}")))?;
        let stdio = Gateway::Stdio { exe, config: out };
        let gateway = match &args.gateway_url {
            Some(url) => Gateway::Url(url.clone()),
            None => stdio.clone(),
        };
        for (host, file, taken) in &removed {
            let entry = rewire::entry(*host, &gateway, Some(&stdio));
            let outcome = rewire::rewire(*host, file, taken, &entry);
            if let Some(report) = reports
                .iter_mut()
                .find(|r| r.host == host.name() && &r.file == file)
            {
                match outcome {
                    Ok(backup) => report.rewired = Some(backup.display().to_string()),
                    Err(e) => report.error = Some(format!("not rewired: {e}")),
                }
            }
        }
    }
    if args.rewire && args.dry_run {
        for (host, file, _) in &removed {
            if let Some(report) = reports
                .iter_mut()
                .find(|r| r.host == host.name() && &r.file == file)
            {
                report.notes.push(format!(
                    "would be rewired, its file kept as {}",
                    rewire::backup_of(file).display()
                ));
            }
        }
    }
    let failed = reports.iter().any(|r| r.error.is_some());
    if json_out {
        let hosts: Vec<Value> = reports.iter().map(HostReport::json).collect();
        let mut document = json!({"file": if stdout { Value::Null } else { json!(out) },
                                  "servers": count, "hosts": hosts, "written": !stdout && !args.dry_run});
        if args.dry_run {
            document["merged"] = shown(&serde_json::from_str(&text).unwrap_or(Value::Null));
        }
        if stdout {
            say_err!("{document}");
        } else {
            crate::render::print_json(&document);
        }
    } else {
        let line = |text: String| {
            if stdout {
                say_err!("{text}");
            } else {
                say!("{text}");
            }
        };
        for r in &reports {
            let names = if r.imported.is_empty() {
                "nothing imported".to_owned()
            } else {
                r.imported.join(", ")
            };
            line(format!("{}  {}: {names}", r.host, r.file.display()));
            for (name, reason) in &r.skipped {
                line(format!("  skipped {name}: {reason}"));
            }
            for note in &r.notes {
                line(format!("  {note}"));
            }
            if let Some(error) = &r.error {
                line(format!("  error: {error}"));
            }
            if let Some(backup) = &r.rewired {
                line(format!(
                    "  rewired: it now reaches Toolwire's gateway (the old file is {backup})"
                ));
            }
        }
        if args.dry_run && !stdout {
            let preview = serde_json::from_str(&text).unwrap_or(Value::Null);
            line(format!(
                "would write {} ({count} servers):\n{}",
                out.display(),
                serde_json::to_string_pretty(&shown(&preview)).unwrap_or_default()
            ));
        } else if !stdout {
            line(format!("wrote {} ({count} servers)", out.display()));
            if !toolwire_host::trust::is_users_own(&out) {
                line(format!(
                    "approve it once with `toolwire trust {}` before using it",
                    out.display()
                ));
            }
        }
    }
    Ok(if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// The merged document as a preview shows it: a value of an entry's `env` or `headers` that is
/// written out rather than taken from a variable (`${VAR}`) may be a secret, so it is hidden,
/// and a URL's credentials and query values too. The file written keeps them (0600), and
/// `--out -` writes the file itself.
fn shown(document: &Value) -> Value {
    let mut shown = document.clone();
    let Some(servers) = shown.get_mut("mcpServers").and_then(Value::as_object_mut) else {
        return shown;
    };
    for entry in servers.values_mut() {
        for member in ["env", "headers"] {
            let Some(values) = entry.get_mut(member).and_then(Value::as_object_mut) else {
                continue;
            };
            for value in values.values_mut() {
                if value.as_str().is_some_and(|v| !v.contains("${")) {
                    *value = json!("<hidden: kept in the file>");
                }
            }
        }
        if let Some(url) = entry.get_mut("url")
            && let Some(text) = url.as_str()
        {
            *url = json!(toolwire::types::redacted_url(text));
        }
    }
    shown
}

fn undo(
    json_out: bool,
    dry_run: bool,
    sources: &[(HostApp, PathBuf)],
) -> Result<ExitCode, Failure> {
    let mut restored = Vec::new();
    for (host, file) in sources {
        let backup = rewire::backup_of(file);
        let done = if dry_run {
            backup.exists()
        } else {
            rewire::undo(file)
                .map_err(|e| Failure::Usage(format!("cannot put back {}: {e}", file.display())))?
        };
        if done {
            restored.push(json!({"host": host.name(), "file": file}));
            if !json_out {
                let verb = if dry_run {
                    "would put back"
                } else {
                    "put back"
                };
                say!("{}  {verb} {}", host.name(), file.display());
            }
        }
    }
    if json_out {
        crate::render::print_json(&json!({"restored": restored}));
    } else if restored.is_empty() {
        say!("no host's file has a backup of --rewire to put back");
    }
    Ok(ExitCode::SUCCESS)
}

/// What `out` holds already (an object with `mcpServers`), or an empty file's start.
fn existing(out: &Path) -> Result<Value, Failure> {
    match std::fs::read_to_string(out) {
        Ok(text) if text.trim().is_empty() => Ok(json!({"mcpServers": {}})),
        Ok(text) => {
            let value: Value =
                jsonc_parser::parse_to_serde_value(&text, &jsonc_parser::ParseOptions::default())
                    .map_err(|e| Failure::Usage(format!("{}: {e}", out.display())))?;
            if !value.is_object() {
                return Err(Failure::Usage(format!(
                    "{}: not a JSON object",
                    out.display()
                )));
            }
            Ok(value)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({"mcpServers": {}})),
        Err(e) => Err(Failure::Usage(format!(
            "cannot read {}: {e}",
            out.display()
        ))),
    }
}

/// Whether `entry` loads as Toolwire's loader reads it, every variable taken as set: the
/// problems it reports, on one line.
fn loads(name: &str, entry: &Value) -> Result<(), String> {
    let text = json!({"mcpServers": {name: entry}}).to_string();
    toolwire_host::ServersConfig::parse(&text, |_| Some("set".to_owned()))
        .map(drop)
        .map_err(|e| {
            e.problems()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
}

/// The merged list, with where each entry came from.
struct Merge {
    servers: Map<String, Value>,
    origins: BTreeMap<String, String>,
    key: &'static str,
}

/// What adding one entry did.
enum Added {
    New,
    /// The same entry was there already, from this origin.
    Same(String),
    /// An entry of that name, from this origin, differs: this one took the new name.
    Renamed(String, String),
}

impl Merge {
    fn from_document(document: &mut Value) -> Self {
        let key = if document.get("mcpServers").is_none() && document.get("servers").is_some() {
            "servers"
        } else {
            "mcpServers"
        };
        let servers = match document.get_mut(key).map(Value::take) {
            Some(Value::Object(servers)) => servers,
            _ => Map::new(),
        };
        let origins = servers
            .keys()
            .map(|k| (k.clone(), "the file".to_owned()))
            .collect();
        Self {
            servers,
            origins,
            key,
        }
    }

    fn add(&mut self, name: &str, entry: Value, origin: &str) -> Added {
        let Some(there) = self.servers.get(name) else {
            self.insert(name, entry, origin);
            return Added::New;
        };
        let there_from = self.origins.get(name).cloned().unwrap_or_default();
        if *there == entry {
            return Added::Same(there_from);
        }
        let base = format!("{name}-{origin}");
        let mut candidate = base.clone();
        for n in 2.. {
            match self.servers.get(&candidate) {
                None => break,
                Some(v) if *v == entry => {
                    let origin = self.origins.get(&candidate).cloned().unwrap_or_default();
                    return Added::Same(origin);
                }
                Some(_) => candidate = format!("{base}-{n}"),
            }
        }
        self.insert(&candidate, entry, origin);
        Added::Renamed(candidate, there_from)
    }

    fn insert(&mut self, name: &str, entry: Value, origin: &str) {
        self.servers.insert(name.to_owned(), entry);
        self.origins.insert(name.to_owned(), origin.to_owned());
    }

    fn into_document(self, document: &mut Value) {
        if let Some(object) = document.as_object_mut() {
            object.insert(self.key.to_owned(), Value::Object(self.servers));
        }
    }
}

/// Writes `text` to `file` whole or not at all: a temporary file in the same folder, renamed
/// over it. `private`: the file is 0600 (it may hold secrets); else it keeps the permissions
/// the file had.
pub(crate) fn write_whole(file: &Path, text: &str, private: bool) -> std::io::Result<()> {
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let before = std::fs::metadata(file).map(|m| m.permissions()).ok();
    let mut temp = tempfile::Builder::new()
        .prefix(".toolwire.")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    std::io::Write::write_all(&mut temp, text.as_bytes())?;
    temp.as_file().sync_all()?;
    if !private && let Some(permissions) = before {
        temp.as_file().set_permissions(permissions)?;
    }
    temp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_entry_twice_is_kept_once_and_a_different_one_renamed() {
        let mut document = json!({"mcpServers": {"a": {"command": "x"}}, "gateway": {"k": 1}});
        let mut merge = Merge::from_document(&mut document);
        assert!(
            matches!(merge.add("a", json!({"command": "x"}), "cursor"), Added::Same(o) if o == "the file")
        );
        assert!(
            matches!(merge.add("a", json!({"command": "y"}), "cursor"), Added::Renamed(n, _) if n == "a-cursor")
        );
        assert!(
            matches!(merge.add("a", json!({"command": "z"}), "cursor"), Added::Renamed(n, _) if n == "a-cursor-2")
        );
        assert!(
            matches!(merge.add("a", json!({"command": "y"}), "cursor"), Added::Same(o) if o == "cursor")
        );
        merge.into_document(&mut document);
        assert_eq!(
            document,
            json!({"gateway": {"k": 1}, "mcpServers": {"a": {"command": "x"}, "a-cursor": {"command": "y"}, "a-cursor-2": {"command": "z"}}})
        );
    }

    #[test]
    fn an_entry_the_loader_refuses_is_named_with_its_problem() {
        let refused = loads("bad", &json!({"command": "x", "type": "sse"}));
        assert!(refused.is_err_and(|p| p.contains("type")));
        assert!(loads("good", &json!({"url": "${URL}", "headers": {"A": "${B}"}})).is_ok());
    }
}

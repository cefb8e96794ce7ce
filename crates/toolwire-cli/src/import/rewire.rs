//! `toolwire import --rewire` and `--undo`: a host's file edited in place so that the servers
//! imported from it are gone and one entry starts Toolwire's gateway over the merged file (or
//! names its URL), every other member and comment of the file kept; the file as it was is
//! kept beside it first (`FILE.toolwire-backup`) and put back by `--undo`.

use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::{Value, json};

use super::hosts::HostApp;
use super::write_whole;

/// What a rewired host reaches instead of its servers.
#[derive(Debug, Clone)]
pub(crate) enum Gateway {
    /// `EXE gateway --config FILE --stdio`, started by the host.
    Stdio { exe: PathBuf, config: PathBuf },
    /// A gateway the user runs (`toolwire gateway --http`), at this URL.
    Url(String),
}

/// The entries taken from a host's file: each list's path from the root, and the names.
pub(crate) type Taken = [(Vec<String>, Vec<String>)];

/// The name of the entry a rewired host has.
pub(crate) const ENTRY: &str = "toolwire";

/// Where the file as it was before `--rewire` is kept.
pub(crate) fn backup_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".toolwire-backup");
    PathBuf::from(name)
}

/// Why a host was not rewired.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RewireError {
    #[error(
        "already rewired ({} is there): run `toolwire import --undo` first",
        .0.display()
    )]
    Rewired(PathBuf),
    #[error("{}: {error}", .file.display())]
    Io {
        file: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: cannot be edited: {reason}", .file.display())]
    Edit { file: PathBuf, reason: String },
}

/// The entry of `host` that reaches `gateway`, in that host's words. Claude Desktop starts
/// stdio servers only, so it is given the stdio form whatever was asked, when that is known.
pub(crate) fn entry(host: HostApp, gateway: &Gateway, stdio: Option<&Gateway>) -> Value {
    let gateway = match (host, gateway, stdio) {
        (HostApp::ClaudeDesktop, Gateway::Url(_), Some(stdio)) => stdio,
        _ => gateway,
    };
    match gateway {
        Gateway::Stdio { exe, config } => {
            let args = json!(["gateway", "--config", config.to_string_lossy(), "--stdio"]);
            let mut entry = json!({"command": exe.to_string_lossy(), "args": args});
            if host == HostApp::VsCode {
                entry["type"] = json!("stdio");
            }
            entry
        }
        Gateway::Url(url) => match host {
            HostApp::Windsurf => json!({"serverUrl": url}),
            HostApp::Gemini => json!({"httpUrl": url}),
            HostApp::ClaudeCode | HostApp::VsCode => json!({"type": "http", "url": url}),
            _ => json!({"url": url}),
        },
    }
}

/// Rewires `file` of `host`: the entries `removed` (each list's path, then names) taken out,
/// [`ENTRY`] set to `entry`, the old file kept as [`backup_of`] first. A file that is a link
/// is edited where it points.
pub(crate) fn rewire(
    host: HostApp,
    file: &Path,
    removed: &Taken,
    entry: &Value,
) -> Result<PathBuf, RewireError> {
    let io = |error| RewireError::Io {
        file: file.to_owned(),
        error,
    };
    let file = std::fs::canonicalize(file).map_err(io)?;
    let backup = backup_of(&file);
    if backup.exists() {
        return Err(RewireError::Rewired(backup));
    }
    let text = std::fs::read_to_string(&file).map_err(io)?;
    let edited = if host.is_toml() {
        edit_toml(&text, host, removed, entry)
    } else {
        edit_json(&text, host, removed, entry)
    }
    .map_err(|reason| RewireError::Edit {
        file: file.clone(),
        reason,
    })?;
    std::fs::copy(&file, &backup).map_err(io)?;
    write_whole(&file, &edited, false).map_err(io)?;
    Ok(backup)
}

/// Puts back `file` as it was before `--rewire`; `false` when it has no backup.
pub(crate) fn undo(file: &Path) -> std::io::Result<bool> {
    let file = match std::fs::canonicalize(file) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => file.to_owned(),
        Err(e) => return Err(e),
    };
    let backup = backup_of(&file);
    if !backup.exists() {
        return Ok(false);
    }
    std::fs::rename(&backup, &file)?;
    Ok(true)
}

fn edit_json(text: &str, host: HostApp, removed: &Taken, entry: &Value) -> Result<String, String> {
    let root = CstRootNode::parse(text, &jsonc_parser::ParseOptions::default())
        .map_err(|e| e.to_string())?;
    let top = root.object_value_or_set();
    for (path, names) in removed {
        let Some(list) = path.iter().try_fold(top.clone(), |object: CstObject, key| {
            object.object_value(key)
        }) else {
            continue;
        };
        for name in names {
            if let Some(prop) = list.get(name) {
                prop.remove();
            }
        }
    }
    // The gateway's entry goes where the first list taken from was (VS Code's `mcp.json`
    // or its `settings.json`), else where the host keeps its list.
    let first = removed.first().map(|(path, _)| path.clone());
    let path = first.unwrap_or_else(|| vec![host.list_key().to_owned()]);
    let mut list = top;
    for key in &path {
        list = list
            .object_value_or_create(key)
            .ok_or_else(|| format!("`{key}` is not an object"))?;
    }
    match list.get(ENTRY) {
        Some(prop) => prop.set_value(cst(entry)),
        None => {
            list.append(ENTRY, cst(entry));
        }
    }
    Ok(root.to_string())
}

fn cst(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(cst).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), cst(v))).collect())
        }
    }
}

fn edit_toml(text: &str, host: HostApp, removed: &Taken, entry: &Value) -> Result<String, String> {
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.message().to_owned())?;
    let key = host.list_key();
    let list = document
        .entry(key)
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .ok_or_else(|| format!("`{key}` is not a table"))?;
    for (_, names) in removed {
        for name in names {
            list.remove(name);
        }
    }
    let mut table = toml_edit::Table::new();
    for (k, v) in entry.as_object().into_iter().flatten() {
        if let Some(v) = toml_value(v) {
            table.insert(k, toml_edit::Item::Value(v));
        }
    }
    list.insert(ENTRY, toml_edit::Item::Table(table));
    Ok(document.to_string())
}

fn toml_value(value: &Value) -> Option<toml_edit::Value> {
    Some(match value {
        Value::String(s) => s.as_str().into(),
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64()?.into(),
        },
        Value::Array(items) => {
            toml_edit::Value::Array(items.iter().filter_map(toml_value).collect())
        }
        Value::Object(map) => toml_edit::Value::InlineTable(
            map.iter()
                .filter_map(|(k, v)| Some((k.as_str(), toml_value(v)?)))
                .collect(),
        ),
        Value::Null => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio() -> Gateway {
        Gateway::Stdio {
            exe: "/bin/toolwire".into(),
            config: "/cfg/mcp.json".into(),
        }
    }

    #[test]
    fn a_json_file_keeps_its_comments_and_other_members() {
        let text = "{\n  // the theme\n  \"theme\": \"dark\",\n  \"context_servers\": {\n    \"files\": { \"command\": \"npx\" }, // imported\n    \"ext\": { \"settings\": {} }\n  }\n}\n";
        let removed = vec![(vec!["context_servers".into()], vec!["files".into()])];
        let edited = edit_json(
            text,
            HostApp::Zed,
            &removed,
            &entry(HostApp::Zed, &stdio(), None),
        )
        .expect("edits");
        assert!(edited.contains("// the theme"), "{edited}");
        assert!(edited.contains("\"theme\": \"dark\""), "{edited}");
        let value: Value =
            jsonc_parser::parse_to_serde_value(&edited, &jsonc_parser::ParseOptions::default())
                .expect("still JSON");
        let list = &value["context_servers"];
        assert!(list.get("files").is_none(), "{edited}");
        assert_eq!(list["ext"], json!({"settings": {}}));
        assert_eq!(list[ENTRY]["args"][3], json!("--stdio"));
    }

    #[test]
    fn a_toml_file_keeps_its_comments_and_gets_a_table() {
        let text = "# mine\nmodel = \"o3\"\n\n[mcp_servers.files]\ncommand = \"npx\"\n\n[mcp_servers.kept]\nurl = \"https://k.example/mcp\"\n";
        let removed = vec![(vec!["mcp_servers".into()], vec!["files".into()])];
        let edited = edit_toml(
            text,
            HostApp::Codex,
            &removed,
            &entry(
                HostApp::Codex,
                &Gateway::Url("http://127.0.0.1:8808/mcp".into()),
                None,
            ),
        )
        .expect("edits");
        assert!(edited.starts_with("# mine\nmodel = \"o3\""), "{edited}");
        assert!(!edited.contains("[mcp_servers.files]"), "{edited}");
        assert!(edited.contains("[mcp_servers.kept]"), "{edited}");
        assert!(
            edited.contains("[mcp_servers.toolwire]\nurl = \"http://127.0.0.1:8808/mcp\""),
            "{edited}"
        );
    }

    #[test]
    fn vscode_settings_get_the_gateway_where_their_servers_were() {
        let text = "{\n  \"editor.fontSize\": 14,\n  \"mcp\": {\n    \"servers\": {\n      \"files\": { \"command\": \"npx\" }\n    }\n  }\n}\n";
        let removed = vec![(vec!["mcp".into(), "servers".into()], vec!["files".into()])];
        let edited = edit_json(
            text,
            HostApp::VsCode,
            &removed,
            &entry(HostApp::VsCode, &stdio(), None),
        )
        .expect("edits");
        let value: Value =
            jsonc_parser::parse_to_serde_value(&edited, &jsonc_parser::ParseOptions::default())
                .expect("still JSON");
        assert_eq!(
            value["mcp"]["servers"][ENTRY]["type"],
            json!("stdio"),
            "{edited}"
        );
        assert!(value["mcp"]["servers"].get("files").is_none(), "{edited}");
        assert!(value.get("servers").is_none(), "{edited}");
        assert_eq!(value["editor.fontSize"], json!(14));
    }

    #[test]
    fn claude_desktop_gets_the_stdio_form_when_a_url_was_asked() {
        let url = Gateway::Url("http://127.0.0.1:8808/mcp".into());
        let e = entry(HostApp::ClaudeDesktop, &url, Some(&stdio()));
        assert_eq!(e["command"], json!("/bin/toolwire"));
        assert_eq!(
            entry(HostApp::Windsurf, &url, Some(&stdio()))["serverUrl"],
            json!("http://127.0.0.1:8808/mcp")
        );
    }
}

//! `resources …`, `prompts …`, `skills …` and `complete`: what a server offers besides tools.

use std::process::ExitCode;

use serde_json::{Value, json};
use toolwire::Client;
use toolwire::types::{CompletionReference, ResourceContents};

use crate::{Failure, print_json};

/// `resources list` and `resources templates`: every page.
pub(crate) async fn list_resources(
    client: &Client,
    templates: bool,
    json_out: bool,
) -> Result<ExitCode, Failure> {
    // Every page, bounded and guarded against a cursor the server repeats (a cursor answered
    // from the response cache would otherwise loop with no network at all).
    let items = if templates {
        to_values(&client.list_all_resource_templates().await?)
    } else {
        to_values(&client.list_all_resources().await?)
    };
    let key = if templates {
        "resourceTemplates"
    } else {
        "resources"
    };
    if json_out {
        print_json(&json!({ key: items }));
    } else {
        for item in &items {
            let address = item["uri"]
                .as_str()
                .or_else(|| item["uriTemplate"].as_str())
                .unwrap_or("?");
            let name = item["title"]
                .as_str()
                .or_else(|| item["name"].as_str())
                .unwrap_or("");
            let mime = item["mimeType"]
                .as_str()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            say!("{address}  {name}{mime}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn to_values<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect()
}

/// `resources read URI`: text as it is, binary as its size.
pub(crate) async fn read(client: &Client, uri: &str, json_out: bool) -> Result<ExitCode, Failure> {
    let result = client.read_resource(uri).await?;
    if json_out {
        print_json(&serde_json::to_value(&result).unwrap_or(Value::Null));
        return Ok(ExitCode::SUCCESS);
    }
    for contents in &result.contents {
        match contents {
            ResourceContents::Text(t) => say!("{}", t.text),
            ResourceContents::Blob(b) => say!(
                "[{} bytes of {}, base64]",
                b.blob.len(),
                b.mime_type.as_deref().unwrap_or("binary")
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `prompts list`: every page.
pub(crate) async fn list_prompts(client: &Client, json_out: bool) -> Result<ExitCode, Failure> {
    let prompts = to_values(&client.list_all_prompts().await?);
    if json_out {
        print_json(&json!({ "prompts": prompts }));
    } else {
        for p in &prompts {
            let arguments: Vec<String> = p["arguments"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|arg| {
                            let name = arg["name"].as_str().unwrap_or("?");
                            if arg["required"] == true {
                                format!("{name}=")
                            } else {
                                format!("[{name}=]")
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            say!(
                "{} {}  {}",
                p["name"].as_str().unwrap_or("?"),
                arguments.join(" "),
                p["description"].as_str().unwrap_or("")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `KEY=VALUE` pairs.
pub(crate) fn pairs(params: &[String]) -> Result<Vec<(String, String)>, Failure> {
    params
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| Failure::Usage(format!("{p:?}: expected KEY=VALUE")))
        })
        .collect()
}

/// `prompts get NAME KEY=VALUE…`: each message as `role: text`.
pub(crate) async fn get_prompt(
    client: &Client,
    name: &str,
    params: &[String],
    json_out: bool,
) -> Result<ExitCode, Failure> {
    let result = client.get_prompt(name, pairs(params)?).await?;
    if json_out {
        print_json(&serde_json::to_value(&result).unwrap_or(Value::Null));
        return Ok(ExitCode::SUCCESS);
    }
    for message in &result.messages {
        let message = serde_json::to_value(message).unwrap_or(Value::Null);
        let text = message["content"]["text"]
            .as_str()
            .map_or_else(|| message["content"].to_string(), str::to_owned);
        say!("{}: {text}", message["role"].as_str().unwrap_or("?"));
    }
    Ok(ExitCode::SUCCESS)
}

/// `complete (--prompt NAME | --resource URI) ARGUMENT TYPED [KEY=VALUE…]`: one suggestion a
/// line.
pub(crate) async fn complete(
    client: &Client,
    reference: CompletionReference,
    argument: &str,
    typed: &str,
    context: &[String],
    json_out: bool,
) -> Result<ExitCode, Failure> {
    let result = client
        .complete(reference, argument, typed, pairs(context)?)
        .await
        .map_err(Failure::from)?;
    if json_out {
        print_json(&serde_json::to_value(&result).unwrap_or(Value::Null));
    } else {
        for value in &result.completion.values {
            say!("{value}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `skills list`: every skill, its frontmatter name and description; no file is read.
pub(crate) async fn list_skills(client: &Client, json_out: bool) -> Result<ExitCode, Failure> {
    let skills = client.list_all_skills().await?;
    if json_out {
        print_json(&json!({ "skills": skills }));
    } else {
        for skill in &skills {
            let name = skill
                .frontmatter
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("?");
            let description = skill
                .frontmatter
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            say!(
                "{name}  {description}  ({}, {} files)",
                skill.uri,
                skill.resources.len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `skills get SKILL`: the skill found by URI (`skills/get`) or by name (in the listing),
/// loaded and verified; its `SKILL.md` printed.
pub(crate) async fn get_skill(
    client: &Client,
    wanted: &str,
    json_out: bool,
) -> Result<ExitCode, Failure> {
    let skill = if wanted.contains("://") {
        client.get_skill(wanted).await?
    } else {
        client
            .list_all_skills()
            .await?
            .into_iter()
            .find(|s| s.frontmatter.get("name").and_then(Value::as_str) == Some(wanted))
            .ok_or_else(|| Failure::Remote(format!("no skill named {wanted}")))?
    };
    let loaded = client.load_skill(&skill).await?;
    if json_out {
        print_json(&json!({ "skill": loaded.skill, "text": loaded.text }));
    } else {
        say_part!("{}", loaded.text);
    }
    Ok(ExitCode::SUCCESS)
}

/// `apps list`: the tools that name an MCP Apps view.
pub(crate) async fn list_apps(client: &Client, json_out: bool) -> Result<ExitCode, Failure> {
    client.list_tools().await?;
    let snapshot = client.tools();
    let mut apps: Vec<(String, toolwire::types::UiToolMeta)> = snapshot
        .iter()
        .filter_map(|(name, t)| Some((name.to_owned(), t.tool().ui()?)))
        .filter(|(_, ui)| ui.resource_uri.is_some())
        .collect();
    apps.sort_by(|a, b| a.0.cmp(&b.0));
    if json_out {
        let apps: Vec<Value> = apps
            .iter()
            .map(|(name, ui)| json!({"tool": name, "ui": ui}))
            .collect();
        print_json(&json!({ "apps": apps }));
    } else {
        for (name, ui) in &apps {
            let who = match (ui.model_visible(), ui.app_visible()) {
                (true, true) => "model, app",
                (true, false) => "model",
                (false, true) => "app only",
                (false, false) => "nobody",
            };
            say!(
                "{name}  {}  ({who})",
                ui.resource_uri.as_deref().unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `apps get TOOL [--out FILE]`: the tool's view, checked; its HTML to `out` (exactly) or
/// stdout, its sandbox metadata to stderr (or all of it as one JSON document).
pub(crate) async fn get_app(
    client: &Client,
    tool: &str,
    out: Option<&std::path::Path>,
    json_out: bool,
) -> Result<ExitCode, Failure> {
    let Some(view) = client.app(tool).await? else {
        return Err(Failure::Usage(format!(
            "tool `{tool}` has no MCP Apps view (see `toolwire apps list`)"
        )));
    };
    if let Some(path) = out {
        std::fs::write(path, view.html.as_bytes())
            .map_err(|e| Failure::Usage(format!("--out {}: {e}", path.display())))?;
    }
    if json_out {
        let mut document = json!({"tool": view.tool, "uri": view.uri, "meta": view.meta,
            "toolMeta": view.tool_meta});
        match out {
            Some(path) => document["out"] = json!(path.display().to_string()),
            None => document["html"] = json!(view.html),
        }
        print_json(&document);
        return Ok(ExitCode::SUCCESS);
    }
    if out.is_none() {
        say_part!("{}", view.html);
    }
    say_err!("{}: {} ({} bytes)", view.tool, view.uri, view.html.len());
    let csp = view.meta.csp.clone().unwrap_or_default();
    for (directive, domains) in [
        ("connect", &csp.connect_domains),
        ("resources", &csp.resource_domains),
        ("frames", &csp.frame_domains),
        ("base URI", &csp.base_uri_domains),
    ] {
        let listed = domains.as_deref().unwrap_or_default();
        let shown = if listed.is_empty() {
            "none".to_owned()
        } else {
            listed.join(" ")
        };
        say_err!("  csp {directive}: {shown}");
    }
    let permissions = view.meta.permissions.clone().unwrap_or_default();
    let asked: Vec<&str> = [
        ("camera", permissions.camera.is_some()),
        ("microphone", permissions.microphone.is_some()),
        ("geolocation", permissions.geolocation.is_some()),
        ("clipboard-write", permissions.clipboard_write.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    say_err!(
        "  permissions: {}",
        if asked.is_empty() {
            "none".to_owned()
        } else {
            asked.join(", ")
        }
    );
    Ok(ExitCode::SUCCESS)
}

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

fn to_values<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
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

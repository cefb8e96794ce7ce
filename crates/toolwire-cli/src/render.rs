//! What the CLI prints: JSON documents, typed `KEY=VALUE` arguments, content blocks for
//! people.

use super::*;

pub(crate) fn print_json(value: &Value) {
    say!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// The tools a listing left out (or kept without headers), for `--json`.
pub(crate) fn rejections(items: &[toolwire::RejectedTool]) -> Vec<Value> {
    items
        .iter()
        .map(|r| json!({"index": r.index, "name": r.name, "reason": r.reason.to_string()}))
        .collect()
}

/// A `KEY=VALUE` value typed by the property's schema (integer, number, boolean, string;
/// objects and arrays as JSON).
pub(crate) fn typed(schema: Option<&Value>, raw: &str) -> Value {
    let kind = schema.and_then(|s| s.get("type")).and_then(Value::as_str);
    match kind {
        Some("integer") => raw
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(raw)),
        Some("number") => raw
            .parse::<f64>()
            .ok()
            .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
            .unwrap_or_else(|| Value::from(raw)),
        Some("boolean") => match raw {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::from(raw),
        },
        Some("string") => Value::from(raw),
        _ => serde_json::from_str::<Value>(raw)
            .ok()
            .filter(|v| v.is_object() || v.is_array())
            .unwrap_or_else(|| Value::from(raw)),
    }
}

pub(crate) fn size(data: &str) -> usize {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map(|b| b.len())
        .unwrap_or(data.len() * 3 / 4)
}

/// A result for people and for scripts: its content on stdout and nothing else (the structured
/// form only where no text says it); what is about the result (an error mark, tools it
/// registered) on stderr.
pub(crate) fn render(result: &CallToolResult) {
    if result.is_error() {
        say_err!("(the tool reported an error)");
    }
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => say!("{}", t.text),
            ContentBlock::Image(b) => say!("[image {}, {} bytes]", b.mime_type, size(&b.data)),
            ContentBlock::Audio(b) => say!("[audio {}, {} bytes]", b.mime_type, size(&b.data)),
            ContentBlock::ResourceLink(r) => say!(
                "[link {} {}{}]",
                r.name,
                r.uri,
                r.mime_type
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ),
            ContentBlock::Resource(e) => {
                let value = serde_json::to_value(&e.resource).unwrap_or(Value::Null);
                match value.get("text").and_then(Value::as_str) {
                    Some(text) => say!("[resource {}]\n{text}", e.resource.uri()),
                    None => say!("[resource {}, binary]", e.resource.uri()),
                }
            }
            other => say!(
                "{}",
                serde_json::to_string(other).unwrap_or_else(|_| "[content]".into())
            ),
        }
    }
    // By convention the text content carries the structured content already.
    let text = result
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::Text(_)));
    if let Some(structured) = result.structured_content.as_ref().filter(|_| !text) {
        say!(
            "{}",
            serde_json::to_string_pretty(structured).unwrap_or_default()
        );
    }
    for (label, names) in [
        ("registers", &result.registers),
        ("unregisters", &result.unregisters),
        ("updates", &result.updates),
    ] {
        if let Some(names) = names.as_ref().filter(|n| !n.is_empty()) {
            say_err!("{label}: {}", names.join(", "));
        }
    }
    if toolwire::tools_may_be_stale(result) {
        say_err!("(the tool list may be stale: the announced changes did not arrive in time)");
    }
}

//! `toolwire-interop-client everything (--url URL | --stdio PROGRAM ARGS...)`: the library
//! against `@modelcontextprotocol/server-everything`, a 2025-11-25 server nobody on this team
//! wrote, for `cargo xtask interop`. (`logs --url URL`: the per-request log level of
//! `2026-07-28` against the Python peer's `log` tool; see [`logs`].)
//!
//! It connects in `auto` mode (so the `server/discover` probe must fall back to `initialize`),
//! declares sampling and elicitation, and checks what the server answered:
//! - `negotiated`: the legacy version the server speaks;
//! - `list-changed`: the tools the server registers only after `notifications/initialized`
//!   reach the cache through `notifications/tools/list_changed` alone (this client never calls
//!   `tools/list` itself);
//! - `progress`: a long-running tool's progress notifications, in order, then its result;
//! - `sampling`: the server's `sampling/createMessage` answered by this client's handler, whose
//!   reply the tool result must quote;
//! - `elicitation`: `elicitation/create` accepted with the schema's defaults plus a name, which
//!   the tool result must quote;
//! - `structured`: a result checked against the tool's output schema;
//! - `echo`: non-ASCII text both ways;
//! - `prompts`: `prompts/get` with an argument the message must quote;
//! - `logging`: at level `info` (`logging/setLevel`), the log message the server sends when
//!   it receives a `resources/subscribe` reaches the notification stream;
//! - `resource-updates`: the `notifications/resources/updated` the server simulates for a
//!   subscribed resource (`toggle-subscriber-updates`) reach the notification stream.
//!
//! Each check prints one JSON line `{"check", "ok", "detail"}` on stdout; the exit code is 0
//! when every check passed.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the driver reads checks from stdout and the reason from stderr"
)]

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolwire::{
    BoxFuture, CallOptions, CallToolResult, Client, ClientCapabilities, ContentBlock, ErrorObject,
    HttpTransport, LoggingLevel, Notifications, ServerNotification, ServerRequest, StdioConfig,
};

/// What this client's sampling handler answers; the tool result must quote it.
const SAMPLED: &str = "toolwire-sampled-reply";
/// The name this client's elicitation handler fills in; the tool result must quote it.
const ELICITED_NAME: &str = "Toolwire Interop";
/// How long the tools registered after `initialized` may take to be announced.
const ANNOUNCE_WAIT: Duration = Duration::from_secs(15);

/// Answers sampling with [`SAMPLED`] and elicitation with the schema's defaults and a name.
fn handler(request: ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>> {
    Box::pin(async move {
        match request {
            ServerRequest::CreateMessage(_) => Ok(json!({
                "role": "assistant",
                "content": {"type": "text", "text": SAMPLED},
                "model": "toolwire-interop",
                "stopReason": "endTurn",
            })),
            ServerRequest::Elicit(params) => {
                let mut content = toolwire_conformance::schema_defaults(&params);
                content.insert("name".into(), ELICITED_NAME.into());
                Ok(json!({"action": "accept", "content": content}))
            }
            other => Err(ErrorObject::new(
                -32601,
                format!("this client does not handle {}", other.method()),
            )),
        }
    })
}

/// The text blocks of a result, joined by newlines.
fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One check's outcome.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

impl Check {
    fn new(name: &'static str, ok: bool, detail: impl Into<String>) -> Self {
        Self {
            name,
            ok,
            detail: detail.into(),
        }
    }

    /// A check whose call failed.
    fn failed(name: &'static str, error: &toolwire::Error) -> Self {
        Self::new(name, false, toolwire_conformance::error_chain(error))
    }
}

/// Waits until every one of `names` is in the cache, or [`ANNOUNCE_WAIT`] passes.
async fn announced(client: &Client, names: &[&str]) -> Check {
    let mut commits = client.subscribe_tools();
    let has_all = |c: &Client| names.iter().all(|n| c.tools().contains(n));
    let waited = tokio::time::timeout(ANNOUNCE_WAIT, async {
        while !has_all(client) {
            if commits.recv().await.is_err() && !has_all(client) {
                // The channel lagged or closed: look at the snapshot again after a pause.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    })
    .await;
    let snapshot = client.tools();
    let detail = format!(
        "cache generation {} holds {} tools",
        snapshot.generation(),
        snapshot.len()
    );
    Check::new("list-changed", waited.is_ok(), detail)
}

/// The first notification on `notifications` that `wanted` picks, within `within`.
async fn first_notice<T>(
    notifications: &mut Notifications,
    within: Duration,
    mut wanted: impl FnMut(&ServerNotification) -> Option<T>,
) -> Option<T> {
    tokio::time::timeout(within, async {
        while let Some(notice) = notifications.recv().await {
            if let Some(found) = wanted(&notice.notification) {
                return Some(found);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
}

/// `prompts`, `logging` and `resource-updates` (see the module docs).
async fn prompts_logging_and_subscriptions(client: &Client, checks: &mut Vec<Check>) {
    checks.push(
        match client
            .get_prompt("args-prompt", [("city".to_owned(), "Paris".to_owned())])
            .await
        {
            Ok(prompt) => {
                let text = prompt
                    .messages
                    .first()
                    .and_then(|m| m.content.as_text())
                    .unwrap_or_default()
                    .to_owned();
                Check::new("prompts", text.contains("Paris"), text)
            }
            Err(e) => Check::failed("prompts", &e),
        },
    );

    let mut notifications = client.notifications();
    let uri = match client.list_resources(None).await {
        Ok(listed) => match listed.resources.first() {
            Some(resource) => resource.uri.clone(),
            None => {
                checks.push(Check::new(
                    "logging",
                    false,
                    "the server listed no resource",
                ));
                return;
            }
        },
        Err(e) => return checks.push(Check::failed("logging", &e)),
    };
    if let Err(e) = client.set_log_level(LoggingLevel::Info).await {
        return checks.push(Check::failed("logging", &e));
    }
    if let Err(e) = client.subscribe_resource(&uri).await {
        return checks.push(Check::failed("logging", &e));
    }
    let expected = format!("Received Subscribe Resource request for URI: {uri}");
    let logged = first_notice(&mut notifications, Duration::from_secs(10), |n| match n {
        ServerNotification::LoggingMessage(log)
            if log.data.as_str().is_some_and(|d| d.contains(&expected)) =>
        {
            Some(log.data.to_string())
        }
        _ => None,
    })
    .await;
    checks.push(Check::new(
        "logging",
        logged.is_some(),
        logged.unwrap_or_else(|| format!("no log message containing {expected:?} within 10 s")),
    ));

    let toggle = || client.call_tool("toggle-subscriber-updates", json!({}));
    if let Err(e) = toggle().await {
        return checks.push(Check::failed("resource-updates", &e));
    }
    // The first update goes out at once, the next ones every 5 s.
    let updated = first_notice(&mut notifications, Duration::from_secs(12), |n| match n {
        ServerNotification::ResourceUpdated(updated) if updated.uri == uri => {
            Some(updated.uri.clone())
        }
        _ => None,
    })
    .await;
    let stopped = toggle().await;
    let unsubscribed = client.unsubscribe_resource(&uri).await;
    checks.push(Check::new(
        "resource-updates",
        updated.is_some() && stopped.is_ok() && unsubscribed.is_ok(),
        match (updated, stopped, unsubscribed) {
            (None, ..) => format!("no update of {uri} within 12 s"),
            (Some(_), Err(e), _) | (Some(_), _, Err(e)) => toolwire_conformance::error_chain(&e),
            (Some(uri), Ok(_), Ok(())) => format!("{uri} updated; updates stopped, unsubscribed"),
        },
    ));
}

async fn everything(client: &Client) -> Vec<Check> {
    let mut checks = Vec::new();
    match client.ready().await {
        Ok(negotiated) => checks.push(Check::new(
            "negotiated",
            negotiated.version.as_str() == "2025-11-25",
            format!(
                "{} with {}",
                negotiated.version.as_str(),
                negotiated
                    .server_info
                    .as_ref()
                    .map_or("an unnamed server", |i| i.name.as_str())
            ),
        )),
        Err(e) => {
            checks.push(Check::failed("negotiated", &e));
            return checks;
        }
    }
    checks.push(
        announced(
            client,
            &["trigger-sampling-request", "trigger-elicitation-request"],
        )
        .await,
    );

    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&steps);
    let long = client
        .call_tool_with_progress(
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
            CallOptions::default(),
            move |p| {
                if let Ok(mut s) = seen.lock() {
                    s.push(p.progress);
                }
            },
        )
        .await;
    checks.push(match long {
        Ok(result) => {
            let steps = steps.lock().map(|s| s.clone()).unwrap_or_default();
            let ok = steps == [1.0, 2.0, 3.0] && text(&result).contains("completed");
            Check::new(
                "progress",
                ok,
                format!("progress {steps:?}; {}", text(&result)),
            )
        }
        Err(e) => Check::failed("progress", &e),
    });

    checks.push(
        match client
            .call_tool(
                "trigger-sampling-request",
                json!({"prompt": "say hi", "maxTokens": 10}),
            )
            .await
        {
            Ok(result) => {
                let text = text(&result);
                Check::new("sampling", text.contains(SAMPLED), text)
            }
            Err(e) => Check::failed("sampling", &e),
        },
    );

    checks.push(
        match client
            .call_tool("trigger-elicitation-request", json!({}))
            .await
        {
            Ok(result) => {
                let text = text(&result);
                let ok = text.contains(&format!("Name: {ELICITED_NAME}"))
                    && text.contains("Favorite Integer: 42");
                Check::new("elicitation", ok, text)
            }
            Err(e) => Check::failed("elicitation", &e),
        },
    );

    checks.push(
        match client
            .call_tool("get-structured-content", json!({"location": "Chicago"}))
            .await
        {
            Ok(result) => {
                let structured = result.structured_content.clone().unwrap_or_default();
                let ok = structured["temperature"].is_number();
                Check::new("structured", ok, structured.to_string())
            }
            Err(e) => Check::failed("structured", &e),
        },
    );

    let message = "héllo, wörld ✓";
    checks.push(
        match client
            .call_tool("echo", json!({ "message": message }))
            .await
        {
            Ok(result) => {
                let text = text(&result);
                Check::new("echo", text == format!("Echo: {message}"), text)
            }
            Err(e) => Check::failed("echo", &e),
        },
    );
    prompts_logging_and_subscriptions(client, &mut checks).await;
    checks
}

/// The texts of the log messages waiting on `notifications`, in order.
fn logged(notifications: &mut Notifications) -> Vec<String> {
    std::iter::from_fn(|| notifications.try_recv())
        .filter_map(|notice| match &notice.notification {
            ServerNotification::LoggingMessage(log) => Some(log.data.as_str()?.to_owned()),
            _ => None,
        })
        .collect()
}

/// `logs`: against a server whose `log` tool logs `"{level}: {message}"` at debug, info,
/// warning and error, in the `2026-07-28` era:
/// - `log-level`: a client at level `warning` gets the warning and the error only (the level
///   rides on the request's `_meta`; the messages come before the answer on its stream);
/// - `no-log-level`: a client that asked for no level gets none.
async fn logs(url: &str) -> Vec<Check> {
    let mut checks = Vec::new();
    for (name, level, expected) in [
        (
            "log-level",
            Some(LoggingLevel::Warning),
            &["warning: m", "error: m"][..],
        ),
        ("no-log-level", None, &[][..]),
    ] {
        let mut builder = Client::builder("toolwire-interop", env!("CARGO_PKG_VERSION"));
        if let Some(level) = level {
            builder = builder.log_level(level);
        }
        let client = match builder.connect_http(HttpTransport::builder(url)) {
            Ok(client) => client,
            Err(e) => {
                checks.push(Check::failed(name, &e));
                continue;
            }
        };
        let mut notifications = client.notifications();
        // Listed first, so the call goes with its headers (and no warning about a tool the
        // cache does not know).
        if let Err(e) = client.list_all_tools().await {
            checks.push(Check::failed(name, &e));
            continue;
        }
        let check = match client.call_tool("log", json!({"message": "m"})).await {
            Ok(_) => {
                let version = client
                    .ready()
                    .await
                    .map(|n| n.version.as_str().to_owned())
                    .unwrap_or_default();
                let got = logged(&mut notifications);
                Check::new(
                    name,
                    got == expected && version == "2026-07-28",
                    format!("{version}: {got:?}"),
                )
            }
            Err(e) => Check::failed(name, &e),
        };
        checks.push(check);
        client.close().await;
    }
    checks
}

async fn run(args: &[String]) -> Result<bool, String> {
    let usage = "usage: toolwire-interop-client everything (--url URL | --stdio PROGRAM ARGS...) \
                 | logs --url URL";
    let checks = match (
        args.first().map(String::as_str),
        args.get(1).map(String::as_str),
        args.get(2),
    ) {
        (Some("everything"), Some(how), _) => everything_at(how, args).await?,
        (Some("logs"), Some("--url"), Some(url)) => logs(url).await,
        _ => return Err(usage.into()),
    };
    for c in &checks {
        println!(
            "{}",
            json!({"check": c.name, "ok": c.ok, "detail": c.detail})
        );
    }
    Ok(checks.iter().all(|c| c.ok))
}

/// `everything` over `--url` or `--stdio`.
async fn everything_at(how: &str, args: &[String]) -> Result<Vec<Check>, String> {
    let usage = "usage: toolwire-interop-client everything (--url URL | --stdio PROGRAM ARGS...)";
    let capabilities: ClientCapabilities =
        serde_json::from_value(json!({"sampling": {}, "elicitation": {"form": {}}}))
            .map_err(|e| e.to_string())?;
    let builder = Client::builder("toolwire-interop", env!("CARGO_PKG_VERSION"))
        .handler(capabilities, handler);
    let client = match (how, args.get(2)) {
        ("--url", Some(url)) => builder.connect_http(HttpTransport::builder(url.as_str())),
        ("--stdio", Some(program)) => {
            builder.connect_stdio(StdioConfig::new(program.as_str(), &args[3..]))
        }
        _ => return Err(usage.into()),
    }
    .map_err(|e| toolwire_conformance::error_chain(&e))?;
    let checks = everything(&client).await;
    client.close().await;
    Ok(checks)
}

fn main() -> ExitCode {
    toolwire_conformance::init_tracing();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = toolwire_conformance::runtime()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(run(&args)));
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("toolwire-interop-client: {e}");
            ExitCode::from(2)
        }
    }
}

//! `toolwire … batch`: one JSON request a line on stdin, one JSON line a request on stdout, in
//! order, over one client (or the host of a `--config` file) for the whole run, so that its
//! reconnects, caches and session serve a script.
//!
//! A line is `{"tool": NAME, "arguments": {...}}` or `{"method": M, "params": {...}}` (with
//! `--config` and no `--server`, `tool` is `SERVER__TOOL` and a `method` line names its
//! `"server"`). The answer is the result, or `{"error": {"message", "exit", "code"?,
//! "data"?}}`, where `exit` is the exit code the command would have had alone: 1 a tool
//! result with `isError`, 2 a line that is not a request, 3 the connection, the protocol or
//! the server. The process exits with the highest of them (0 when every line succeeded).

use std::process::ExitCode;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use toolwire::types::methods::method;
use toolwire::types::{HasMeta, RequestMethod};
use toolwire::{Client, Error, ErrorChain};
use toolwire_host::{Host, HostError};

/// Who answers the lines.
pub(crate) enum Target<'a> {
    /// One server.
    Client(&'a Client),
    /// Every server of a configuration.
    Host(&'a Host),
}

/// Reads requests from stdin until it ends, answering each on stdout.
pub(crate) async fn run(target: Target<'_>) -> ExitCode {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut worst = 0;
    let mut listed = false;
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                print(&usage(&format!("stdin: {e}")).0);
                worst = 2;
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let (answer, exit) = match serde_json::from_str::<Value>(&line) {
            Ok(request) => one(&target, request, &mut listed).await,
            Err(e) => usage(&format!("not JSON: {e}")),
        };
        print(&answer);
        worst = worst.max(exit);
    }
    ExitCode::from(worst)
}

fn print(answer: &Value) {
    // One line each; stdout is flushed at the newline.
    say!("{answer}");
}

fn usage(message: &str) -> (Value, u8) {
    (json!({"error": {"message": message, "exit": 2}}), 2)
}

fn failed(error: &Error) -> (Value, u8) {
    let mut body = json!({"message": ErrorChain(error).to_string(), "exit": 3});
    if let Error::Server(e) = error {
        body["code"] = json!(e.code);
        if let Some(data) = &e.data {
            body["data"] = data.clone();
        }
    }
    (json!({ "error": body }), 3)
}

fn host_failed(error: &HostError) -> (Value, u8) {
    match error {
        HostError::Call { error, .. } => failed(error),
        other => (
            json!({"error": {"message": ErrorChain(other).to_string(), "exit": 3}}),
            3,
        ),
    }
}

/// A tool result: exit 1 when it says `isError`.
fn result(result: &toolwire::CallToolResult) -> (Value, u8) {
    let exit = u8::from(result.is_error());
    (serde_json::to_value(result).unwrap_or(Value::Null), exit)
}

async fn one(target: &Target<'_>, request: Value, listed: &mut bool) -> (Value, u8) {
    let arguments = request.get("arguments").cloned().unwrap_or(json!({}));
    let params = request.get("params").cloned().unwrap_or(json!({}));
    match (
        request.get("tool").and_then(Value::as_str),
        request.get("method").and_then(Value::as_str),
        target,
    ) {
        (Some(tool), None, Target::Client(client)) => {
            if let Some(refusal) = crate::pins::held(tool) {
                return host_failed(&refusal);
            }
            // Listed once, for the headers of the tools it names.
            if !*listed && !client.tools().contains(tool) {
                *listed = true;
                if let Err(e) = client.list_tools().await {
                    return failed(&e);
                }
            }
            match client.call_tool(tool, arguments).await {
                Ok(r) => result(&r),
                Err(e) => failed(&e),
            }
        }
        (Some(tool), None, Target::Host(host)) => match host.call_tool(tool, arguments).await {
            Ok(r) => result(&r),
            Err(e) => host_failed(&e),
        },
        (None, Some(method), Target::Client(client)) => any(client, method, params).await,
        (None, Some(method), Target::Host(host)) => {
            let Some(server) = request.get("server").and_then(Value::as_str) else {
                return usage("with --config, a method line names its \"server\"");
            };
            match host.client(server) {
                Ok(client) => any(&client, method, params).await,
                Err(e) => host_failed(&e),
            }
        }
        _ => usage(
            r#"a line is {"tool": NAME, "arguments": {...}} or {"method": M, "params": {...}}"#,
        ),
    }
}

/// Any request the client knows by name, its params decoded from the line.
async fn any(client: &Client, name: &str, params: Value) -> (Value, u8) {
    async fn typed<M>(client: &Client, params: Value) -> (Value, u8)
    where
        M: RequestMethod,
        M::Params: HasMeta + DeserializeOwned + Send + 'static,
        M::Result: Serialize,
    {
        let params: M::Params = match serde_json::from_value(params) {
            Ok(p) => p,
            Err(e) => return usage(&format!("params of {}: {e}", M::NAME)),
        };
        match client.request::<M>(params).await {
            Ok(r) => (serde_json::to_value(r).unwrap_or(Value::Null), 0),
            Err(e) => failed(&e),
        }
    }
    match name {
        "ping" => typed::<method::Ping>(client, params).await,
        "tools/list" => typed::<method::ListTools>(client, params).await,
        "tools/call" => typed::<method::CallTool>(client, params).await,
        "resources/list" => typed::<method::ListResources>(client, params).await,
        "resources/templates/list" => typed::<method::ListResourceTemplates>(client, params).await,
        "resources/read" => typed::<method::ReadResource>(client, params).await,
        "resources/subscribe" => typed::<method::Subscribe>(client, params).await,
        "resources/unsubscribe" => typed::<method::Unsubscribe>(client, params).await,
        "prompts/list" => typed::<method::ListPrompts>(client, params).await,
        "prompts/get" => typed::<method::GetPrompt>(client, params).await,
        "completion/complete" => typed::<method::Complete>(client, params).await,
        "logging/setLevel" => typed::<method::SetLevel>(client, params).await,
        other => usage(&format!("batch knows no method {other:?}")),
    }
}

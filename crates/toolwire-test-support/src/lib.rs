//! Test peers for Toolwire.
//!
//! [`ScriptedServer`] is a small MCP server as a pure function from one received line to the
//! lines it answers with, speaking the modern era (`server/discover`, `_meta` envelope), the
//! legacy era (`initialize`) or both. [`serve_stdio`] runs it on stdin/stdout, for end-to-end
//! tests through real child processes. It is a peer for tests, not a reference server: it
//! knows a handful of tools and the behaviours the tests need (pages, progress, list changes,
//! a slow tool for cancellation).
//!
//! It also serves one resource (`file:///notes.txt`), one prompt (`greet {who}`) and, in the
//! legacy era, `ping`.
//!
//! Its tools: `echo {text}`, `execute_sql {region (x-mcp-header Region), query}`,
//! `count {to}` (progress notifications, one per step), `slow` (answers only when cancelled
//! or never), `ask` (legacy: sends `elicitation/create` and answers with the name it gets),
//! `weather`/`liar`/`failing_liar`/`remote_ref` (structured output against an `outputSchema`:
//! conforming, not conforming, not conforming but `isError`, a remote `$ref`), `unlock` (announces `registers: ["read_file"]`, then sends
//! `notifications/tools/list_changed` and lists `read_file` from then on).
//!
//! [`http`] has loopback HTTP peers: [`http::HttpPeer`] answers each request as the test's
//! handler chooses and records it; [`http::scripted`] serves a [`ScriptedServer`] over
//! Streamable HTTP. [`proxy::FaultProxy`] sits between a client and a server and injects
//! faults connection by connection.

pub mod forward;
pub mod http;
pub mod issuer;
pub mod logs;
pub mod oauth;
pub mod otlp;
pub mod proxy;
pub mod redis;
pub mod sse;
pub mod threads;

use std::io::{BufRead, Write};

use serde_json::{Value, json};
use toolwire_types::{
    ErrorObject, Message, ProtocolVersion, RequestId, encode_error, encode_notification,
    encode_result, error::code,
};

/// Which eras the scripted server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eras {
    /// `server/discover` and per-request `_meta` only; `initialize` is refused.
    Modern,
    /// `initialize` only; `server/discover` is an unknown method.
    Legacy,
    /// Both.
    Both,
    /// Legacy, and the process exits if the first request is not `initialize` (as stdio
    /// servers built on rmcp do).
    StrictLegacy,
}

/// A scripted MCP server: state plus a line-in, lines-out step function.
#[derive(Debug)]
pub struct ScriptedServer {
    eras: Eras,
    unlocked: bool,
    /// The `ask` call waiting for the client's answer to `elicitation/create`.
    asking: Option<RequestId>,
    /// Requests seen, by method (for assertions).
    pub seen: Vec<String>,
    /// Set when the server wants its process to end (see [`Eras::StrictLegacy`]).
    pub exit: bool,
}

fn tool(name: &str, schema: Value) -> Value {
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": schema})
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

impl ScriptedServer {
    /// A server speaking `eras`.
    pub fn new(eras: Eras) -> Self {
        Self {
            eras,
            unlocked: false,
            asking: None,
            seen: Vec::new(),
            exit: false,
        }
    }

    fn tools(&self) -> Vec<Value> {
        let mut tools = vec![
            tool(
                "echo",
                json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            ),
            tool(
                "execute_sql",
                json!({"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}}}),
            ),
            tool(
                "count",
                json!({"type": "object", "properties": {"to": {"type": "integer"}}}),
            ),
            tool("slow", json!({"type": "object"})),
            tool("unlock", json!({"type": "object"})),
            tool("ask", json!({"type": "object"})),
            tool("login", json!({"type": "object"})),
        ];
        let weather = json!({"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]});
        for (name, schema) in [
            ("weather", weather.clone()),
            ("liar", weather.clone()),
            ("failing_liar", weather),
            (
                "remote_ref",
                json!({"$ref": "https://schemas.example.com/weather.json"}),
            ),
        ] {
            let mut t = tool(name, json!({"type": "object"}));
            t["outputSchema"] = schema;
            tools.push(t);
        }
        if self.unlocked {
            tools.push(tool(
                "read_file",
                json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            ));
        }
        tools
    }

    /// Answers one received line with zero or more lines (each one JSON-RPC message).
    pub fn handle_line(&mut self, line: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        match Message::decode(line) {
            Ok(Message::Request(request)) => {
                if self.eras == Eras::StrictLegacy
                    && self.seen.is_empty()
                    && request.method != "initialize"
                {
                    self.exit = true;
                    return out;
                }
                self.seen.push(request.method.clone());
                let params: Value = request.params().unwrap_or(Value::Null);
                self.answer(&request.id, &request.method, &params, &mut out);
            }
            Ok(Message::Notification(n)) => self.seen.push(n.method),
            Ok(Message::Response(response)) => {
                // The client's answer to `ask`'s elicitation: now the call can finish.
                if let (Some(call), Some(RequestId::String(id))) = (&self.asking, &response.id)
                    && id == "ask-1"
                {
                    let text = match &response.payload {
                        Ok(raw) => {
                            let v: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                            match v["action"].as_str() {
                                Some("accept") => format!(
                                    "hello {}",
                                    v["content"]["name"].as_str().unwrap_or("?")
                                ),
                                other => format!("no name ({})", other.unwrap_or("?")),
                            }
                        }
                        Err(e) => format!("elicitation refused: {}", e.code),
                    };
                    push(&mut out, encode_result(call, &text_result(&text)));
                    self.asking = None;
                }
            }
            Err(e) => push(
                &mut out,
                encode_error(None, &ErrorObject::new(code::PARSE_ERROR, e.to_string())),
            ),
        }
        out
    }

    fn answer(&mut self, id: &RequestId, method: &str, params: &Value, out: &mut Vec<Vec<u8>>) {
        let modern_ok = matches!(self.eras, Eras::Modern | Eras::Both);
        let legacy_ok = self.eras != Eras::Modern;
        let modern_request = params["_meta"]["io.modelcontextprotocol/protocolVersion"].is_string();
        let result = match method {
            "server/discover" if modern_ok => Ok(json!({
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": true}}, "ttlMs": 0, "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1"}}})),
            "initialize" if legacy_ok => {
                let asked = params["protocolVersion"].as_str().unwrap_or("");
                let version = if ProtocolVersion::new(asked)
                    .is_ok_and(|v| v.is_supported() && !v.is_modern())
                {
                    asked.to_owned()
                } else {
                    ProtocolVersion::LATEST_LEGACY.to_string()
                };
                Ok(
                    json!({"protocolVersion": version, "capabilities": {"tools": {"listChanged": true}, "resources": {}, "prompts": {}},
                    "serverInfo": {"name": "scripted-legacy", "version": "1"}}),
                )
            }
            "ping" if legacy_ok => Ok(json!({})),
            _ if modern_ok && !legacy_ok && !modern_request => Err(ErrorObject::new(
                code::INVALID_PARAMS,
                "missing _meta protocolVersion",
            )),
            "tools/list" => {
                // Two pages: the first two tools, then the rest (cursor "2").
                let tools = self.tools();
                let (page, next) = match params["cursor"].as_str() {
                    None => (tools[..2].to_vec(), Some("2")),
                    Some(_) => (tools[2..].to_vec(), None),
                };
                let mut r = json!({"tools": page});
                if let Some(next) = next {
                    r["nextCursor"] = json!(next);
                }
                Ok(r)
            }
            "tools/call" => self.call(params, out),
            "resources/list" => Ok(
                json!({"resources": [{"uri": "file:///notes.txt", "name": "notes.txt", "mimeType": "text/plain"}]}),
            ),
            "resources/read" if params["uri"] == "file:///notes.txt" => Ok(
                json!({"contents": [{"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "remember the milk"}]}),
            ),
            "resources/read" => {
                let code = if modern_request {
                    code::INVALID_PARAMS
                } else {
                    code::RESOURCE_NOT_FOUND_LEGACY
                };
                Err(ErrorObject::new(code, "Resource not found"))
            }
            "prompts/list" => Ok(
                json!({"prompts": [{"name": "greet", "arguments": [{"name": "who", "required": true}]}]}),
            ),
            "prompts/get" if params["name"] == "secret" => match params["requestState"].as_str() {
                None => Ok(json!({"resultType": "input_required", "requestState": "s",
                    "inputRequests": {"pin": {"method": "elicitation/create", "params": {"message": "PIN?"}}}})),
                Some("s") => Ok(
                    json!({"messages": [{"role": "user", "content": {"type": "text",
                    "text": format!("the secret for PIN {}", params["inputResponses"]["pin"]["content"]["pin"])}}]}),
                ),
                Some(other) => Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!("bad requestState {other}"),
                )),
            },
            "prompts/get" => Ok(
                json!({"messages": [{"role": "user", "content": {"type": "text",
                "text": format!("Hello, {}!", params["arguments"]["who"].as_str().unwrap_or("you"))}}]}),
            ),
            _ => Err(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )),
        };
        if method == "tools/call" && params["name"] == "ask" && result.is_ok() {
            self.asking = Some(id.clone());
        }
        if method == "tools/call"
            && matches!(params["name"].as_str(), Some("slow" | "ask"))
            && result.is_ok()
        {
            return; // `slow` never answers; `ask` answers when the client does
        }
        match result {
            Ok(mut r) => {
                if modern_request && r.get("resultType").is_none() {
                    r["resultType"] = json!("complete");
                }
                push(out, encode_result(id, &r));
            }
            Err(e) => push(out, encode_error(Some(id), &e)),
        }
    }

    fn call(&mut self, params: &Value, out: &mut Vec<Vec<u8>>) -> Result<Value, ErrorObject> {
        let args = &params["arguments"];
        match params["name"].as_str().unwrap_or("") {
            "echo" => Ok(text_result(args["text"].as_str().unwrap_or(""))),
            "execute_sql" => Ok(text_result(&format!(
                "region={} rows=1",
                args["region"].as_str().unwrap_or("?")
            ))),
            "count" => {
                let to = args["to"].as_u64().unwrap_or(3);
                if let Some(token) = params["_meta"].get("progressToken") {
                    for i in 1..=to {
                        let p = json!({"progressToken": token, "progress": i, "total": to});
                        push(out, encode_notification("notifications/progress", Some(&p)));
                    }
                }
                Ok(text_result(&format!("counted to {to}")))
            }
            "slow" => Ok(json!({})),
            "login" => Ok(
                match (
                    &params["inputResponses"]["github_login"],
                    params["requestState"].as_str(),
                ) {
                    (Value::Null, _) => json!({"resultType": "input_required",
                    "inputRequests": {"github_login": {"method": "elicitation/create", "params": {
                        "message": "GitHub login?", "requestedSchema": {"type": "object",
                        "properties": {"name": {"type": "string"}}, "required": ["name"]}}}},
                    "requestState": "state-1 opaque=+/"}),
                    (answer, Some("state-1 opaque=+/")) if answer["action"] == "accept" => {
                        // The retry must carry the first round's arguments too.
                        let org = params["arguments"]["org"]
                            .as_str()
                            .map(|org| format!(" of {org}"))
                            .unwrap_or_default();
                        text_result(&format!(
                            "welcome {}{org}",
                            answer["content"]["name"].as_str().unwrap_or("?")
                        ))
                    }
                    (_, state) => {
                        return Err(ErrorObject::new(
                            code::INVALID_PARAMS,
                            format!("bad retry (requestState {state:?})"),
                        ));
                    }
                },
            ),
            "weather" | "remote_ref" => Ok(
                json!({"content": [{"type": "text", "text": "{\"temp\":21}"}], "structuredContent": {"temp": 21}}),
            ),
            "liar" => Ok(
                json!({"content": [{"type": "text", "text": "hot"}], "structuredContent": {"temp": "hot"}}),
            ),
            "failing_liar" => Ok(json!({"content": [{"type": "text", "text": "sensor down"}],
                "structuredContent": {"error": "sensor down"}, "isError": true})),
            "ask" if self.eras != Eras::Modern => {
                let p = json!({"message": "Your name?", "requestedSchema": {"type": "object",
                    "properties": {"name": {"type": "string", "default": "octocat"}}}});
                push(
                    out,
                    toolwire_types::encode_request(
                        &RequestId::from("ask-1"),
                        "elicitation/create",
                        Some(&p),
                    ),
                );
                Ok(json!({}))
            }
            "unlock" => {
                self.unlocked = true;
                let mut r = text_result("unlocked");
                // Announced in the result; the list change follows it (see `after`): the race
                // the settle barrier closes.
                r["registers"] = json!(["read_file"]);
                Ok(r)
            }
            other => Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!("Unknown tool: {other}"),
            )),
        }
    }

    /// Lines to send after the answer to `method` (the list change after `unlock`).
    pub fn after(&mut self, method_and_name: (&str, &str)) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        if method_and_name == ("tools/call", "unlock") {
            push(
                &mut out,
                encode_notification("notifications/tools/list_changed", None::<&()>),
            );
        }
        out
    }
}

fn push(out: &mut Vec<Vec<u8>>, encoded: Result<Vec<u8>, toolwire_types::EncodeError>) {
    if let Ok(bytes) = encoded {
        out.push(bytes);
    }
}

/// With this variable set to a path, the stdio server appends `start PID` when it starts and
/// `call NAME ARGUMENTS` for each `tools/call` it receives: what ran, for tests to check.
pub const LOG_VAR: &str = "TOOLWIRE_TEST_LOG";

/// With this variable set to N, the stdio server exits after answering its Nth `tools/call`.
pub const EXIT_AFTER_VAR: &str = "TOOLWIRE_TEST_EXIT_AFTER";

fn append(log: Option<&std::path::Path>, line: &str) -> std::io::Result<()> {
    let Some(path) = log else { return Ok(()) };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}

/// Serves `eras` on stdin/stdout until stdin ends. Tool-list changes are written
/// [`http::REGISTER_DELAY`] after the answer that causes them. See [`LOG_VAR`] and
/// [`EXIT_AFTER_VAR`].
pub fn serve_stdio(eras: Eras) -> std::io::Result<()> {
    let mut server = ScriptedServer::new(eras);
    let log = std::env::var_os(LOG_VAR).map(std::path::PathBuf::from);
    let exit_after: Option<usize> = std::env::var(EXIT_AFTER_VAR)
        .ok()
        .and_then(|n| n.parse().ok());
    let mut calls = 0;
    append(log.as_deref(), &format!("start {}", std::process::id()))?;
    let stdin = std::io::stdin();
    for line in stdin.lock().split(b'\n') {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (method, name) = match serde_json::from_slice::<Value>(&line) {
            Ok(v) => (
                v["method"].as_str().unwrap_or("").to_owned(),
                v["params"]["name"].as_str().unwrap_or("").to_owned(),
            ),
            Err(_) => (String::new(), String::new()),
        };
        if method == "tools/call" {
            let arguments = serde_json::from_slice::<Value>(&line)
                .map(|v| v["params"]["arguments"].to_string())
                .unwrap_or_default();
            append(log.as_deref(), &format!("call {name} {arguments}"))?;
            calls += 1;
        }
        let lines = server.handle_line(&line);
        if server.exit {
            return Ok(());
        }
        {
            // Locked per batch, not for the whole loop: delayed writers need their turn.
            let mut stdout = std::io::stdout().lock();
            for l in lines {
                stdout.write_all(&l)?;
                stdout.write_all(b"\n")?;
            }
            stdout.flush()?;
        }
        if exit_after.is_some_and(|n| method == "tools/call" && calls >= n) {
            return Ok(());
        }
        let later = server.after((&method, &name));
        if !later.is_empty() {
            // Registered a little after the answer, as real servers do.
            std::thread::spawn(move || {
                std::thread::sleep(http::REGISTER_DELAY);
                let mut out = std::io::stdout().lock();
                for mut l in later {
                    l.push(b'\n');
                    let _ = out.write_all(&l);
                }
                let _ = out.flush();
            });
        }
    }
    Ok(())
}

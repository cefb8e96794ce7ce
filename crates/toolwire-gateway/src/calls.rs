//! `tools/call` through the gateway: routed to its server under the server's own name, its
//! progress relayed under the client's token, the server's requests about it relayed to the
//! client ([`crate::relay`]), and the tools its result names renamed as clients see them.

use crate::lock;
use std::sync::{Arc, Mutex};
use toolwire_types::Method as _;
use toolwire_types::methods::method as mcp;

use serde::Deserialize as _;
use serde_json::{Value, json};
use tokio::sync::watch;
use toolwire::{CallHooks, CallOptions, LoggingLevel, ProgressParams};
use toolwire_host::HostError;
use toolwire_server::{Era, Notifier, Reply, Request, RpcError};
use toolwire_types::{error::code, meta_key};

use crate::metrics::{Outcome, Side};
use crate::relay::{self, Question, Relay, Running};
use crate::{Gateway, upstream_error};

/// What a call's work upstream ends with, and what the answer needs of it.
pub(crate) struct Called {
    /// Who called (`-` when callers are not authenticated), for the audit line.
    caller: String,
    name: String,
    server: Option<Arc<str>>,
    /// The arguments, for an audit line that carries them ([`crate::GatewayBuilder::audit_arguments`]).
    arguments: Option<String>,
    began: std::time::Instant,
    /// The era of the client that called: what its copy of a result passed on as text lacks.
    era: Era,
    /// The result, or (for a client that declared the tasks extension) the upstream's task.
    result: Result<toolwire::Called, HostError>,
    /// What traffic control let through: told how the call ended.
    pass: Option<crate::traffic::Pass>,
}

/// Whether a call's upstream failed to answer it (what a circuit breaker counts): no answer
/// in time, a lost connection, not running. An answer of any kind (a tool error, a JSON-RPC
/// error) is the upstream working.
fn upstream_failed(result: &Result<toolwire::Called, HostError>) -> bool {
    match result {
        Ok(_) => false,
        Err(HostError::NotRunning { .. }) => true,
        Err(HostError::Call { error, .. }) => matches!(
            error,
            toolwire::Error::Timeout(_)
                | toolwire::Error::Connection(_)
                | toolwire::Error::Negotiation(_)
        ),
        Err(_) => false,
    }
}

/// `notifications/progress` for the client, under its `token`.
fn progress(token: &Value, p: &ProgressParams) -> Value {
    let mut params = json!({"progressToken": token, "progress": p.progress});
    if let Some(total) = p.total {
        params["total"] = json!(total);
    }
    if let Some(message) = &p.message {
        params["message"] = json!(message);
    }
    json!({"jsonrpc": "2.0", "method": mcp::Progress::NAME, "params": params})
}

/// The progress token of a request, if it asked for progress.
fn token(params: &Value) -> Option<Value> {
    params["_meta"]
        .get("progressToken")
        .filter(|t| t.is_string() || t.is_number())
        .cloned()
}

/// Where the news of the call `params` asks for goes: its notifier, its progress token, the
/// log level it asked for (2026-07-28).
fn relay(params: &Value, notifier: &Notifier) -> Relay {
    Relay {
        notifier: notifier.clone(),
        token: token(params),
        // Decoded only when asked for: most calls ask none, and decoding an absent level made
        // (and formatted) an error on every one of them.
        level: params["_meta"]
            .get(meta_key::LOG_LEVEL)
            .and_then(|level| LoggingLevel::deserialize(level).ok()),
    }
}

impl Gateway {
    /// A `tools/call`, or a 2026-07-28 client's retry of one it was asked input for.
    pub(crate) async fn call(
        &self,
        request: Request<'_>,
        notifier: &Notifier,
    ) -> Result<Reply, RpcError> {
        let params = request.params;
        if request.era == Era::Modern
            && let Some(state) = params["requestState"].as_str()
            && state.starts_with("gw-")
        {
            let owner = crate::access::principal(request.caller);
            return self.resume(state, owner, params, notifier).await;
        }
        let Some(name) = params["name"].as_str() else {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("{} needs a name", mcp::CallTool::NAME),
            ));
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(arguments @ Value::Object(_)) => arguments.clone(),
            Some(other) => {
                return Err(RpcError::new(
                    code::INVALID_PARAMS,
                    format!("arguments must be an object, not {other}"),
                ));
            }
        };
        let routed = self
            .host
            .load()
            .get(name)
            .map(|t| (t.server.clone(), t.tool.clone()));
        // The upstream's limits, breaker and cap let the call through, or refuse it at once.
        let pass = match &routed {
            Some((server, tool)) => Some(
                self.let_through(server, &tool.name, crate::access::principal(request.caller))
                    .await?,
            ),
            None => None,
        };
        let server = routed.map(|(server, _)| server);
        let caller = crate::access::principal(request.caller).to_owned();
        let audited = self.audit_arguments.then(|| arguments.to_string());
        let began = std::time::Instant::now();
        let relay_to = Arc::new(Mutex::new(relay(params, notifier)));
        let mut hooks = CallHooks::new();
        if token(params).is_some() {
            let to = relay_to.clone();
            hooks = hooks.on_progress(move |p: &ProgressParams| {
                let to = lock(&to);
                if let Some(token) = &to.token {
                    to.notifier.send(progress(token, p));
                }
            });
        }
        // What the client declared, shared: the relay of the upstream's questions checks them,
        // and a 2026-07-28 upstream hears them.
        let declared = request.client.map(|c| self.declarations.get(c));
        let client = declared.as_ref().map(|d| d.json.clone());
        // A 2026-07-28 upstream hears exactly what the calling client declared: it asks only
        // what that client can answer, and makes a task only for a client that follows one.
        let mut options = CallOptions::default();
        // One trace follows the call end to end: the call upstream is made in the gateway's
        // span, the child of the caller's context, and carries that span's own context. When
        // the gateway makes no OpenTelemetry spans, the caller's context goes on as it came.
        if toolwire_telemetry::current().is_none()
            && let Some(trace) = params["_meta"]
                .as_object()
                .and_then(toolwire_types::TraceContext::from_meta)
        {
            trace.write_into(options.meta.get_or_insert_with(Default::default));
        }
        // Capabilities declared per call exist in 2026-07-28 only: an upstream known to speak
        // an older version would ignore them, so they are not decoded for it.
        let upstream = server.as_ref().and_then(|s| self.host.client(s).ok());
        let legacy_upstream = upstream
            .as_ref()
            .and_then(toolwire::Client::protocol_version)
            .is_some_and(|v| !v.is_modern());
        if !legacy_upstream
            && let Some(capabilities) = declared.as_ref().and_then(|d| d.capabilities.clone())
        {
            options = options.with_capabilities(capabilities);
        }
        // An upstream called with its callers' credentials gets this caller's, and only at
        // the address they were got for.
        if let Some(server) = &server {
            self.still_where_pinned(server)?;
        }
        if let (Some(server), Some(access)) = (&server, &self.access)
            && let Some(header) = access
                .upstream_authorization(server, request.caller, &self.changes)
                .await?
        {
            options = options.with_authorization(header);
        }
        if request.era == Era::Legacy {
            // A URL elicitation the call asks for (`-32042`) is completed by a notification
            // from its server: forwarded from the first call on.
            if let (Some(server), Some(upstream)) = (&server, &upstream) {
                self.forward(server, upstream);
            }
            let session = request
                .session
                .map(|s| crate::sessions::SessionKey::new(&caller, s));
            // The upstream's messages about the call reach this caller on the call's own
            // stream (from the level its session asked for, if it asked), and nobody else.
            if let Some(server) = server.clone() {
                let level = session.as_ref().and_then(|s| self.sessions.level(s));
                let notifier = notifier.clone();
                hooks = hooks.on_log(move |message: &toolwire_types::Notification| {
                    let params: Value = message
                        .params
                        .as_deref()
                        .and_then(|p| serde_json::from_str(p.get()).ok())
                        .unwrap_or_default();
                    let heard = crate::sessions::level_of(&params);
                    if level.is_none_or(|asked| heard.is_none_or(|l| l >= asked)) {
                        notifier.send(crate::subscriptions::log_message(&server, params));
                    }
                });
            }
            // A URL elicitation asked of this call is completed for this session alone.
            let asked_url: relay::AskedUrl = match (&server, &session) {
                (Some(server), Some(session)) => {
                    let (server, session) = (server.clone(), session.clone());
                    let sessions = self.sessions.clone();
                    Some(Arc::new(move |id: &str| {
                        sessions.asked_url(&session, &server, id);
                    }))
                }
                _ => None,
            };
            // Ends with this call, and with it any question still waiting for the client.
            let (_alive, alive) = watch::channel(());
            let hooks = hooks.on_server_request(relay::legacy(
                notifier.clone(),
                client,
                alive,
                asked_url.clone(),
                server.clone(),
            ));
            let result = self
                .host
                .call_tool_relayed(name, arguments, options, hooks, false)
                .await
                .map(|(_, called)| called);
            if let (Err(HostError::Call { error, .. }), Some(asked)) = (&result, &asked_url)
                && let toolwire::Error::Input(toolwire::InputError::UrlElicitationRequired {
                    elicitations,
                    ..
                }) = error
            {
                for id in elicitations
                    .iter()
                    .filter_map(|e| e.elicitation_id.as_deref())
                {
                    asked(id);
                }
            }
            let called = Called {
                caller,
                name: name.to_owned(),
                server,
                arguments: audited,
                began,
                era: Era::Legacy,
                result,
                pass,
            };
            return self.finish(called);
        }
        // 2026-07-28: the log level is the request's; the upstream's messages about the call
        // reach the client as far as that level lets them, and never anyone else.
        if let Some(level) = lock(&relay_to).level {
            options = options.with_log_level(level);
        }
        if let Some(server) = server.clone() {
            let to = relay_to.clone();
            hooks = hooks.on_log(move |message: &toolwire_types::Notification| {
                let to = lock(&to);
                let Some(asked) = to.level else {
                    return;
                };
                let params: Value = message
                    .params
                    .as_deref()
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or_default();
                let level = params
                    .get("level")
                    .and_then(|level| LoggingLevel::deserialize(level).ok());
                if level.is_some_and(|level| level >= asked) {
                    to.notifier
                        .send(crate::subscriptions::log_message(&server, params));
                }
            });
        }
        let (questions_to, questions) = futures_channel::mpsc::unbounded();
        // A task of an upstream called with its callers' credentials would be followed with
        // the entry's own (tasks/* carry no caller's): the gateway follows it itself.
        let with_tasks = crate::tasks::declared(client.as_deref())
            && server
                .as_deref()
                .is_none_or(|s| self.own_credentials_only(s, mcp::GetTask::NAME).is_ok());
        let hooks = hooks.on_server_request(relay::modern(client, questions_to, server.clone()));
        let (host, name) = (self.host.clone(), name.to_owned());
        let task = Box::pin(async move {
            let result = host
                .call_tool_relayed(&name, arguments, options, hooks, with_tasks)
                .await
                .map(|(_, called)| called);
            Called {
                caller,
                name,
                server,
                arguments: audited,
                began,
                era: Era::Modern,
                result,
                pass,
            }
        });
        let running = Running {
            task,
            questions,
            relay_to,
        };
        let owner = crate::access::principal(request.caller);
        self.wait(running, owner).await
    }

    /// Traffic control's pass for `caller`'s call to `server`, or its refusal (counted by
    /// reason).
    async fn let_through(
        &self,
        server: &Arc<str>,
        tool: &str,
        caller: &str,
    ) -> Result<crate::traffic::Pass, RpcError> {
        self.traffic.admit(server, tool, caller).await.inspect_err(|refused| {
            let reason = refused
                .data
                .as_ref()
                .and_then(|d| d["reason"].as_str())
                .unwrap_or("refused");
            tracing::info!(target: "toolwire_gateway::audit", upstream = &**server, reason, "call refused by traffic control");
            self.metrics.refused(server, reason);
        })
    }

    /// Refuses a call to an upstream called with its callers' credentials whose entry a
    /// reload moved to another URL: the credentials were got for the first one.
    fn still_where_pinned(&self, server: &str) -> Result<(), RpcError> {
        let Some(then) = self.pinned.get(server) else {
            return Ok(());
        };
        let now = self.host.url(server);
        if now == *then {
            return Ok(());
        }
        tracing::warn!(target: "toolwire_gateway::audit", upstream = server, "refused: a reload moved an upstream called with its callers' credentials");
        Err(RpcError::new(
            code::INVALID_REQUEST,
            format!(
                "server `{server}` moved to another URL since the gateway started, and its callers' credentials are for the first one: restart the gateway to call it at its new address"
            ),
        ))
    }

    /// A 2026-07-28 client's retry of a call parked here: its answers go to the upstream's
    /// questions, and the call goes on.
    async fn resume(
        &self,
        state: &str,
        owner: &str,
        params: &Value,
        notifier: &Notifier,
    ) -> Result<Reply, RpcError> {
        let Some(mut parked) = self.parked.take(state, owner) else {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                "requestState names no call waiting here: it expired, was used already, or was given by another gateway replica; call the tool again",
            ));
        };
        *lock(&parked.running.relay_to) = relay(params, notifier);
        parked.answer(&params["inputResponses"]);
        self.wait(parked.running, owner).await
    }

    /// Waits for a call's work: its answer, or, when the upstream asks something first, an
    /// `input_required` answer carrying the questions, the call parked until the retry.
    async fn wait(&self, mut running: Running<Called>, owner: &str) -> Result<Reply, RpcError> {
        enum Next {
            Done(Box<Called>),
            Asked(Question),
        }
        let next = tokio::select! {
            done = &mut running.task => Next::Done(Box::new(done)),
            Ok(question) = running.questions.recv() => Next::Asked(question),
        };
        let first = match next {
            Next::Done(called) => return self.finish(*called),
            Next::Asked(question) => question,
        };
        // Questions an upstream asks together (an MRTR round's several input requests) are
        // handed over together: take every one already waiting.
        tokio::task::yield_now().await;
        let mut asked = vec![first];
        while let Ok(more) = running.questions.try_recv() {
            asked.push(more);
        }
        let keyed: Vec<(String, Question)> = asked
            .into_iter()
            .enumerate()
            .map(|(n, q)| (format!("ask-{}", n + 1), q))
            .collect();
        let shown: Vec<(String, String, Value)> = keyed
            .iter()
            .map(|(key, q)| (key.clone(), q.method.clone(), q.params.clone()))
            .collect();
        let replies = keyed.into_iter().map(|(key, q)| (key, q.reply)).collect();
        match self.parked.park(owner, running, replies) {
            Ok(state) => Ok(Reply::Json(relay::input_required(&shown, &state))),
            Err(full) => Err(full.error()),
        }
    }

    /// The answer to a call whose work ended: its metrics counted, the tools its result
    /// names renamed as clients see them; a result that names none passed on as it came.
    fn finish(&self, called: Called) -> Result<Reply, RpcError> {
        let Called {
            caller,
            name,
            server,
            arguments,
            began,
            era,
            result,
            pass,
        } = called;
        if let Some(pass) = pass {
            pass.ended(upstream_failed(&result));
        }
        let outcome = match &result {
            Ok(toolwire::Called::Done(r)) if r.is_error == Some(true) => Outcome::ToolError,
            Ok(toolwire::Called::Raw(r)) if r.is_error() => Outcome::ToolError,
            Ok(_) => Outcome::Ok,
            Err(_) => Outcome::Error,
        };
        // Which side a call with no result failed on, for the audit line and the metrics.
        let side = result.as_ref().err().map(Side::of);
        let side_word = side.map_or("-", Side::as_str);
        let took = began.elapsed();
        // One line per call: who, where, what, how it ended, how long (its arguments only
        // when asked).
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let upstream = server.as_deref().unwrap_or("-");
        match &arguments {
            Some(arguments) => tracing::info!(
                target: "toolwire_gateway::audit",
                caller, upstream, tool = name, outcome = outcome.as_str(), side = side_word, micros, arguments,
                "call"
            ),
            None => tracing::info!(
                target: "toolwire_gateway::audit",
                caller, upstream, tool = name, outcome = outcome.as_str(), side = side_word, micros,
                "call"
            ),
        }
        if let Some(server) = &server {
            self.metrics.call(server, &name, outcome, took);
            if let Some(side) = side {
                self.metrics.failed(server, side);
            }
        }
        let mut result = match result.map_err(|e| match (&self.access, &server) {
            (Some(access), Some(server)) => access.relay_challenge(server, upstream_error(&e), &e),
            _ => upstream_error(&e),
        })? {
            toolwire::Called::Done(result) => result,
            // Passed on as it came, unless it names tools or resources, which are renamed, or
            // its upstream, which is the gateway's to name.
            toolwire::Called::Raw(raw)
                if !(raw.facts().names_tools
                    || raw.facts().names_resources
                    || raw.facts().names_server) =>
            {
                return Ok(crate::text_for_era(raw, era));
            }
            toolwire::Called::Raw(raw) => raw.decode().map_err(|e| {
                RpcError::new(code::INTERNAL_ERROR, format!("the upstream's result: {e}"))
            })?,
            toolwire::Called::Task(handle) => {
                // Left running upstream: the client follows it with `tasks/get`.
                let Some(server) = &server else {
                    return Err(RpcError::new(code::INTERNAL_ERROR, "a task from no server"));
                };
                let mut task = self.outward_task(&caller, server, handle.task().clone())?;
                task["resultType"] = json!("task");
                return Ok(Reply::Json(task));
            }
            _ => {
                return Err(RpcError::new(
                    code::INTERNAL_ERROR,
                    "the upstream answered in a way this gateway does not know",
                ));
            }
        };
        // Tools the call says it registers, removes or changes, by the names clients see here
        // (a client waits for exactly those names before it trusts its listing again).
        if let Some(server) = &server {
            for names in [
                &mut result.registers,
                &mut result.unregisters,
                &mut result.updates,
            ]
            .into_iter()
            .flatten()
            {
                for tool in names.iter_mut() {
                    *tool = self.host.tool_name(server, tool);
                }
            }
        }
        let mut result = serde_json::to_value(&result)
            .map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))?;
        if let Some(server) = &server {
            outward_result(&mut result, server, self.host.separator());
        }
        Ok(Reply::Json(result))
    }
}

/// A call's result as the gateway's own: the resources its content names (links and embedded
/// resources) under the URIs the gateway reads them by, and no word of the upstream's identity
/// in its `_meta` (the gateway is the server its client talks to).
fn outward_result(result: &mut Value, server: &str, separator: &str) {
    if let Some(blocks) = result["content"].as_array_mut() {
        for block in blocks {
            match block["type"].as_str() {
                Some("resource_link") => {
                    crate::surface::rename_uri(block, "uri", server, separator);
                }
                Some("resource") => {
                    crate::surface::rename_uri(&mut block["resource"], "uri", server, separator);
                }
                _ => {}
            }
        }
    }
    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(meta_key::SERVER_INFO);
        if meta.is_empty() {
            result.as_object_mut().map(|r| r.remove("_meta"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_names_resources_by_the_gateways_uris_and_not_its_upstream() {
        let mut result = json!({
            "content": [
                {"type": "text", "text": "see file:///report.pdf"},
                {"type": "resource_link", "uri": "file:///report.pdf", "name": "report.pdf"},
                {"type": "resource", "resource": {"uri": "toolwire://files/a", "text": "milk"}},
            ],
            "_meta": {meta_key::SERVER_INFO: {"name": "py-demo", "version": "1"}}
        });
        outward_result(&mut result, "py", "__");
        assert_eq!(
            result["content"][0]["text"], "see file:///report.pdf",
            "text is the tool's"
        );
        assert_eq!(result["content"][1]["uri"], "file://py__/report.pdf");
        assert_eq!(
            result["content"][2]["resource"]["uri"],
            "toolwire://py__files/a"
        );
        assert!(result.get("_meta").is_none(), "{result}");

        let mut kept = json!({"content": [], "_meta": {"io.example/trace": 1,
            meta_key::SERVER_INFO: {"name": "py-demo"}}});
        outward_result(&mut kept, "py", "__");
        assert_eq!(kept["_meta"], json!({"io.example/trace": 1}));
    }
}

//! The reference server's behaviour: its tools, resources, prompts, completions, skills and
//! tasks, as a [`Service`] the protocol layer of `toolwire-server` serves.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::broadcast;
use toolwire_headers::HeaderPlan;
use toolwire_server::{
    Answer, Change, Era, Notifier, Reply, Request, RpcError, ServerInfo, Service,
};
use toolwire_types::Method as _;
use toolwire_types::methods::method as mcp;
use toolwire_types::{ClientMethod, ClientNotice, Tool, error::code, meta_key};

use crate::Options;
use crate::faults::Injector;
use crate::tasks::{Job, Tasks};
use crate::tools;

/// Locks a mutex; the data under every lock here stays consistent if a holder panicked.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Clone)]
struct Entry {
    def: Value,
    plan: Option<HeaderPlan>,
}

impl Entry {
    fn new(def: Value) -> Self {
        let plan = serde_json::from_value::<Tool>(def.clone())
            .ok()
            .and_then(|t| HeaderPlan::for_tool(&t).ok());
        Self { def, plan }
    }

    fn name(&self) -> &str {
        self.def["name"].as_str().unwrap_or("")
    }
}

/// The server's state.
pub(crate) struct Core {
    pub(crate) options: Options,
    /// Itself, for work that outlives a request (`unlock_files` registering tools later).
    me: std::sync::Weak<Core>,
    tools: Mutex<Vec<Entry>>,
    files: Mutex<HashMap<String, String>>,
    changes: broadcast::Sender<Change>,
    /// The legacy `logging/setLevel` threshold (one for the whole server: enough for tests).
    log_level: Mutex<Option<String>>,
    /// The legacy `resources/subscribe` set (one for the whole server, as the log level).
    subscribed: Mutex<BTreeSet<String>>,
    /// The tasks extension's tasks.
    pub(crate) tasks: Arc<Tasks>,
    /// `finish_link` was called: `link_account` succeeds (one for the whole server).
    linked: std::sync::atomic::AtomicBool,
    /// `notifications/cancelled` received.
    pub(crate) cancellations: Arc<std::sync::atomic::AtomicU64>,
    /// The faults it injects.
    pub(crate) faults: Injector,
}

/// The reference server authenticates nobody and serves no page beside its endpoint; its
/// edge injects the faults it was asked for.
impl toolwire_server::Edge for Core {
    fn intercept<'a>(
        &'a self,
        request: &'a http::request::Parts,
    ) -> impl Future<Output = Option<toolwire_server::Page>> + Send + 'a {
        self.faults.intercept(request)
    }

    fn cut_answer_stream(&self) -> bool {
        self.faults.cut_answer_stream()
    }
}

impl Service for Core {
    fn info(&self) -> ServerInfo {
        ServerInfo::new(
            "toolwire-refserver",
            env!("CARGO_PKG_VERSION"),
            capabilities(),
        )
        .with_instructions("Toolwire's reference server: try execute_sql, slow, unlock_files.")
    }

    async fn handle<'a>(
        &'a self,
        request: Request<'a>,
        notifier: &'a Notifier,
    ) -> Result<Reply, RpcError> {
        let call = request.method == ClientMethod::CallTool;
        let answer = self.answer(request, notifier).await.map(Reply::Json);
        if call {
            self.faults.call_answered();
        }
        answer
    }

    fn notified(&self, notification: &Value) {
        if notification["method"].as_str().map(ClientNotice::of) == Some(ClientNotice::Cancelled) {
            self.cancellations
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn header_plan(&self, name: &str) -> Option<HeaderPlan> {
        lock(&self.tools)
            .iter()
            .find(|e| e.name() == name)
            .and_then(|e| e.plan.clone())
    }

    fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Every tool-list change, updates of the resources subscribed to, completed links.
    fn legacy_notification(
        &self,
        change: &Change,
        _: &toolwire_server::Listener<'_>,
    ) -> Option<Value> {
        if let Change::Resource(uri) = change
            && !lock(&self.subscribed).contains(uri)
        {
            return None;
        }
        toolwire_server::legacy_notification(change)
    }
}

impl Core {
    pub(crate) fn new(options: Options) -> Arc<Self> {
        let fixtures = options.task_fixtures.then(tools::task_fixtures);
        let tools = tools::base_tools()
            .into_iter()
            .chain(fixtures.into_iter().flatten())
            .chain((0..options.synthetic_tools).map(tools::synthetic))
            .chain(options.tally.is_some().then(tools::tally))
            .map(Entry::new)
            .collect();
        let faults = Injector::new(options.faults.clone());
        Arc::new_cyclic(|me| Self {
            options,
            faults,
            me: me.clone(),
            tools: Mutex::new(tools),
            files: Mutex::new(HashMap::new()),
            changes: broadcast::channel(64).0,
            log_level: Mutex::new(None),
            subscribed: Mutex::new(BTreeSet::new()),
            tasks: Arc::default(),
            linked: std::sync::atomic::AtomicBool::new(false),
            cancellations: Arc::default(),
        })
    }

    /// Answers one request the protocol layer passed on.
    async fn answer(&self, request: Request<'_>, notify: &Notifier) -> Answer {
        let Request {
            method,
            params,
            era,
            client,
            ..
        } = request;
        let modern = (era == Era::Modern).then_some(());
        let invalid = |e: RpcError| (e.code, e.message);
        let answer = match method {
            ClientMethod::Subscribe if modern.is_none() => request
                .params_as::<mcp::Subscribe>()
                .map(|p| {
                    lock(&self.subscribed).insert(p.uri);
                    json!({})
                })
                .map_err(invalid),
            ClientMethod::Unsubscribe if modern.is_none() => request
                .params_as::<mcp::Unsubscribe>()
                .map(|p| {
                    lock(&self.subscribed).remove(&p.uri);
                    json!({})
                })
                .map_err(invalid),
            ClientMethod::SetLevel if modern.is_none() => match params["level"].as_str() {
                Some(level) if tools::LEVELS.contains(&level) => {
                    *lock(&self.log_level) = Some(level.to_owned());
                    Ok(json!({}))
                }
                _ => Err((
                    code::INVALID_PARAMS,
                    format!("bad level {}", params["level"]),
                )),
            },
            ClientMethod::ListTools => {
                let mut tools: Vec<Value> =
                    lock(&self.tools).iter().map(|e| e.def.clone()).collect();
                if self.options.broken_tools {
                    tools.extend(tools::broken_tools());
                }
                Ok(json!({ "tools": tools }))
            }
            ClientMethod::CallTool => self.call(params, notify, client).await,
            ClientMethod::ListResources => Ok(json!({"resources": tools::resources()})),
            ClientMethod::ListResourceTemplates => {
                Ok(json!({"resourceTemplates": tools::resource_templates()}))
            }
            ClientMethod::ReadResource => {
                let uri = params["uri"].as_str().unwrap_or("");
                let files = lock(&self.files).clone();
                // The code of each era: -32602 from 2026-07-28 on, -32002 before.
                let not_found = if modern.is_some() {
                    code::INVALID_PARAMS
                } else {
                    code::RESOURCE_NOT_FOUND_LEGACY
                };
                tools::read(uri, &files).ok_or((not_found, format!("Resource not found: {uri}")))
            }
            ClientMethod::ListPrompts => Ok(json!({"prompts": tools::prompts()})),
            ClientMethod::ListSkills => Ok(json!({"skills": [tools::skill()]})),
            ClientMethod::GetTask | ClientMethod::UpdateTask | ClientMethod::CancelTask
                if modern.is_some() =>
            {
                if declares_tasks(client) {
                    self.tasks.handle(method, params)
                } else {
                    Err((
                        code::MISSING_REQUIRED_CLIENT_CAPABILITY,
                        format!(
                            "{} needs the {} extension",
                            request.method_name,
                            toolwire_types::TASKS_EXTENSION
                        ),
                    ))
                }
            }
            ClientMethod::ReadDirectory => {
                let uri = params["uri"].as_str().unwrap_or("");
                tools::read_directory(uri)
                    .ok_or((code::INVALID_PARAMS, format!("Not a directory: {uri}")))
            }
            ClientMethod::GetSkill => {
                let skill = tools::skill();
                if params["uri"] == skill["uri"] {
                    Ok(json!({ "skill": skill }))
                } else {
                    Err((
                        code::INVALID_PARAMS,
                        format!("Unknown skill: {}", params["uri"]),
                    ))
                }
            }
            ClientMethod::GetPrompt => {
                tools::prompt(params["name"].as_str().unwrap_or(""), &params["arguments"]).ok_or((
                    code::INVALID_PARAMS,
                    format!("Unknown prompt: {}", params["name"]),
                ))
            }
            ClientMethod::Complete => {
                let files: Vec<String> = lock(&self.files).keys().cloned().collect();
                Ok(json!({"completion": tools::complete(params, &files)}))
            }
            _ => Err((
                code::METHOD_NOT_FOUND,
                format!("Method not found: {}", request.method_name),
            )),
        };
        answer.map_err(|(c, m)| match c {
            // The only capability the server requires is the tasks extension.
            code::MISSING_REQUIRED_CLIENT_CAPABILITY => RpcError::new(c, m)
                .with_data(json!({"requiredCapabilities":
                    {"extensions": {toolwire_types::TASKS_EXTENSION: {}}}})),
            // The only URL elicitation this server asks for is the account link.
            code::URL_ELICITATION_REQUIRED => {
                RpcError::new(c, m).with_data(json!({"elicitations": [tools::link_elicitation()]}))
            }
            _ => RpcError::new(c, m),
        })
    }

    async fn call(
        &self,
        params: &Value,
        notify: &Notifier,
        client: Option<&Value>,
    ) -> Result<Value, (i64, String)> {
        let name = params["name"].as_str().unwrap_or("");
        let args = params.get("arguments").cloned().unwrap_or(json!({}));
        let known = lock(&self.tools).iter().any(|e| e.name() == name);
        if !known {
            return Err((code::INVALID_PARAMS, format!("Unknown tool: {name}")));
        }
        let str_arg = |k: &str| args[k].as_str().unwrap_or("").to_owned();
        Ok(match name {
            "echo" => tools::text(str_arg("text")),
            synthetic if synthetic.starts_with("synthetic_") => tools::text(args.to_string()),
            "tally" => {
                let (Some(file), Some(id)) = (self.options.tally.as_deref(), args["id"].as_str())
                else {
                    return Err((code::INVALID_PARAMS, "tally needs a string id".into()));
                };
                if id.is_empty() || id.contains(['\n', '\r']) {
                    return Err((
                        code::INVALID_PARAMS,
                        "tally's id is one non-empty line".into(),
                    ));
                }
                match tools::record_tally(file, id) {
                    Ok(()) => tools::text(id),
                    Err(e) => return Err((code::INTERNAL_ERROR, format!("tally file: {e}"))),
                }
            }
            "add" => {
                let (Some(a), Some(b)) = (args["a"].as_i64(), args["b"].as_i64()) else {
                    return Err((code::INVALID_PARAMS, "add needs integers a and b".into()));
                };
                let Some(sum) = a.checked_add(b) else {
                    return Ok(
                        json!({"content": [{"type": "text", "text": "overflow"}], "isError": true}),
                    );
                };
                json!({"content": [{"type": "text", "text": sum.to_string()}], "structuredContent": {"sum": sum}})
            }
            "execute_sql" => tools::text(format!(
                "region={} rows=1 query={}",
                str_arg("region"),
                str_arg("query")
            )),
            "deploy" => {
                let target = &args["target"];
                tools::text(format!(
                    "deployed to {} at priority {}{}",
                    target["cluster"].as_str().unwrap_or("default"),
                    target["priority"].as_i64().unwrap_or(0),
                    if args["dry_run"].as_bool() == Some(true) {
                        " (dry run)"
                    } else {
                        ""
                    }
                ))
            }
            "sample_content" => tools::sample_content(&str_arg("kind")).ok_or((
                code::INVALID_PARAMS,
                format!("unknown kind {:?}", args["kind"]),
            ))?,
            "fail" => {
                json!({"content": [{"type": "text", "text": "this tool always fails"}], "isError": true})
            }
            "protocol_error" => {
                return Err((
                    code::INTERNAL_ERROR,
                    "protocol_error answers with a JSON-RPC error".into(),
                ));
            }
            "test_tool_with_task" => {
                // An MRTR round gathers a name, then the work goes on as a task.
                if !modern_with_tasks(params, client) {
                    return Job::Greet {
                        name: String::new(),
                    }
                    .run_in_call()
                    .await;
                }
                let answer = &params["inputResponses"]["user_name"];
                let name = answer["content"]["name"]
                    .as_str()
                    .or_else(|| answer["content"]["user_name"].as_str());
                match name {
                    Some(name) => self.tasks.create(Job::Greet {
                        name: name.to_owned(),
                    }),
                    None => json!({"resultType": "input_required", "inputRequests": {
                        "user_name": {"method": mcp::Elicit::NAME, "params": {"mode": "form",
                            "message": "What is your name?", "requestedSchema": {"type": "object",
                                "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}}),
                }
            }
            "greet" => tools::text(format!("Hello, {}!", str_arg("name"))),
            "ask_client" => {
                let what = str_arg("what");
                let Some((method, question, capability)) = tools::client_question(&what) else {
                    return Err((
                        code::INVALID_PARAMS,
                        "ask_client: `what` is name, link, sample or roots".into(),
                    ));
                };
                let modern = params["_meta"][meta_key::PROTOCOL_VERSION].is_string();
                if client.is_some_and(|c| c.get(capability).is_none()) {
                    tools::client_answered(
                        &what,
                        Err(RpcError::new(
                            code::INVALID_REQUEST,
                            format!("the client did not declare {capability}"),
                        )),
                    )
                } else if !modern {
                    tools::client_answered(&what, notify.ask(method, question).await)
                } else if let Some(answer) = params["inputResponses"].get("ask") {
                    tools::client_answered(&what, Ok(answer.clone()))
                } else {
                    json!({"resultType": "input_required", "inputRequests": {"ask":
                        {"method": method, "params": question}}})
                }
            }
            "show_clock" => tools::text("12:00"),
            "link_account" => {
                let linked = self.linked.load(std::sync::atomic::Ordering::SeqCst);
                let modern = params["_meta"][meta_key::PROTOCOL_VERSION].is_string();
                match (linked, modern) {
                    (true, _) => tools::text("account linked"),
                    // 2026-07-28: the URL elicitation is an input request of the call.
                    (false, true) if params["inputResponses"]["link"].is_null() => {
                        json!({"resultType": "input_required", "inputRequests": {"link":
                            {"method": mcp::Elicit::NAME, "params": tools::link_elicitation()}}})
                    }
                    (false, true) => {
                        json!({"content": [{"type": "text", "text": "the account is not linked yet"}], "isError": true})
                    }
                    (false, false) => {
                        return Err((
                            code::URL_ELICITATION_REQUIRED,
                            "Link your account first".into(),
                        ));
                    }
                }
            }
            "finish_link" => {
                self.linked.store(true, std::sync::atomic::Ordering::SeqCst);
                let _ = self
                    .changes
                    .send(Change::ElicitationComplete(tools::LINK_ELICITATION.into()));
                tools::text("linked")
            }
            task_tool if let Some(job) = Job::for_tool(task_tool, &args) => {
                if modern_with_tasks(params, client) {
                    self.tasks.create(job)
                } else {
                    job.run_in_call().await?
                }
            }
            "log" => {
                // Modern: only what the request's level allows, nothing without one; legacy:
                // what `logging/setLevel` allows, everything before it.
                let threshold = if params["_meta"][meta_key::PROTOCOL_VERSION].is_string() {
                    params["_meta"][meta_key::LOG_LEVEL]
                        .as_str()
                        .map(str::to_owned)
                } else {
                    Some(
                        lock(&self.log_level)
                            .clone()
                            .unwrap_or_else(|| "debug".into()),
                    )
                };
                let message = str_arg("message");
                let mut sent = 0;
                for level in ["debug", "info", "warning", "error"] {
                    if threshold
                        .as_deref()
                        .is_some_and(|t| tools::passes(level, t))
                    {
                        sent += 1;
                        notify.send(json!({"jsonrpc": "2.0", "method": mcp::LoggingMessage::NAME,
                            "params": {"level": level, "logger": "refserver", "data": format!("{level}: {message}")}}));
                    }
                }
                tools::text(format!("logged {sent} messages"))
            }
            "slow" => {
                let (steps, delay) = tools::slow_plan(&args);
                let token = params["_meta"]["progressToken"].clone();
                for step in 1..=steps {
                    tokio::time::sleep(delay).await;
                    if !token.is_null() {
                        notify.send(json!({"jsonrpc": "2.0", "method": mcp::Progress::NAME,
                            "params": {"progressToken": token, "progress": step, "total": steps,
                                "message": format!("step {step} of {steps}")}}));
                    }
                }
                tools::text(format!("done after {steps} steps"))
            }
            "unlock_files" => {
                self.later(|core| core.register(tools::file_tools()));
                let mut r = tools::text("files unlocked: read_file and write_file are coming");
                r["registers"] = json!(["read_file", "write_file"]);
                r
            }
            "redefine_echo" => {
                self.later(|core| core.register(vec![tools::redefined_echo()]));
                tools::text("echo's description changes in a moment")
            }
            "ephemeral" => {
                self.later(|core| core.unregister("ephemeral"));
                let mut r = tools::text("gone after this call");
                r["unregisters"] = json!(["ephemeral"]);
                r
            }
            "read_file" => match lock(&self.files).get(&str_arg("path")) {
                Some(content) => tools::text(content.clone()),
                None => {
                    json!({"content": [{"type": "text", "text": format!("no such file: {}", str_arg("path"))}], "isError": true})
                }
            },
            "write_file" => {
                lock(&self.files).insert(str_arg("path"), str_arg("content"));
                let uri = format!("toolwire://files/{}", str_arg("path"));
                let _ = self.changes.send(Change::Resource(uri.clone()));
                // The file, as a link the client can read back.
                json!({"content": [
                    {"type": "text", "text": format!("wrote {}", str_arg("path"))},
                    {"type": "resource_link", "uri": uri, "name": str_arg("path"), "mimeType": "text/plain"},
                ]})
            }
            other => return Err((code::INVALID_PARAMS, format!("Unknown tool: {other}"))),
        })
    }

    /// Runs `change` after the registration delay (the race the settle barrier closes: the answer comes before the list change).
    fn later(&self, change: impl FnOnce(&Core) + Send + 'static) {
        let core = self.me.clone();
        let delay = self.options.register_delay;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(core) = core.upgrade() {
                change(&core);
            }
        });
    }

    fn register(&self, defs: Vec<Value>) {
        let mut tools = lock(&self.tools);
        for def in defs {
            let entry = Entry::new(def);
            tools.retain(|e| e.name() != entry.name());
            tools.push(entry);
        }
        drop(tools);
        let _ = self.changes.send(Change::Tools);
    }

    fn unregister(&self, name: &str) {
        lock(&self.tools).retain(|e| e.name() != name);
        let _ = self.changes.send(Change::Tools);
    }
}

/// What the server declares, in both eras.
fn capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "logging": {}, "resources": {"subscribe": true},
        "prompts": {}, "completions": {},
        "extensions": {toolwire_types::SKILLS_EXTENSION: {"directoryRead": true},
            toolwire_types::TASKS_EXTENSION: {}}})
}

/// Whether a 2026-07-28 request declares the tasks extension: a task may answer it.
fn modern_with_tasks(params: &Value, client: Option<&Value>) -> bool {
    params["_meta"][meta_key::PROTOCOL_VERSION].is_string() && declares_tasks(client)
}

/// Whether a request's per-request capabilities declare the tasks extension.
fn declares_tasks(client: Option<&Value>) -> bool {
    client.is_some_and(|c| {
        c["extensions"]
            .get(toolwire_types::TASKS_EXTENSION)
            .is_some()
    })
}

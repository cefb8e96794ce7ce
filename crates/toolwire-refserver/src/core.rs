//! The server's JSON-RPC dispatch, shared by the HTTP and stdio front ends.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use toolwire_headers::HeaderPlan;
use toolwire_types::{Tool, error::code, meta_key};

use crate::tasks::{Job, Tasks};
use crate::tools;
use crate::{Eras, Options};

/// The versions of the legacy era this server speaks, newest first.
pub(crate) const LEGACY_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The modern version.
pub(crate) const MODERN: &str = "2026-07-28";

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

/// What handling one message gave.
pub(crate) enum Handled {
    /// The response to send.
    Answer(Value),
    /// Nothing to send (a notification or a response from the client).
    Nothing,
    /// A `subscriptions/listen` the front end keeps open (its request id, what it asked for).
    Listen(Value, Interest),
}

/// Something that changed, for whoever listens.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// The tool list.
    Tools,
    /// The resource with this URI (a file `write_file` wrote).
    Resource(String),
    /// The URL elicitation with this id was completed (`finish_link`).
    ElicitationComplete(String),
}

/// What a `subscriptions/listen` stream asked for (and is acknowledged: this server honours
/// all of it).
#[derive(Debug, Clone, Default)]
pub(crate) struct Interest {
    tools: bool,
    resources: BTreeSet<String>,
}

impl Interest {
    fn from_params(params: &Value) -> Self {
        let asked = &params["notifications"];
        Self {
            tools: asked["toolsListChanged"] == true,
            resources: asked["resourceSubscriptions"]
                .as_array()
                .map(|uris| {
                    uris.iter()
                        .filter_map(|u| u.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The notification `change` makes on the listen stream `subscription`, if it asked for it.
    pub(crate) fn notification(&self, change: &Change, subscription: &Value) -> Option<Value> {
        match change {
            Change::Tools => self.tools.then(|| list_changed(Some(subscription))),
            Change::Resource(uri) => self
                .resources
                .contains(uri)
                .then(|| resource_updated(uri, Some(subscription))),
            // The 2026-07-28 era completes URL elicitations by retrying the request.
            Change::ElicitationComplete(_) => None,
        }
    }

    /// The first message of a listen stream: everything asked for is honoured.
    pub(crate) fn acknowledged(&self, subscription: &Value) -> Value {
        let mut agreed = json!({});
        if self.tools {
            agreed["toolsListChanged"] = json!(true);
        }
        if !self.resources.is_empty() {
            agreed["resourceSubscriptions"] = json!(self.resources);
        }
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": agreed,
                "_meta": {meta_key::SUBSCRIPTION_ID: subscription}}})
    }
}

/// The server's state.
pub(crate) struct Core {
    pub(crate) options: Options,
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
}

pub(crate) fn error(
    id: &Value,
    code: i64,
    message: impl Into<String>,
    data: Option<Value>,
) -> Value {
    let mut e = json!({"code": code, "message": message.into()});
    if let Some(data) = data {
        e["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The `_meta.protocolVersion` a modern request carries.
pub(crate) fn request_version(message: &Value) -> Option<&str> {
    message["params"]["_meta"][meta_key::PROTOCOL_VERSION].as_str()
}

impl Core {
    pub(crate) fn new(options: Options) -> Arc<Self> {
        let fixtures = options.task_fixtures.then(tools::task_fixtures);
        let tools = tools::base_tools()
            .into_iter()
            .chain(fixtures.into_iter().flatten())
            .map(Entry::new)
            .collect();
        Arc::new(Self {
            options,
            tools: Mutex::new(tools),
            files: Mutex::new(HashMap::new()),
            changes: broadcast::channel(64).0,
            log_level: Mutex::new(None),
            subscribed: Mutex::new(BTreeSet::new()),
            tasks: Arc::default(),
            linked: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Tool-list and resource changes, as they happen.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// The legacy notification `change` makes: every tool-list change, updates of the
    /// resources subscribed to.
    pub(crate) fn legacy_notification(&self, change: &Change) -> Option<Value> {
        match change {
            Change::Tools => Some(list_changed(None)),
            Change::Resource(uri) => lock(&self.subscribed)
                .contains(uri)
                .then(|| resource_updated(uri, None)),
            Change::ElicitationComplete(id) => Some(
                json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                    "params": {"elicitationId": id}}),
            ),
        }
    }

    /// The header plan of tool `name`, if it has one.
    pub(crate) fn plan(&self, name: &str) -> Option<HeaderPlan> {
        lock(&self.tools)
            .iter()
            .find(|e| e.name() == name)
            .and_then(|e| e.plan.clone())
    }

    fn modern_ok(&self) -> bool {
        self.options.eras != Eras::Legacy
    }

    fn legacy_ok(&self) -> bool {
        self.options.eras != Eras::Modern
    }

    /// Handles one message; progress notifications go to `notify` as they happen.
    pub(crate) async fn handle(
        self: &Arc<Self>,
        message: &Value,
        notify: &mpsc::UnboundedSender<Value>,
    ) -> Handled {
        let Some(method) = message["method"].as_str() else {
            return Handled::Nothing;
        };
        let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
            return Handled::Nothing;
        };
        let params = &message["params"];
        let modern = request_version(message);
        if self.modern_ok() && method != "initialize" {
            match modern {
                Some(v) if v != MODERN => {
                    return Handled::Answer(error(
                        id,
                        code::UNSUPPORTED_PROTOCOL_VERSION,
                        format!("Unsupported protocol version {v}"),
                        Some(json!({"supported": [MODERN], "requested": v})),
                    ));
                }
                None if !self.legacy_ok() => {
                    return Handled::Answer(error(
                        id,
                        code::INVALID_PARAMS,
                        "Missing _meta.io.modelcontextprotocol/protocolVersion",
                        None,
                    ));
                }
                _ => {}
            }
        }
        let answer = match method {
            "server/discover" if self.modern_ok() => Ok(json!({
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": capabilities(),
                "instructions": "Toolwire's reference server: try execute_sql, slow, unlock_files.",
                "_meta": {meta_key::SERVER_INFO: {"name": "toolwire-refserver", "version": env!("CARGO_PKG_VERSION")}}
            })),
            "initialize" if self.legacy_ok() => {
                let asked = params["protocolVersion"].as_str().unwrap_or("");
                let version = if LEGACY_VERSIONS.contains(&asked) {
                    asked
                } else {
                    LEGACY_VERSIONS[0]
                };
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": capabilities(),
                    "serverInfo": {"name": "toolwire-refserver", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": "Toolwire's reference server: try execute_sql, slow, unlock_files."
                }))
            }
            "subscriptions/listen" if modern.is_some() => {
                return Handled::Listen(id.clone(), Interest::from_params(params));
            }
            "resources/subscribe" | "resources/unsubscribe" if modern.is_none() => {
                match params["uri"].as_str() {
                    Some(uri) if method == "resources/subscribe" => {
                        lock(&self.subscribed).insert(uri.to_owned());
                        Ok(json!({}))
                    }
                    Some(uri) => {
                        lock(&self.subscribed).remove(uri);
                        Ok(json!({}))
                    }
                    None => Err((code::INVALID_PARAMS, "uri is required".to_owned())),
                }
            }
            "ping" => Ok(json!({})),
            "logging/setLevel" if modern.is_none() => match params["level"].as_str() {
                Some(level) if tools::LEVELS.contains(&level) => {
                    *lock(&self.log_level) = Some(level.to_owned());
                    Ok(json!({}))
                }
                _ => Err((
                    code::INVALID_PARAMS,
                    format!("bad level {}", params["level"]),
                )),
            },
            "tools/list" => {
                let mut tools: Vec<Value> =
                    lock(&self.tools).iter().map(|e| e.def.clone()).collect();
                if self.options.faults.broken_tools {
                    tools.extend(tools::broken_tools());
                }
                Ok(json!({ "tools": tools }))
            }
            "tools/call" => self.call(params, notify).await,
            "resources/list" => Ok(json!({"resources": tools::resources()})),
            "resources/templates/list" => {
                Ok(json!({"resourceTemplates": tools::resource_templates()}))
            }
            "resources/read" => {
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
            "prompts/list" => Ok(json!({"prompts": tools::prompts()})),
            "skills/list" => Ok(json!({"skills": [tools::skill()]})),
            "tasks/get" | "tasks/update" | "tasks/cancel" if modern.is_some() => {
                if declares_tasks(params) {
                    self.tasks.handle(method, params)
                } else {
                    Err((
                        code::MISSING_REQUIRED_CLIENT_CAPABILITY,
                        format!(
                            "{method} needs the {} extension",
                            toolwire_types::TASKS_EXTENSION
                        ),
                    ))
                }
            }
            "resources/directory/read" => {
                let uri = params["uri"].as_str().unwrap_or("");
                tools::read_directory(uri)
                    .ok_or((code::INVALID_PARAMS, format!("Not a directory: {uri}")))
            }
            "skills/get" => {
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
            "prompts/get" => {
                tools::prompt(params["name"].as_str().unwrap_or(""), &params["arguments"]).ok_or((
                    code::INVALID_PARAMS,
                    format!("Unknown prompt: {}", params["name"]),
                ))
            }
            "completion/complete" => {
                let files: Vec<String> = lock(&self.files).keys().cloned().collect();
                Ok(json!({"completion": tools::complete(params, &files)}))
            }
            other => Err((code::METHOD_NOT_FOUND, format!("Method not found: {other}"))),
        };
        Handled::Answer(match answer {
            Ok(mut r) => {
                if modern.is_some()
                    && let Some(object) = r.as_object_mut()
                {
                    // 2026-07-28 results say what they are; every cacheable result (discovery,
                    // lists, reads, skills/get) says how long it keeps (both fields required).
                    object
                        .entry("resultType")
                        .or_insert_with(|| json!("complete"));
                    if method.ends_with("/list")
                        || matches!(
                            method,
                            "server/discover"
                                | "resources/read"
                                | "skills/get"
                                | "resources/directory/read"
                        )
                    {
                        object.entry("ttlMs").or_insert_with(|| json!(0));
                        object
                            .entry("cacheScope")
                            .or_insert_with(|| json!("private"));
                    }
                }
                result(id, r)
            }
            // The only capability the server requires is the tasks extension.
            Err((c, m)) if c == code::MISSING_REQUIRED_CLIENT_CAPABILITY => {
                let data = json!({"requiredCapabilities":
                    {"extensions": {toolwire_types::TASKS_EXTENSION: {}}}});
                error(id, c, m, Some(data))
            }
            // The only URL elicitation this server asks for is the account link.
            Err((c, m)) if c == code::URL_ELICITATION_REQUIRED => {
                let data = json!({"elicitations": [tools::link_elicitation()]});
                error(id, c, m, Some(data))
            }
            Err((c, m)) => error(id, c, m, None),
        })
    }

    async fn call(
        self: &Arc<Self>,
        params: &Value,
        notify: &mpsc::UnboundedSender<Value>,
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
                if !modern_with_tasks(params) {
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
                        "user_name": {"method": "elicitation/create", "params": {"mode": "form",
                            "message": "What is your name?", "requestedSchema": {"type": "object",
                                "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}}),
                }
            }
            "greet" => tools::text(format!("Hello, {}!", str_arg("name"))),
            "show_clock" => tools::text("12:00"),
            "link_account" => {
                let linked = self.linked.load(std::sync::atomic::Ordering::SeqCst);
                let modern = params["_meta"][meta_key::PROTOCOL_VERSION].is_string();
                match (linked, modern) {
                    (true, _) => tools::text("account linked"),
                    // 2026-07-28: the URL elicitation is an input request of the call.
                    (false, true) if params["inputResponses"]["link"].is_null() => {
                        json!({"resultType": "input_required", "inputRequests": {"link":
                            {"method": "elicitation/create", "params": tools::link_elicitation()}}})
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
                if modern_with_tasks(params) {
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
                        let _ = notify.send(json!({"jsonrpc": "2.0", "method": "notifications/message",
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
                        let _ = notify.send(
                            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step, "total": steps,
                                "message": format!("step {step} of {steps}")}}),
                        );
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
                let _ = self.changes.send(Change::Resource(uri));
                tools::text(format!("wrote {}", str_arg("path")))
            }
            other => return Err((code::INVALID_PARAMS, format!("Unknown tool: {other}"))),
        })
    }

    /// Runs `change` after the registration delay (the race the settle barrier closes: the answer comes before the list change).
    fn later(self: &Arc<Self>, change: impl FnOnce(&Core) + Send + 'static) {
        let core = self.clone();
        let delay = self.options.register_delay;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            change(&core);
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
fn modern_with_tasks(params: &Value) -> bool {
    params["_meta"][meta_key::PROTOCOL_VERSION].is_string() && declares_tasks(params)
}

/// Whether a request's per-request capabilities declare the tasks extension.
fn declares_tasks(params: &Value) -> bool {
    params["_meta"][meta_key::CLIENT_CAPABILITIES]["extensions"]
        .get(toolwire_types::TASKS_EXTENSION)
        .is_some()
}

/// `notifications/tools/list_changed`, on a listen stream when `subscription` is given.
pub(crate) fn list_changed(subscription: Option<&Value>) -> Value {
    match subscription {
        Some(id) => json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {meta_key::SUBSCRIPTION_ID: id}}}),
        None => json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    }
}

/// `notifications/resources/updated` for `uri`, on a listen stream when `subscription` is
/// given.
pub(crate) fn resource_updated(uri: &str, subscription: Option<&Value>) -> Value {
    let mut note = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
        "params": {"uri": uri}});
    if let Some(id) = subscription {
        note["params"]["_meta"] = json!({meta_key::SUBSCRIPTION_ID: id});
    }
    note
}

//! The tasks extension on the server side, as its specification words it: `slow_task`
//! becomes a task when the request declares the extension (else it runs in the call);
//! `tasks/get` answers the whole task (`ttlMs`, `pollIntervalMs`, the `inputRequests` still
//! outstanding, the `result` once completed), `tasks/update` takes answers by key (unknown or
//! answered keys ignored) and `tasks/cancel` is an acknowledgement, the same for a task that
//! already ended. A task id the server does not know is `-32602`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::Notify;
use toolwire_types::Method as _;
use toolwire_types::error::code;
use toolwire_types::methods::method as mcp;
use toolwire_types::{ClientMethod, TASKS_EXTENSION};

use crate::core::lock;

/// One task.
struct TaskState {
    status: &'static str,
    created_at: String,
    updated_at: String,
    /// `completed`: the tool's result.
    result: Option<Value>,
    /// `failed`: the JSON-RPC error.
    error: Option<Value>,
    /// Input requests not answered yet, by key.
    outstanding: BTreeMap<String, Value>,
    /// Answers received, by key.
    answers: BTreeMap<String, Value>,
}

impl TaskState {
    fn is_terminal(&self) -> bool {
        matches!(self.status, "completed" | "failed" | "cancelled")
    }
}

/// The server's tasks.
#[derive(Default)]
pub(crate) struct Tasks {
    tasks: Mutex<HashMap<String, TaskState>>,
    next: AtomicU64,
    /// `tasks/cancel` requests received (for tests).
    pub(crate) cancelled: Arc<AtomicU64>,
    changed: Notify,
}

/// The time now, as ISO 8601 UTC (seconds).
fn now_iso() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm), 1970-01-01 = day 0.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// What a task does: `slow_task`, and the tools the conformance suite's tasks scenarios call
/// ([`crate::Options::task_fixtures`]).
pub(crate) enum Job {
    /// `slow_task`: done after `ms`; with `ask`, first asks who it is for.
    Slow { ms: u64, ask: bool },
    /// `slow_compute`: done after `seconds`.
    Compute { seconds: u64, label: String },
    /// `failing_job`: a tool error (`completed`, `isError`) after a moment.
    ToolError,
    /// `protocol_error_job`: a JSON-RPC error (`failed`) after a moment.
    ProtocolError,
    /// `confirm_delete`: asks to confirm, then says what it did.
    Confirm { filename: String },
    /// `multi_input`: asks two questions at once; done when both are answered.
    TwoQuestions,
    /// `test_tool_with_task`: greets the name an MRTR round gathered before the task.
    Greet { name: String },
}

/// A form elicitation asking for one string `field`.
fn ask_for(message: &str, field: &str) -> Value {
    json!({"method": mcp::Elicit::NAME, "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": "string"}},
            "required": [field]}}})
}

fn text(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

/// An accepted elicitation's `content[field]`.
fn answered(answer: Option<&Value>, field: &str) -> Option<String> {
    let answer = answer?;
    (answer["action"] == "accept").then(|| answer["content"][field].as_str().map(str::to_owned))?
}

impl Job {
    /// The job a task-supporting tool call asks for, if `name` is one.
    pub(crate) fn for_tool(name: &str, args: &Value) -> Option<Self> {
        Some(match name {
            "slow_task" => Self::Slow {
                ms: args["ms"].as_u64().unwrap_or(100).min(60_000),
                ask: args["ask"].as_bool().unwrap_or(false),
            },
            "slow_compute" => Self::Compute {
                seconds: args["seconds"].as_u64().unwrap_or(1).min(600),
                label: args["label"].as_str().unwrap_or("job").to_owned(),
            },
            "failing_job" => Self::ToolError,
            "protocol_error_job" => Self::ProtocolError,
            "confirm_delete" => Self::Confirm {
                filename: args["filename"].as_str().unwrap_or("file").to_owned(),
            },
            "multi_input" => Self::TwoQuestions,
            _ => return None,
        })
    }

    /// Runs it in the call, for a client without the extension (no questions asked); a job
    /// that cannot run without a task is `-32021`.
    pub(crate) async fn run_in_call(self) -> Result<Value, (i64, String)> {
        match self {
            Self::Slow { ms, .. } => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(slow_result(ms, None))
            }
            Self::Compute { seconds, label } => {
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                Ok(text(format!("computed {label} in {seconds} s")))
            }
            Self::ProtocolError => Err((code::INTERNAL_ERROR, "protocol_error_job failed".into())),
            _ => Err((
                code::MISSING_REQUIRED_CLIENT_CAPABILITY,
                format!("this tool runs as a task: it needs the {TASKS_EXTENSION} extension"),
            )),
        }
    }
}

/// `slow_task`'s result.
fn slow_result(ms: u64, name: Option<&str>) -> Value {
    match name {
        Some(name) => text(format!("done after {ms} ms, for {name}")),
        None => text(format!("done after {ms} ms")),
    }
}

impl Tasks {
    /// Starts a task for `job`; its `CreateTaskResult` (the task exists before it is sent).
    pub(crate) fn create(self: &Arc<Self>, job: Job) -> Value {
        let id = format!("task-{}", self.next.fetch_add(1, Ordering::SeqCst) + 1);
        let now = now_iso();
        let state = TaskState {
            status: "working",
            created_at: now.clone(),
            updated_at: now,
            result: None,
            error: None,
            outstanding: BTreeMap::new(),
            answers: BTreeMap::new(),
        };
        lock(&self.tasks).insert(id.clone(), state);
        let tasks = self.clone();
        let task_id = id.clone();
        tokio::spawn(async move { tasks.run(&task_id, job).await });
        let mut created = self.view(&id).unwrap_or_else(|| json!({}));
        created["resultType"] = json!("task");
        created
    }

    async fn run(&self, id: &str, job: Job) {
        let moment = Duration::from_millis(300);
        let outcome = match job {
            Job::Slow { ms, ask } => {
                if !self.wait(id, Duration::from_millis(ms)).await {
                    return;
                }
                let name = if ask {
                    let Some(answers) = self
                        .ask(id, [("name-1", ask_for("Who is this for?", "name"))])
                        .await
                    else {
                        return;
                    };
                    answered(answers.get("name-1"), "name")
                } else {
                    None
                };
                Ok(slow_result(ms, name.as_deref()))
            }
            Job::Compute { seconds, label } => {
                if !self.wait(id, Duration::from_secs(seconds)).await {
                    return;
                }
                Ok(text(format!("computed {label} in {seconds} s")))
            }
            Job::ToolError => {
                if !self.wait(id, moment).await {
                    return;
                }
                Ok(
                    json!({"content": [{"type": "text", "text": "failing_job failed"}],
                    "isError": true}),
                )
            }
            Job::ProtocolError => {
                if !self.wait(id, moment).await {
                    return;
                }
                Err(json!({"code": code::INTERNAL_ERROR, "message": "protocol_error_job failed"}))
            }
            Job::Confirm { filename } => {
                let question = ask_for(&format!("Delete {filename}?"), "confirm");
                let Some(answers) = self.ask(id, [("confirm-1", question)]).await else {
                    return;
                };
                let accepted = answers
                    .get("confirm-1")
                    .is_some_and(|a| a["action"] == "accept");
                Ok(text(if accepted {
                    format!("deleted {filename}")
                } else {
                    format!("kept {filename}")
                }))
            }
            Job::TwoQuestions => {
                let Some(answers) = self
                    .ask(
                        id,
                        [
                            ("first", ask_for("First?", "name")),
                            ("second", ask_for("Second?", "name")),
                        ],
                    )
                    .await
                else {
                    return;
                };
                Ok(text(format!("answered {} questions", answers.len())))
            }
            Job::Greet { name } => {
                if !self.wait(id, moment).await {
                    return;
                }
                Ok(text(format!("Hello, {name}!")))
            }
        };
        self.set(id, |t| {
            if !t.is_terminal() {
                match outcome {
                    Ok(result) => {
                        t.status = "completed";
                        t.result = Some(result);
                    }
                    Err(error) => {
                        t.status = "failed";
                        t.error = Some(error);
                    }
                }
            }
        });
    }

    /// Waits `duration` unless the task is cancelled (or gone) first: whether it may go on.
    async fn wait(&self, id: &str, duration: Duration) -> bool {
        let until = tokio::time::Instant::now() + duration;
        loop {
            let changed = self.changed.notified();
            match lock(&self.tasks).get(id) {
                Some(t) if !t.is_terminal() => {}
                _ => return false,
            }
            if tokio::time::timeout_at(until, changed).await.is_err() {
                return true;
            }
        }
    }

    /// Asks `questions` (`input_required` until every one is answered): the answers, or
    /// `None` if the task was cancelled (or is gone) first.
    async fn ask<const N: usize>(
        &self,
        id: &str,
        questions: [(&str, Value); N],
    ) -> Option<BTreeMap<String, Value>> {
        self.set(id, |t| {
            if !t.is_terminal() {
                t.status = "input_required";
                t.outstanding = questions
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect();
            }
        });
        loop {
            let changed = self.changed.notified();
            match lock(&self.tasks).get(id) {
                Some(t) if t.is_terminal() => return None,
                Some(t) if t.outstanding.is_empty() => return Some(t.answers.clone()),
                Some(_) => {}
                None => return None,
            }
            changed.await;
        }
    }

    fn set(&self, id: &str, change: impl FnOnce(&mut TaskState)) {
        if let Some(t) = lock(&self.tasks).get_mut(id) {
            change(t);
            t.updated_at = now_iso();
        }
        self.changed.notify_waiters();
    }

    /// The task as `tasks/get` shows it.
    fn view(&self, id: &str) -> Option<Value> {
        let tasks = lock(&self.tasks);
        let t = tasks.get(id)?;
        let mut v = json!({"taskId": id, "status": t.status, "createdAt": t.created_at,
            "lastUpdatedAt": t.updated_at, "ttlMs": 600_000, "pollIntervalMs": 20});
        if t.status == "input_required" {
            v["inputRequests"] = json!(t.outstanding);
        }
        if let Some(result) = &t.result {
            v["result"] = result.clone();
        }
        if let Some(error) = &t.error {
            v["error"] = error.clone();
        }
        Some(v)
    }

    /// `tasks/get`, `tasks/update` and `tasks/cancel`.
    pub(crate) fn handle(
        &self,
        method: ClientMethod,
        params: &Value,
    ) -> Result<Value, (i64, String)> {
        let id = params["taskId"].as_str().unwrap_or("");
        let unknown = || (code::INVALID_PARAMS, format!("Unknown task: {id}"));
        if !lock(&self.tasks).contains_key(id) {
            return Err(unknown());
        }
        match method {
            ClientMethod::GetTask => self.view(id).ok_or_else(unknown),
            ClientMethod::UpdateTask => {
                // Answers to outstanding keys count; any other key is ignored, as the
                // extension asks. Some of the keys leave the task waiting for the rest.
                let responses = params["inputResponses"].as_object().cloned();
                self.set(id, |t| {
                    for (key, answer) in responses.into_iter().flatten() {
                        if t.outstanding.remove(&key).is_some() {
                            t.answers.insert(key, answer);
                        }
                    }
                    if t.status == "input_required" && t.outstanding.is_empty() {
                        t.status = "working";
                    }
                });
                Ok(json!({}))
            }
            _ => {
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                self.set(id, |t| {
                    if !t.is_terminal() {
                        t.status = "cancelled";
                        t.outstanding.clear();
                    }
                });
                Ok(json!({}))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_is_iso_8601_utc() {
        let now = super::now_iso();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.starts_with("20") && now.ends_with('Z'), "{now}");
        assert_eq!(&now[10..11], "T");
    }
}

//! The tasks extension on the server side: `slow_task` becomes a task when the request
//! declares the extension (else it runs in the call); `tasks/get`, `tasks/update` and
//! `tasks/cancel`. Every task-bearing answer carries a new `requestState`, and a request that
//! does not echo the latest one is refused, so a client that echoes wrongly is caught.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::Notify;
use toolwire_types::error::code;

use crate::core::lock;

/// One task.
struct TaskState {
    status: &'static str,
    created_at: String,
    updated_at: String,
    /// The `requestState` last handed out (`s-<id>-<n>`), and its counter.
    state: u64,
    result: Option<Value>,
    /// Outstanding input requests by key.
    input_requests: Option<Value>,
    /// The name the client gave, when asked.
    name: Option<String>,
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

/// How the task tool's arguments read.
pub(crate) struct Job {
    pub(crate) ms: u64,
    pub(crate) ask: bool,
}

impl Job {
    pub(crate) fn from_args(args: &Value) -> Self {
        Self {
            ms: args["ms"].as_u64().unwrap_or(100).min(60_000),
            ask: args["ask"].as_bool().unwrap_or(false),
        }
    }

    /// The tool's result once done.
    pub(crate) fn result(&self, name: Option<&str>) -> Value {
        let text = match name {
            Some(name) => format!("done after {} ms, for {name}", self.ms),
            None => format!("done after {} ms", self.ms),
        };
        json!({"content": [{"type": "text", "text": text}], "isError": false})
    }
}

impl Tasks {
    /// Starts a task for `job`; its `CreateTaskResult`.
    pub(crate) fn create(self: &Arc<Self>, job: Job) -> Value {
        let id = format!("task-{}", self.next.fetch_add(1, Ordering::SeqCst) + 1);
        let now = now_iso();
        let state = TaskState {
            status: "working",
            created_at: now.clone(),
            updated_at: now,
            state: 0,
            result: None,
            input_requests: None,
            name: None,
        };
        lock(&self.tasks).insert(id.clone(), state);
        let tasks = self.clone();
        let task_id = id.clone();
        tokio::spawn(async move { tasks.run(&task_id, job).await });
        let mut created = self.view(&id, true).unwrap_or_else(|| json!({}));
        created["resultType"] = json!("task");
        created
    }

    async fn run(&self, id: &str, job: Job) {
        tokio::time::sleep(Duration::from_millis(job.ms)).await;
        let mut name = None;
        if job.ask {
            self.set(id, |t| {
                t.status = "input_required";
                t.input_requests = Some(json!({"name-1": {"method": "elicitation/create",
                    "params": {"mode": "form", "message": "Who is this for?",
                        "requestedSchema": {"type": "object",
                            "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}));
            });
            loop {
                let waiting = self.changed.notified();
                match lock(&self.tasks).get(id) {
                    Some(t) if t.status == "cancelled" => return,
                    Some(t) if t.name.is_some() => {
                        name = t.name.clone();
                        break;
                    }
                    Some(_) => {}
                    None => return,
                }
                waiting.await;
            }
        }
        self.set(id, |t| {
            if t.status != "cancelled" {
                t.status = "completed";
                t.input_requests = None;
                t.result = Some(job.result(name.as_deref()));
            }
        });
    }

    fn set(&self, id: &str, change: impl FnOnce(&mut TaskState)) {
        if let Some(t) = lock(&self.tasks).get_mut(id) {
            change(t);
            t.updated_at = now_iso();
        }
        self.changed.notify_waiters();
    }

    /// The task as a task-bearing message shows it, with a new `requestState` when `fresh`.
    fn view(&self, id: &str, fresh: bool) -> Option<Value> {
        let mut tasks = lock(&self.tasks);
        let t = tasks.get_mut(id)?;
        if fresh {
            t.state += 1;
        }
        let mut v = json!({"taskId": id, "status": t.status, "createdAt": t.created_at,
            "lastUpdatedAt": t.updated_at, "ttlSeconds": 600, "pollIntervalMilliseconds": 20,
            "requestState": format!("s-{id}-{}", t.state)});
        if let Some(requests) = &t.input_requests {
            v["inputRequests"] = requests.clone();
        }
        if let Some(result) = &t.result {
            v["result"] = result.clone();
        }
        Some(v)
    }

    /// Refuses a request about task `id` that does not echo the latest `requestState`.
    fn check_state(&self, id: &str, params: &Value) -> Result<(), (i64, String)> {
        let tasks = lock(&self.tasks);
        let Some(t) = tasks.get(id) else {
            return Err((code::INVALID_PARAMS, format!("Unknown task: {id}")));
        };
        let latest = format!("s-{id}-{}", t.state);
        if params["requestState"].as_str() == Some(latest.as_str()) {
            Ok(())
        } else {
            Err((
                code::INVALID_PARAMS,
                format!(
                    "requestState {} is not the latest ({latest})",
                    params["requestState"]
                ),
            ))
        }
    }

    /// `tasks/get`, `tasks/update` and `tasks/cancel`.
    pub(crate) fn handle(&self, method: &str, params: &Value) -> Result<Value, (i64, String)> {
        let id = params["taskId"].as_str().unwrap_or("");
        match method {
            "tasks/get" => {
                self.check_state(id, params)?;
                self.view(id, true)
                    .ok_or((code::INVALID_PARAMS, format!("Unknown task: {id}")))
            }
            "tasks/update" => {
                // Acknowledged even for an unknown task, as the extension asks.
                if self.check_state(id, params).is_ok() {
                    let name = params["inputResponses"]["name-1"]["content"]["name"]
                        .as_str()
                        .map(str::to_owned);
                    if let Some(name) = name {
                        self.set(id, |t| {
                            t.name = Some(name);
                            t.status = "working";
                            t.input_requests = None;
                        });
                    }
                }
                Ok(json!({}))
            }
            _ => {
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                self.set(id, |t| {
                    if t.status == "working" || t.status == "input_required" {
                        t.status = "cancelled";
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

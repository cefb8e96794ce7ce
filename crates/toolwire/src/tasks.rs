//! The tasks extension for applications (SEP-2663): a `tools/call` the server answers with a
//! task is followed to its end inside [`Client::call_tool`], which keeps returning the final
//! result: `tasks/get` at the interval the server suggests (50 ms to 30 s, 1 s if it says
//! nothing), the latest `requestState` echoed exactly, `input_required` answered through
//! the handler with `tasks/update` (each key once), and `tasks/cancel` when the call's
//! deadline passes or its caller stops waiting. The raw methods are here too, for callers
//! who keep task ids themselves.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use toolwire_types::methods::method;
use toolwire_types::{
    CallToolResult, InputRequiredResult, JsonObject, ResultType, Task, TaskParams, TaskStatus,
    UpdateTaskParams,
};

use crate::{Client, Error};

/// The polling interval when the server suggests none.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// The bounds a server's suggestion is held to: no busy loop, no hour-long silence.
const MIN_POLL: Duration = Duration::from_millis(50);
const MAX_POLL: Duration = Duration::from_secs(30);

/// Whether a raw `tools/call` result is a task (`resultType: "task"`).
pub(crate) fn is_task(raw: &serde_json::value::RawValue) -> bool {
    // A cheap look first: most results never mention it.
    raw.get().contains("\"task\"")
        && serde_json::from_str::<serde_json::Value>(raw.get())
            .is_ok_and(|v| v["resultType"] == "task")
}

fn params(task_id: &str, request_state: Option<String>) -> TaskParams {
    TaskParams {
        task_id: task_id.to_owned(),
        request_state,
        meta: None,
        extra: JsonObject::new(),
    }
}

/// Cancels the task if the call that follows it is dropped before the end.
struct CancelTask {
    client: Client,
    task_id: String,
    request_state: Option<String>,
    armed: bool,
}

impl Drop for CancelTask {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let client = self.client.clone();
        let params = params(&self.task_id, self.request_state.take());
        // Best effort: the caller is gone.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = client.request::<method::CancelTask>(params).await {
                    tracing::debug!(error = %e, "tasks/cancel for an abandoned call failed");
                }
            });
        }
    }
}

impl Client {
    /// `tasks/get`: a task's state, with its result once completed. Pass the latest
    /// `requestState` the server sent about it (none if the latest message had none).
    pub async fn get_task(
        &self,
        task_id: &str,
        request_state: Option<String>,
    ) -> Result<Task, Error> {
        self.request::<method::GetTask>(params(task_id, request_state))
            .await
    }

    /// `tasks/update`: answers to a task's input requests, by their keys.
    pub async fn update_task(
        &self,
        task_id: &str,
        input_responses: JsonObject,
        request_state: Option<String>,
    ) -> Result<(), Error> {
        let params = UpdateTaskParams {
            task_id: task_id.to_owned(),
            input_responses,
            request_state,
            meta: None,
            extra: JsonObject::new(),
        };
        self.request::<method::UpdateTask>(params).await.map(drop)
    }

    /// `tasks/cancel`: asks the server to stop a task (it acknowledges; the task may still
    /// end otherwise).
    pub async fn cancel_task(
        &self,
        task_id: &str,
        request_state: Option<String>,
    ) -> Result<(), Error> {
        self.request::<method::CancelTask>(params(task_id, request_state))
            .await
            .map(drop)
    }

    /// Follows the task a `tools/call` was answered with to its final result, until
    /// `deadline` (then `tasks/cancel` and [`Error::Timeout`] with `limit`).
    pub(crate) async fn follow_task(
        &self,
        task: Task,
        deadline: Instant,
        limit: Duration,
    ) -> Result<CallToolResult, Error> {
        tracing::debug!(task = %task.task_id, "the call goes on as a task");
        let mut guard = CancelTask {
            client: self.clone(),
            task_id: task.task_id.clone(),
            request_state: task.request_state.clone(),
            armed: true,
        };
        let mut interval = clamp(task.poll_interval());
        let mut answered = BTreeSet::new();
        let mut rounds = 0;
        let mut current = task;
        loop {
            if !current.status.is_terminal() {
                if Instant::now() + interval > deadline {
                    tokio::time::sleep_until(deadline).await;
                    guard.armed = false;
                    let _ = self
                        .cancel_task(&current.task_id, guard.request_state.take())
                        .await;
                    return Err(Error::Timeout(limit));
                }
                tokio::time::sleep(interval).await;
                current = self
                    .get_task(&current.task_id, guard.request_state.clone())
                    .await?;
                // The latest message's state, or none if it had none.
                guard.request_state = current.request_state.clone();
                if let Some(suggested) = current.poll_interval() {
                    interval = clamp(Some(suggested));
                }
            }
            match current.status {
                TaskStatus::Working => {}
                TaskStatus::InputRequired => {
                    self.answer_task_input(&current, &mut answered, &mut rounds, &guard)
                        .await?;
                }
                TaskStatus::Completed => {
                    guard.armed = false;
                    let result = current.result.take().unwrap_or_default();
                    return serde_json::from_value(serde_json::Value::Object(result)).map_err(
                        |source| {
                            Error::Decode(Arc::new(toolwire_types::DecodeError::InvalidResult {
                                method: "tasks/get".to_owned(),
                                source,
                            }))
                        },
                    );
                }
                TaskStatus::Failed => {
                    guard.armed = false;
                    return Err(match current.error.take() {
                        Some(error) => Error::Server(error),
                        None => Error::TaskEnded {
                            task_id: current.task_id,
                            status: TaskStatus::Failed,
                            message: current.status_message,
                        },
                    });
                }
                TaskStatus::Cancelled => {
                    guard.armed = false;
                    return Err(Error::TaskEnded {
                        task_id: current.task_id,
                        status: TaskStatus::Cancelled,
                        message: current.status_message,
                    });
                }
            }
        }
    }

    /// Answers the input requests of `task` not answered before, through the handler, with
    /// `tasks/update`.
    async fn answer_task_input(
        &self,
        task: &Task,
        answered: &mut BTreeSet<String>,
        rounds: &mut usize,
        guard: &CancelTask,
    ) -> Result<(), Error> {
        let fresh: std::collections::BTreeMap<_, _> = task
            .input_requests
            .iter()
            .flatten()
            .filter(|(key, _)| !answered.contains(*key))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = fresh.keys().cloned().collect();
        let required = InputRequiredResult {
            result_type: ResultType::InputRequired,
            input_requests: Some(fresh),
            request_state: None,
            meta: None,
            extra: JsonObject::new(),
        };
        let (responses, _) = self.answer_input(Box::new(required), rounds).await?;
        self.update_task(&task.task_id, responses, guard.request_state.clone())
            .await?;
        answered.extend(keys);
        Ok(())
    }
}

fn clamp(suggested: Option<Duration>) -> Duration {
    suggested.unwrap_or(DEFAULT_POLL).clamp(MIN_POLL, MAX_POLL)
}

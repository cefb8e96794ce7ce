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
}

/// A task a `tools/call` was answered with ([`Client::call_tool_as_task`]): its latest state,
/// polled with [`TaskHandle::next`], answered with [`TaskHandle::answer`], cancelled with
/// [`TaskHandle::cancel`], or followed to the end with [`TaskHandle::result`] as
/// [`Client::call_tool`] does. Dropping a handle leaves the task alone (its id can be kept and
/// asked about later); dropping [`TaskHandle::result`]'s future cancels it.
pub struct TaskHandle {
    client: Client,
    tool: String,
    task: Task,
    /// The latest `requestState` (none if the latest task-bearing message had none).
    request_state: Option<String>,
    interval: Duration,
    deadline: Instant,
    limit: Duration,
    output_schema: Option<serde_json::Value>,
    /// Input request keys already answered.
    answered: BTreeSet<String>,
    rounds: usize,
    /// Send `tasks/cancel` if dropped before a terminal status (while `result` follows it).
    cancel_on_drop: bool,
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle")
            .field("tool", &self.tool)
            .field("task_id", &self.task.task_id)
            .field("status", &self.task.status)
            .finish_non_exhaustive()
    }
}

impl TaskHandle {
    /// `task` as `tools/call` of `tool` answered it; followed until `deadline` (the call's
    /// timeout, `limit`).
    pub(crate) fn new(
        client: Client,
        tool: &str,
        task: Task,
        (deadline, limit): (Instant, Duration),
        output_schema: Option<serde_json::Value>,
    ) -> Self {
        tracing::debug!(task = %task.task_id, tool, "the call goes on as a task");
        Self {
            client,
            tool: tool.to_owned(),
            request_state: task.request_state.clone(),
            interval: clamp(task.poll_interval()),
            task,
            deadline,
            limit,
            output_schema,
            answered: BTreeSet::new(),
            rounds: 0,
            cancel_on_drop: false,
        }
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.task.task_id
    }

    /// The task as last seen.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// Waits the polling interval the server suggests, then asks for the task's state
    /// (`tasks/get`, with the latest `requestState`).
    pub async fn next(&mut self) -> Result<&Task, Error> {
        tokio::time::sleep(self.interval).await;
        self.poll().await?;
        Ok(&self.task)
    }

    async fn poll(&mut self) -> Result<(), Error> {
        let task = self
            .client
            .get_task(&self.task.task_id, self.request_state.clone())
            .await?;
        // The latest message's state, or none if it had none.
        self.request_state = task.request_state.clone();
        if let Some(suggested) = task.poll_interval() {
            self.interval = clamp(Some(suggested));
        }
        self.task = task;
        Ok(())
    }

    /// Answers input requests of the task (`tasks/update`), by their keys.
    pub async fn answer(&mut self, responses: JsonObject) -> Result<(), Error> {
        let keys: Vec<String> = responses.keys().cloned().collect();
        self.client
            .update_task(&self.task.task_id, responses, self.request_state.clone())
            .await?;
        self.answered.extend(keys);
        Ok(())
    }

    /// Asks the server to stop the task (`tasks/cancel`).
    pub async fn cancel(mut self) -> Result<(), Error> {
        self.cancel_on_drop = false;
        let state = self.request_state.take();
        self.client.cancel_task(&self.task.task_id, state).await
    }

    /// Follows the task to its end as [`Client::call_tool`] does: polls at the server's
    /// interval, answers input requests through the client's handler, checks the final
    /// result against the tool's output schema; at the call's deadline `tasks/cancel` and
    /// [`Error::Timeout`]. A failed task is [`Error::Server`] with its error, a cancelled
    /// one [`Error::TaskEnded`].
    pub async fn result(mut self) -> Result<CallToolResult, Error> {
        self.cancel_on_drop = true;
        loop {
            match self.task.status {
                TaskStatus::Working => {}
                TaskStatus::InputRequired => self.answer_through_handler().await?,
                TaskStatus::Completed => {
                    self.cancel_on_drop = false;
                    let result = self.task.result.take().unwrap_or_default();
                    let result: CallToolResult = serde_json::from_value(serde_json::Value::Object(
                        result,
                    ))
                    .map_err(|source| {
                        Error::Decode(Arc::new(toolwire_types::DecodeError::InvalidResult {
                            method: "tasks/get".to_owned(),
                            source,
                        }))
                    })?;
                    self.client
                        .validate(&self.tool, self.output_schema.as_ref(), &result)?;
                    return Ok(result);
                }
                TaskStatus::Failed => {
                    self.cancel_on_drop = false;
                    return Err(match self.task.error.take() {
                        Some(error) => Error::Server(error),
                        None => self.ended(),
                    });
                }
                TaskStatus::Cancelled => {
                    self.cancel_on_drop = false;
                    return Err(self.ended());
                }
            }
            if Instant::now() + self.interval > self.deadline {
                tokio::time::sleep_until(self.deadline).await;
                let limit = self.limit;
                let _ = self.cancel().await;
                return Err(Error::Timeout(limit));
            }
            tokio::time::sleep(self.interval).await;
            self.poll().await?;
        }
    }

    fn ended(&mut self) -> Error {
        Error::TaskEnded {
            task_id: self.task.task_id.clone(),
            status: self.task.status,
            message: self.task.status_message.take(),
        }
    }

    /// Answers the input requests not answered before, through the client's handler.
    async fn answer_through_handler(&mut self) -> Result<(), Error> {
        let fresh: std::collections::BTreeMap<_, _> = self
            .task
            .input_requests
            .iter()
            .flatten()
            .filter(|(key, _)| !self.answered.contains(*key))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let required = InputRequiredResult {
            result_type: ResultType::InputRequired,
            input_requests: Some(fresh),
            request_state: None,
            meta: None,
            extra: JsonObject::new(),
        };
        let (responses, _) = self
            .client
            .answer_input(Box::new(required), &mut self.rounds)
            .await?;
        self.answer(responses).await
    }
}

impl Drop for TaskHandle {
    fn drop(&mut self) {
        if !self.cancel_on_drop || self.task.status.is_terminal() {
            return;
        }
        let client = self.client.clone();
        let params = params(&self.task.task_id, self.request_state.take());
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

fn clamp(suggested: Option<Duration>) -> Duration {
    suggested.unwrap_or(DEFAULT_POLL).clamp(MIN_POLL, MAX_POLL)
}

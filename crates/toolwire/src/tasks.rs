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
    raw.get().contains("task") && toolwire_types::says_result_type(raw, "task")
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
    output_schema: Option<toolwire_types::Schema>,
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
        output_schema: Option<toolwire_types::Schema>,
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
                        Error::Protocol(crate::ProtocolError::Decode(Arc::new(
                            toolwire_types::DecodeError::InvalidResult {
                                method: "tasks/get".to_owned(),
                                source,
                            },
                        )))
                    })?;
                    self.client
                        .validate(&self.tool, self.output_schema.as_ref(), &result)?;
                    return Ok(result);
                }
                TaskStatus::Failed => {
                    self.cancel_on_drop = false;
                    return Err(match self.task.error.take() {
                        Some(error) => Error::server(error),
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

#[cfg(test)]
mod tests {
    //! Polling on a paused clock: a scripted in-memory server records the virtual time of
    //! every request, so intervals and deadlines are checked exactly, not by sleeping.

    use std::time::Duration;

    use serde_json::{Value, json};

    use crate::test_peer::{Peer, Seen};
    use crate::{CallOptions, Client, Error};

    fn task(status: &str, interval_ms: Option<u64>, state: &str) -> Value {
        let mut task = json!({"resultType": "complete", "taskId": "t-1", "status": status,
            "createdAt": "2026-11-24T00:00:00Z", "lastUpdatedAt": "2026-11-24T00:00:00Z",
            "requestState": state});
        if let Some(ms) = interval_ms {
            task["pollIntervalMs"] = json!(ms);
        }
        task
    }

    fn created(interval_ms: Option<u64>) -> Value {
        let mut t = task("working", interval_ms, "s-0");
        t["resultType"] = json!("task");
        t
    }

    /// The times of the requests with `method`, and the state each carried.
    fn times(seen: &Seen, method: &str) -> Vec<(Duration, Value)> {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(_, m, _)| m == method)
            .map(|(at, _, params)| (*at, params["requestState"].clone()))
            .collect()
    }

    fn client(peer: Peer) -> Client {
        Client::builder("tasks-test", "0").connect(peer).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn polls_wait_the_servers_interval_held_between_50_ms_and_30_s() {
        let mut polls = 0;
        let (peer, seen) = Peer::new(move |method, _| match method {
            "tools/call" => created(Some(5_000)),
            "tasks/get" => {
                polls += 1;
                match polls {
                    // Too eager: held to 50 ms.
                    1 => task("working", Some(1), "s-1"),
                    // Too lazy: held to 30 s.
                    2 => task("working", Some(120_000), "s-2"),
                    _ => {
                        let mut done = task("completed", None, "s-3");
                        done["result"] = json!({"content": [{"type": "text", "text": "done"}]});
                        done
                    }
                }
            }
            _ => json!({}),
        });
        let client = client(peer);
        let result = client.call_tool("job", json!({})).await.unwrap();
        assert_eq!(result.content[0].as_text(), Some("done"));
        let call = times(&seen, "tools/call")[0].0;
        let gets = times(&seen, "tasks/get");
        let gaps: Vec<Duration> = gets
            .iter()
            .scan(call, |last, (at, _)| {
                let gap = *at - *last;
                *last = *at;
                Some(gap)
            })
            .collect();
        assert_eq!(
            gaps,
            [
                Duration::from_secs(5),
                Duration::from_millis(50),
                Duration::from_secs(30)
            ]
        );
        // Each poll echoes the state of the message before it.
        let states: Vec<Value> = gets.into_iter().map(|(_, state)| state).collect();
        assert_eq!(states, [json!("s-0"), json!("s-1"), json!("s-2")]);
        client.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_suggested_interval_a_task_is_polled_every_second() {
        let mut polls = 0;
        let (peer, seen) = Peer::new(move |method, _| match method {
            "tools/call" => created(None),
            "tasks/get" => {
                polls += 1;
                if polls < 3 {
                    task("working", None, "s")
                } else {
                    let mut done = task("completed", None, "s");
                    done["result"] = json!({"content": []});
                    done
                }
            }
            _ => json!({}),
        });
        let client = client(peer);
        client.call_tool("job", json!({})).await.unwrap();
        let call = times(&seen, "tools/call")[0].0;
        let gets: Vec<Duration> = times(&seen, "tasks/get")
            .into_iter()
            .map(|(at, _)| at - call)
            .collect();
        assert_eq!(
            gets,
            [1, 2, 3].map(Duration::from_secs),
            "one poll a second"
        );
        client.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_still_working_at_the_calls_deadline_is_cancelled_at_that_deadline() {
        let (peer, seen) = Peer::new(|method, _| match method {
            "tools/call" => created(Some(5_000)),
            "tasks/get" => task("working", Some(5_000), "s-get"),
            _ => json!({"resultType": "complete"}),
        });
        let client = client(peer);
        let options = CallOptions::default().with_timeout(Duration::from_secs(12));
        let error = client
            .call_tool_with("job", json!({}), options)
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::Timeout(d) if d == Duration::from_secs(12)),
            "{error}"
        );
        let call = times(&seen, "tools/call")[0].0;
        let gets: Vec<Duration> = times(&seen, "tasks/get")
            .into_iter()
            .map(|(at, _)| at - call)
            .collect();
        // Polls at 5 s and 10 s; the next would be past the deadline.
        assert_eq!(gets, [5, 10].map(Duration::from_secs));
        let cancels = times(&seen, "tasks/cancel");
        assert_eq!(cancels.len(), 1, "one tasks/cancel");
        assert_eq!(
            cancels[0].0 - call,
            Duration::from_secs(12),
            "at the deadline"
        );
        assert_eq!(cancels[0].1, json!("s-get"), "with the latest state");
        client.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_stops_waiting_has_its_task_cancelled() {
        let (peer, seen) = Peer::new(|method, _| match method {
            "tools/call" => created(Some(2_000)),
            "tasks/get" => task("working", None, "s-get"),
            _ => json!({"resultType": "complete"}),
        });
        let client = client(peer);
        let gave_up =
            tokio::time::timeout(Duration::from_secs(7), client.call_tool("job", json!({}))).await;
        assert!(gave_up.is_err(), "the task never ends");
        // The cancel is sent by a task of its own: let it run.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let call = times(&seen, "tools/call")[0].0;
        assert_eq!(times(&seen, "tasks/get").len(), 3, "polled at 2, 4 and 6 s");
        let cancels = times(&seen, "tasks/cancel");
        assert_eq!(cancels.len(), 1, "one tasks/cancel");
        assert_eq!(cancels[0].0 - call, Duration::from_secs(7));
        client.close().await;
    }
}

//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): a `tools/call` may be
//! answered with a task (`resultType: "task"`) whose final result is fetched by polling
//! `tasks/get`; `tasks/update` answers its input requests and `tasks/cancel` asks it to stop.
//!
//! The extension's wire moved while it was drafted: its specification now spells the fields
//! `ttlMs` and `pollIntervalMs` and has no `requestState`, as the conformance suite's
//! `0.2.0-alpha.12` does, while the SEP's earlier text had `ttlSeconds`,
//! `pollIntervalMilliseconds` and a `requestState` to echo. Both spellings are read
//! ([`Task::poll_interval`] and [`Task::ttl`] give one answer), and a `requestState` is echoed
//! only when a server sends one.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::{JsonObject, ResultType};
use crate::{ErrorObject, InputRequest, Meta};

/// The extension's identifier, as both sides declare it under `capabilities.extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// In progress.
    Working,
    /// Waiting for the answers to its `inputRequests` (`tasks/update`).
    InputRequired,
    /// Done: `result` holds the request's result.
    Completed,
    /// Failed with a JSON-RPC error: `error` holds it.
    Failed,
    /// Cancelled before it completed.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task will not change again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// A task as `tools/call` (`CreateTaskResult`), `tasks/get` and `notifications/tasks` carry
/// it; `result`, `error` and `inputRequests` only in the last two, for the statuses
/// that have them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// `task` on a `CreateTaskResult`, `complete` on `tasks/get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The task's identifier, for every later request about it.
    pub task_id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// A message about the status, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When it was created (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When it last changed (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated_at: Option<String>,
    /// How long the server keeps it, in seconds from creation (SEP text; `null`: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<Value>,
    /// How long the server keeps it, in milliseconds (the suite's spelling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<Value>,
    /// How often to poll, in milliseconds (SEP text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_milliseconds: Option<u64>,
    /// How often to poll, in milliseconds (the suite's spelling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
    /// Opaque state: the next request about this task carries the latest one exactly, and
    /// none if the latest message had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// `input_required`: what the server asks, by key (answered with `tasks/update`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<BTreeMap<String, InputRequest>>,
    /// `completed`: the request's result (a `CallToolResult` for `tools/call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JsonObject>,
    /// `failed`: the JSON-RPC error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Task {
    /// The polling interval the server suggests, in either spelling.
    pub fn poll_interval(&self) -> Option<Duration> {
        self.poll_interval_milliseconds
            .or(self.poll_interval_ms)
            .map(Duration::from_millis)
    }

    /// How long the server keeps the task from its creation, in either spelling (`None`:
    /// not said, or unlimited).
    pub fn ttl(&self) -> Option<Duration> {
        let seconds = self.ttl_seconds.as_ref().and_then(Value::as_u64);
        let millis = self.ttl_ms.as_ref().and_then(Value::as_u64);
        seconds
            .map(Duration::from_secs)
            .or(millis.map(Duration::from_millis))
    }
}

/// `tasks/get` and `tasks/cancel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskParams {
    /// The task.
    pub task_id: String,
    /// The latest `requestState` the server sent about it, exactly (none if it sent none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `tasks/update` params: answers to the task's outstanding input requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// The task.
    pub task_id: String,
    /// The answers, by the keys of its `inputRequests`.
    pub input_responses: JsonObject,
    /// The latest `requestState` the server sent about it, exactly (none if it sent none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

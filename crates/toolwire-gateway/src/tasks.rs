//! The tasks extension (2026-07-28) passed through: a call from a client that declared the
//! extension may be answered with its upstream's task, whose id then names the server and
//! seals the upstream's id to the caller (`{server}__{sealed}`: the upstream's id sealed with
//! the gateway's keys for that caller's principal, [`SessionKeys::seal_for`]), so any replica
//! holding the keys routes it without a table, and only the caller that started the task can
//! get, update or cancel it: anyone else's `tasks/*` with that id is an unknown task, whatever
//! they can see of the server. `tasks/get`, `tasks/update` and `tasks/cancel` go to that server
//! under its own id. A client that did not declare the extension never sees a task: the
//! gateway follows its call's task to the result, as any Toolwire client does.

use serde_json::{Value, json};
use toolwire_server::{Answer, Era, Request, RpcError, SessionKeys};
use toolwire_types::Method as _;
use toolwire_types::methods::method as mcp;
use toolwire_types::{ClientMethod, TASKS_EXTENSION, Task, error::code};

use crate::{Gateway, relayed};

/// Whether a 2026-07-28 client declared the tasks extension (in the request's `_meta`).
pub(crate) fn declared(client: Option<&Value>) -> bool {
    client.is_some_and(|c| c["extensions"].get(TASKS_EXTENSION).is_some())
}

/// What a task id is sealed for ([`SessionKeys::seal_for`]).
const PURPOSE: &str = "task";

/// A task as `owner` sees it through the gateway: its id names its server and seals the
/// upstream's id to `owner`; everything else as the server sent it.
pub(crate) fn outward(
    keys: &SessionKeys,
    owner: &str,
    server: &str,
    separator: &str,
    mut task: Task,
) -> Answer {
    let mut text = server.as_bytes().to_vec();
    text.push(0);
    text.extend_from_slice(task.task_id.as_bytes());
    let sealed = keys
        .seal_for(PURPOSE, owner, &text)
        .ok_or_else(|| RpcError::new(code::INTERNAL_ERROR, "the system's random source failed"))?;
    task.task_id = format!("{server}{separator}{sealed}");
    serde_json::to_value(task).map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))
}

/// The server and upstream id of the task `task_id` the gateway gave `owner`; None for an id
/// it did not give, or gave someone else.
pub(crate) fn inward(
    keys: &SessionKeys,
    owner: &str,
    separator: &str,
    task_id: &str,
) -> Option<(String, String)> {
    let (server, sealed) = task_id.split_once(separator)?;
    let text = keys.open_for(PURPOSE, owner, sealed)?;
    let zero = text.iter().position(|b| *b == 0)?;
    let (sealed_server, id) = (&text[..zero], &text[zero + 1..]);
    if sealed_server != server.as_bytes() {
        return None;
    }
    Some((server.to_owned(), String::from_utf8(id.to_vec()).ok()?))
}

impl Gateway {
    /// [`outward`] with the gateway's keys.
    pub(crate) fn outward_task(&self, owner: &str, server: &str, task: Task) -> Answer {
        let keys = self.keys.as_ref().ok_or_else(|| {
            RpcError::new(
                code::INTERNAL_ERROR,
                "the gateway has no keys to seal a task id with",
            )
        })?;
        outward(keys, owner, server, self.host.separator(), task)
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel`, routed by the task's id.
    pub(crate) async fn task_request(&self, request: Request<'_>) -> Answer {
        let (method, params) = (request.method_name, request.params);
        if request.era != Era::Modern {
            return Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("Method not found: {method} (the tasks extension is 2026-07-28's)"),
            ));
        }
        if !declared(request.client) {
            return Err(RpcError::new(
                code::MISSING_REQUIRED_CLIENT_CAPABILITY,
                format!("{method} needs the {TASKS_EXTENSION} extension"),
            )
            .with_data(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})));
        }
        let Some(task_id) = params["taskId"].as_str() else {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("{method} needs a taskId"),
            ));
        };
        let unknown = || RpcError::new(code::INVALID_PARAMS, format!("Unknown task: {task_id}"));
        let separator = self.host.separator();
        let owner = crate::access::principal(request.caller);
        let opened = self
            .keys
            .as_ref()
            .and_then(|keys| inward(keys, owner, separator, task_id));
        let Some((server, id)) = opened else {
            tracing::info!(target: "toolwire_gateway::audit", caller = owner, method, what = "task", name = task_id, "refused: a task id this caller was not given");
            return Err(unknown());
        };
        let (server, id) = (server.as_str(), id.as_str());
        self.own_credentials_only(server, method)?;
        let client = self.host.client(server).map_err(|_| unknown())?;
        let state = params["requestState"].as_str().map(str::to_owned);
        let answer = match request.method {
            ClientMethod::GetTask => match client.get_task(id, state).await {
                Ok(task) => return self.outward_task(owner, server, task),
                Err(e) => Err(e),
            },
            ClientMethod::UpdateTask => {
                let Some(responses) = params["inputResponses"].as_object() else {
                    return Err(RpcError::new(
                        code::INVALID_PARAMS,
                        format!("{} needs inputResponses", mcp::UpdateTask::NAME),
                    ));
                };
                client.update_task(id, responses.clone(), state).await
            }
            _ => client.cancel_task(id, state).await,
        };
        answer.map(|()| json!({})).map_err(|e| relayed(server, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tasks_id_names_its_server_opens_for_its_caller_only_and_keeps_the_rest() {
        let keys = SessionKeys::new([[3; 32]]).unwrap();
        let task: Task = serde_json::from_value(json!({"taskId": "t-1", "status": "working",
            "ttlMs": 60000, "vendor": {"kept": true}}))
        .unwrap();
        let out = outward(&keys, "iss#alice", "ref", "__", task).unwrap();
        let id = out["taskId"].as_str().unwrap();
        assert!(id.starts_with("ref__") && !id.contains("t-1"), "{id}");
        assert_eq!(out["status"], "working");
        assert_eq!(out["vendor"], json!({"kept": true}));
        assert_eq!(
            inward(&keys, "iss#alice", "__", id),
            Some(("ref".to_owned(), "t-1".to_owned()))
        );
        // Another caller; the upstream's own id; the sealed part under another server.
        assert_eq!(inward(&keys, "iss#carol", "__", id), None);
        assert_eq!(inward(&keys, "iss#alice", "__", "ref__t-1"), None);
        let moved = id.replacen("ref__", "other__", 1);
        assert_eq!(inward(&keys, "iss#alice", "__", &moved), None);
    }

    #[test]
    fn only_a_client_that_declared_the_extension_has_it() {
        assert!(declared(Some(
            &json!({"extensions": {TASKS_EXTENSION: {}}})
        )));
        assert!(!declared(Some(&json!({"extensions": {}}))));
        assert!(!declared(None));
    }
}

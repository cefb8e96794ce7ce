//! The tasks extension (2026-07-28) passed through: a call from a client that declared the
//! extension may be answered with its upstream's task, whose id then names the server
//! (`{server}__{id}`, reversible without a table, so any replica can route it), and
//! `tasks/get`, `tasks/update` and `tasks/cancel` go to that server under its own id. A client
//! that did not declare the extension never sees a task: the gateway follows its call's task
//! to the result, as any Toolwire client does.

use serde_json::{Value, json};
use toolwire_server::{Answer, Era, Request, RpcError};
use toolwire_types::{TASKS_EXTENSION, Task, error::code};

use crate::{Gateway, relayed};

/// Whether a 2026-07-28 client declared the tasks extension (in the request's `_meta`).
pub(crate) fn declared(client: Option<&Value>) -> bool {
    client.is_some_and(|c| c["extensions"].get(TASKS_EXTENSION).is_some())
}

/// A task as the gateway's clients see it: its id names its server; everything else as the
/// server sent it.
pub(crate) fn outward(server: &str, separator: &str, mut task: Task) -> Answer {
    task.task_id = format!("{server}{separator}{}", task.task_id);
    serde_json::to_value(task).map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))
}

impl Gateway {
    /// `tasks/get`, `tasks/update` or `tasks/cancel`, routed by the task's id.
    pub(crate) async fn task_request(&self, request: Request<'_>) -> Answer {
        let (method, params) = (request.method, request.params);
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
        let (server, id) = task_id.split_once(separator).ok_or_else(unknown)?;
        let client = self.host.client(server).map_err(|_| unknown())?;
        let state = params["requestState"].as_str().map(str::to_owned);
        let answer = match method {
            "tasks/get" => match client.get_task(id, state).await {
                Ok(task) => return outward(server, separator, task),
                Err(e) => Err(e),
            },
            "tasks/update" => {
                let Some(responses) = params["inputResponses"].as_object() else {
                    return Err(RpcError::new(
                        code::INVALID_PARAMS,
                        "tasks/update needs inputResponses",
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
    fn a_tasks_id_names_its_server_and_keeps_the_rest() {
        let task: Task = serde_json::from_value(json!({"taskId": "t-1", "status": "working",
            "ttlMs": 60000, "vendor": {"kept": true}}))
        .unwrap();
        let out = outward("ref", "__", task).unwrap();
        assert_eq!(out["taskId"], "ref__t-1");
        assert_eq!(out["status"], "working");
        assert_eq!(out["vendor"], json!({"kept": true}));
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

//! The policy applied to requests: what a caller may not see is refused when asked for by
//! name (as an unknown tool, prompt, resource or task would be) and left out of listings.
//! Every refusal is logged under `toolwire_gateway::audit` with the caller's principal.

use serde_json::Value;
use toolwire_server::{Caller, Request, RpcError};
use toolwire_types::ClientMethod;
use toolwire_types::error::code;

use super::View;
use super::policy::ItemNames;
use crate::Gateway;
use crate::discovery::{CALL_TOOL, DESCRIBE_TOOL};

/// Who a log line is about.
pub(crate) fn principal(caller: Option<&Caller>) -> &str {
    caller.map_or("-", |c| c.principal.as_str())
}

impl Gateway {
    /// What `caller` may see and call.
    pub(crate) fn view(&self, caller: Option<&Caller>) -> View<'_> {
        self.access
            .as_ref()
            .map_or_else(View::everything, |a| a.view(caller))
    }

    /// Whether the tool or prompt listed as `name` is allowed: its server is the one the
    /// snapshot knows for a tool (and its upstream name is matched too), else the one its
    /// name begins with.
    pub(crate) fn item_allowed(&self, view: &View<'_>, name: &str) -> bool {
        if view.is_everything() {
            return true;
        }
        if let Some(tool) = self.host.load().get(name) {
            return self.tool_allowed(view, name, tool);
        }
        let server = name
            .split_once(self.host.separator())
            .map_or("", |(s, _)| s);
        view.item(server, &ItemNames::listed(name))
    }

    /// Whether the tool `entry`, listed as `name`, is allowed: by its listed name or its
    /// upstream identity.
    pub(crate) fn tool_allowed(
        &self,
        view: &View<'_>,
        name: &str,
        entry: &toolwire_host::HostTool,
    ) -> bool {
        let names = ItemNames::tool(name, &entry.server, self.host.separator(), &entry.tool.name);
        view.item(&entry.server, &names)
    }

    /// Whether the caller may reach `server` through a resource or a task: its resources are
    /// open to it, or (tasks) any of its tools is.
    pub(crate) fn server_allowed(&self, view: &View<'_>, server: &str, tools_count: bool) -> bool {
        view.server(server)
            || (tools_count
                && self.host.load().iter().any(|(name, tool)| {
                    &*tool.server == server && self.tool_allowed(view, name, tool)
                }))
    }

    /// The server behind a URI the gateway gave out.
    fn uri_server(&self, uri: &str) -> Option<String> {
        crate::uris::inward(uri, self.host.separator()).map(|(server, _)| server)
    }

    /// Whether the caller may read (and hear of) the resource `uri`.
    pub(crate) fn uri_allowed(&self, view: &View<'_>, uri: &str) -> bool {
        view.is_everything()
            || self
                .uri_server(uri)
                .is_some_and(|s| self.server_allowed(view, &s, false))
    }

    /// Refuses a request for something the caller may not see, as if it did not exist.
    pub(crate) fn admit(&self, request: &Request<'_>, view: &View<'_>) -> Result<(), RpcError> {
        if view.is_everything() {
            return Ok(());
        }
        let params = request.params;
        let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
        let refused = |what: &str, name: &str, error: RpcError| {
            tracing::info!(target: "toolwire_gateway::audit", caller = principal(request.caller), method = request.method_name, what, name, "refused by policy");
            Err(error)
        };
        match request.method {
            ClientMethod::CallTool => {
                let mut name = text(&params["name"]);
                if matches!(name.as_str(), DESCRIBE_TOOL | CALL_TOOL) && self.progressive_now() {
                    name = text(&params["arguments"]["name"]);
                }
                // A name nobody serves is the handler's to report (an upstream that is down
                // says so), once the policy lets the caller see that name.
                if !self.item_allowed(view, &name) {
                    return refused(
                        "tool",
                        &name,
                        RpcError::new(code::INVALID_PARAMS, format!("Unknown tool: {name}")),
                    );
                }
            }
            ClientMethod::GetPrompt => {
                let name = text(&params["name"]);
                if !self.item_allowed(view, &name) {
                    return refused(
                        "prompt",
                        &name,
                        RpcError::new(code::INVALID_PARAMS, format!("Unknown prompt: {name}")),
                    );
                }
            }
            ClientMethod::ReadResource | ClientMethod::Subscribe | ClientMethod::Unsubscribe => {
                let uri = text(&params["uri"]);
                if !self
                    .uri_server(&uri)
                    .is_some_and(|s| self.server_allowed(view, &s, false))
                {
                    return refused(
                        "resource",
                        &uri,
                        RpcError::new(code::INVALID_PARAMS, format!("Unknown resource: {uri}"))
                            .with_data(serde_json::json!({"uri": uri})),
                    );
                }
            }
            ClientMethod::Complete => {
                let reference = &params["ref"];
                let allowed = match reference["type"].as_str() {
                    Some("ref/prompt") => self.item_allowed(view, &text(&reference["name"])),
                    Some("ref/resource") => self
                        .uri_server(&text(&reference["uri"]))
                        .is_some_and(|s| self.server_allowed(view, &s, false)),
                    _ => true,
                };
                if !allowed {
                    return refused(
                        "completion",
                        &reference.to_string(),
                        RpcError::new(code::INVALID_PARAMS, "Unknown completion reference"),
                    );
                }
            }
            ClientMethod::GetTask | ClientMethod::UpdateTask | ClientMethod::CancelTask => {
                let id = text(&params["taskId"]);
                let server = id.split_once(self.host.separator()).map(|(s, _)| s);
                if server.is_some_and(|s| !self.server_allowed(view, s, true)) {
                    return refused(
                        "task",
                        &id,
                        RpcError::new(code::INVALID_PARAMS, format!("Unknown task: {id}")),
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A listing with what the caller may not see left out.
    pub(crate) fn only_allowed(
        &self,
        view: &View<'_>,
        method: ClientMethod,
        mut result: Value,
    ) -> Value {
        if view.is_everything() {
            return result;
        }
        let (key, member) = match method {
            ClientMethod::ListPrompts => ("prompts", "name"),
            ClientMethod::ListResources => ("resources", "uri"),
            ClientMethod::ListResourceTemplates => ("resourceTemplates", "uriTemplate"),
            _ => return result,
        };
        if let Some(items) = result[key].as_array_mut() {
            items.retain(|item| {
                let text = item[member].as_str().unwrap_or("");
                if member == "name" {
                    self.item_allowed(view, text)
                } else {
                    self.uri_server(text)
                        .is_some_and(|s| self.server_allowed(view, &s, false))
                }
            });
        }
        result
    }
}

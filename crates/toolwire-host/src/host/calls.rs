//! What a host does with its merged tools: search them, call them (routed to their server),
//! pre-load known ones.

use serde_json::Value;
use toolwire::{CallHooks, CallOptions, CallToolResult, Called, Client, ProgressParams, Tool};

use super::idle::InUse;
use super::{Arc, Host, HostError, HostMatch, ServerState};

impl Host {
    /// The `k` tools of the merged snapshot most relevant to `query`, best first: BM25 over
    /// their names (as the host gives them), titles, descriptions and parameter names
    /// (`toolwire::search`). The index is built on the first search after each change of the
    /// snapshot, so it follows every server's list changes.
    pub fn search_tools(&self, query: &str, k: usize) -> Vec<HostMatch> {
        let merged = self.tools();
        let index = self.inner.search.index(merged.generation(), || {
            merged
                .tools
                .iter()
                .map(|(name, t)| (name.clone(), &*t.tool))
                .collect()
        });
        index
            .search(query, k)
            .into_iter()
            .filter_map(|hit| {
                let found = merged.get(&hit.key)?;
                Some(HostMatch {
                    name: hit.key,
                    score: hit.score,
                    tool: found.clone(),
                })
            })
            .collect()
    }

    /// Calls `server__tool`: routed to its server, with that server's SEP-2243 headers and
    /// settle barrier.
    pub async fn call_tool(
        &self,
        qualified: &str,
        arguments: Value,
    ) -> Result<CallToolResult, HostError> {
        let (client, server, name, _held) = self.route(qualified)?;
        let result = client.call_tool(&name, arguments).await;
        result.map_err(|error| HostError::Call {
            server: server.to_string(),
            error,
        })
    }

    /// [`Self::call_tool`] with options, asking the server for progress and handing each
    /// notification to `on_progress` (see `Client::call_tool_with_progress`). Dropping the
    /// future cancels the call on its server.
    pub async fn call_tool_with_progress(
        &self,
        qualified: &str,
        arguments: Value,
        options: CallOptions,
        on_progress: impl Fn(&ProgressParams) + Send + Sync + 'static,
    ) -> Result<CallToolResult, HostError> {
        let hooks = CallHooks::new().on_progress(on_progress);
        self.call_tool_with_hooks(qualified, arguments, options, hooks)
            .await
    }

    /// [`Self::call_tool`] with options and hooks of the call's own: its progress, and a
    /// handler for the requests its server makes about it (see `Client::call_tool_with_hooks`).
    /// Dropping the future cancels the call on its server.
    pub async fn call_tool_with_hooks(
        &self,
        qualified: &str,
        arguments: Value,
        options: CallOptions,
        hooks: CallHooks,
    ) -> Result<CallToolResult, HostError> {
        let (client, server, name, _held) = self.route(qualified)?;
        let result = client
            .call_tool_with_hooks(&name, arguments, options, hooks)
            .await;
        result.map_err(|error| HostError::Call {
            server: server.to_string(),
            error,
        })
    }

    /// [`Self::call_tool_with_hooks`], answered with a task when the server makes one (see
    /// `Client::call_tool_as_task`): the server it went to, and what it answered.
    pub async fn call_tool_as_task_with_hooks(
        &self,
        qualified: &str,
        arguments: Value,
        options: CallOptions,
        hooks: CallHooks,
    ) -> Result<(Arc<str>, Called), HostError> {
        let (client, server, name, _held) = self.route(qualified)?;
        match client
            .call_tool_as_task_with_hooks(&name, arguments, options, hooks)
            .await
        {
            Ok(called) => Ok((server, called)),
            Err(error) => Err(HostError::Call {
                server: server.to_string(),
                error,
            }),
        }
    }

    /// A call for a relay that passes the result on (see `Client::call_tool_relayed`): the
    /// server it went to, and its result as the server sent it, decoded only where an output
    /// schema checks it; with `tasks`, a task is handed back instead of followed.
    pub async fn call_tool_relayed(
        &self,
        qualified: &str,
        arguments: Value,
        options: CallOptions,
        hooks: CallHooks,
        tasks: bool,
    ) -> Result<(Arc<str>, Called), HostError> {
        let (client, server, name, _held) = self.route(qualified)?;
        match client
            .call_tool_relayed(&name, arguments, options, hooks, tasks)
            .await
        {
            Ok(called) => Ok((server, called)),
            Err(error) => Err(HostError::Call {
                server: server.to_string(),
                error,
            }),
        }
    }

    /// The client, server and server's own tool name `qualified` routes to, and the hold that
    /// keeps that server from being stopped while idle until the call ends.
    fn route(&self, qualified: &str) -> Result<(Client, Arc<str>, String, InUse), HostError> {
        let merged = self.load();
        let Some(entry) = merged.get(qualified) else {
            // A tool whose definition changed since it was pinned: say so, and how to let it in.
            if let Some(held) = super::lock(&self.inner.quarantined).get(qualified) {
                return Err(HostError::Quarantined {
                    server: held.server.to_string(),
                    tool: held.tool.clone(),
                    members: held.members.join(", "),
                });
            }
            // A tool of a server that is down left the snapshot: say that server is down.
            let down = self.inner.servers.load().iter().find_map(|s| {
                let tool = qualified.strip_prefix(&*s.name)?;
                let state = s.state.borrow();
                let down = matches!(
                    *state,
                    ServerState::Failed { .. }
                        | ServerState::NeedsLogin { .. }
                        | ServerState::Starting
                );
                (tool.starts_with(&self.inner.separator) && down).then(|| HostError::NotRunning {
                    server: s.name.to_string(),
                    state: super::describe(&state),
                })
            });
            return Err(down.unwrap_or_else(|| {
                HostError::UnknownTool(qualified.to_owned(), self.inner.separator.clone())
            }));
        };
        let server = entry.server.clone();
        let name = entry.tool.name.clone();
        drop(merged);
        let s = self.inner.named(&server)?;
        let held = self.inner.hold(&s);
        Ok((super::running(&s)?, server, name, held))
    }

    /// Pre-loads tool definitions on one server (see `Client::add_known_tools`); they reach
    /// the merged snapshot when its filters let them through.
    pub fn add_known_tools(
        &self,
        server: &str,
        tools: impl IntoIterator<Item = Tool>,
    ) -> Result<(), HostError> {
        let client = self.client(server)?;
        client
            .add_known_tools(tools)
            .map_err(|error| HostError::Call {
                server: server.to_owned(),
                error,
            })?;
        Ok(())
    }
}

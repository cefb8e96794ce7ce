//! The merged snapshot: each server's part rebuilt from its client's cache, swapped in whole,
//! with the difference announced; names another tool already has left out as collisions.

use super::*;

impl Inner {
    /// Rebuilds `server`'s part of the snapshot from its client's cache; returns its count.
    pub(super) fn merge(&self, server: &Server, client: &Client) -> usize {
        let snapshot = client.tools();
        let mut tools: Vec<(Arc<str>, HostTool)> = snapshot
            .iter()
            .filter(|(name, _)| server.config.tools.allows(name))
            .map(|(name, cached)| {
                let qualified: Arc<str> = self.tool_name(&server.config, name).into();
                let tool = HostTool {
                    server: server.name.clone(),
                    tool: cached.tool().clone(),
                };
                (qualified, tool)
            })
            .collect();
        tools.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let tools = self.pinned(server, tools);
        let count = tools.len();
        self.replace_and_settle(server, tools);
        count
    }

    /// [`Inner::replace`], then each server a tool of which was left out for a name `server`
    /// gave up is merged again, so that the tool comes in.
    pub(super) fn replace_and_settle(&self, server: &Server, tools: Vec<(Arc<str>, HostTool)>) {
        for waiting in self.replace(server, tools) {
            let client = lock(&waiting.client).clone();
            if let Some(client) = client {
                self.merge(&waiting, &client);
            }
        }
    }

    /// Puts `tools` in place of `server`'s in a new snapshot, swaps it in and announces the
    /// difference; returns the other servers whose left-out tools wanted a name it gave up.
    fn replace(&self, server: &Server, tools: Vec<(Arc<str>, HostTool)>) -> Vec<Arc<Server>> {
        let _merging = lock(&self.merging);
        // A server the configuration no longer has only ever leaves (a merge it began before
        // it was retired must not bring its tools back).
        if *server.retired.borrow() && !tools.is_empty() {
            return Vec::new();
        }
        let (tools, collisions) = self.without_collisions(server, tools);
        let collisions_changed = *lock(&server.collisions) != collisions;
        *lock(&server.collisions) = collisions;
        let mut own = lock(&server.tools);
        let before: HashSet<&Arc<str>> = own.iter().map(|(k, _)| k).collect();
        let after: HashSet<&Arc<str>> = tools.iter().map(|(k, _)| k).collect();
        let added: Vec<Arc<str>> = after.difference(&before).map(|k| (*k).clone()).collect();
        let removed: Vec<Arc<str>> = before.difference(&after).map(|k| (*k).clone()).collect();
        let old: HashMap<&Arc<str>, &Arc<Tool>> = own.iter().map(|(k, t)| (k, &t.tool)).collect();
        let changed: Vec<Arc<str>> = tools
            .iter()
            .filter(|(k, t)| {
                old.get(k)
                    .is_some_and(|o| !Arc::ptr_eq(o, &t.tool) && **o != t.tool)
            })
            .map(|(k, _)| k.clone())
            .collect();
        drop(old);
        if added.is_empty() && removed.is_empty() && changed.is_empty() && !collisions_changed {
            *own = tools;
            return Vec::new();
        }
        let waiting: Vec<Arc<Server>> = self
            .servers
            .load()
            .iter()
            .filter(|s| s.name != server.name)
            .filter(|s| {
                lock(&s.collisions)
                    .iter()
                    .any(|c| removed.iter().any(|r| **r == *c.name))
            })
            .cloned()
            .collect();
        let current = self.merged.load();
        let mut next = current.tools.clone();
        for key in &removed {
            next.remove(key);
        }
        for (key, tool) in &tools {
            next.insert(key.clone(), tool.clone());
        }
        let generation = current.generation + 1;
        let collisions = self
            .servers
            .load()
            .iter()
            .flat_map(|s| lock(&s.collisions).clone())
            .collect();
        self.merged.store(Arc::new(HostTools {
            generation,
            tools: next,
            collisions,
        }));
        *own = tools;
        let _ = self.changes.send(HostChange {
            generation,
            server: server.name.clone(),
            added,
            removed,
            changed,
        });
        waiting
    }
}

impl Inner {
    /// With pinning on, `server`'s tools less those whose definitions changed since they were
    /// pinned, which are quarantined (said once each, at WARN); a tool seen for the first time
    /// is pinned. A pin file that cannot be used holds all of them back: a check that cannot
    /// be made lets nothing through.
    fn pinned(
        &self,
        server: &Server,
        tools: Vec<(Arc<str>, HostTool)>,
    ) -> Vec<(Arc<str>, HostTool)> {
        let Some(pins) = &self.pins else {
            return tools;
        };
        let definitions: Vec<(&str, serde_json::Value)> = tools
            .iter()
            .map(|(_, t)| {
                let definition = serde_json::to_value(&*t.tool).unwrap_or_default();
                (t.tool.name.as_str(), definition)
            })
            .collect();
        let verdicts = match pins.check(&server.name, &definitions) {
            Ok(verdicts) => verdicts,
            Err(e) => {
                tracing::warn!(target: "toolwire_host::pins", server = %server.name, error = %e, "the pin file cannot be used: the server's tools are held back");
                return Vec::new();
            }
        };
        drop(definitions);
        let mut quarantined = lock(&self.quarantined);
        let before: HashSet<Arc<str>> = quarantined
            .iter()
            .filter(|(_, q)| q.server == server.name)
            .map(|(name, _)| name.clone())
            .collect();
        quarantined.retain(|_, q| q.server != server.name);
        let mut kept = Vec::with_capacity(tools.len());
        for ((name, tool), verdict) in tools.into_iter().zip(verdicts) {
            match verdict {
                Verdict::Pinned => kept.push((name, tool)),
                Verdict::Changed { members } => {
                    if !before.contains(&name) {
                        tracing::warn!(
                            target: "toolwire_host::pins",
                            server = %server.name,
                            tool = %tool.tool.name,
                            changed = %members.join(", "),
                            "a tool's definition changed since it was pinned: quarantined until the change is approved"
                        );
                    }
                    quarantined.insert(
                        name,
                        Quarantined {
                            server: server.name.clone(),
                            tool: tool.tool.name.clone(),
                            members,
                        },
                    );
                }
            }
        }
        kept
    }

    /// `server`'s tools (sorted by name) less those whose name another tool has: one of the
    /// same server's listed before it, or another server's in the snapshot now. Each one left
    /// out is a [`NameCollision`], which the snapshot carries (nothing is logged here).
    fn without_collisions(
        &self,
        server: &Server,
        tools: Vec<(Arc<str>, HostTool)>,
    ) -> (Vec<(Arc<str>, HostTool)>, Vec<NameCollision>) {
        let current = self.merged.load();
        let mut kept: Vec<(Arc<str>, HostTool)> = Vec::with_capacity(tools.len());
        let mut collisions = Vec::new();
        for (name, tool) in tools {
            let holder = match kept.last() {
                Some((last, other)) if *last == name => Some(other.clone()),
                _ => current
                    .tools
                    .get(&name)
                    .filter(|other| other.server != server.name)
                    .cloned(),
            };
            match holder {
                Some(other) => {
                    let collision = NameCollision {
                        name: name.to_string(),
                        kept_server: other.server.to_string(),
                        kept_tool: other.tool.name.clone(),
                        server: server.name.to_string(),
                        tool: tool.tool.name.clone(),
                    };
                    collisions.push(collision);
                }
                None => kept.push((name, tool)),
            }
        }
        (kept, collisions)
    }
}

impl Host {
    /// The tools held out because their definitions changed since they were pinned
    /// ([`HostBuilder::pin_tools`]), by the name the host would give them.
    pub fn quarantined(&self) -> Vec<(Arc<str>, Quarantined)> {
        lock(&self.inner.quarantined)
            .iter()
            .map(|(name, held)| (name.clone(), held.clone()))
            .collect()
    }

    /// Reads the pin file again and merges every running server's tools anew: a change
    /// approved since ([`crate::PinFile::approve`]) lets its tool back in, announced as any
    /// other change of the snapshot is.
    pub fn repin(&self) {
        for server in self.inner.servers.load().iter() {
            let client = lock(&server.client).clone();
            if let Some(client) = client {
                self.inner.merge(server, &client);
            }
        }
    }
}

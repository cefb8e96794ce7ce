//! A new configuration applied to a running host: entries added start, entries removed stop
//! (their tools leave the snapshot, their child processes end), entries changed restart, and
//! entries as they were are not touched (their sessions and children go on).

use super::*;

/// What a reload did, by server name, in the new configuration's order (removed ones in the
/// old one's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reloaded {
    /// Entries that are new: started.
    pub added: Vec<String>,
    /// Entries that are gone: stopped, their tools out.
    pub removed: Vec<String>,
    /// Entries whose settings changed: stopped and started again.
    pub changed: Vec<String>,
    /// Entries as they were: left running.
    pub kept: Vec<String>,
}

impl Reloaded {
    /// Whether the reload changed anything.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

impl std::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = |names: &[String]| {
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        write!(
            f,
            "added {}; removed {}; changed {}; {} kept",
            part(&self.added),
            part(&self.removed),
            part(&self.changed),
            self.kept.len()
        )
    }
}

impl Host {
    /// Applies `config` (what [`HostBuilder::check`] refuses is refused here too, and nothing
    /// changes): an entry the same as before keeps its server as it is; a new one starts; one
    /// that is gone stops and its tools leave the snapshot; a changed one (any setting) stops
    /// and starts again. Tool changes are announced as any others. Must be called inside a
    /// tokio runtime.
    pub fn reload(&self, config: &ServersConfig) -> Result<Reloaded, HostError> {
        check(config, &self.inner.separator)?;
        let current = self.inner.servers.load_full();
        let mut next = Vec::with_capacity(config.servers.len());
        let mut starting = Vec::new();
        let mut done = Reloaded::default();
        for entry in &config.servers {
            match current.iter().find(|s| *s.name == *entry.name) {
                Some(same) if same.config == *entry => {
                    done.kept.push(entry.name.clone());
                    next.push(same.clone());
                }
                found => {
                    let list = if found.is_some() {
                        &mut done.changed
                    } else {
                        &mut done.added
                    };
                    list.push(entry.name.clone());
                    let server = Server::new(entry);
                    starting.push(server.clone());
                    next.push(server);
                }
            }
        }
        let leaving: Vec<Arc<Server>> = current
            .iter()
            .filter(|s| !next.iter().any(|n| Arc::ptr_eq(n, s)))
            .cloned()
            .collect();
        for server in &leaving {
            if !done.changed.iter().any(|c| **c == *server.name) {
                done.removed.push(server.name.to_string());
            }
        }
        // The new list first (merges and collisions are reckoned against it), then the old
        // servers leave, then the new ones start.
        self.inner.servers.store(Arc::new(next));
        for server in &leaving {
            self.inner.retire(server);
        }
        for server in &starting {
            self.inner.launch(server);
        }
        Ok(done)
    }
}

impl Inner {
    /// Stops `server` for good: its task ends and closes its client, its tools leave.
    pub(super) fn retire(&self, server: &Server) {
        server.retired.send_replace(true);
        self.replace_and_settle(server, Vec::new());
    }
}

//! Immutable snapshots of the tools a client knows, and diffs between them.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::sync::{Arc, OnceLock};

use toolwire_headers::HeaderPlan;
use toolwire_types::Tool;

/// One tool in a snapshot: its definition, its precomputed header plan, where it came from,
/// and a hash of its definition.
#[derive(Debug, Clone)]
pub struct CachedTool {
    pub(crate) tool: Arc<Tool>,
    pub(crate) plan: HeaderPlan,
    pub(crate) known: bool,
    pub(crate) discovered: bool,
    /// Computed on first use: diffs compare definitions directly, so ingestion never pays for
    /// it.
    pub(crate) hash: OnceLock<u64>,
}

impl CachedTool {
    pub(crate) fn new(tool: Arc<Tool>, plan: HeaderPlan, known: bool, discovered: bool) -> Self {
        Self {
            tool,
            plan,
            known,
            discovered,
            hash: OnceLock::new(),
        }
    }

    /// Whether two entries hold the same definition (the same allocation, or equal).
    pub(crate) fn same_definition(&self, other: &CachedTool) -> bool {
        Arc::ptr_eq(&self.tool, &other.tool) || *self.tool == *other.tool
    }

    /// The definition (the latest one written: the server's or the caller's).
    pub fn tool(&self) -> &Arc<Tool> {
        &self.tool
    }

    /// The headers its calls carry.
    pub fn plan(&self) -> &HeaderPlan {
        &self.plan
    }

    /// Pre-loaded by the caller (`add_known_tools`); survives `tools/list` refreshes until it
    /// is removed.
    pub fn is_known(&self) -> bool {
        self.known
    }

    /// Listed by the server in the last complete `tools/list`.
    pub fn is_discovered(&self) -> bool {
        self.discovered
    }

    /// A hash of the whole definition (its JSON as written, schemas in the server's member
    /// order), stable for the life of the process: the same definition hashes the same. Diffs
    /// compare the definitions themselves.
    pub fn definition_hash(&self) -> u64 {
        *self.hash.get_or_init(|| definition_hash(&self.tool))
    }
}

/// Feeds serialised JSON into a hasher without building the text.
struct HashWriter<'a>(&'a mut DefaultHasher);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A hash of a tool's definition: its JSON (object keys sorted, except inside the schemas,
/// which are written as the server ordered them), hashed as it is written.
pub(crate) fn definition_hash(tool: &Tool) -> u64 {
    let mut hasher = DefaultHasher::new();
    // Writing into a hasher cannot fail, and a `Tool` always serialises; on the impossible
    // error the hash covers what was written, which still differs between definitions.
    let _ = serde_json::to_writer(HashWriter(&mut hasher), tool);
    hasher.finish()
}

/// The tools a client knows at one moment. Never changes once built; the cache swaps in a new
/// one for every change.
#[derive(Debug, Clone, Default)]
pub struct ToolSnapshot {
    pub(crate) generation: u64,
    pub(crate) stale: bool,
    pub(crate) tools: Arc<ToolMap>,
}

/// The map of a snapshot. `foldhash` with a random seed per map: fast for short keys, and the
/// keys come from the peer, so a fixed-seed hash would invite collisions.
pub(crate) type ToolMap = HashMap<Box<str>, CachedTool, foldhash::fast::RandomState>;

impl ToolSnapshot {
    /// The generation: 0 for the empty start, one more for every swap.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the server announced a change (`notifications/tools/list_changed`) that no
    /// complete `tools/list` has caught up with yet. A stale snapshot is still used: headers
    /// keep flowing from the last good definitions until the refresh lands.
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// A tool by name.
    pub fn get(&self, name: &str) -> Option<&CachedTool> {
        self.tools.get(name)
    }

    /// The header plan of a tool by name.
    pub fn plan(&self, name: &str) -> Option<&HeaderPlan> {
        self.tools.get(name).map(|t| &t.plan)
    }

    /// Whether the snapshot holds a tool of that name.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Every tool, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &CachedTool)> {
        self.tools.iter().map(|(k, v)| (&**k, v))
    }

    /// Tool names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.tools.keys().map(|k| &**k).collect();
        names.sort_unstable();
        names
    }

    /// What changed from `older` to this snapshot.
    pub fn diff(&self, older: &ToolSnapshot) -> SnapshotDiff {
        let mut diff = SnapshotDiff {
            from: older.generation,
            to: self.generation,
            ..SnapshotDiff::default()
        };
        if Arc::ptr_eq(&self.tools, &older.tools) {
            // Same map (a stale mark): nothing changed.
            return diff;
        }
        for (name, tool) in self.tools.iter() {
            match older.tools.get(name) {
                None => diff.added.push(name.to_string()),
                Some(old) if !old.same_definition(tool) => diff.changed.push(name.to_string()),
                Some(_) => {}
            }
        }
        diff.removed = older
            .tools
            .keys()
            .filter(|n| !self.tools.contains_key(*n))
            .map(|n| n.to_string())
            .collect();
        diff.added.sort_unstable();
        diff.changed.sort_unstable();
        diff.removed.sort_unstable();
        diff
    }
}

/// What changed between two generations. Names are sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotDiff {
    /// The older generation.
    pub from: u64,
    /// The newer generation.
    pub to: u64,
    /// Tools in the newer snapshot only.
    pub added: Vec<String>,
    /// Tools in the older snapshot only.
    pub removed: Vec<String>,
    /// Tools in both whose definitions differ.
    pub changed: Vec<String>,
}

impl SnapshotDiff {
    /// Whether no tool was added, removed or changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

//! The cache: one [`ToolSnapshot`] behind `ArcSwap`, replaced whole by serialised writers.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::{ArcSwap, Guard};
use toolwire_headers::{HeaderPlan, InvalidToolHeaders};
use toolwire_types::{MalformedTool, Tool};

use crate::snapshot::{CachedTool, SnapshotDiff, ToolMap, ToolSnapshot};

/// How the cache treats tool definitions.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CacheConfig {
    /// Exclude server tools whose `x-mcp-header` annotations break the rules (default `true`).
    ///
    /// Over Streamable HTTP the spec requires it. Over stdio the spec allows ignoring the
    /// annotations; with `false` such a tool stays in the cache with no `Mcp-Param-*` headers
    /// and its problems are reported in [`ListOutcome::unmirrored`]. Known tools are always
    /// validated.
    pub enforce_header_rules: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            enforce_header_rules: true,
        }
    }
}

impl CacheConfig {
    /// Sets [`CacheConfig::enforce_header_rules`].
    pub fn with_enforce_header_rules(mut self, enforce: bool) -> Self {
        self.enforce_header_rules = enforce;
        self
    }
}

/// Why a tool definition was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RejectReason {
    /// The tool has an empty name.
    EmptyName,
    /// A later definition in the same listing has the same name; the later one was kept.
    DuplicateName,
    /// Its `x-mcp-header` annotations break the rules.
    Headers(InvalidToolHeaders),
    /// The definition does not decode as a tool (the decoder's words; they name the member).
    Malformed(String),
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyName => f.write_str("the tool has an empty name"),
            Self::DuplicateName => {
                f.write_str("a later tool in the same listing has the same name")
            }
            Self::Headers(e) => fmt::Display::fmt(e, f),
            Self::Malformed(e) => write!(f, "the definition does not decode: {e}"),
        }
    }
}

/// A tool definition that was not taken, with its position in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedTool {
    /// Position in the batch, or in the listing as the server sent it, all pages in order
    /// (0-based).
    pub index: usize,
    /// The tool's name (possibly empty; empty too for a malformed definition without one).
    pub name: String,
    /// Why.
    pub reason: RejectReason,
}

impl fmt::Display for RejectedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} `{}`: {}", self.index, self.name, self.reason)
    }
}

fn list(items: &[RejectedTool]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The caller asked for something the cache does not do; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KnownToolsError {
    /// At least one tool of the batch is invalid, so none was added.
    #[error("{} of {total} known tools are invalid, none was added: {}", invalid.len(), list(invalid))]
    Invalid {
        /// The batch size.
        total: usize,
        /// Every invalid tool.
        invalid: Vec<RejectedTool>,
    },
    /// At least one name is empty, so no tool was removed.
    #[error("tool names at positions {positions:?} are empty, none was removed")]
    EmptyNames {
        /// Where the empty names are.
        positions: Vec<usize>,
    },
}

/// The result of a change: the new generation and what changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The generation now current.
    pub generation: u64,
    /// What changed from the previous generation.
    pub diff: SnapshotDiff,
}

/// The result of committing a complete `tools/list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListOutcome {
    /// The swap.
    pub commit: Commit,
    /// The server's tools this listing put in the cache, in the server's order (the same
    /// definitions the snapshot holds, shared).
    pub tools: Vec<Arc<Tool>>,
    /// Server tools excluded from the cache (log each: the spec says clients SHOULD warn with
    /// the tool name and the reason).
    pub rejected: Vec<RejectedTool>,
    /// Server tools kept without `Mcp-Param-*` headers because header rules are not enforced
    /// ([`CacheConfig::enforce_header_rules`]).
    pub unmirrored: Vec<RejectedTool>,
}

/// A `tools/list` walk in progress: pages are collected here and reach the cache only when the
/// walk is complete ([`ToolCache::commit_listing`]). Dropping it (a page failed, a cursor
/// repeated) leaves the cache as it was.
#[derive(Debug)]
pub struct Listing {
    /// Every definition in the order the server listed it. One that did not decode keeps its
    /// place: it still claims its name (a later broken definition is still the server's latest
    /// word on that tool), and the positions in [`RejectedTool`] stay the server's.
    entries: Vec<Result<Tool, MalformedTool>>,
    stale_epoch: u64,
}

impl Listing {
    /// Adds one page of tools.
    pub fn add_page(&mut self, tools: impl IntoIterator<Item = Tool>) {
        self.entries.extend(tools.into_iter().map(Ok));
    }

    /// Adds one page that was decoded tool by tool
    /// ([`toolwire_types::ListToolsResult::decode_lenient`]): the `tools` that decoded, in
    /// order, and the `malformed` ones, each put back at its [`MalformedTool::index`] in the
    /// page. The malformed ones are rejected at commit ([`RejectReason::Malformed`]).
    pub fn add_lenient_page(&mut self, tools: Vec<Tool>, malformed: Vec<MalformedTool>) {
        let total = tools.len() + malformed.len();
        let mut tools = tools.into_iter();
        let mut malformed = malformed.into_iter().peekable();
        self.entries.reserve(total);
        for position in 0..total {
            // Every turn takes exactly one of the two, so nothing is lost even when the
            // indices do not fit the page (the rest then goes last, in order).
            let entry = match malformed.next_if(|m| m.index == position) {
                Some(m) => Err(m),
                None => match tools.next() {
                    Some(tool) => Ok(tool),
                    None => match malformed.next() {
                        Some(m) => Err(m),
                        None => break,
                    },
                },
            };
            self.entries.push(entry);
        }
    }

    /// Definitions collected so far, malformed ones included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no definition was collected.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The name a listing entry claims, if it has one.
fn entry_name(entry: &Result<Tool, MalformedTool>) -> Option<&str> {
    match entry {
        Ok(tool) => Some(&tool.name),
        Err(malformed) => malformed.name.as_deref(),
    }
}

#[derive(Debug, Default)]
struct WriterState {
    /// Counts `mark_stale` calls, so a listing begun before the last one does not clear the
    /// stale mark.
    stale_epoch: u64,
}

/// A borrowed view of the current snapshot: loading one takes no lock and does not contend
/// with other readers. Hold it briefly; use [`ToolCache::snapshot`] to keep a snapshot.
pub struct SnapshotRef(Guard<Arc<ToolSnapshot>>);

impl std::ops::Deref for SnapshotRef {
    type Target = ToolSnapshot;

    fn deref(&self) -> &ToolSnapshot {
        &self.0
    }
}

impl fmt::Debug for SnapshotRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.0, f)
    }
}

/// The tools a client knows.
///
/// Readers ([`ToolCache::load`], [`ToolCache::snapshot`]) never block and never see a
/// half-built or emptied cache. Writers are serialised by a mutex, each builds the next
/// snapshot from the current one and swaps it in, so no update is lost.
#[derive(Debug)]
pub struct ToolCache {
    current: ArcSwap<ToolSnapshot>,
    writer: Mutex<WriterState>,
    config: CacheConfig,
}

impl Default for ToolCache {
    fn default() -> Self {
        Self::new(CacheConfig::default())
    }
}

/// One entry being written into the next snapshot.
fn entry(
    tool: Arc<Tool>,
    plan: HeaderPlan,
    known: bool,
    discovered: bool,
) -> (Box<str>, CachedTool) {
    (
        tool.name.as_str().into(),
        CachedTool::new(tool, plan, known, discovered),
    )
}

impl ToolCache {
    /// An empty cache (generation 0).
    pub fn new(config: CacheConfig) -> Self {
        Self {
            current: ArcSwap::from_pointee(ToolSnapshot::default()),
            writer: Mutex::new(WriterState::default()),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// The current snapshot, borrowed (the fast path: no reference count, no lock).
    pub fn load(&self) -> SnapshotRef {
        SnapshotRef(self.current.load())
    }

    /// The current snapshot, owned.
    pub fn snapshot(&self) -> Arc<ToolSnapshot> {
        self.current.load_full()
    }

    fn lock(&self) -> MutexGuard<'_, WriterState> {
        // The state is a counter and every snapshot is immutable, so a writer that panicked
        // cannot have left anything half-done: recover the guard.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Builds the next snapshot from the current one and swaps it in. Call with the writer
    /// lock held.
    fn swap(&self, tools: impl Into<Arc<ToolMap>>, stale: bool) -> Commit {
        let old = self.current.load_full();
        let next = Arc::new(ToolSnapshot {
            generation: old.generation + 1,
            stale,
            tools: tools.into(),
        });
        let diff = next.diff(&old);
        let generation = next.generation;
        self.current.store(next);
        Commit { generation, diff }
    }

    /// Pre-loads tool definitions, so calls carry `Mcp-Param-*` headers without a
    /// `tools/list`. All or nothing: every tool is validated first (non-empty name,
    /// the `x-mcp-header` rules) and one bad tool adds none, with an error naming each bad
    /// one. A name already cached is overwritten (last write wins) and becomes known; known
    /// status lasts until [`ToolCache::remove_known_tools`] or
    /// [`ToolCache::clear_known_tools`].
    pub fn add_known_tools(
        &self,
        tools: impl IntoIterator<Item = Tool>,
    ) -> Result<Commit, KnownToolsError> {
        let tools: Vec<Tool> = tools.into_iter().collect();
        let mut planned = Vec::with_capacity(tools.len());
        let mut invalid = Vec::new();
        let total = tools.len();
        for (index, tool) in tools.into_iter().enumerate() {
            if tool.name.is_empty() {
                invalid.push(RejectedTool {
                    index,
                    name: String::new(),
                    reason: RejectReason::EmptyName,
                });
                continue;
            }
            match HeaderPlan::for_tool(&tool) {
                Ok(plan) => planned.push((tool, plan)),
                Err(e) => invalid.push(RejectedTool {
                    index,
                    name: tool.name.clone(),
                    reason: RejectReason::Headers(e),
                }),
            }
        }
        if !invalid.is_empty() {
            return Err(KnownToolsError::Invalid { total, invalid });
        }
        let _writer = self.lock();
        let current = self.current.load();
        let mut next = (*current.tools).clone();
        for (tool, plan) in planned {
            let discovered = next.get(tool.name.as_str()).is_some_and(|t| t.discovered);
            let (name, cached) = entry(Arc::new(tool), plan, true, discovered);
            next.insert(name, cached);
        }
        Ok(self.swap(next, current.stale))
    }

    /// Removes the known status of these tools (all names are checked first: an empty one
    /// removes none). A tool the server also listed stays, as a discovered tool; a tool only
    /// known leaves the cache, and its calls carry no `Mcp-Param-*` headers any more. Names
    /// that are not known are ignored.
    pub fn remove_known_tools<S: AsRef<str>>(
        &self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Commit, KnownToolsError> {
        let names: Vec<S> = names.into_iter().collect();
        let positions: Vec<usize> = names
            .iter()
            .enumerate()
            .filter(|(_, n)| n.as_ref().is_empty())
            .map(|(i, _)| i)
            .collect();
        if !positions.is_empty() {
            return Err(KnownToolsError::EmptyNames { positions });
        }
        let _writer = self.lock();
        let current = self.current.load();
        let mut next = (*current.tools).clone();
        for name in &names {
            let name = name.as_ref();
            match next.get_mut(name) {
                Some(t) if t.known && t.discovered => t.known = false,
                Some(t) if t.known => {
                    next.remove(name);
                }
                _ => {}
            }
        }
        Ok(self.swap(next, current.stale))
    }

    /// Removes the known status of every tool (see [`ToolCache::remove_known_tools`]).
    pub fn clear_known_tools(&self) -> Commit {
        let _writer = self.lock();
        let current = self.current.load();
        let next: ToolMap = current
            .tools
            .iter()
            .filter(|(_, t)| t.discovered)
            .map(|(name, t)| {
                (
                    name.clone(),
                    CachedTool {
                        known: false,
                        ..t.clone()
                    },
                )
            })
            .collect();
        self.swap(next, current.stale)
    }

    /// Marks the current snapshot stale (a `notifications/tools/list_changed` arrived). The
    /// tools stay: headers keep flowing from the last good definitions until a listing begun
    /// after this call is committed.
    pub fn mark_stale(&self) -> Commit {
        let mut writer = self.lock();
        writer.stale_epoch += 1;
        let tools = Arc::clone(&self.current.load().tools);
        self.swap(tools, true)
    }

    /// Starts collecting a `tools/list` walk.
    pub fn begin_listing(&self) -> Listing {
        Listing {
            entries: Vec::new(),
            stale_epoch: self.lock().stale_epoch,
        }
    }

    /// Replaces the discovered tools with a complete listing, in one swap. Known tools survive;
    /// a listed tool with a known tool's name replaces its definition and stays known; a tool
    /// whose annotations break the rules is rejected (or kept without headers, see
    /// [`CacheConfig`]). The snapshot stays stale if the server announced a change after the
    /// listing began.
    pub fn commit_listing(&self, listing: Listing) -> ListOutcome {
        let total = listing.entries.len();
        let mut rejected = Vec::new();
        let mut unmirrored = Vec::new();
        // Later definitions of a name win (a malformed one too); earlier ones are reported.
        // Walked from the end, the first sighting of a name is the one kept.
        let mut keep = vec![true; total];
        let mut seen: HashSet<&str, foldhash::fast::RandomState> =
            HashSet::with_capacity_and_hasher(total, Default::default());
        for (entry, keep) in listing.entries.iter().zip(keep.iter_mut()).rev() {
            if let Some(name) = entry_name(entry) {
                *keep = seen.insert(name);
            }
        }
        drop(seen);

        // Each definition goes behind its `Arc` here, once: from now on it moves as a pointer.
        let mut discovered: Vec<(Arc<Tool>, HeaderPlan)> = Vec::with_capacity(total);
        for (index, (entry, keep)) in listing.entries.into_iter().zip(keep).enumerate() {
            let tool = match entry {
                Ok(tool) => tool,
                Err(malformed) => {
                    rejected.push(RejectedTool {
                        index,
                        name: malformed.name.unwrap_or_default(),
                        reason: RejectReason::Malformed(malformed.error),
                    });
                    continue;
                }
            };
            let reject = |reason| RejectedTool {
                index,
                name: tool.name.clone(),
                reason,
            };
            if !keep {
                rejected.push(reject(RejectReason::DuplicateName));
            } else if tool.name.is_empty() {
                rejected.push(reject(RejectReason::EmptyName));
            } else {
                match HeaderPlan::for_tool(&tool) {
                    Ok(plan) => discovered.push((Arc::new(tool), plan)),
                    Err(e) if self.config.enforce_header_rules => {
                        rejected.push(reject(RejectReason::Headers(e)));
                    }
                    Err(e) => {
                        unmirrored.push(reject(RejectReason::Headers(e)));
                        let plan = HeaderPlan::without_params(&tool.name);
                        discovered.push((Arc::new(tool), plan));
                    }
                }
            }
        }

        let writer = self.lock();
        let current = self.current.load();
        let mut next = ToolMap::with_capacity_and_hasher(discovered.len(), Default::default());
        // Known tools survive, with their current definitions, until the listing says more.
        for (name, t) in current.tools.iter().filter(|(_, t)| t.known) {
            next.insert(
                name.clone(),
                CachedTool {
                    discovered: false,
                    ..t.clone()
                },
            );
        }
        let mut listed = Vec::with_capacity(discovered.len());
        for (tool, plan) in discovered {
            let known = next.get(tool.name.as_str()).is_some_and(|t| t.known);
            listed.push(Arc::clone(&tool));
            let (name, cached) = entry(tool, plan, known, true);
            next.insert(name, cached);
        }
        let stale = writer.stale_epoch != listing.stale_epoch;
        let commit = self.swap(next, stale);
        ListOutcome {
            commit,
            tools: listed,
            rejected,
            unmirrored,
        }
    }
}

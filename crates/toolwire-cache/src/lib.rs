//! The tools an MCP client knows, as immutable snapshots behind `arc-swap`.
//!
//! A [`ToolCache`] holds one [`ToolSnapshot`]: a map of tool name → [`CachedTool`] (the
//! definition, its precomputed [`toolwire_headers::HeaderPlan`], whether it is *known* and/or
//! *discovered*, a definition hash), a generation number and a stale mark. Readers load the
//! current snapshot without a lock; every change builds a new snapshot and swaps it in, so a
//! reader never sees a half-built or emptied cache, not even while a `tools/list` refresh is in
//! flight (the C# SDK clears its cache before refetching; this one never does).
//!
//! The semantics are those of the C# SDK's `AddKnownTools` (the rules are listed under "Known tools" in
//! `docs/protocol-decisions.md`):
//! - [`ToolCache::add_known_tools`] validates every tool first and adds all or none; last
//!   write wins; known status lasts until removed.
//! - A complete listing ([`ToolCache::begin_listing`], [`Listing::add_page`],
//!   [`ToolCache::commit_listing`]) replaces the discovered tools in one swap; known tools
//!   survive it; a listed tool with a known tool's name takes the server's definition and
//!   stays known; a tool with invalid `x-mcp-header` annotations is rejected and reported. A
//!   walk that fails half-way is dropped and changes nothing.
//! - [`ToolCache::remove_known_tools`] and [`ToolCache::clear_known_tools`] are the only ways
//!   known status ends.
//! - [`ToolCache::mark_stale`] records a `list_changed` without emptying anything.
//! - [`ToolSnapshot::diff`] tells what was added, removed and changed between generations.
//!
//! No I/O, no clock, no async: the session decides when to list and what to log.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use toolwire_cache::ToolCache;
//! use toolwire_types::Tool;
//!
//! let cache = ToolCache::default();
//! let schema = json!({"type": "object", "properties": {
//!     "region": {"type": "string", "x-mcp-header": "Region"}}});
//! let tool = Tool::new("execute_sql", schema.as_object().cloned().unwrap_or_default());
//! cache.add_known_tools([tool])?;
//!
//! // A refresh whose listing does not contain it keeps it: it is known.
//! let listing = cache.begin_listing();
//! cache.commit_listing(listing);
//! let snapshot = cache.load();
//! let plan = snapshot.plan("execute_sql").expect("still cached");
//! assert_eq!(plan.params()[0].header_name(), "Mcp-Param-Region");
//! # Ok::<(), toolwire_cache::KnownToolsError>(())
//! ```
//!
//! # Dependencies
//! - `arc-swap`: lock-free loads of the current snapshot (readers do not contend on a
//!   reference count, unlike `RwLock` or `Arc` cloning); see the `cache` bench.
//! - `serde_json`: to hash a definition as its JSON.
//!
//! # Performance
//! `cargo bench -p toolwire-cache`; figures in `docs/benchmarks.md`.

mod cache;
mod snapshot;

pub use cache::{
    CacheConfig, Commit, KnownToolsError, ListOutcome, Listing, RejectReason, RejectedTool,
    SnapshotRef, ToolCache,
};
pub use snapshot::{CachedTool, SnapshotDiff, ToolSnapshot};

//! The known-tools semantics ("Known tools" in `docs/protocol-decisions.md`), rule by rule, plus listings, staleness,
//! diffs and concurrent readers.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use serde_json::json;
use toolwire_cache::*;
use toolwire_types::Tool;

/// A tool whose `region` argument is mirrored into `Mcp-Param-{header}`.
fn tool(name: &str, header: &str) -> Tool {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": header}, "query": {"type": "string"}}});
    Tool::new(name, schema.as_object().cloned().unwrap())
}

fn plain(name: &str) -> Tool {
    Tool::new(
        name,
        json!({"type": "object"}).as_object().cloned().unwrap(),
    )
}

fn invalid(name: &str) -> Tool {
    tool(name, "My Region")
}

/// The `Mcp-Param-*` header names a call of `name` would carry now, or `None` if the cache
/// does not know the tool.
fn headers(cache: &ToolCache, name: &str) -> Option<Vec<String>> {
    let snapshot = cache.load();
    let plan = snapshot.plan(name)?;
    let args = json!({"region": "us-west-2", "query": "SELECT 1"});
    Some(
        plan.param_headers(args.as_object())
            .unwrap()
            .into_iter()
            .map(|h| format!("{}: {}", h.name, h.value))
            .collect(),
    )
}

fn list(cache: &ToolCache, tools: Vec<Tool>) -> ListOutcome {
    let mut listing = cache.begin_listing();
    listing.add_page(tools);
    cache.commit_listing(listing)
}

#[test]
fn known_tools_give_headers_without_a_listing() {
    let cache = ToolCache::default();
    assert_eq!(headers(&cache, "execute_sql"), None);
    let commit = cache
        .add_known_tools([tool("execute_sql", "Region")])
        .unwrap();
    assert_eq!(commit.generation, 1);
    assert_eq!(commit.diff.added, ["execute_sql"]);
    assert_eq!(
        headers(&cache, "execute_sql").unwrap(),
        ["Mcp-Param-Region: us-west-2"]
    );
    let snapshot = cache.load();
    let t = snapshot.get("execute_sql").unwrap();
    assert!(t.is_known() && !t.is_discovered());
}

/// Known tools: "register → server returns [] → headers still sent".
#[test]
fn staleness_known_survives_an_empty_listing() {
    let cache = ToolCache::default();
    cache
        .add_known_tools([tool("execute_sql", "Region")])
        .unwrap();
    let outcome = list(&cache, vec![]);
    assert!(outcome.commit.diff.is_empty());
    assert_eq!(
        headers(&cache, "execute_sql").unwrap(),
        ["Mcp-Param-Region: us-west-2"]
    );
}

/// Known tools: "[valid, invalid, valid] → nothing cached".
#[test]
fn partial_failure_is_atomic() {
    let cache = ToolCache::default();
    let err = cache
        .add_known_tools([tool("a", "A"), invalid("b"), tool("c", "C")])
        .unwrap_err();
    let KnownToolsError::Invalid { total, invalid } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*total, 3);
    assert_eq!(invalid.len(), 1);
    assert_eq!((invalid[0].index, invalid[0].name.as_str()), (1, "b"));
    assert!(matches!(invalid[0].reason, RejectReason::Headers(_)));
    let text = err.to_string();
    assert!(
        text.contains("1 of 3 known tools are invalid, none was added") && text.contains("`b`"),
        "{text}"
    );
    assert!(cache.load().is_empty());
    assert_eq!(cache.load().generation(), 0);
}

/// Known tools: "null element at index 1 → nothing cached" (in Rust: an unnamed tool).
#[test]
fn an_unnamed_element_is_atomic_too() {
    let cache = ToolCache::default();
    let err = cache
        .add_known_tools([tool("a", "A"), plain(""), invalid("c")])
        .unwrap_err();
    let KnownToolsError::Invalid { invalid, .. } = &err else {
        panic!()
    };
    let found: Vec<_> = invalid
        .iter()
        .map(|r| (r.index, r.reason.clone()))
        .collect();
    assert_eq!(found.len(), 2, "every bad tool is named: {found:?}");
    assert_eq!(found[0], (1, RejectReason::EmptyName));
    assert!(cache.load().is_empty());
}

/// Known tools: "re-register with schema B → headers reflect B".
#[test]
fn last_write_wins() {
    let cache = ToolCache::default();
    cache
        .add_known_tools([tool("execute_sql", "Region")])
        .unwrap();
    let commit = cache
        .add_known_tools([tool("execute_sql", "Zone")])
        .unwrap();
    assert_eq!(commit.diff.changed, ["execute_sql"]);
    assert_eq!(
        headers(&cache, "execute_sql").unwrap(),
        ["Mcp-Param-Zone: us-west-2"]
    );
    // Within one batch, too.
    cache
        .add_known_tools([tool("x", "First"), tool("x", "Second")])
        .unwrap();
    assert_eq!(
        headers(&cache, "x").unwrap(),
        ["Mcp-Param-Second: us-west-2"]
    );
}

#[test]
fn known_tools_survive_listings_beside_discovered_ones() {
    let cache = ToolCache::default();
    cache.add_known_tools([tool("known", "K")]).unwrap();
    let outcome = list(&cache, vec![tool("server", "S")]);
    assert_eq!(outcome.commit.diff.added, ["server"]);
    let snapshot = cache.load();
    assert_eq!(snapshot.names(), ["known", "server"]);
    let k = snapshot.get("known").unwrap();
    assert!(k.is_known() && !k.is_discovered());
    let s = snapshot.get("server").unwrap();
    assert!(!s.is_known() && s.is_discovered());
    // The next listing without `server` drops it; `known` stays.
    drop(snapshot);
    let outcome = list(&cache, vec![]);
    assert_eq!(outcome.commit.diff.removed, ["server"]);
    assert_eq!(cache.load().names(), ["known"]);
}

/// Known tools: "If the server returns a tool with the same name, the server's definition
/// overwrites the cached one, but the tool keeps its known status."
#[test]
fn server_definition_overwrites_and_the_tool_stays_known() {
    let cache = ToolCache::default();
    cache
        .add_known_tools([tool("execute_sql", "Region")])
        .unwrap();
    let outcome = list(&cache, vec![tool("execute_sql", "Zone")]);
    assert_eq!(outcome.commit.diff.changed, ["execute_sql"]);
    assert_eq!(
        headers(&cache, "execute_sql").unwrap(),
        ["Mcp-Param-Zone: us-west-2"]
    );
    let snapshot = cache.load();
    let t = snapshot.get("execute_sql").unwrap();
    assert!(t.is_known() && t.is_discovered());
    drop(snapshot);
    // Still known when the server stops listing it, with the latest definition.
    list(&cache, vec![]);
    assert_eq!(
        headers(&cache, "execute_sql").unwrap(),
        ["Mcp-Param-Zone: us-west-2"]
    );
}

/// Known tools: "RemoveKnownTools → no headers sent after removal".
#[test]
fn remove_then_headers_stop() {
    let cache = ToolCache::default();
    cache
        .add_known_tools([tool("execute_sql", "Region"), tool("other", "O")])
        .unwrap();
    let commit = cache
        .remove_known_tools(["execute_sql", "never-known"])
        .unwrap();
    assert_eq!(commit.diff.removed, ["execute_sql"]);
    assert_eq!(headers(&cache, "execute_sql"), None);
    assert!(headers(&cache, "other").is_some());
}

#[test]
fn remove_validates_every_name_first() {
    let cache = ToolCache::default();
    cache.add_known_tools([tool("a", "A")]).unwrap();
    let err = cache.remove_known_tools(["a", "", "b", ""]).unwrap_err();
    assert_eq!(
        err,
        KnownToolsError::EmptyNames {
            positions: vec![1, 3]
        }
    );
    assert!(cache.load().contains("a"), "nothing was removed");
}

#[test]
fn removing_a_listed_known_tool_keeps_it_as_discovered() {
    let cache = ToolCache::default();
    cache.add_known_tools([tool("both", "B")]).unwrap();
    list(&cache, vec![tool("both", "B")]);
    cache.remove_known_tools(["both"]).unwrap();
    let snapshot = cache.load();
    let t = snapshot.get("both").unwrap();
    assert!(!t.is_known() && t.is_discovered());
    drop(snapshot);
    list(&cache, vec![]);
    assert!(
        !cache.load().contains("both"),
        "no longer known, so the next listing drops it"
    );
}

#[test]
fn clear_removes_known_status_everywhere() {
    let cache = ToolCache::default();
    cache
        .add_known_tools([tool("k1", "A"), tool("k2", "B"), tool("s", "C")])
        .unwrap();
    list(&cache, vec![tool("s", "C"), tool("t", "D")]);
    let commit = cache.clear_known_tools();
    assert_eq!(commit.diff.removed, ["k1", "k2"]);
    let snapshot = cache.load();
    assert_eq!(snapshot.names(), ["s", "t"]);
    assert!(snapshot.iter().all(|(_, t)| !t.is_known()));
}

#[test]
fn invalid_server_tools_are_excluded_and_reported() {
    let cache = ToolCache::default();
    let outcome = list(
        &cache,
        vec![
            tool("valid_tool", "Region"),
            invalid("invalid_space_in_name"),
            plain(""),
        ],
    );
    assert_eq!(cache.load().names(), ["valid_tool"]);
    let reasons: Vec<_> = outcome
        .rejected
        .iter()
        .map(|r| (r.index, r.name.as_str()))
        .collect();
    assert_eq!(reasons, [(1, "invalid_space_in_name"), (2, "")]);
    assert!(
        outcome.rejected[0]
            .to_string()
            .contains("not an HTTP token")
    );
    assert!(outcome.unmirrored.is_empty());
}

#[test]
fn without_enforcement_invalid_tools_stay_without_param_headers() {
    let cache = ToolCache::new(CacheConfig::default().with_enforce_header_rules(false));
    let outcome = list(&cache, vec![invalid("t")]);
    assert!(outcome.rejected.is_empty());
    assert_eq!(outcome.unmirrored.len(), 1);
    assert_eq!(headers(&cache, "t").unwrap(), Vec::<String>::new());
    // Known tools are validated regardless.
    assert!(cache.add_known_tools([invalid("k")]).is_err());
}

#[test]
fn a_listing_that_is_not_committed_changes_nothing() {
    let cache = ToolCache::default();
    cache.add_known_tools([tool("k", "K")]).unwrap();
    let before = cache.snapshot();
    {
        let mut listing = cache.begin_listing();
        listing.add_page(vec![tool("page1", "P")]);
        assert_eq!(listing.len(), 1);
        // The second page failed: the walk is dropped.
    }
    let after = cache.snapshot();
    assert_eq!(after.generation(), before.generation());
    assert_eq!(after.names(), ["k"]);
}

#[test]
fn pages_reach_the_cache_in_one_swap() {
    let cache = ToolCache::default();
    let mut listing = cache.begin_listing();
    listing.add_page(vec![tool("a", "A"), plain("b")]);
    listing.add_page(vec![plain("c")]);
    let outcome = cache.commit_listing(listing);
    assert_eq!(outcome.commit.generation, 1);
    assert_eq!(outcome.commit.diff.added, ["a", "b", "c"]);
}

#[test]
fn duplicate_names_in_a_listing_keep_the_last() {
    let cache = ToolCache::default();
    let outcome = list(
        &cache,
        vec![tool("x", "First"), plain("y"), tool("x", "Second")],
    );
    assert_eq!(
        headers(&cache, "x").unwrap(),
        ["Mcp-Param-Second: us-west-2"]
    );
    assert_eq!(outcome.rejected.len(), 1);
    assert_eq!(
        (outcome.rejected[0].index, &outcome.rejected[0].reason),
        (0, &RejectReason::DuplicateName)
    );
}

fn malformed(index: usize, name: Option<&str>) -> toolwire_types::MalformedTool {
    toolwire_types::MalformedTool {
        index,
        name: name.map(str::to_owned),
        error: "missing field `inputSchema`".into(),
    }
}

#[test]
fn malformed_definitions_keep_their_place_and_their_name() {
    let cache = ToolCache::default();
    let mut listing = cache.begin_listing();
    // Page 1: x, <broken x>, y: the broken definition is the server's latest word on `x`.
    listing.add_lenient_page(
        vec![tool("x", "First"), plain("y")],
        vec![malformed(1, Some("x"))],
    );
    // Page 2: <broken z>, z, <broken, nameless>: the good `z` comes later and wins.
    listing.add_lenient_page(
        vec![plain("z")],
        vec![malformed(0, Some("z")), malformed(2, None)],
    );
    assert_eq!(listing.len(), 6);
    let outcome = cache.commit_listing(listing);
    assert_eq!(cache.load().names(), ["y", "z"]);
    let rejected: Vec<_> = outcome
        .rejected
        .iter()
        .map(|r| (r.index, r.name.as_str(), r.reason.clone()))
        .collect();
    let broken = RejectReason::Malformed("missing field `inputSchema`".into());
    assert_eq!(
        rejected,
        [
            (0, "x", RejectReason::DuplicateName),
            (1, "x", broken.clone()),
            (3, "z", broken.clone()),
            (5, "", broken.clone()),
        ]
    );
    assert!(outcome.rejected[1].to_string().contains("does not decode"));

    // Indices that do not fit the page lose nothing: the rest goes last, in order.
    let mut listing = cache.begin_listing();
    listing.add_lenient_page(vec![plain("a")], vec![malformed(9, Some("b"))]);
    assert_eq!(listing.len(), 2);
    let outcome = cache.commit_listing(listing);
    assert_eq!(cache.load().names(), ["a"]);
    assert_eq!(
        (outcome.rejected[0].index, outcome.rejected[0].name.as_str()),
        (1, "b")
    );
}

#[test]
fn a_listing_returns_the_tools_it_kept_in_the_servers_order() {
    let cache = ToolCache::default();
    cache.add_known_tools([tool("pinned", "Pinned")]).unwrap();
    let mut listing = cache.begin_listing();
    // zeta, alpha, <broken>, mid, alpha again (the later one wins, at its own place).
    listing.add_lenient_page(
        vec![
            plain("zeta"),
            plain("alpha"),
            plain("mid"),
            tool("alpha", "A"),
        ],
        vec![malformed(2, Some("broken"))],
    );
    let outcome = cache.commit_listing(listing);
    let names: Vec<&str> = outcome.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["zeta", "mid", "alpha"],
        "server order, rejected ones left out"
    );
    // The second `alpha` is the one kept, and the snapshot holds the very same definition.
    let snapshot = cache.load();
    let alpha = snapshot.get("alpha").unwrap().tool();
    assert!(Arc::ptr_eq(alpha, &outcome.tools[2]));
    // A known tool the server did not list stays in the cache but is not in the listing.
    assert!(snapshot.contains("pinned"));
}

#[test]
fn stale_marks_keep_tools_until_a_later_listing() {
    let cache = ToolCache::default();
    list(&cache, vec![tool("a", "A")]);
    let early = cache.begin_listing();
    let commit = cache.mark_stale();
    assert!(commit.diff.is_empty());
    let snapshot = cache.snapshot();
    assert!(snapshot.is_stale());
    assert_eq!(snapshot.names(), ["a"], "marking stale empties nothing");
    assert!(headers(&cache, "a").is_some());
    // A listing begun before the announcement does not clear the mark.
    let mut early = early;
    early.add_page(vec![tool("a", "A")]);
    cache.commit_listing(early);
    assert!(cache.load().is_stale());
    // One begun after it does.
    list(&cache, vec![tool("a", "A"), plain("b")]);
    assert!(!cache.load().is_stale());
}

#[test]
fn diffs_between_any_generations() {
    let cache = ToolCache::default();
    list(
        &cache,
        vec![tool("keep", "K"), tool("change", "C"), plain("drop")],
    );
    let g1 = cache.snapshot();
    list(
        &cache,
        vec![tool("keep", "K"), tool("change", "C2"), plain("new")],
    );
    let g2 = cache.snapshot();
    let diff = g2.diff(&g1);
    assert_eq!((diff.from, diff.to), (1, 2));
    assert_eq!(diff.added, ["new"]);
    assert_eq!(diff.removed, ["drop"]);
    assert_eq!(diff.changed, ["change"]);
    assert!(g2.diff(&g2).is_empty());
    // Changing only the description is a change too.
    let mut described = tool("keep", "K");
    described.description = Some("now documented".into());
    let outcome = list(&cache, vec![described, tool("change", "C2"), plain("new")]);
    assert_eq!(outcome.commit.diff.changed, ["keep"]);
}

/// Readers on several threads never see a known tool missing, an empty cache, or a generation
/// going backwards, while writers add, list, remove and mark stale; and what the writers
/// publish reaches them (each reader starts before the first write and ends on the last one).
#[test]
fn readers_never_see_a_half_built_cache() {
    let cache = ToolCache::default();
    cache.add_known_tools([tool("pinned", "Pinned")]).unwrap();
    let done = AtomicBool::new(false);
    // Three readers and two writers: no write before every reader has read once.
    let start = std::sync::Barrier::new(5);
    let check = |snapshot: &toolwire_cache::ToolSnapshot, last: u64| {
        assert!(snapshot.generation() >= last, "generation went backwards");
        let pinned = snapshot.get("pinned").expect("a known tool went missing");
        assert!(pinned.is_known());
        assert_eq!(pinned.plan().params().len(), 1);
        assert!(!snapshot.is_empty());
        snapshot.generation()
    };
    thread::scope(|s| {
        let readers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let first = check(&cache.load(), 0);
                    start.wait();
                    let mut last = first;
                    while !done.load(Ordering::Acquire) {
                        last = check(&cache.load(), last);
                    }
                    // After every writer ended: the final snapshot, whatever was missed.
                    (first, check(&cache.load(), last))
                })
            })
            .collect();
        let writers = [
            s.spawn(|| {
                start.wait();
                for i in 0..300 {
                    let name = format!("k{}", i % 7);
                    cache.add_known_tools([tool(&name, "H")]).unwrap();
                    cache.remove_known_tools([name]).unwrap();
                }
            }),
            s.spawn(|| {
                start.wait();
                for i in 0..300 {
                    let tools = (0..(i % 5)).map(|j| tool(&format!("s{j}"), "S")).collect();
                    list(&cache, tools);
                    if i % 3 == 0 {
                        cache.mark_stale();
                    }
                }
            }),
        ];
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
        // 2 × 300 add/remove + 300 listings + 100 stale marks, one generation each: none lost.
        let last = 1 + 600 + 300 + 100;
        for r in readers {
            let (first, seen_last) = r.join().unwrap();
            assert_eq!(first, 1, "a reader read only after a write");
            assert_eq!(seen_last, last, "a reader never saw the final snapshot");
        }
    });
    assert_eq!(cache.load().generation(), 1 + 600 + 300 + 100);
}

#[test]
fn definition_hashes_follow_the_definition() {
    let cache = ToolCache::default();
    list(&cache, vec![tool("a", "A"), tool("b", "A"), tool("c", "C")]);
    let snapshot = cache.snapshot();
    let h = |n: &str| snapshot.get(n).unwrap().definition_hash();
    // Stable: the same definition held by another cache (another `CachedTool`, its hash
    // computed afresh) hashes the same.
    let other = ToolCache::default();
    other.add_known_tools([tool("a", "A")]).unwrap();
    assert_eq!(
        other.load().get("a").unwrap().definition_hash(),
        h("a"),
        "stable"
    );
    assert_ne!(h("a"), h("b"), "the name is part of the definition");
    list(&cache, vec![tool("a", "A")]);
    assert_eq!(
        cache.load().get("a").unwrap().definition_hash(),
        h("a"),
        "an equal definition hashes equally"
    );
}

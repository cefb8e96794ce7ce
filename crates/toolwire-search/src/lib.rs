//! Ranked search over MCP tool definitions, for an agent with more tools than a model can take
//! (providers cap a request at 128 tools): find the few that fit a task, then hand the model
//! only those.
//!
//! [`ToolIndex`] indexes each tool's name (twice: it is the strongest evidence), title,
//! description and parameter names, and ranks with Okapi BM25 (`k1` 1.2, `b` 0.75, the average
//! length fitted to the catalog). Names and parameter names are split into words first
//! (`create_issue`, `listPullRequests`, `files.read` → `create issue`, `list Pull Requests`,
//! `files read`), queries too, so a query may use either form. Text is lowercased, folded to
//! ASCII where it has a close form, stripped of English stop words and stemmed (Snowball), so
//! "deleting files" finds `delete_file`.
//!
//! An index is built whole from one catalog and never changes: a client or host keeps the one
//! for its current tool snapshot and builds another when the snapshot changes. Equal scores
//! come in key order, so the same query on the same catalog always gives the same list.
//!
//! ```
//! use toolwire_search::ToolIndex;
//! use toolwire_types::Tool;
//!
//! let tool = |name: &str, description: &str| {
//!     let mut t = Tool::new(name, Default::default());
//!     t.description = Some(description.to_owned());
//!     t
//! };
//! let tools = [
//!     tool("create_issue", "Open a new issue in a GitHub repository"),
//!     tool("read_file", "Read the complete contents of a file from disk"),
//!     tool("send_message", "Post a message to a Slack channel"),
//! ];
//! let index = ToolIndex::new(tools.iter().map(|t| (t.name.clone(), t)));
//! let hits = index.search("open a bug report on github", 2);
//! assert_eq!(hits[0].key, "create_issue");
//! # assert!(index.search("", 5).is_empty());
//! ```
//!
//! # Dependencies
//! `bm25` (MIT): the tokenizer (Unicode word segmentation, stop words, Snowball stemmers) and
//! the BM25 term weights of each document, rather than hand-written ones. Its retrieval is
//! not used: its `Scorer` rescans each matching document's terms and sorts every match, which
//! took 1.9 ms at the 99th percentile over 10,000 tools; here each term's postings are
//! summed once (term at a time) and only the best `k` are ordered. Its `SearchEngine` also
//! copies each hit's text and breaks ties in hash order.

use std::collections::HashMap;

use bm25::{Embedder, EmbedderBuilder, Language, LanguageMode};
use toolwire_types::Tool;

/// A ranked index over one catalog of tools, each under a key of the caller's (a tool name,
/// a host's `server__tool`). Built whole; never changes.
pub struct ToolIndex<K> {
    embedder: Embedder,
    /// For each term, the tools that have it, with its BM25 weight there.
    postings: HashMap<u32, Vec<(u32, f32)>>,
    keys: Vec<K>,
}

impl<K> std::fmt::Debug for ToolIndex<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolIndex")
            .field("tools", &self.keys.len())
            .field("avgdl", &self.embedder.avgdl())
            .finish_non_exhaustive()
    }
}

/// One tool a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<K> {
    /// The tool's key in the index.
    pub key: K,
    /// Its BM25 score: higher is more relevant; only comparable within one search.
    pub score: f32,
}

impl<K: Clone + Ord> ToolIndex<K> {
    /// Indexes `tools`. A catalog of more than `u32::MAX` tools keeps the first `u32::MAX`.
    pub fn new<'a>(tools: impl IntoIterator<Item = (K, &'a Tool)>) -> Self {
        let (keys, texts): (Vec<K>, Vec<String>) = tools
            .into_iter()
            .take(u32::MAX as usize)
            .map(|(key, tool)| (key, document(tool)))
            .unzip();
        let corpus: Vec<&str> = texts.iter().map(String::as_str).collect();
        let embedder: Embedder =
            EmbedderBuilder::with_fit_to_corpus(LanguageMode::Fixed(Language::English), &corpus)
                .build();
        let mut postings: HashMap<u32, Vec<(u32, f32)>> = HashMap::new();
        for (id, text) in (0u32..).zip(&texts) {
            let mut terms = embedder.embed(text).0;
            // A term repeated in a text carries the same weight each time: once is enough.
            terms.sort_by_key(|t| t.index);
            terms.dedup_by_key(|t| t.index);
            for term in terms {
                postings
                    .entry(term.index)
                    .or_default()
                    .push((id, term.value));
            }
        }
        Self {
            embedder,
            postings,
            keys,
        }
    }

    /// The `k` tools most relevant to `query`, best first; only tools that share a word with
    /// it (after stemming) are found at all, so fewer than `k` may come back.
    pub fn search(&self, query: &str, k: usize) -> Vec<Hit<K>> {
        if k == 0 {
            return Vec::new();
        }
        let mut terms: Vec<u32> = self
            .embedder
            .embed(&words(query))
            .indices()
            .copied()
            .collect();
        terms.sort_unstable();
        terms.dedup();
        // Term at a time: each query term's postings add `idf × weight` to their tools.
        let total = self.keys.len() as f32;
        let mut scores = vec![0f32; self.keys.len()];
        let mut found: Vec<u32> = Vec::new();
        for term in &terms {
            let Some(list) = self.postings.get(term) else {
                continue;
            };
            let df = list.len() as f32;
            let idf = (1.0 + (total - df + 0.5) / (df + 0.5)).ln();
            for &(id, weight) in list {
                let Some(score) = scores.get_mut(id as usize) else {
                    continue;
                };
                if *score == 0.0 {
                    found.push(id);
                }
                *score += idf * weight;
            }
        }
        // Best first, equal scores in key order; only the best `k` are ordered.
        let order = |a: &u32, b: &u32| {
            let (sa, sb) = (scores[*a as usize], scores[*b as usize]);
            sb.total_cmp(&sa)
                .then_with(|| self.keys[*a as usize].cmp(&self.keys[*b as usize]))
        };
        if found.len() > k {
            found.select_nth_unstable_by(k - 1, order);
            found.truncate(k);
        }
        found.sort_unstable_by(order);
        found
            .into_iter()
            .map(|id| Hit {
                key: self.keys[id as usize].clone(),
                score: scores[id as usize],
            })
            .collect()
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The index of a catalog that changes by generations (a client's tool snapshot, a host's
/// merged one): built on the first search of each generation and shared until the next, so an
/// index always follows the list changes and is never built twice for one catalog.
pub struct IndexCache<K>(std::sync::Mutex<Option<(u64, std::sync::Arc<ToolIndex<K>>)>>);

impl<K> Default for IndexCache<K> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(None))
    }
}

impl<K> std::fmt::Debug for IndexCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let generation = self
            .0
            .lock()
            .ok()
            .and_then(|held| held.as_ref().map(|(g, _)| *g));
        f.debug_struct("IndexCache")
            .field("generation", &generation)
            .finish()
    }
}

impl<K: Clone + Ord> IndexCache<K> {
    /// The index of generation `generation`, built from `tools` if the one held is of another.
    pub fn index<'a>(
        &self,
        generation: u64,
        tools: impl FnOnce() -> Vec<(K, &'a Tool)>,
    ) -> std::sync::Arc<ToolIndex<K>> {
        let mut held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((g, index)) = held.as_ref()
            && *g == generation
        {
            return index.clone();
        }
        let index = std::sync::Arc::new(ToolIndex::new(tools()));
        *held = Some((generation, index.clone()));
        index
    }
}

/// The text a tool is indexed by: its name twice, its title, its description and the names of
/// its parameters, identifiers split into words.
pub fn document(tool: &Tool) -> String {
    let name = words(&tool.name);
    let mut text = format!("{name} {name}");
    for part in [&tool.title, &tool.description].into_iter().flatten() {
        text.push(' ');
        text.push_str(&words(part));
    }
    let schema = tool.input_schema.decode_object().unwrap_or_default();
    if let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) {
        for parameter in properties.keys() {
            text.push(' ');
            text.push_str(&words(parameter));
        }
    }
    text
}

/// `text` with identifiers split into words: `_`, `-`, `.`, `/` and `:` become spaces, and a
/// lower-case letter or digit followed by an upper-case one gets a space between them
/// (`listPullRequests` → `list Pull Requests`).
pub fn words(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut previous: Option<char> = None;
    for c in text.chars() {
        if matches!(c, '_' | '-' | '.' | '/' | ':') {
            out.push(' ');
            previous = None;
            continue;
        }
        if c.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit()) {
            out.push(' ');
        }
        out.push(c);
        previous = Some(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(value: serde_json::Value) -> Tool {
        serde_json::from_value(value).unwrap_or_else(|_| Tool::new("broken", Default::default()))
    }

    fn catalog() -> Vec<Tool> {
        vec![
            tool(
                json!({"name": "create_issue", "description": "Create a new issue in a GitHub repository",
                "inputSchema": {"type": "object", "properties": {"owner": {}, "repo": {}, "title": {}, "body": {}}}}),
            ),
            tool(
                json!({"name": "list_pull_requests", "title": "List pull requests",
                "description": "List and filter repository pull requests",
                "inputSchema": {"type": "object", "properties": {"owner": {}, "repo": {}, "state": {}}}}),
            ),
            tool(
                json!({"name": "read_file", "description": "Read the complete contents of a file from the file system",
                "inputSchema": {"type": "object", "properties": {"path": {}}}}),
            ),
            tool(
                json!({"name": "delete_file", "description": "Remove a file",
                "inputSchema": {"type": "object", "properties": {"path": {}}}}),
            ),
            tool(
                json!({"name": "postMessage", "description": "Post a message to a Slack channel",
                "inputSchema": {"type": "object", "properties": {"channelId": {}, "text": {}}}}),
            ),
            tool(
                json!({"name": "get_weather", "description": "Current weather for a city",
                "inputSchema": {"type": "object", "properties": {"city": {}}}}),
            ),
        ]
    }

    fn index(tools: &[Tool]) -> ToolIndex<String> {
        ToolIndex::new(tools.iter().map(|t| (t.name.clone(), t)))
    }

    fn top(index: &ToolIndex<String>, query: &str) -> Option<String> {
        index.search(query, 1).into_iter().next().map(|h| h.key)
    }

    #[test]
    fn identifiers_are_split_into_words() {
        assert_eq!(words("create_issue"), "create issue");
        assert_eq!(words("listPullRequests"), "list Pull Requests");
        assert_eq!(words("files.v2/read-file:now"), "files v2 read file now");
        assert_eq!(words("s3Bucket"), "s3 Bucket");
        assert_eq!(words("HTTPServer"), "HTTPServer");
    }

    #[test]
    fn a_query_finds_the_tool_its_words_describe() {
        let tools = catalog();
        let index = index(&tools);
        assert_eq!(
            top(&index, "open a bug in the github repo").as_deref(),
            Some("create_issue")
        );
        assert_eq!(
            top(&index, "pull requests that are open").as_deref(),
            Some("list_pull_requests")
        );
        assert_eq!(
            top(&index, "deleting files").as_deref(),
            Some("delete_file"),
            "stemmed"
        );
        assert_eq!(
            top(&index, "post_message").as_deref(),
            Some("postMessage"),
            "either spelling"
        );
        assert_eq!(top(&index, "slack channel").as_deref(), Some("postMessage"));
        assert_eq!(
            top(&index, "weather in Paris").as_deref(),
            Some("get_weather")
        );
    }

    #[test]
    fn the_name_weighs_more_than_the_description() {
        let tools = vec![
            tool(json!({"name": "search_files", "description": "Find paths", "inputSchema": {}})),
            tool(
                json!({"name": "grep", "description": "Search inside files for a pattern", "inputSchema": {}}),
            ),
        ];
        let index = index(&tools);
        assert_eq!(top(&index, "search files").as_deref(), Some("search_files"));
    }

    #[test]
    fn no_shared_word_finds_nothing_and_k_bounds_the_list() {
        let tools = catalog();
        let index = index(&tools);
        assert!(index.search("zebra quantum", 5).is_empty());
        assert!(index.search("", 5).is_empty());
        assert!(index.search("file", 0).is_empty());
        let files = index.search("file", 10);
        assert_eq!(
            files.iter().map(|h| h.key.as_str()).collect::<Vec<_>>(),
            ["delete_file", "read_file"]
        );
        assert_eq!(index.search("file", 1).len(), 1);
        assert!(
            files.windows(2).all(|w| w[0].score >= w[1].score),
            "best first"
        );
    }

    #[test]
    fn equal_scores_come_in_key_order_whatever_the_catalog_order() {
        let same = |name: &str| {
            tool(json!({"name": name, "description": "Return the current time", "inputSchema": {}}))
        };
        let forward = vec![same("clock_a"), same("clock_b"), same("clock_c")];
        let backward: Vec<Tool> = forward.iter().rev().cloned().collect();
        for tools in [forward, backward] {
            let index = index(&tools);
            let keys: Vec<String> = index
                .search("current time", 2)
                .into_iter()
                .map(|h| h.key)
                .collect();
            assert_eq!(keys, ["clock_a", "clock_b"]);
        }
    }

    #[test]
    fn the_cache_builds_once_per_generation_and_again_for_the_next() {
        let tools = catalog();
        let cache = IndexCache::default();
        let builds = std::cell::Cell::new(0);
        fn entries<'a>(
            builds: &std::cell::Cell<u32>,
            tools: &'a [Tool],
        ) -> Vec<(String, &'a Tool)> {
            builds.set(builds.get() + 1);
            tools.iter().map(|t| (t.name.clone(), t)).collect()
        }
        let first = cache.index(1, || entries(&builds, &tools[..2]));
        let again = cache.index(1, || entries(&builds, &tools));
        assert!(std::sync::Arc::ptr_eq(&first, &again));
        assert_eq!((builds.get(), again.len()), (1, 2));
        let next = cache.index(2, || entries(&builds, &tools));
        assert_eq!((builds.get(), next.len()), (2, tools.len()));
        assert_eq!(top(&next, "weather").as_deref(), Some("get_weather"));
    }

    #[test]
    fn an_empty_catalog_finds_nothing() {
        let index: ToolIndex<String> = ToolIndex::new(std::iter::empty());
        assert!(index.is_empty());
        assert!(index.search("anything", 3).is_empty());
    }
}

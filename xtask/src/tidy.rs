//! `cargo xtask tidy`: the architecture invariants that a compiler does not check.
//!
//! 1. Dependency arrows between workspace crates are exactly those of `ARCHITECTURE.md`
//!    ([`ARROWS`]); a crate not in the table fails (add it to the design first).
//! 2. The sans-IO crates ([`SANS_IO`]) do not reach an async runtime, a socket or an HTTP
//!    stack through any chain of normal dependencies ([`IO_CRATES`]).
//! 3. Their sources do not read the clock or touch the network, files or processes.
//! 4. Every member inherits the workspace lints, and each `crates/<dir>` is the crate `<dir>`.
//! 5. `ARCHITECTURE.md` names every crate.
//! 6. MCP headers are built once, by `toolwire-headers`, in their final form: the session and
//!    the facade never convert a header name or value ([`NO_HEADER_CONVERSION`]).
//! 7. The transports name no MCP method ([`METHOD_BLIND`]): what a message does to a legacy
//!    session comes from the session (`Outbound::session`), so MCP session state has one
//!    owner.
//! 8. Only `toolwire-types` knows the JSON shape of MCP: the crates that carry MCP messages
//!    ([`NO_MCP_SHAPES`]) derive no `Deserialize` (a type of their own that is not an MCP
//!    shape says so on the line before its derive: `// tidy: not an MCP shape`).
//! 9. The crates that serve MCP ([`METHODS_THROUGH_TYPES`]) name its methods through
//!    `toolwire-types`' markers, never as string literals outside their tests.
//! 10. And they dispatch on the types' method kinds (`ClientMethod`, `ServerNotice`, …), never
//!     by comparing a method's name with a marker's ([`NAME_DISPATCH`]): one table of which
//!     name is which method, the types'.
//! 11. Each document stays within its size budget ([`DOC_BUDGETS`]): a page a newcomer reads
//!     whole. Where a document is still above the size it should have, its budget is its size
//!     today, so that it can only shrink. And every relative link in them leads somewhere.
//! 12. Every identifier `ARCHITECTURE.md` names in backticks is in the code (a word of a Rust
//!     file outside its comments, or a file's name): the map names what exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The allowed workspace-internal dependencies of each crate (normal and build dependencies).
/// Dev-dependencies may also use `toolwire-test-support`.
pub(crate) const ARROWS: &[(&str, &[&str])] = &[
    ("toolwire-types", &[]),
    ("toolwire-wire", &["toolwire-types"]),
    ("toolwire-headers", &["toolwire-types"]),
    ("toolwire-cache", &["toolwire-types", "toolwire-headers"]),
    ("toolwire-search", &["toolwire-types"]),
    // The client in JavaScript: the sans-IO session over `fetch`.
    (
        "toolwire-web",
        &[
            "toolwire-types",
            "toolwire-wire",
            "toolwire-cache",
            "toolwire-session",
        ],
    ),
    // Spans and trace context: used by the facade and the server side alike.
    ("toolwire-telemetry", &["toolwire-types"]),
    (
        "toolwire-session",
        &[
            "toolwire-types",
            "toolwire-wire",
            "toolwire-headers",
            "toolwire-cache",
        ],
    ),
    ("toolwire-transport", &["toolwire-types", "toolwire-wire"]),
    ("toolwire-stdio", &["toolwire-transport", "toolwire-types"]),
    ("toolwire-http", &["toolwire-transport", "toolwire-types"]),
    // Its tests drive the HTTP transport directly (a dev-dependency on the transport trait).
    ("toolwire-auth", &["toolwire-http", "toolwire-transport"]),
    (
        "toolwire",
        &[
            "toolwire-types",
            "toolwire-headers",
            "toolwire-cache",
            "toolwire-search",
            "toolwire-telemetry",
            "toolwire-session",
            "toolwire-transport",
            "toolwire-stdio",
            "toolwire-http",
            "toolwire-auth",
        ],
    ),
    // Its tests connect entries to the reference server (a dev-dependency).
    ("toolwire-host", &["toolwire", "toolwire-refserver"]),
    (
        "toolwire-cli",
        &[
            "toolwire",
            "toolwire-host",
            "toolwire-refserver",
            "toolwire-gateway",
            "toolwire-server",
            "toolwire-telemetry",
        ],
    ),
    (
        "toolwire-gateway",
        &[
            "toolwire",
            "toolwire-host",
            "toolwire-server",
            "toolwire-headers",
            "toolwire-types",
            "toolwire-telemetry",
        ],
    ),
    // The server side: the protocol around a `Service` (reference server, gateway).
    (
        "toolwire-server",
        &["toolwire-types", "toolwire-headers", "toolwire-telemetry"],
    ),
    (
        "toolwire-refserver",
        &["toolwire-types", "toolwire-headers", "toolwire-server"],
    ),
    ("toolwire-conformance", &["toolwire"]),
    // The bench measures the public API only, the facade's and the host's (its
    // dev-dependencies are checked too).
    ("toolwire-bench", &["toolwire", "toolwire-host"]),
    ("toolwire-test-support", &["toolwire-types"]),
    // The end-to-end crate in `tests/`: its binary is the scripted server; its tests may use
    // every crate (dev-dependencies are checked against this list too).
    (
        "toolwire-e2e",
        &[
            "toolwire-test-support",
            "toolwire-types",
            "toolwire-wire",
            "toolwire-headers",
            "toolwire-cache",
            "toolwire-session",
            "toolwire-transport",
            "toolwire-stdio",
            "toolwire-http",
            "toolwire-auth",
            "toolwire",
            "toolwire-host",
            "toolwire-server",
            "toolwire-gateway",
            // The reference server is a peer for end-to-end tests, like the scripted one.
            "toolwire-refserver",
        ],
    ),
    ("xtask", &[]),
];

/// Crates that never do I/O and never read the clock.
pub(crate) const SANS_IO: &[&str] = &[
    "toolwire-types",
    "toolwire-wire",
    "toolwire-headers",
    "toolwire-cache",
    "toolwire-session",
];

/// Crates whose presence in a sans-IO crate's dependency tree means I/O.
pub(crate) const IO_CRATES: &[&str] = &[
    "tokio",
    "tokio-util",
    "mio",
    "socket2",
    "hyper",
    "hyper-util",
    "h2",
    "reqwest",
    "async-std",
    "smol",
    "rustls",
    "tokio-rustls",
    "hyper-rustls",
];

/// Source patterns a sans-IO crate must not contain.
const FORBIDDEN_IN_SANS_IO: &[&str] = &[
    "Instant::now",
    "SystemTime::now",
    "std::net",
    "std::fs",
    "std::process",
    "thread::sleep",
];

/// Crates that hand headers on and must not build or convert one: `toolwire-headers` builds
/// every MCP header in the form it travels in, and the session moves it into the message.
pub(crate) const NO_HEADER_CONVERSION: &[&str] = &["toolwire-session", "toolwire"];

/// Crates that move messages without knowing what they mean: no MCP method name appears in
/// their code (rule 7).
pub(crate) const METHOD_BLIND: &[&str] = &[
    "toolwire-http",
    "toolwire-stdio",
    "toolwire-transport",
    "toolwire-wire",
];

/// Crates that serve MCP and name its methods only through `toolwire-types`' markers
/// (`method::CallTool::NAME`), never as string literals (rule 9): one list of methods, the
/// types'.
pub(crate) const METHODS_THROUGH_TYPES: &[&str] =
    &["toolwire-server", "toolwire-gateway", "toolwire-refserver"];

/// A method's name compared with a marker's, as a match arm or an equality (rule 10).
const NAME_DISPATCH: &[&str] = &["::NAME =>", "::NAME |", "::NAME if", "== mcp::", "!= mcp::"];

/// Crates that carry MCP messages and read them only through `toolwire-types` (rule 8).
pub(crate) const NO_MCP_SHAPES: &[&str] = &[
    "toolwire",
    "toolwire-session",
    "toolwire-http",
    "toolwire-transport",
    "toolwire-stdio",
    "toolwire-wire",
    "toolwire-headers",
    "toolwire-cache",
    "toolwire-server",
    "toolwire-gateway",
];

/// What marks a derive of a type that is not an MCP shape (rule 8).
const NOT_AN_MCP_SHAPE: &str = "// tidy: not an MCP shape";

/// The MCP method names (whole, or by the prefix of their family) as string literals.
const METHOD_LITERALS: &[&str] = &[
    "\"initialize\"",
    "\"ping\"",
    "\"server/discover\"",
    "\"notifications/",
    "\"tools/",
    "\"resources/",
    "\"prompts/",
    "\"logging/",
    "\"completion/",
    "\"subscriptions/",
    "\"sampling/",
    "\"elicitation/",
    "\"roots/",
    "\"tasks/",
    "\"skills/",
];

/// Source patterns that build or convert an `http` header name or value.
const HEADER_CONVERSION: &[&str] = &[
    "HeaderName::from",
    "HeaderValue::from",
    "HeaderName::try_from",
    "HeaderValue::try_from",
];

/// A dependency edge of a workspace package, as `cargo metadata` lists it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dep {
    pub(crate) name: String,
    /// `None` for normal, `Some("dev")`, `Some("build")`.
    pub(crate) kind: Option<String>,
}

/// What tidy needs from `cargo metadata`.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    /// Workspace members: name → their declared dependencies.
    pub(crate) members: BTreeMap<String, Vec<Dep>>,
    /// The resolved graph of every package: name → names of its normal dependencies.
    pub(crate) resolved_normal: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// Reads the graph from `cargo metadata --format-version 1` output.
    pub(crate) fn from_metadata(meta: &Value) -> Result<Self, String> {
        let packages = meta["packages"]
            .as_array()
            .ok_or("metadata without packages")?;
        let members: BTreeSet<&str> = meta["workspace_members"]
            .as_array()
            .ok_or("metadata without workspace_members")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut id_to_name = BTreeMap::new();
        let mut graph = Self::default();
        for p in packages {
            let (Some(id), Some(name)) = (p["id"].as_str(), p["name"].as_str()) else {
                continue;
            };
            id_to_name.insert(id.to_owned(), name.to_owned());
            if members.contains(id) {
                let deps = p["dependencies"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| {
                        Some(Dep {
                            name: d["name"].as_str()?.to_owned(),
                            kind: d["kind"].as_str().map(str::to_owned),
                        })
                    })
                    .collect();
                graph.members.insert(name.to_owned(), deps);
            }
        }
        for node in meta["resolve"]["nodes"].as_array().into_iter().flatten() {
            let Some(name) = node["id"].as_str().and_then(|id| id_to_name.get(id)) else {
                continue;
            };
            let normal = graph.resolved_normal.entry(name.clone()).or_default();
            for dep in node["deps"].as_array().into_iter().flatten() {
                let is_normal = dep["dep_kinds"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|k| k["kind"].is_null());
                if let Some(dep_name) = dep["pkg"].as_str().and_then(|id| id_to_name.get(id))
                    && is_normal
                {
                    normal.insert(dep_name.clone());
                }
            }
        }
        Ok(graph)
    }
}

/// Checks rule 1: workspace-internal edges follow [`ARROWS`].
pub(crate) fn check_arrows(graph: &Graph) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = ARROWS.iter().copied().collect();
    let mut problems = Vec::new();
    for (name, deps) in &graph.members {
        let Some(allowed_deps) = allowed.get(name.as_str()) else {
            problems.push(format!(
                "crate `{name}` is not in the design: add it to ARCHITECTURE.md and xtask's ARROWS"
            ));
            continue;
        };
        for dep in deps.iter().filter(|d| graph.members.contains_key(&d.name)) {
            let ok = allowed_deps.contains(&dep.name.as_str())
                || (dep.kind.as_deref() == Some("dev") && dep.name == "toolwire-test-support");
            if !ok {
                let kind = dep.kind.as_deref().unwrap_or("normal");
                problems.push(format!(
                    "`{name}` must not depend on `{}` ({kind} dependency); the design allows {allowed_deps:?}",
                    dep.name
                ));
            }
        }
    }
    problems
}

/// Checks rule 2: no sans-IO crate reaches an I/O crate through normal dependencies.
pub(crate) fn check_sans_io(graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for &krate in SANS_IO {
        if !graph.members.contains_key(krate) {
            continue;
        }
        // Breadth-first, remembering how each crate was reached to print the chain.
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = vec![krate];
        while let Some(current) = queue.pop() {
            for dep in graph.resolved_normal.get(current).into_iter().flatten() {
                if dep == krate || parent.contains_key(dep.as_str()) {
                    continue;
                }
                parent.insert(dep, current);
                if IO_CRATES.contains(&dep.as_str()) {
                    let mut chain = vec![dep.as_str()];
                    let mut at = dep.as_str();
                    while let Some(&p) = parent.get(at) {
                        chain.push(p);
                        at = p;
                    }
                    chain.reverse();
                    problems.push(format!(
                        "sans-IO crate `{krate}` reaches `{dep}`: {}",
                        chain.join(" -> ")
                    ));
                } else {
                    queue.push(dep);
                }
            }
        }
    }
    problems
}

/// The lines of `text` before its unit-test module (`#[cfg(test)]` then `mod tests`), each
/// with its index: what the rules read (tests may read the clock, name methods, derive).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    // `#[cfg(test)]` (or `#[cfg(all(test, …))]`), with at most two attributes more, before
    // `mod tests`.
    let end = (0..lines.len())
        .find(|&i| {
            let cfg = lines[i].trim();
            (cfg == "#[cfg(test)]" || cfg.starts_with("#[cfg(all(test"))
                && lines[i + 1..]
                    .iter()
                    .take(3)
                    .find(|l| !l.trim_start().starts_with("#["))
                    .is_some_and(|l| l.trim_start().starts_with("mod tests"))
        })
        .unwrap_or(lines.len());
    lines.into_iter().take(end).enumerate()
}

/// The lines of `text` (comments and the unit-test module aside: tests may read the clock
/// to make a time) that contain one of `patterns`, as `path:line: ` followed by what `say`
/// makes of the pattern.
fn find_patterns(
    path: &str,
    text: &str,
    patterns: &[&str],
    say: impl Fn(&str) -> String,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, line) in code_lines(text) {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for pat in patterns.iter().filter(|pat| line.contains(*pat)) {
            problems.push(format!("{path}:{}: {}", i + 1, say(pat)));
        }
    }
    problems
}

/// Checks rule 3 on one source file's text.
pub(crate) fn check_sans_io_source(path: &str, text: &str) -> Vec<String> {
    find_patterns(path, text, FORBIDDEN_IN_SANS_IO, |pat| {
        format!("sans-IO code must not use `{pat}`")
    })
}

/// Checks rule 6 on one source file's text.
pub(crate) fn check_header_conversion(path: &str, text: &str) -> Vec<String> {
    find_patterns(path, text, HEADER_CONVERSION, |pat| {
        format!("`{pat}`: headers are built once, in toolwire-headers, and moved as they are")
    })
}

/// Checks rule 7 on one source file's text (tests at its end may name methods).
pub(crate) fn check_method_blind(path: &str, text: &str) -> Vec<String> {
    find_patterns(path, text, METHOD_LITERALS, |pat| {
        format!(
            "{pat}…: a transport names no MCP method; the session marks what it needs on `Outbound`"
        )
    })
}

/// Checks rule 9 on one source file's text (tests at its end may name methods).
pub(crate) fn check_methods_through_types(path: &str, text: &str) -> Vec<String> {
    find_patterns(path, text, METHOD_LITERALS, |pat| {
        format!(
            "{pat}…: name an MCP method through toolwire-types' markers (`method::CallTool::NAME`), not as a literal"
        )
    })
}

/// Checks rule 10 on one source file's text (tests at its end may compare names).
pub(crate) fn check_dispatch_on_kinds(path: &str, text: &str) -> Vec<String> {
    find_patterns(path, text, NAME_DISPATCH, |pat| {
        format!(
            "`{pat}`: dispatch on toolwire-types' method kinds (`ClientMethod::of(name)`), not on a marker's name"
        )
    })
}

/// Checks rule 8 on one source file's text: a `Deserialize` derive, unless the line before
/// says the type is not an MCP shape (the unit-test module may derive what it likes).
pub(crate) fn check_mcp_shapes(path: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut before = "";
    for (i, line) in code_lines(text) {
        let derive = line.trim_start().starts_with("#[derive(") && line.contains("Deserialize");
        if derive && before.trim() != NOT_AN_MCP_SHAPE {
            problems.push(format!(
                "{path}:{}: `Deserialize` outside toolwire-types: read MCP through its types (or mark a type of this crate's own `{NOT_AN_MCP_SHAPE}`)",
                i + 1
            ));
        }
        before = line;
    }
    problems
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What `doc` writes in backticks, each with its line number (from 1).
fn backticked(doc: &str) -> impl Iterator<Item = (usize, &str)> {
    doc.lines().enumerate().flat_map(|(i, line)| {
        line.split('`')
            .enumerate()
            .filter(|(j, _)| j % 2 == 1)
            .map(move |(_, part)| (i + 1, part))
    })
}

/// The test names `doc` cites (backticked snake_case names with three or more underscores, as
/// test names are) that no `fn` in `defined` has: a renamed test leaves its row pointing at
/// nothing.
pub(crate) fn check_cited_tests(
    doc_path: &str,
    doc: &str,
    defined: &std::collections::HashSet<String>,
) -> Vec<String> {
    backticked(doc)
        .filter(|(_, part)| {
            part.matches('_').count() >= 3
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && !defined.contains(*part)
        })
        .map(|(line, part)| format!("{doc_path}:{line}: cites `{part}`, which no test defines"))
        .collect()
}

/// What the Rust files under `dirs` define and say, read once for the cited tests and rule
/// 12: every `fn` name, and every word outside their comment lines (identifiers, and the
/// words of string literals: JSON member names) with each file's stem (a test file, a fuzz
/// target).
struct Code {
    fns: std::collections::HashSet<String>,
    words: std::collections::HashSet<String>,
}

fn read_code(dirs: &[std::path::PathBuf]) -> Code {
    let mut code = Code {
        fns: std::collections::HashSet::new(),
        words: std::collections::HashSet::new(),
    };
    for dir in dirs {
        let mut files = Vec::new();
        rust_files(dir, &mut files);
        for file in files {
            if let Some(stem) = file.file_stem() {
                code.words.insert(stem.to_string_lossy().into_owned());
            }
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for rest in text.split("fn ").skip(1) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    code.fns.insert(name);
                }
            }
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if !word.is_empty() {
                        code.words.insert(word.to_owned());
                    }
                }
            }
        }
    }
    code
}

/// `name` in snake_case (`hideWhileOpen` → `hide_while_open`): a JSON member serde renames.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if !out.is_empty() {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The identifiers `doc` names in backticks (`Name`, `path::to::item`, `call()`) that the code
/// in `words` has nowhere (rule 12): a map that names what was renamed or removed sends a
/// newcomer nowhere.
pub(crate) fn check_named_identifiers(
    doc_path: &str,
    doc: &str,
    words: &std::collections::HashSet<String>,
) -> Vec<String> {
    backticked(doc)
        .filter(|(_, part)| {
            let item = part.strip_suffix("()").unwrap_or(part);
            let is_identifier = !item.is_empty()
                && item.split("::").all(|seg| {
                    seg.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
            let last = item.rsplit("::").next().unwrap_or(item);
            is_identifier && !words.contains(last) && !words.contains(&snake_case(last))
        })
        .map(|(line, part)| format!("{doc_path}:{line}: names `{part}`, which no code has"))
        .collect()
}

/// The longest a Rust file may be, outside `toolwire-types` (its method tables and wire
/// shapes are long by nature) and `xtask` (one file per command): a file past it holds more
/// than one job.
pub(crate) const MAX_FILE_LINES: usize = 800;

/// The documents' budgets in bytes (rule 11): the size each should have, and where one is
/// still larger, its ceiling until it is cut (docs/protocol-decisions.md and
/// docs/reliability.md should be a page per area). README.md is a front
/// door: what Toolwire is, the set-up, one example each, links; the guide holds the rest, a
/// page per task.
pub(crate) const DOC_BUDGETS: &[(&str, usize)] = &[
    ("README.md", 10_000),
    ("docs/guide/cli.md", 12_000),
    ("docs/guide/crates.md", 8_000),
    ("docs/guide/development.md", 6_000),
    ("docs/guide/gateway.md", 20_000),
    ("docs/guide/host.md", 10_000),
    ("docs/guide/library.md", 8_000),
    ("ARCHITECTURE.md", 20_000),
    ("CHANGELOG.md", 16_000),
    ("docs/performance.md", 16_000),
    ("docs/benchmarks.md", 40_000),
    ("docs/conformance.md", 12_000),
    ("docs/interop.md", 12_000),
    ("docs/protocol-decisions.md", 80_000),
    ("docs/reliability.md", 60_000),
    ("docs/soak.md", 6_000),
];

/// The documents of `sizes` (path, bytes) past their budget in [`DOC_BUDGETS`], and any
/// document of `docs/` that has no budget.
pub(crate) fn check_doc_budgets(sizes: &[(String, usize)]) -> Vec<String> {
    sizes
        .iter()
        .filter_map(|(path, bytes)| {
            match DOC_BUDGETS.iter().find(|(p, _)| p == path) {
                Some((_, budget)) if bytes > budget => Some(format!(
                    "{path} is {bytes} bytes (its budget is {budget}): say it shorter, or move detail beside the code it describes"
                )),
                Some(_) => None,
                None => Some(format!("{path} has no size budget in tidy's DOC_BUDGETS")),
            }
        })
        .collect()
}

/// The relative links of the document `path` (its `text`) whose target does not exist under
/// `root` (rule 11: a page moved or renamed leaves no dead link behind).
pub(crate) fn check_doc_links(root: &Path, path: &str, text: &str) -> Vec<String> {
    let dir = Path::new(path).parent().unwrap_or(Path::new(""));
    let mut dead = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        rest = &rest[end..];
        if target.contains(char::is_whitespace)
            || target.starts_with('#')
            || target.contains("://")
            || target.starts_with("mailto:")
        {
            continue;
        }
        let file = target.split('#').next().unwrap_or(target);
        if !root.join(dir).join(file).exists() {
            dead.push(format!("{path}: the link to `{target}` leads nowhere"));
        }
    }
    dead
}

/// A crate's manifest must name its licence (the workspace's, which the root's files hold).
pub(crate) fn check_licence(name: &str, manifest: &str) -> Vec<String> {
    let names = manifest.lines().any(|l| {
        l.trim_start().starts_with("license.workspace = true")
            || l.trim_start().starts_with("license = ")
    });
    if names {
        Vec::new()
    } else {
        vec![format!(
            "crate `{name}` must name its licence (license.workspace = true)"
        )]
    }
}

pub(crate) fn check_file_lengths(files: &[(String, usize)]) -> Vec<String> {
    files
        .iter()
        .filter(|(_, lines)| *lines > MAX_FILE_LINES)
        .map(|(path, lines)| {
            format!("{path} has {lines} lines (at most {MAX_FILE_LINES}): split it by job")
        })
        .collect()
}

/// Runs every check on the workspace at `root`.
pub(crate) fn run(root: &Path) -> Result<(), String> {
    let out = Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("bad cargo metadata: {e}"))?;
    let graph = Graph::from_metadata(&meta)?;

    let mut problems = check_arrows(&graph);
    problems.extend(check_sans_io(&graph));
    // The licence every manifest names is the one the root's files hold.
    for file in ["LICENSE-MIT", "LICENSE-APACHE"] {
        if !root.join(file).is_file() {
            problems.push(format!(
                "{file} is missing at the root (the crates say MIT OR Apache-2.0)"
            ));
        }
    }
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    if !workspace.contains("license = \"MIT OR Apache-2.0\"") {
        problems.push(
            "Cargo.toml: [workspace.package] must say license = \"MIT OR Apache-2.0\"".into(),
        );
    }

    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
    for name in graph.members.keys() {
        let dir = match name.as_str() {
            "xtask" => root.join("xtask"),
            "toolwire-e2e" => root.join("tests"),
            _ => root.join("crates").join(name),
        };
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        if manifest.is_empty() {
            problems.push(format!("crate `{name}` must live in crates/{name}"));
        }
        problems.extend(check_licence(name, &manifest));
        if !manifest.contains("[lints]\nworkspace = true") {
            problems.push(format!(
                "crate `{name}` must inherit the workspace lints ([lints] workspace = true)"
            ));
        }
        if name != "xtask" && !architecture.contains(&format!("`{name}`")) {
            problems.push(format!("ARCHITECTURE.md does not name crate `{name}`"));
        }
        if name != "xtask" && name != "toolwire-types" {
            let mut files = Vec::new();
            rust_files(&dir, &mut files);
            let lengths: Vec<(String, usize)> = files
                .iter()
                .map(|file| {
                    let shown = file
                        .strip_prefix(root)
                        .unwrap_or(file)
                        .display()
                        .to_string();
                    let lines = std::fs::read_to_string(file).map_or(0, |t| t.lines().count());
                    (shown, lines)
                })
                .collect();
            problems.extend(check_file_lengths(&lengths));
        }
        let sans_io = SANS_IO.contains(&name.as_str());
        let no_conversion = NO_HEADER_CONVERSION.contains(&name.as_str());
        let blind = METHOD_BLIND.contains(&name.as_str());
        let shapeless = NO_MCP_SHAPES.contains(&name.as_str());
        let through_types = METHODS_THROUGH_TYPES.contains(&name.as_str());
        if sans_io || no_conversion || blind || shapeless || through_types {
            let mut files = Vec::new();
            rust_files(&dir.join("src"), &mut files);
            for file in files {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                let shown = file
                    .strip_prefix(root)
                    .unwrap_or(&file)
                    .display()
                    .to_string();
                if sans_io {
                    problems.extend(check_sans_io_source(&shown, &text));
                }
                if no_conversion {
                    problems.extend(check_header_conversion(&shown, &text));
                }
                if blind {
                    problems.extend(check_method_blind(&shown, &text));
                }
                if shapeless {
                    problems.extend(check_mcp_shapes(&shown, &text));
                }
                if through_types {
                    problems.extend(check_methods_through_types(&shown, &text));
                    problems.extend(check_dispatch_on_kinds(&shown, &text));
                }
            }
        }
    }

    let mut docs: Vec<String> = DOC_BUDGETS.iter().map(|(p, _)| (*p).to_owned()).collect();
    for dir in ["docs", "docs/guide"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            for entry in entries.flatten() {
                let path = format!("{dir}/{}", entry.file_name().to_string_lossy());
                if path.ends_with(".md") && !docs.contains(&path) {
                    docs.push(path);
                }
            }
        }
    }
    let sizes: Vec<(String, usize)> = docs
        .into_iter()
        .map(|path| {
            let bytes = std::fs::metadata(root.join(&path)).map_or(0, |m| m.len());
            (path, usize::try_from(bytes).unwrap_or(usize::MAX))
        })
        .collect();
    problems.extend(check_doc_budgets(&sizes));
    for (path, _) in &sizes {
        let text = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        problems.extend(check_doc_links(root, path, &text));
    }

    let code = read_code(&[
        root.join("crates"),
        root.join("tests"),
        root.join("xtask"),
        root.join("fuzz"),
    ]);
    problems.extend(check_named_identifiers(
        "ARCHITECTURE.md",
        &architecture,
        &code.words,
    ));
    let reliability = std::fs::read_to_string(root.join("docs/reliability.md")).unwrap_or_default();
    problems.extend(check_cited_tests(
        "docs/reliability.md",
        &reliability,
        &code.fns,
    ));

    if problems.is_empty() {
        eprintln!(
            "tidy: {} crates, arrows and sans-IO rules hold",
            graph.members.len()
        );
        Ok(())
    } else {
        for p in &problems {
            eprintln!("tidy: {p}");
        }
        Err(format!("tidy found {} problem(s)", problems.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_file_past_the_line_limit_is_named_and_one_at_it_is_not() {
        let files = [
            ("crates/a/src/lib.rs".to_owned(), MAX_FILE_LINES),
            ("crates/a/src/big.rs".to_owned(), MAX_FILE_LINES + 1),
        ];
        let problems = check_file_lengths(&files);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("crates/a/src/big.rs has 801 lines"));
    }

    #[test]
    fn a_deserialize_derive_is_named_unless_marked_as_no_mcp_shape() {
        let text = "#[derive(Debug, serde::Deserialize)]\nstruct Peek;\n// tidy: not an MCP shape\n#[derive(Deserialize)]\nstruct Saved;\n#[derive(Debug, Clone)]\nstruct Plain;\n#[cfg(test)]\nfn helper() {}\n#[derive(Deserialize)]\nstruct AfterATestItem;\n#[cfg(test)]\nmod tests {\n    #[derive(Deserialize)]\n    struct InTests;\n}\n";
        let problems = check_mcp_shapes("crates/s/src/x.rs", text);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("crates/s/src/x.rs:1: "));
        assert!(
            problems[1].starts_with("crates/s/src/x.rs:10: "),
            "a test item is not the test module: the rule goes on after it"
        );
    }

    #[test]
    fn a_method_name_in_transport_code_is_named_but_not_in_comments_or_tests() {
        let text = "// sends \"initialize\" first\nlet m = \"tools/call\";\nlet ok = \"tools\";\n#[cfg(test)]\nmod tests {\n    const M: &str = \"ping\";\n}\n";
        let problems = check_method_blind("crates/t/src/lib.rs", text);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("crates/t/src/lib.rs:2: \"tools/"));
    }

    #[test]
    fn a_method_literal_in_a_serving_crate_is_named_and_a_marker_or_a_cfg_all_test_module_is_not() {
        let text = "let m = mcp::CallTool::NAME;\nlet n = \"notifications/message\";\n#[cfg(all(test, unix))]\n#[allow(dead_code)]\nmod tests {\n    const M: &str = \"tools/call\";\n}\n";
        let problems = check_methods_through_types("crates/toolwire-server/src/x.rs", text);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("crates/toolwire-server/src/x.rs:2: \"notifications/"));
    }

    #[test]
    fn a_match_or_comparison_on_a_markers_name_is_named_and_a_kind_or_a_built_message_is_not() {
        let text = "match name {\n    mcp::CallTool::NAME => 1,\n    mcp::Ping::NAME | mcp::Discover::NAME => 2,\n}\nif m == mcp::Initialize::NAME {}\nmatch kind { ClientMethod::CallTool => 1 }\nlet n = json!({\"method\": mcp::Progress::NAME});\n#[cfg(test)]\nmod tests {\n    const B: bool = m == mcp::Ping::NAME;\n}\n";
        let problems = check_dispatch_on_kinds("crates/toolwire-gateway/src/x.rs", text);
        let mut lines: Vec<&str> = problems
            .iter()
            .map(|p| p.split(": ").next().unwrap_or(""))
            .collect();
        lines.dedup();
        assert_eq!(
            lines,
            [
                "crates/toolwire-gateway/src/x.rs:2",
                "crates/toolwire-gateway/src/x.rs:3",
                "crates/toolwire-gateway/src/x.rs:5",
            ],
            "{problems:?}"
        );
    }

    #[test]
    fn a_link_that_leads_nowhere_is_named_and_web_links_and_anchors_are_left_alone() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = "[a](../../README.md) [b](../gone.md#x) [c](https://x.example/y) [d](#here)";
        let dead = super::check_doc_links(&root, "docs/guide/page.md", text);
        assert_eq!(
            dead,
            ["docs/guide/page.md: the link to `../gone.md#x` leads nowhere"]
        );
    }

    #[test]
    fn an_identifier_the_map_names_must_be_in_the_code_and_other_backticks_are_left_alone() {
        let words: std::collections::HashSet<String> = ["Session", "call_tool", "hide_while_open"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let doc = "`toolwire_session::Session` `Client::call_tool()` `hideWhileOpen` `--flag` `a/b.rs` `Gone`";
        assert_eq!(
            super::check_named_identifiers("MAP.md", doc, &words),
            ["MAP.md:1: names `Gone`, which no code has"]
        );
    }

    #[test]
    fn a_document_past_its_budget_or_without_one_is_named() {
        let ok = vec![("docs/performance.md".to_owned(), 12_000)];
        assert!(super::check_doc_budgets(&ok).is_empty());
        let long = vec![("docs/performance.md".to_owned(), 16_001)];
        assert!(super::check_doc_budgets(&long)[0].contains("budget is 16000"));
        let new = vec![("docs/diary.md".to_owned(), 10)];
        assert!(super::check_doc_budgets(&new)[0].contains("no size budget"));
    }

    /// The rules hold on the workspace itself, so `cargo test` fails wherever
    /// `cargo xtask tidy` would (each problem is printed on stderr).
    #[test]
    fn a_manifest_without_a_licence_is_named() {
        assert!(
            check_licence("a", "[package]\nname = \"a\"\nlicense.workspace = true\n").is_empty()
        );
        assert!(check_licence("b", "[package]\nlicense = \"MIT\"\n").is_empty());
        assert_eq!(
            check_licence("c", "[package]\nname = \"c\"\n"),
            ["crate `c` must name its licence (license.workspace = true)"]
        );
    }

    #[test]
    fn the_workspace_keeps_every_tidy_rule() {
        let outcome = run(&crate::workspace_root());
        assert_eq!(outcome, Ok(()));
    }

    type Members<'a> = &'a [(&'a str, &'a [(&'a str, Option<&'a str>)])];

    /// Builds `cargo metadata`-shaped JSON: `members` with their declared deps, and resolved
    /// normal edges for every package.
    fn metadata(members: Members<'_>, resolved: &[(&str, &[&str])]) -> Value {
        let mut names: BTreeSet<&str> = members.iter().map(|m| m.0).collect();
        for (from, tos) in resolved {
            names.insert(from);
            names.extend(tos.iter());
        }
        let packages: Vec<Value> = names
            .iter()
            .map(|n| {
                let deps: Vec<Value> = members
                    .iter()
                    .find(|m| m.0 == *n)
                    .map(|m| {
                        m.1.iter()
                            .map(|(d, k)| json!({"name": d, "kind": k}))
                            .collect()
                    })
                    .unwrap_or_default();
                json!({"id": format!("id-{n}"), "name": n, "dependencies": deps})
            })
            .collect();
        let nodes: Vec<Value> = resolved
            .iter()
            .map(|(from, tos)| {
                let deps: Vec<Value> = tos
                    .iter()
                    .map(|t| json!({"pkg": format!("id-{t}"), "dep_kinds": [{"kind": null}]}))
                    .collect();
                json!({"id": format!("id-{from}"), "deps": deps})
            })
            .collect();
        json!({
            "packages": packages,
            "workspace_members": members.iter().map(|m| format!("id-{}", m.0)).collect::<Vec<_>>(),
            "resolve": {"nodes": nodes},
        })
    }

    fn graph(members: Members<'_>, resolved: &[(&str, &[&str])]) -> Graph {
        Graph::from_metadata(&metadata(members, resolved)).unwrap()
    }

    #[test]
    fn the_designed_arrows_pass() {
        let g = graph(
            &[
                ("toolwire-types", &[("serde", None)]),
                (
                    "toolwire-headers",
                    &[
                        ("toolwire-types", None),
                        ("toolwire-test-support", Some("dev")),
                    ],
                ),
                ("toolwire-test-support", &[("toolwire-types", None)]),
            ],
            &[
                ("toolwire-headers", &["toolwire-types"]),
                ("toolwire-types", &["serde"]),
            ],
        );
        assert_eq!(check_arrows(&g), Vec::<String>::new());
        assert_eq!(check_sans_io(&g), Vec::<String>::new());
    }

    #[test]
    fn a_lower_crate_depending_on_a_higher_one_fails() {
        let g = graph(
            &[
                ("toolwire-types", &[("toolwire-headers", None)]),
                ("toolwire-headers", &[("toolwire-types", None)]),
            ],
            &[],
        );
        let problems = check_arrows(&g);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("`toolwire-types` must not depend on `toolwire-headers`"));
    }

    #[test]
    fn a_dev_dependency_upwards_fails_too() {
        let g = graph(
            &[
                ("toolwire-cache", &[("toolwire-session", Some("dev"))]),
                ("toolwire-session", &[]),
            ],
            &[],
        );
        let problems = check_arrows(&g);
        assert!(problems[0].contains("(dev dependency)"), "{problems:?}");
    }

    #[test]
    fn an_undesigned_crate_fails() {
        let g = graph(&[("toolwire-extra", &[])], &[]);
        assert!(check_arrows(&g)[0].contains("not in the design"));
    }

    #[test]
    fn a_sans_io_crate_reaching_tokio_fails_with_the_chain() {
        let g = graph(
            &[("toolwire-cache", &[("arc-swap", None)])],
            &[
                ("toolwire-cache", &["arc-swap"]),
                ("arc-swap", &["helper"]),
                ("helper", &["tokio"]),
            ],
        );
        let problems = check_sans_io(&g);
        assert_eq!(
            problems,
            [
                "sans-IO crate `toolwire-cache` reaches `tokio`: toolwire-cache -> arc-swap -> helper -> tokio"
            ]
        );
    }

    #[test]
    fn the_session_and_facade_may_not_convert_headers() {
        let text = "// HeaderValue::from_static in a comment\nlet v = http::HeaderValue::from_bytes(b);\nlet n = HeaderName::try_from(s);\nlet ok = header.into_http();\n";
        let problems = check_header_conversion("c.rs", text);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("c.rs:2: `HeaderValue::from`"));
        assert!(problems[1].starts_with("c.rs:3: `HeaderName::try_from`"));
    }

    #[test]
    fn unit_tests_may_read_the_clock_the_code_above_them_may_not() {
        let text =
            "let a = Instant::now();\n#[cfg(test)]\nmod tests {\n    let t = Instant::now();\n}\n";
        assert_eq!(
            check_sans_io_source("s.rs", text),
            ["s.rs:1: sans-IO code must not use `Instant::now`"]
        );
        // A `cfg(test)` item that is not the test module ends nothing.
        let text = "#[cfg(test)]\nfn helper() {}\nlet b = Instant::now();\n";
        assert_eq!(check_sans_io_source("s.rs", text).len(), 1);
    }

    #[test]
    fn sans_io_sources_may_not_read_the_clock() {
        let text = "// Instant::now is fine in a comment\nlet t = std::time::Instant::now();\nuse std::net::TcpStream;\n";
        let problems = check_sans_io_source("x.rs", text);
        assert_eq!(
            problems,
            [
                "x.rs:2: sans-IO code must not use `Instant::now`",
                "x.rs:3: sans-IO code must not use `std::net`"
            ]
        );
    }

    #[test]
    fn a_cited_test_that_no_fn_defines_is_named() {
        let defined: std::collections::HashSet<String> =
            ["the_test_that_exists".to_owned()].into_iter().collect();
        let doc = "| row | `the_test_that_exists`, `a_test_that_was_renamed` |\n| `ToolCache` `evaluation_cost` |";
        assert_eq!(
            check_cited_tests("r.md", doc, &defined),
            ["r.md:1: cites `a_test_that_was_renamed`, which no test defines"]
        );
    }
}

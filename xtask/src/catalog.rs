//! `cargo xtask catalog`: the tool definitions of real MCP servers from npm and PyPI, for the
//! tool search benchmark (`cargo xtask bench`). Installs each server at its pinned version
//! (into the peers cache, `$TOOLWIRE_PEERS`, like `interop`), lists its tools with the
//! `toolwire` CLI over stdio (dummy credentials where a server refuses to start without one:
//! listing needs none), and writes `crates/toolwire-bench/data/catalog.json`: per server its
//! package, version and tools (name, title, description and the names and descriptions of the
//! parameters; nothing else of the schemas is kept). The file is committed, so the benchmark
//! runs offline; run this again to refresh it.

use std::path::Path;
use std::process::Command;

use serde_json::{Map, Value, json};

use crate::conformance::{
    cache_dir, install_node, installed_npm_version, npm_install_all, pip_install,
};

/// One server: its name in the catalog, the package, the executable and its arguments, and
/// the environment it needs to start.
struct Server {
    name: &'static str,
    package: &'static str,
    version: &'static str,
    command: &'static str,
    env: &'static [(&'static str, &'static str)],
}

const NPM: &[Server] = &[
    server(
        "everything",
        "@modelcontextprotocol/server-everything",
        "2026.8.31",
        "mcp-server-everything",
        &[],
    ),
    server(
        "filesystem",
        "@modelcontextprotocol/server-filesystem",
        "2026.8.31",
        "mcp-server-filesystem .",
        &[],
    ),
    server(
        "memory",
        "@modelcontextprotocol/server-memory",
        "2026.8.31",
        "mcp-server-memory",
        &[],
    ),
    server(
        "github",
        "@modelcontextprotocol/server-github",
        "2025.4.8",
        "mcp-server-github",
        &[],
    ),
    server(
        "slack",
        "@modelcontextprotocol/server-slack",
        "2025.4.25",
        "mcp-server-slack",
        &[("SLACK_BOT_TOKEN", "x"), ("SLACK_TEAM_ID", "x")],
    ),
    server(
        "gitlab",
        "@modelcontextprotocol/server-gitlab",
        "2025.4.25",
        "mcp-server-gitlab",
        &[("GITLAB_PERSONAL_ACCESS_TOKEN", "x")],
    ),
    server(
        "maps",
        "@modelcontextprotocol/server-google-maps",
        "0.6.2",
        "mcp-server-google-maps",
        &[("GOOGLE_MAPS_API_KEY", "x")],
    ),
    server(
        "brave",
        "@modelcontextprotocol/server-brave-search",
        "0.6.2",
        "mcp-server-brave-search",
        &[("BRAVE_API_KEY", "x")],
    ),
    server(
        "thinking",
        "@modelcontextprotocol/server-sequential-thinking",
        "2026.8.31",
        "mcp-server-sequential-thinking",
        &[],
    ),
    server(
        "postgres",
        "@modelcontextprotocol/server-postgres",
        "0.6.2",
        "mcp-server-postgres postgresql://localhost/db",
        &[],
    ),
    server(
        "notion",
        "@notionhq/notion-mcp-server",
        "2.5.2",
        "notion-mcp-server",
        &[],
    ),
    server(
        "playwright",
        "@playwright/mcp",
        "0.0.83",
        "playwright-mcp",
        &[],
    ),
    server(
        "firecrawl",
        "firecrawl-mcp",
        "3.22.2",
        "firecrawl-mcp",
        &[("FIRECRAWL_API_KEY", "x")],
    ),
    server(
        "exa",
        "exa-mcp-server",
        "3.4.1",
        "exa-mcp-server",
        &[("EXA_API_KEY", "x")],
    ),
    server(
        "kubernetes",
        "mcp-server-kubernetes",
        "4.1.7",
        "mcp-server-kubernetes",
        &[],
    ),
    server(
        "mongodb",
        "mongodb-mcp-server",
        "3.0.4",
        "mongodb-mcp-server",
        &[],
    ),
    server(
        "airtable",
        "airtable-mcp-server",
        "1.14.0",
        "airtable-mcp-server",
        &[("AIRTABLE_API_KEY", "x")],
    ),
    server(
        "elasticsearch",
        "@elastic/mcp-server-elasticsearch",
        "0.3.1",
        "mcp-server-elasticsearch",
        &[("ES_URL", "http://localhost:9200"), ("ES_API_KEY", "x")],
    ),
    server(
        "tavily",
        "tavily-mcp",
        "0.2.22",
        "tavily-mcp",
        &[("TAVILY_API_KEY", "x")],
    ),
    server(
        "context7",
        "@upstash/context7-mcp",
        "4.1.1",
        "context7-mcp",
        &[],
    ),
    server(
        "sentry",
        "@sentry/mcp-server",
        "0.36.0",
        "sentry-mcp --access-token=x",
        &[],
    ),
    server(
        "hubspot",
        "@hubspot/mcp-server",
        "0.4.0",
        "mcp-hubspot",
        &[("PRIVATE_APP_ACCESS_TOKEN", "x")],
    ),
    server(
        "browserbase",
        "@browserbasehq/mcp-server-browserbase",
        "2.4.3",
        "mcp-server-browserbase",
        &[
            ("BROWSERBASE_API_KEY", "x"),
            ("BROWSERBASE_PROJECT_ID", "x"),
        ],
    ),
];

const PYPI: &[Server] = &[
    server("git", "mcp-server-git", "2026.10.19", "mcp-server-git", &[]),
    server(
        "time",
        "mcp-server-time",
        "2026.10.19",
        "mcp-server-time",
        &[],
    ),
    server(
        "fetch",
        "mcp-server-fetch",
        "2026.10.24",
        "mcp-server-fetch",
        &[],
    ),
];

const fn server(
    name: &'static str,
    package: &'static str,
    version: &'static str,
    command: &'static str,
    env: &'static [(&'static str, &'static str)],
) -> Server {
    Server {
        name,
        package,
        version,
        command,
        env,
    }
}

pub(crate) fn run(root: &Path) -> Result<(), String> {
    let toolwire = crate::release_bins(root, &["toolwire"])?.join("toolwire");
    let cache = cache_dir().join("catalog");
    let path = install_node(&cache_dir())?;
    let npm_dir = cache.join("npm");
    let missing: Vec<String> = NPM
        .iter()
        .filter(|s| installed_npm_version(&npm_dir, s.package).as_deref() != Some(s.version))
        .map(|s| format!("{}@{}", s.package, s.version))
        .collect();
    if !missing.is_empty() {
        let missing: Vec<&str> = missing.iter().map(String::as_str).collect();
        // The servers' install scripts (native modules, browser downloads) are not needed to
        // list tools.
        npm_install_all(&npm_dir, &missing, &["--ignore-scripts"])?;
    }
    let venv = cache.join("venv");
    let pins: Vec<String> = PYPI
        .iter()
        .map(|s| format!("{}=={}", s.package, s.version))
        .collect();
    let pins: Vec<&str> = pins.iter().map(String::as_str).collect();
    pip_install(root, &venv, &pins)?;

    let mut servers = Vec::new();
    let mut total = 0;
    let listed = NPM
        .iter()
        .map(|s| (s, npm_dir.join("node_modules/.bin")))
        .chain(PYPI.iter().map(|s| (s, venv.join("bin"))));
    for (server, bin_dir) in listed {
        let tools = list(&toolwire, server, &bin_dir, &npm_dir, &path)?;
        eprintln!("    {}: {} tools", server.name, tools.len());
        total += tools.len();
        servers.push(json!({"server": server.name, "package": server.package,
            "version": server.version, "tools": tools}));
    }
    let out = root.join("crates/toolwire-bench/data/catalog.json");
    let text =
        serde_json::to_string_pretty(&json!({"servers": servers})).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(out.parent().ok_or("no parent")?).map_err(|e| e.to_string())?;
    std::fs::write(&out, text + "\n").map_err(|e| format!("{}: {e}", out.display()))?;
    eprintln!(
        "catalog: {total} tools of {} servers in {}",
        servers.len(),
        out.display()
    );
    Ok(())
}

/// `server`'s tools, as the CLI lists them, trimmed to what search reads.
fn list(
    toolwire: &Path,
    server: &Server,
    bin_dir: &Path,
    cwd: &Path,
    path: &str,
) -> Result<Vec<Value>, String> {
    let (program, args) = server
        .command
        .split_once(' ')
        .unwrap_or((server.command, ""));
    // The CLI gives a stdio server an allow-listed environment: the dummy credentials go
    // through `env` on the command line.
    let env: Vec<String> = server.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let command = format!(
        "env {} {} {args}",
        env.join(" "),
        bin_dir.join(program).display()
    );
    let output = Command::new(toolwire)
        .args([
            "--timeout",
            "60",
            "--stdio",
            &command,
            "--json",
            "tools",
            "list",
        ])
        .current_dir(cwd)
        .env("PATH", path)
        .output()
        .map_err(|e| format!("{}: {e}", server.name))?;
    if !output.status.success() {
        return Err(format!(
            "{}: tools list failed: {}",
            server.name,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let listed: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("{}: not JSON: {e}", server.name))?;
    let tools = listed["tools"].as_array().cloned().unwrap_or_default();
    Ok(tools.iter().map(trim).collect())
}

/// A tool with what search reads: name, title, description, and each parameter's name and
/// description.
fn trim(tool: &Value) -> Value {
    let mut kept = Map::new();
    for key in ["name", "title", "description"] {
        if let Some(v) = tool.get(key).filter(|v| v.is_string()) {
            kept.insert(key.to_owned(), v.clone());
        }
    }
    let mut properties = Map::new();
    if let Some(props) = tool["inputSchema"]["properties"].as_object() {
        for (name, schema) in props {
            let mut p = Map::new();
            if let Some(d) = schema.get("description").filter(|d| d.is_string()) {
                p.insert("description".to_owned(), d.clone());
            }
            properties.insert(name.clone(), Value::Object(p));
        }
    }
    kept.insert(
        "inputSchema".to_owned(),
        json!({"type": "object", "properties": properties}),
    );
    Value::Object(kept)
}

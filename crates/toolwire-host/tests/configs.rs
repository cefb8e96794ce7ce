//! Configuration files as each MCP app writes them, and malformed ones: what loads, and where
//! each problem is named.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use toolwire::Client;
use toolwire_host::{ConfigError, ProblemKind, ServerTransport, ServersConfig};

fn env(name: &str) -> Option<String> {
    match name {
        "GITHUB_TOKEN" => Some("ghp_secret".into()),
        "LINEAR_TOKEN" => Some("lin_secret".into()),
        "HOME" => Some("/home/me".into()),
        _ => None,
    }
}

fn parse(text: &str) -> ServersConfig {
    ServersConfig::parse(text, env).unwrap_or_else(|e| panic!("{e}"))
}

/// `(server, key, problem)` of every problem, for tables.
fn problems(text: &str) -> Vec<(Option<String>, Option<String>, ProblemKind)> {
    match ServersConfig::parse(text, env) {
        Ok(config) => panic!("loaded: {config:?}"),
        Err(e) => e
            .problems()
            .iter()
            .map(|p| (p.server.clone(), p.key.clone(), p.kind.clone()))
            .collect(),
    }
}

fn stdio(config: &ServersConfig, name: &str) -> (String, Vec<String>, Vec<(String, String)>) {
    match &config.get(name).unwrap().transport {
        ServerTransport::Stdio {
            command, args, env, ..
        } => (command.clone(), args.clone(), env.clone()),
        other => panic!("{name}: {other:?}"),
    }
}

fn http(config: &ServersConfig, name: &str) -> (String, Vec<(String, String)>) {
    match &config.get(name).unwrap().transport {
        ServerTransport::Http { url, headers, .. } => (url.clone(), headers.clone()),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn claude_desktop_stdio_entries() {
    let config = parse(
        r#"{"mcpServers": {
            "filesystem": {"command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/Desktop"]},
            "github": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}}
        }}"#,
    );
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["filesystem", "github"]);
    let (command, args, _) = stdio(&config, "filesystem");
    assert_eq!(command, "npx");
    assert_eq!(args[2], "/home/me/Desktop");
    let (_, _, env) = stdio(&config, "github");
    assert_eq!(
        env,
        [(
            "GITHUB_PERSONAL_ACCESS_TOKEN".to_owned(),
            "ghp_secret".to_owned()
        )]
    );
}

#[test]
fn claude_code_mcp_json_with_types_and_defaults() {
    let config = parse(
        r#"{"mcpServers": {
            "linear": {"type": "http", "url": "https://mcp.linear.app/mcp",
                "headers": {"Authorization": "Bearer ${LINEAR_TOKEN}"}},
            "legacy": {"type": "sse", "url": "https://old.example/sse"},
            "local": {"type": "stdio", "command": "my-server", "args": ["--port", "${PORT:-8080}"]},
            "modern": {"type": "streamable-http", "url": "https://x.example/mcp"}
        }}"#,
    );
    assert_eq!(
        http(&config, "linear"),
        (
            "https://mcp.linear.app/mcp".to_owned(),
            vec![("Authorization".to_owned(), "Bearer lin_secret".to_owned())]
        )
    );
    assert!(matches!(
        config.get("legacy").unwrap().transport,
        ServerTransport::Sse { .. }
    ));
    assert_eq!(stdio(&config, "local").1, ["--port", "8080"]);
    assert_eq!(http(&config, "modern").0, "https://x.example/mcp");
}

#[test]
fn cursor_infers_the_transport_from_command_or_url() {
    let config = parse(
        r#"{"mcpServers": {
            "remote": {"url": "https://mcp.example.com/mcp", "headers": {"X-Team": "a"}},
            "local": {"command": "python", "args": ["server.py"]}
        }}"#,
    );
    assert_eq!(http(&config, "remote").0, "https://mcp.example.com/mcp");
    assert_eq!(stdio(&config, "local").0, "python");
}

#[test]
fn vs_code_servers_key_jsonc_and_env_scheme() {
    let config = parse(
        r#"// .vscode/mcp.json
        {
          "inputs": [{"type": "promptString", "id": "token", "password": true}],
          "servers": {
            /* a block comment */
            "github": {
              "type": "http",
              "url": "https://api.githubcopilot.com/mcp/",
              "headers": {"Authorization": "Bearer ${env:GITHUB_TOKEN}"},
            },
            "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"],},
          },
        }"#,
    );
    assert_eq!(
        http(&config, "github").1,
        [("Authorization".to_owned(), "Bearer ghp_secret".to_owned())]
    );
    assert_eq!(stdio(&config, "fetch").1, ["mcp-server-fetch"]);
}

#[test]
fn vs_code_input_prompts_are_refused_with_where_they_are() {
    assert_eq!(
        problems(
            r#"{"servers": {"github": {"type": "http", "url": "https://x/mcp",
                "headers": {"Authorization": "Bearer ${input:token}"}}}}"#
        ),
        [(
            Some("github".into()),
            Some("headers.Authorization".into()),
            ProblemKind::UnsupportedScheme("input".into())
        )]
    );
}

#[test]
fn windsurf_server_url_and_disabled() {
    let config = parse(
        r#"{"mcpServers": {
            "remote": {"serverUrl": "https://mcp.example.com/mcp", "disabled": true,
                "headers": {"Authorization": "Bearer ${env:LINEAR_TOKEN}"}}
        }}"#,
    );
    let remote = config.get("remote").unwrap();
    assert!(remote.disabled);
    assert_eq!(http(&config, "remote").0, "https://mcp.example.com/mcp");
}

#[test]
fn gemini_http_url_filters_timeout_cwd_and_kept_extras() {
    let config = parse(
        r#"{"theme": "dark", "mcpServers": {
            "tools": {"httpUrl": "https://mcp.example.com/mcp", "timeout": 30000, "trust": true,
                "includeTools": ["read_*", "search"], "excludeTools": ["*_secret"]},
            "local": {"command": "node", "args": ["server.js"], "cwd": "./servers"}
        }}"#,
    );
    let tools = config.get("tools").unwrap();
    assert_eq!(tools.timeout, Some(Duration::from_secs(30)));
    assert!(tools.tools.allows("read_file"));
    assert!(!tools.tools.allows("read_secret"));
    assert!(!tools.tools.allows("delete_file"));
    assert_eq!(tools.extra.get("trust"), Some(&json!(true)));
    match &config.get("local").unwrap().transport {
        ServerTransport::Stdio { cwd, .. } => {
            assert_eq!(cwd.as_deref(), Some(std::path::Path::new("./servers")))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn cline_streamable_http_and_codex_style_tool_lists() {
    let config = parse(
        r#"{"mcpServers": {
            "a": {"type": "streamable_http", "url": "https://a/mcp", "alwaysAllow": ["x"],
                "enabled_tools": ["x", "y"], "disabled_tools": ["y"]}
        }}"#,
    );
    let a = config.get("a").unwrap();
    assert!(a.tools.allows("x"));
    assert!(!a.tools.allows("y"));
    assert!(!a.tools.allows("z"));
    assert_eq!(a.extra.get("alwaysAllow"), Some(&json!(["x"])));
}

#[test]
fn syntax_errors_name_line_and_column() {
    let err = ServersConfig::parse(
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": }\n  }\n}",
        env,
    )
    .unwrap_err();
    let problem = &err.problems()[0];
    assert_eq!(problem.position.map(|(line, _)| line), Some(3));
    assert!(matches!(problem.kind, ProblemKind::Syntax(_)));
    assert!(err.to_string().contains("line 3, column"), "{err}");
}

#[test]
fn every_problem_of_a_file_is_reported_and_nothing_loads() {
    let got = problems(
        r#"{"mcpServers": {
            "both": {"command": "x", "url": "https://x/mcp"},
            "neither": {"args": ["a"]},
            "typo": {"type": "websocket", "url": "wss://x"},
            "mismatch": {"type": "stdio", "url": "https://x/mcp"},
            "wrong": {"command": "x", "args": "not a list", "env": {"N": 1}},
            "secret": {"command": "x", "env": {"TOKEN": "${NOT_SET}"}},
            "glob": {"url": "https://x/mcp", "includeTools": ["[unclosed"]},
            "late": {"url": "https://x/mcp", "timeout": "soon"},
            "fine": {"command": "ok"}
        }}"#,
    );
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        got,
        [
            (s("both"), None, ProblemKind::BothTransports),
            (
                s("glob"),
                s("includeTools"),
                ProblemKind::BadPattern("[unclosed".into())
            ),
            (
                s("late"),
                s("timeout"),
                ProblemKind::WrongType("a whole number of milliseconds")
            ),
            (
                s("mismatch"),
                s("type"),
                ProblemKind::TypeMismatch("stdio".into(), "`command`")
            ),
            (s("neither"), None, ProblemKind::NoTransport),
            (
                s("secret"),
                s("env.TOKEN"),
                ProblemKind::UnsetVariable("NOT_SET".into())
            ),
            (
                s("typo"),
                s("type"),
                ProblemKind::UnknownType("websocket".into())
            ),
            (
                s("wrong"),
                s("args"),
                ProblemKind::WrongType("an array of strings")
            ),
            (s("wrong"), s("env.N"), ProblemKind::WrongType("a string")),
        ]
    );
}

#[test]
fn the_file_itself_must_hold_servers() {
    assert_eq!(problems("[]"), [(None, None, ProblemKind::NotAnObject)]);
    assert_eq!(problems("{}"), [(None, None, ProblemKind::NoServers)]);
    assert_eq!(
        problems(r#"{"mcpServers": []}"#),
        [(
            None,
            Some("mcpServers".into()),
            ProblemKind::WrongType("an object")
        )]
    );
}

#[test]
fn loading_a_file_names_it_in_every_error() {
    let dir = std::env::temp_dir().join(format!("toolwire-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mcp.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {"a": {"type": "ws", "url": "x"}}}"#,
    )
    .unwrap();
    let err = ServersConfig::load(&file).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("{}: server `a`, key `type`", file.display())),
        "{err}"
    );
    std::fs::write(&file, r#"{"mcpServers": {"a": {"command": "x"}}}"#).unwrap();
    let config = ServersConfig::load(&file).unwrap();
    assert_eq!(config.file.as_deref(), Some(file.as_path()));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(
        ServersConfig::load(dir.join("missing.json")),
        Err(ConfigError::Read { .. })
    ));
}

#[test]
fn secrets_never_reach_debug_or_errors() {
    let config = parse(
        r#"{"mcpServers": {
            "gh": {"command": "x", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
            "lin": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer ${LINEAR_TOKEN}"}}
        }}"#,
    );
    let shown = format!("{config:?}");
    assert!(
        shown.contains("GITHUB_TOKEN") && shown.contains("Authorization"),
        "{shown}"
    );
    assert!(
        !shown.contains("ghp_secret") && !shown.contains("lin_secret"),
        "{shown}"
    );
    let stdio = config.get("gh").unwrap().stdio_config().unwrap();
    let shown = format!("{stdio:?}");
    assert!(shown.contains("GITHUB_TOKEN"), "{shown}");
    assert!(!shown.contains("ghp_secret"), "{shown}");
}

/// A `type: "sse"` entry connects over the legacy HTTP+SSE transport, with its headers.
#[tokio::test]
async fn a_legacy_sse_entry_connects_over_the_sse_transport() {
    let mut options = toolwire_refserver::Options::default();
    options.server.sse = true;
    let server = toolwire_refserver::serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), options)
        .await
        .unwrap();
    let text = format!(
        r#"{{"mcpServers": {{"old": {{"type": "sse", "url": "{}/sse", "headers": {{"X-Team": "a"}}}}}}}}"#,
        server.url()
    );
    let config = parse(&text);
    let entry = config.get("old").unwrap();
    assert!(matches!(entry.transport, ServerTransport::Sse { .. }));
    let client = Client::builder("host-test", "0")
        .connect_sse(entry.http_transport().unwrap())
        .unwrap();
    let result = client
        .call_tool("echo", json!({"text": "old but gold"}))
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("old but gold"));
    assert!(!client.ready().await.unwrap().version.is_modern());
    client.close().await;
}

/// An HTTP entry connects to a real server with its headers.
#[tokio::test]
async fn an_http_entry_connects_with_its_settings() {
    let server = toolwire_refserver::serve_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        toolwire_refserver::Options::default(),
    )
    .await
    .unwrap();
    let text = format!(
        r#"{{"mcpServers": {{"ref": {{"url": "{}", "headers": {{"X-Team": "a"}}, "timeout": 5000}}}}}}"#,
        server.url()
    );
    let config = parse(&text);
    let entry = config.get("ref").unwrap();
    let client = Client::builder("host-test", "0")
        .timeouts(entry.timeout.unwrap(), Duration::from_secs(5))
        .connect_http(entry.http_transport().unwrap())
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let kept: Vec<&str> = tools
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| entry.tools.allows(n))
        .collect();
    assert!(kept.contains(&"echo"), "{kept:?}");
    client.close().await;
}

/// The draft standard's `oauth` object: loaded on remote entries (with `${VAR}`s), refused on
/// a stdio entry and beside an `Authorization` header, each wrong member named by its key.
#[test]
fn the_oauth_object_loads_on_remote_entries_and_is_refused_where_it_cannot_apply() {
    let config = parse(
        r#"{"mcpServers": {"notion": {"type": "streamable-http", "url": "https://mcp.notion.com/mcp",
            "oauth": {"clientId": "cid-${GITHUB_TOKEN}", "scopes": ["read", "write"],
                      "redirectUri": "http://127.0.0.1:8765/cb"}}}}"#,
    );
    let oauth = config.get("notion").unwrap().oauth.clone().unwrap();
    assert_eq!(oauth.client_id.as_deref(), Some("cid-ghp_secret"));
    assert_eq!(oauth.scopes, ["read", "write"]);
    assert_eq!(
        oauth.redirect_uri.as_deref(),
        Some("http://127.0.0.1:8765/cb")
    );
    assert!(!config.get("notion").unwrap().extra.contains_key("oauth"));

    let found = problems(
        r#"{"mcpServers": {
            "local": {"command": "x", "oauth": {"clientId": "a"}},
            "both": {"url": "https://x/mcp", "headers": {"authorization": "Bearer t"}, "oauth": {}},
            "typed": {"url": "https://x/mcp", "oauth": {"clientId": 7, "scopes": "read"}},
            "flat": {"url": "https://x/mcp", "oauth": "yes"}
        }}"#,
    );
    let key = |k: &str| Some(k.to_owned());
    assert_eq!(
        found,
        [
            (
                key("both"),
                key("oauth"),
                ProblemKind::OAuthWithAuthorization
            ),
            (
                key("flat"),
                key("oauth"),
                ProblemKind::WrongType("an object")
            ),
            (key("local"), key("oauth"), ProblemKind::OAuthOnStdio),
            (
                key("typed"),
                key("oauth.clientId"),
                ProblemKind::WrongType("a string")
            ),
            (
                key("typed"),
                key("oauth.scopes"),
                ProblemKind::WrongType("an array of strings")
            ),
        ]
    );
}

/// OAuth settings are made for remote entries without credentials only, with the entry's
/// client id and scopes on top of the caller's.
#[test]
fn oauth_settings_apply_only_to_remote_entries_without_an_authorization_header() {
    let config = parse(
        r#"{"mcpServers": {
            "plain": {"url": "https://a/mcp"},
            "configured": {"url": "https://b/mcp", "oauth": {"clientId": "client-42", "scopes": ["files:read"]}},
            "keyed": {"url": "https://c/mcp", "headers": {"AUTHORIZATION": "Token ${LINEAR_TOKEN}"}},
            "unset": {"url": "https://d/mcp", "headers": {"Authorization": "Bearer ${NOT_SET:-}"},
                      "oauth": {"clientId": "client-43"}},
            "local": {"command": "x"}
        }}"#,
    );
    let base = toolwire::auth::OAuthConfig::new();
    let made = |name: &str| {
        config
            .get(name)
            .unwrap()
            .oauth_config(base.clone())
            .map(|c| format!("{c:?}"))
    };
    assert!(made("plain").is_some_and(|c| !c.contains("client-42")));
    let configured = made("configured").unwrap();
    assert!(
        configured.contains("client-42") && configured.contains("files:read"),
        "{configured}"
    );
    assert_eq!(made("keyed"), None);
    // A token that fills in empty is no credentials: the header is left out, OAuth applies.
    assert!(made("unset").is_some_and(|c| c.contains("client-43")));
    assert!(!config.get("unset").unwrap().has_authorization());
    assert!(
        !config
            .get("unset")
            .unwrap()
            .http_transport()
            .unwrap()
            .has_credentials()
    );
    assert_eq!(made("local"), None);
    assert!(config.get("keyed").unwrap().has_authorization());
    assert!(!config.get("plain").unwrap().has_authorization());
    assert_eq!(config.get("plain").unwrap().url(), Some("https://a/mcp"));
    assert_eq!(config.get("local").unwrap().url(), None);
}

/// An entry's `Authorization` header (which the transport does not take as a plain header)
/// becomes its credentials, sent as written; OAuth turned on for the client leaves it alone.
#[tokio::test]
async fn an_authorization_header_is_the_entrys_credentials_and_oauth_leaves_it_alone() {
    use toolwire_test_support::http::{Framing, HttpPeer, scripted};
    let peer = HttpPeer::start(scripted(toolwire_test_support::Eras::Both, Framing::Json)).await;
    let text = format!(
        r#"{{"mcpServers": {{"keyed": {{"url": "{}", "headers": {{"Authorization": "Token ${{LINEAR_TOKEN}}", "X-Team": "a"}}}}}}}}"#,
        peer.url()
    );
    let config = parse(&text);
    let entry = config.get("keyed").unwrap();
    let http = entry.http_transport().unwrap();
    assert!(http.has_credentials());
    assert!(!format!("{http:?}").contains("lin_secret"));
    let client = Client::builder("host-test", "0")
        .oauth(toolwire::auth::OAuthConfig::new())
        .connect_http(http)
        .unwrap();
    client.list_all_tools().await.unwrap();
    client.close().await;
    let requests = peer.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r.header("authorization"), "Token lin_secret", "{}", r.path);
        assert_eq!(r.header("x-team"), "a");
    }
}

/// `unixSocket` (Toolwire's own key) on a remote entry: the socket its URL is reached over,
/// `${VAR}`s filled; refused on a stdio entry, and not kept among the unknown members.
#[test]
fn a_remote_entry_may_name_a_unix_socket_and_a_stdio_one_may_not() {
    let config = parse(
        r#"{"mcpServers": {"local": {"url": "http://localhost/mcp",
            "unixSocket": "/run/user/${GITHUB_TOKEN}/mcp.sock"}}}"#,
    );
    let entry = config.get("local").unwrap();
    match &entry.transport {
        ServerTransport::Http { unix_socket, .. } => assert_eq!(
            unix_socket.as_deref(),
            Some(std::path::Path::new("/run/user/ghp_secret/mcp.sock"))
        ),
        other => panic!("{other:?}"),
    }
    assert!(!entry.extra.contains_key("unixSocket"));
    let built = entry.http_transport().unwrap();
    assert_eq!(
        built.unix_socket_path(),
        Some(std::path::Path::new("/run/user/ghp_secret/mcp.sock"))
    );
    let found = problems(
        r#"{"mcpServers": {"child": {"command": "x", "unixSocket": "/tmp/s.sock"},
            "typed": {"url": "http://localhost/mcp", "unixSocket": 7}}}"#,
    );
    let key = |k: &str| Some(k.to_owned());
    assert_eq!(
        found,
        [
            (
                key("child"),
                key("unixSocket"),
                ProblemKind::UnixSocketOnStdio
            ),
            (
                key("typed"),
                key("unixSocket"),
                ProblemKind::WrongType("a string")
            ),
        ]
    );
}

#[test]
fn aliases_name_tools_and_a_bad_one_is_a_problem_of_that_entry() {
    let config = parse(
        r#"{"mcpServers": {"gh": {"command": "gh-mcp",
            "aliases": {"create_issue": "new_issue", "search_code": "grep"}}}}"#,
    );
    let gh = config.get("gh").unwrap();
    assert_eq!(
        gh.aliases.get("create_issue").map(String::as_str),
        Some("new_issue")
    );
    assert_eq!(gh.aliases.len(), 2);
    assert!(!gh.extra.contains_key("aliases"));

    for bad in [
        r#"{"create_issue": ""}"#,
        r#"{"create_issue": "new issue"}"#,
        r#"{"x": 1}"#,
        "[]",
    ] {
        let text =
            format!(r#"{{"mcpServers": {{"gh": {{"command": "gh-mcp", "aliases": {bad}}}}}}}"#);
        let found = problems(&text);
        assert_eq!(found.len(), 1, "{bad}: {found:?}");
        assert_eq!(found[0].0.as_deref(), Some("gh"));
        assert_eq!(found[0].1.as_deref(), Some("aliases"));
        assert!(matches!(found[0].2, ProblemKind::WrongType(_)), "{bad}");
    }
}

#[test]
fn an_entry_pins_its_protocol_or_is_refused_for_a_version_this_client_does_not_speak() {
    let config = parse(
        r#"{"mcpServers": {
            "py": {"command": "python", "args": ["server.py"], "protocol": "2025-11-25"},
            "auto": {"command": "x", "protocol": "auto"},
            "plain": {"command": "x"}
        }}"#,
    );
    assert_eq!(
        config.get("py").unwrap().protocol,
        toolwire::ProtocolMode::Pinned(toolwire::ProtocolVersion::V2025_11_25)
    );
    assert_eq!(
        config.get("auto").unwrap().protocol,
        toolwire::ProtocolMode::Auto
    );
    assert_eq!(
        config.get("plain").unwrap().protocol,
        toolwire::ProtocolMode::Auto
    );
    for bad in [r#""2099-01-01""#, r#""latest""#, "20251125"] {
        let found = problems(&format!(
            r#"{{"mcpServers": {{"py": {{"command": "python", "protocol": {bad}}}}}}}"#
        ));
        assert_eq!(found.len(), 1, "{bad}: {found:?}");
        assert_eq!(found[0].0.as_deref(), Some("py"));
        assert_eq!(found[0].1.as_deref(), Some("protocol"));
        assert!(
            matches!(found[0].2, ProblemKind::WrongType(_)),
            "{bad}: {found:?}"
        );
    }
}

#[test]
fn likely_typos_of_known_members_are_named_and_other_applications_members_are_not() {
    let config = parse(
        r#"{"mcpServers": {
            "a": {"command": "echo", "envv": {"A": "1"}, "disable": true, "Args": ["x"]},
            "b": {"command": "echo", "alwaysAllow": ["x"], "title": "B", "trust": true}
        }}"#,
    );
    let mut typos = config.likely_typos();
    typos.sort();
    assert_eq!(
        typos,
        [
            ("a".to_owned(), "Args".to_owned(), "args"),
            ("a".to_owned(), "disable".to_owned(), "disabled"),
            ("a".to_owned(), "envv".to_owned(), "env"),
        ]
    );
}

#[test]
fn workspace_folder_in_cwd_is_the_project_of_the_file() {
    let dir = std::env::temp_dir().join(format!("toolwire-host-ws-{}", std::process::id()));
    let vscode = dir.join(".vscode");
    std::fs::create_dir_all(&vscode).unwrap();
    let text = r#"{"servers": {"a": {"command": "node", "args": ["${workspaceFolder}/server.js"],
        "cwd": "${workspaceFolder}"}}}"#;
    let config = ServersConfig::from_text(vscode.join("mcp.json"), text).unwrap();
    let (_, args, _) = stdio(&config, "a");
    let root = std::path::absolute(&dir).unwrap();
    assert_eq!(args, [format!("{}/server.js", root.display())]);
    match &config.get("a").unwrap().transport {
        ServerTransport::Stdio { cwd, .. } => assert_eq!(cwd.as_deref(), Some(root.as_path())),
        other => panic!("{other:?}"),
    }
    // Beside any other file: its own folder.
    let config = ServersConfig::from_text(dir.join("mcp.json"), text).unwrap();
    let (_, args, _) = stdio(&config, "a");
    assert_eq!(args, [format!("{}/server.js", root.display())]);
    let _ = std::fs::remove_dir_all(&dir);
}

//! The host over one configuration naming real servers: the scripted server as a child
//! process, the reference server over loopback HTTP, a command that cannot start, a disabled
//! entry, and a child that dies after a while.

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
use toolwire_host::{
    Host, HostError, Naming, ServerState, ServersConfig, is_provider_safe, provider_safe,
};
use toolwire_refserver::{Options, serve_http};

mod procs;

const SERVER: &str = env!("CARGO_BIN_EXE_toolwire-test-server");

async fn reference() -> toolwire_refserver::HttpServer {
    serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), Options::default())
        .await
        .unwrap()
}

fn config(url: &str) -> ServersConfig {
    let text = json!({"mcpServers": {
        "scripted": {"command": SERVER, "args": ["modern"]},
        "ref": {"type": "http", "url": url, "excludeTools": ["fail", "protocol_*"]},
        "broken": {"command": "/nonexistent/toolwire-test-binary"},
        "off": {"command": SERVER, "args": ["modern"], "disabled": true},
        // Ends itself after three seconds: a server that dies later.
        "mortal": {"command": "sh", "args": ["-c", "exec timeout 3 \"$0\" legacy", SERVER]},
    }})
    .to_string();
    ServersConfig::parse(&text, |_| None).unwrap()
}

fn host(config: &ServersConfig) -> Host {
    Host::builder(Client::builder("host-e2e", "0"))
        .start(config)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_start_side_by_side_and_calls_route_by_qualified_name() {
    let server = reference().await;
    let config = config(&server.url());
    let host = host(&config);
    host.settled(Duration::from_secs(20)).await;

    assert!(matches!(
        host.state("scripted"),
        Some(ServerState::Ready { .. })
    ));
    assert!(matches!(host.state("ref"), Some(ServerState::Ready { .. })));
    assert!(matches!(
        host.state("mortal"),
        Some(ServerState::Ready { .. })
    ));
    assert_eq!(host.state("off"), Some(ServerState::Disabled));
    match host.state("broken") {
        Some(ServerState::Failed { reason }) => {
            assert!(reason.contains("nonexistent"), "{reason}")
        }
        other => panic!("{other:?}"),
    }

    // One snapshot, qualified names, the filters applied before it.
    let tools = host.tools();
    let names = tools.names();
    for expected in [
        "scripted__echo",
        "ref__echo",
        "ref__execute_sql",
        "mortal__echo",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("ref__protocol_") || *n == "ref__fail")
    );
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("off__") || n.starts_with("broken__"))
    );
    match host.state("ref") {
        Some(ServerState::Ready { tools, .. }) => {
            assert_eq!(
                tools,
                names.iter().filter(|n| n.starts_with("ref__")).count()
            )
        }
        other => panic!("{other:?}"),
    }

    // Routed to the right server, with its own name for the tool.
    let r = host
        .call_tool("ref__echo", json!({"text": "from ref"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("from ref"));
    let r = host
        .call_tool("scripted__echo", json!({"text": "from scripted"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("from scripted"));
    // A filtered tool is not reachable through the host.
    assert!(matches!(
        host.call_tool("ref__fail", json!({})).await,
        Err(HostError::UnknownTool(..))
    ));
    assert!(matches!(
        host.call_tool("nowhere__echo", json!({})).await,
        Err(HostError::UnknownTool(..))
    ));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_on_one_server_reaches_the_merged_snapshot() {
    let server = reference().await;
    let config = config(&server.url());
    let host = host(&config);
    host.settled(Duration::from_secs(20)).await;
    let mut changes = host.subscribe();
    let before = host.tools().generation();
    assert!(host.tools().get("ref__read_file").is_none());
    // Registers read_file and write_file a moment after it answers, and announces them.
    host.call_tool("ref__unlock_files", json!({}))
        .await
        .unwrap();
    let change = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let change = changes.recv().await.unwrap();
            if change.server.as_ref() == "ref" {
                return change;
            }
        }
    })
    .await
    .expect("no change from ref");
    let mut added: Vec<&str> = change.added.iter().map(|n| &**n).collect();
    added.sort_unstable();
    assert_eq!(added, ["ref__read_file", "ref__write_file"]);
    let tools = host.tools();
    assert!(tools.generation() > before);
    assert!(tools.get("ref__read_file").is_some());
    // The other servers' tools are untouched.
    assert!(tools.get("scripted__echo").is_some());
    host.shutdown().await;
}

/// Without a reconnect policy a server that dies while nobody calls it is noticed at once:
/// its state says so and its tools leave the snapshot, before any call fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_while_idle_fails_alone_without_a_policy() {
    let server = reference().await;
    let config = config(&server.url());
    let host = Host::builder(Client::builder("host-e2e", "0"))
        .reconnect(None)
        .start(&config)
        .unwrap();
    host.settled(Duration::from_secs(20)).await;
    assert!(host.tools().get("mortal__echo").is_some());
    // `mortal` ends itself three seconds after it started.
    let mut state = host.watch("mortal").unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        state.wait_for(|s| matches!(s, ServerState::Failed { .. })),
    )
    .await
    .expect("the death of an idle server went unnoticed")
    .unwrap();
    assert!(
        host.tools().get("mortal__echo").is_none(),
        "its tools left the snapshot"
    );
    let err = host
        .call_tool("mortal__echo", json!({"text": "anyone?"}))
        .await
        .unwrap_err();
    // Its tools are gone, and a call to one says its server is down.
    assert!(
        matches!(&err, HostError::NotRunning { server, state } if server == "mortal" && state.starts_with("failed")),
        "{err}"
    );
    // The others keep answering.
    let r = host
        .call_tool("ref__echo", json!({"text": "still here"}))
        .await
        .unwrap_or_else(|e| panic!("{e}; ref is {:?}", host.state("ref")));
    assert_eq!(r.content[0].as_text(), Some("still here"));
    let r = host
        .call_tool("scripted__echo", json!({"text": "me too"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("me too"));
    host.shutdown().await;
}

/// With the default policy the host restarts a server that died: its state goes through
/// `Reconnecting`, its tools stay, and calls reach the new process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_is_brought_back_by_the_default_policy() {
    let server = reference().await;
    let config = config(&server.url());
    let host = host(&config);
    host.settled(Duration::from_secs(20)).await;
    let mut state = host.watch("mortal").unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        state.wait_for(|s| matches!(s, ServerState::Reconnecting { attempt: 1 })),
    )
    .await
    .expect("the death was not noticed")
    .unwrap();
    assert!(
        host.tools().get("mortal__echo").is_some(),
        "a reconnecting server keeps its tools"
    );
    tokio::time::timeout(
        Duration::from_secs(10),
        state.wait_for(|s| matches!(s, ServerState::Ready { tools, .. } if *tools > 0)),
    )
    .await
    .expect("the server did not come back")
    .unwrap();
    let r = host
        .call_tool("mortal__echo", json!({"text": "back"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("back"));
    host.shutdown().await;
}

#[tokio::test]
async fn a_server_name_with_the_separator_is_refused() {
    let config =
        ServersConfig::parse(r#"{"mcpServers": {"a__b": {"command": "x"}}}"#, |_| None).unwrap();
    let err = Host::builder(Client::builder("host-e2e", "0"))
        .start(&config)
        .unwrap_err();
    assert!(matches!(err, HostError::NameHasSeparator { .. }), "{err}");
    // Another separator makes it fine.
    let host = Host::builder(Client::builder("host-e2e", "0"))
        .separator("/")
        .start(&config)
        .unwrap();
    host.shutdown().await;
}

#[test]
fn two_tools_aliased_alike_are_refused_naming_both_and_the_remedy() {
    let text = json!({"mcpServers": {
        "github": {"command": "x", "aliases": {"create_issue": "new_issue"}},
        "gitlab": {"command": "x", "aliases": {"open_issue": "new_issue"}},
        "off": {"command": "x", "aliases": {"other": "new_issue"}, "disabled": true},
    }});
    let config = ServersConfig::parse(&text.to_string(), |_| None).unwrap();
    let err = Host::builder(Client::builder("host-e2e", "0"))
        .check(&config)
        .unwrap_err();
    let HostError::AliasTaken {
        alias,
        server,
        tool,
        other_server,
        other_tool,
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(
        (alias.as_str(), server.as_str(), tool.as_str()),
        ("new_issue", "github", "create_issue")
    );
    assert_eq!(
        (other_server.as_str(), other_tool.as_str()),
        ("gitlab", "open_issue")
    );
    assert!(
        err.to_string().ends_with("give one of them another alias"),
        "{err}"
    );
    // The disabled entry's alias takes nothing: one of the two alone is fine.
    let text = json!({"mcpServers": {
        "github": {"command": "x", "aliases": {"create_issue": "new_issue"}},
        "off": {"command": "x", "aliases": {"other": "new_issue"}, "disabled": true},
    }});
    let config = ServersConfig::parse(&text.to_string(), |_| None).unwrap();
    assert!(
        Host::builder(Client::builder("host-e2e", "0"))
            .check(&config)
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_tools_added_to_one_server_reach_the_merged_snapshot() {
    let server = reference().await;
    let config = config(&server.url());
    let host = host(&config);
    host.settled(Duration::from_secs(20)).await;
    let mut changes = host.subscribe();
    // Added, then its definition changed: each a change of the merged snapshot, with its diff.
    for (description, added, changed) in [("first", 1, 0), ("second", 0, 1)] {
        let tool: toolwire::Tool = serde_json::from_value(
            json!({"name": "extra", "description": description, "inputSchema": {"type": "object"}}),
        )
        .unwrap();
        host.add_known_tools("ref", [tool]).unwrap();
        let change = tokio::time::timeout(Duration::from_secs(5), changes.recv())
            .await
            .expect("no change")
            .unwrap();
        assert_eq!(change.server.as_ref(), "ref");
        assert_eq!(
            (change.added.len(), change.changed.len()),
            (added, changed),
            "{change:?}"
        );
        assert!(
            change
                .added
                .iter()
                .chain(&change.changed)
                .all(|n| &**n == "ref__extra")
        );
        assert_eq!(
            host.tools()
                .get("ref__extra")
                .unwrap()
                .tool
                .description
                .as_deref(),
            Some(description)
        );
    }
    host.shutdown().await;
}

/// OAuth over a configuration: a remote entry without credentials logs in through the host's
/// OAuth settings, with its own `oauth.clientId` (a pre-registered client: no registration);
/// an entry with an `Authorization` header of its own is never given OAuth, so the server's
/// refusal of that header fails it alone. Without a person to approve, the entry that wants a
/// login is `NeedsLogin`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_entries_log_in_with_oauth_unless_they_carry_an_authorization_header() {
    use toolwire::auth::{FetchRedirect, MemoryStore, OAuthConfig};
    let (peer, state) = toolwire_test_support::oauth::protected_server(|_| {}).await;
    let text = json!({"mcpServers": {
        "open": {"url": peer.url(), "oauth": {"clientId": "pre-registered", "scopes": ["mcp:read"]}},
        "keyed": {"url": peer.url(), "headers": {"Authorization": "Bearer not-a-valid-token"}},
    }})
    .to_string();
    let config = ServersConfig::parse(&text, |_| None).unwrap();
    let base = OAuthConfig::new()
        .store(std::sync::Arc::new(MemoryStore::new()))
        .handler(std::sync::Arc::new(FetchRedirect::new(
            "http://127.0.0.1:9/callback",
        )));
    let host = Host::builder(Client::builder("host-e2e", "0"))
        .reconnect(None)
        .oauth(base)
        .start(&config)
        .unwrap();
    host.settled(Duration::from_secs(20)).await;

    assert!(
        matches!(host.state("open"), Some(ServerState::Ready { .. })),
        "{:?}",
        host.state("open")
    );
    match host.state("keyed") {
        Some(ServerState::Failed { reason }) => assert!(reason.contains("401"), "{reason}"),
        other => panic!("keyed: {other:?}"),
    }
    {
        let s = state.lock().unwrap();
        assert_eq!(s.authorizations, 1, "one login, for `open` only");
        assert_eq!(s.registrations, 0, "the configured client id is used");
        let client_id = s
            .authorize_query
            .iter()
            .find(|(k, _)| k == "client_id")
            .map(|(_, v)| v.as_str());
        assert_eq!(client_id, Some("pre-registered"));
    }
    // No person to approve: the entry that wants a login says so, typed; nothing is asked.
    let unattended = Host::builder(Client::builder("host-e2e", "0"))
        .reconnect(None)
        .oauth(
            OAuthConfig::new()
                .store(std::sync::Arc::new(MemoryStore::new()))
                .handler(std::sync::Arc::new(toolwire::auth::NoInteraction)),
        )
        .start(&config)
        .unwrap();
    unattended.settled(Duration::from_secs(20)).await;
    match unattended.state("open") {
        Some(ServerState::NeedsLogin { reason }) => {
            assert!(reason.contains("log in"), "{reason}");
        }
        other => panic!("open, unattended: {other:?}"),
    }
    assert!(matches!(
        unattended.state("keyed"),
        Some(ServerState::Failed { .. })
    ));
    assert_eq!(state.lock().unwrap().authorizations, 1, "no flow ran");
    unattended.shutdown().await;
    let bearers: Vec<String> = peer
        .requests()
        .iter()
        .filter(|r| r.path == "/mcp")
        .map(|r| r.header("authorization").to_owned())
        .collect();
    assert!(
        bearers.iter().any(|b| b == "Bearer not-a-valid-token"),
        "the entry's own header is sent: {bearers:?}"
    );
    host.shutdown().await;
}

/// Waits up to 5 s for the host's snapshot to satisfy `ready`, following its changes.
async fn until_tools(host: &Host, what: &str, ready: impl Fn(&toolwire_host::HostTools) -> bool) {
    let mut changes = host.subscribe();
    let wait = async {
        while !ready(&host.tools()) {
            let _ = changes.recv().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .unwrap_or_else(|_| panic!("never happened: {what}"));
}

fn tool(name: &str) -> toolwire::Tool {
    serde_json::from_value(json!({"name": name, "inputSchema": {"type": "object"}})).unwrap()
}

/// Provider-safe naming: names that already pass stay; others get the documented short form,
/// and a call by it reaches the server under the tool's own name. A name another tool holds
/// leaves the newcomer out, with both named, until the holder goes; then it comes in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_safe_names_route_calls_and_a_collision_waits_for_the_name() {
    // `a.b`'s tool `x.y` is named `a_b_`, 8 hex digits, `__x_y`; a server named `a_b_` and
    // those digits can offer a tool `x_y`, whose plain name is that same name.
    let taken = provider_safe("a.b", "__", "x.y");
    let holder = taken.split_once("__").unwrap().0.to_owned();
    let mut servers = json!({
        "plain": {"command": SERVER, "args": ["modern"]},
        "a.b": {"command": SERVER, "args": ["modern"]},
    });
    servers[&holder] = json!({"command": SERVER, "args": ["modern"]});
    let text = json!({ "mcpServers": servers }).to_string();
    let config = ServersConfig::parse(&text, |_| None).unwrap();
    let host = Host::builder(Client::builder("host-e2e", "0"))
        .naming(Naming::ProviderSafe)
        .start(&config)
        .unwrap();
    host.settled(Duration::from_secs(20)).await;
    let dotted = provider_safe("a.b", "__", "echo");
    assert_ne!(dotted, "a.b__echo");
    let names: Vec<String> = host
        .tools()
        .names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert!(names.iter().all(|n| is_provider_safe(n)), "{names:?}");
    assert!(names.contains(&"plain__echo".to_owned()), "{names:?}");
    assert!(names.contains(&dotted), "{names:?}");
    let r = host
        .call_tool(&dotted, json!({"text": "to the dotted server"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("to the dotted server"));

    // `a.b` takes the name; the other server then offers a tool whose plain name is it.
    host.add_known_tools("a.b", [tool("x.y")]).unwrap();
    until_tools(&host, "a.b's known tool", |t| t.get(&taken).is_some()).await;
    let impostor = "x_y".to_owned();
    host.add_known_tools(&holder, [tool(&impostor)]).unwrap();
    until_tools(&host, "the collision", |t| !t.collisions().is_empty()).await;
    let tools = host.tools();
    let collision = &tools.collisions()[0];
    assert_eq!(
        (
            collision.name.as_str(),
            collision.kept_server.as_str(),
            collision.kept_tool.as_str()
        ),
        (taken.as_str(), "a.b", "x.y")
    );
    assert_eq!(
        (collision.server.as_str(), collision.tool.as_str()),
        (holder.as_str(), impostor.as_str())
    );
    let message = collision.to_string();
    assert!(
        message.contains("x.y") && message.contains(&impostor),
        "{message}"
    );
    assert_eq!(
        tools.get(&taken).unwrap().server.as_ref(),
        "a.b",
        "the holder keeps it"
    );
    drop(tools);

    // The holder goes: the waiting tool comes in under the name.
    host.client("a.b")
        .unwrap()
        .remove_known_tools(["x.y"])
        .unwrap();
    until_tools(&host, "the name passed on", |t| {
        t.get(&taken).is_some_and(|h| h.server.as_ref() == holder)
    })
    .await;
    assert!(host.tools().collisions().is_empty());
    host.shutdown().await;
}

/// A configuration of scripted servers over stdio, each child marked by `mark` on its command
/// line (the server reads only its first argument).
fn marked(entries: &[(&str, &str)]) -> ServersConfig {
    let servers: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(name, mark)| {
            (
                (*name).to_owned(),
                json!({"command": SERVER, "args": ["modern", mark]}),
            )
        })
        .collect();
    ServersConfig::parse(&json!({ "mcpServers": servers }).to_string(), |_| None).unwrap()
}

/// Waits up to 5 s for `check` to hold.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..100 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never happened: {what}");
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_starts_stops_and_restarts_only_the_entries_that_changed() {
    let before = marked(&[
        ("keep", "reload-keep"),
        ("gone", "reload-gone"),
        ("change", "reload-change-1"),
    ]);
    let host = host(&before);
    host.settled(Duration::from_secs(20)).await;
    let kept_child = procs::children("reload-keep");
    assert_eq!(kept_child.len(), 1);
    assert_eq!(procs::children("reload-gone").len(), 1);

    // A name with the separator is refused, and nothing changes.
    let refused = host.reload(&marked(&[("bad__name", "reload-bad")]));
    assert!(
        matches!(refused, Err(HostError::NameHasSeparator { .. })),
        "{refused:?}"
    );
    assert_eq!(host.servers().len(), 3);

    let after = marked(&[
        ("keep", "reload-keep"),
        ("change", "reload-change-2"),
        ("new", "reload-new"),
    ]);
    let done = host.reload(&after).unwrap();
    assert_eq!(done.added, ["new"]);
    assert_eq!(done.removed, ["gone"]);
    assert_eq!(done.changed, ["change"]);
    assert_eq!(done.kept, ["keep"]);
    let names: Vec<String> = host.servers().iter().map(ToString::to_string).collect();
    assert_eq!(names, ["change", "keep", "new"]);

    until_tools(&host, "new in, gone out", |t| {
        t.get("new__echo").is_some()
            && t.get("gone__echo").is_none()
            && t.get("change__echo").is_some()
    })
    .await;
    eventually("the removed and the replaced children end", || {
        procs::children("reload-gone").is_empty() && procs::children("reload-change-1").is_empty()
    })
    .await;
    assert_eq!(procs::children("reload-change-2").len(), 1);
    assert_eq!(
        procs::children("reload-keep"),
        kept_child,
        "the unchanged entry's child goes on"
    );
    assert!(host.state("gone").is_none());
    let echoed = host
        .call_tool("keep__echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert!(!echoed.content.is_empty());

    // The same file again changes nothing.
    assert!(host.reload(&after).unwrap().is_empty());
    host.shutdown().await;
    eventually("no child outlives the host", || {
        procs::children("reload-").is_empty()
    })
    .await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stdio_server_stops_keeps_its_tools_and_starts_again_when_called() {
    let host = Host::builder(Client::builder("host-e2e", "0"))
        .stop_idle(Duration::from_millis(300))
        .start(&marked(&[("lazy", "idle-lazy")]))
        .unwrap();
    host.settled(Duration::from_secs(20)).await;
    let first = procs::children("idle-lazy");
    assert_eq!(first.len(), 1);
    eventually("stopped while idle, its child gone", || {
        matches!(host.state("lazy"), Some(ServerState::Idle { tools }) if tools > 0)
            && procs::children("idle-lazy").is_empty()
    })
    .await;
    assert!(
        host.tools().get("lazy__echo").is_some(),
        "its tools stay listed"
    );
    let mut changes = host.subscribe();
    let echoed = host
        .call_tool("lazy__echo", json!({"text": "awake"}))
        .await
        .unwrap();
    assert!(!echoed.content.is_empty());
    let second = procs::children("idle-lazy");
    assert_eq!(second.len(), 1, "a new child");
    assert_ne!(second, first);
    eventually("ready again", || {
        matches!(host.state("lazy"), Some(ServerState::Ready { .. }))
    })
    .await;
    assert!(host.tools().get("lazy__echo").is_some());
    assert!(
        changes.try_recv().is_err(),
        "the listing never changed on the way"
    );
    host.shutdown().await;
    eventually("no child outlives the host", || {
        procs::children("idle-lazy").is_empty()
    })
    .await;
}

/// An HTTP server that dies while nobody calls it is found out by the health check (nothing
/// else is open to break): failed, with the reason, its tools out; and back, listed, once it
/// answers again. The same on a server of either era.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_that_dies_while_idle_is_found_failed_by_the_health_check_and_comes_back() {
    for eras in [
        toolwire_refserver::Eras::Legacy,
        toolwire_refserver::Eras::Modern,
    ] {
        let mut options = Options::default();
        options.server.eras = eras;
        let server = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), options.clone())
            .await
            .unwrap();
        let addr = server.addr();
        let text = json!({"mcpServers": {"ref": {"type": "http", "url": server.url()}}});
        let config = ServersConfig::parse(&text.to_string(), |_| None).unwrap();
        let host = Host::builder(Client::builder("host-e2e", "0"))
            .reconnect(None)
            .health_check(Duration::from_millis(200))
            .restart_failed(Some(toolwire::Backoff {
                min: Duration::from_millis(100),
                max: Duration::from_millis(200),
                attempts: None,
                jitter: false,
            }))
            .start(&config)
            .unwrap();
        let mut state = host.watch("ref").unwrap();
        let ready = |s: &ServerState| matches!(s, ServerState::Ready { .. });
        tokio::time::timeout(Duration::from_secs(10), state.wait_for(ready))
            .await
            .expect("ready")
            .unwrap();
        // Checked while alive: still ready after several checks.
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(ready(&state.borrow()), "{eras:?}: {:?}", *state.borrow());

        drop(server);
        let failed = tokio::time::timeout(
            Duration::from_secs(10),
            state.wait_for(|s| matches!(s, ServerState::Failed { .. })),
        )
        .await
        .expect("found failed")
        .unwrap()
        .clone();
        assert!(host.load().get("ref__echo").is_none(), "its tools are out");
        let ServerState::Failed { reason } = failed else {
            unreachable!()
        };
        assert!(!reason.is_empty());

        let _again = toolwire_refserver::serve_http_again(addr, options)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), state.wait_for(ready))
            .await
            .expect("back once it answers")
            .unwrap();
        assert!(host.load().get("ref__echo").is_some(), "its tools are back");
        host.shutdown().await;
    }
}

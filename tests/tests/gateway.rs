//! The gateway end to end: reference servers of each era and a scripted child behind it,
//! Toolwire clients of each era in front, over loopback HTTP; headers checked on both sides,
//! errors relayed, an upstream that dies taking only its own tools out.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod gateway_common;

use std::sync::Arc;
use std::time::Duration;

use gateway_common::*;
use serde_json::json;
use toolwire::{
    Client, Error, HttpTransport, InputError, ProtocolMode, ProtocolVersion, ServerNotification,
};
use toolwire_host::{Naming, ServerState};
use toolwire_refserver::{Eras, Framing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_either_era_reach_servers_of_either_era_by_qualified_name() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new", "old"]).await;

    for (mode, version) in [
        (ProtocolMode::Auto, ProtocolVersion::V2026_07_28),
        (LEGACY, ProtocolVersion::V2025_06_18),
    ] {
        let client = client(&front.url(), mode);
        assert_eq!(client.ready().await.unwrap().version, version);
        let listed = client.list_tools().await.unwrap();
        let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_str()).collect();
        for expected in ["new__echo", "old__echo", "new__execute_sql", "old__add"] {
            assert!(names.contains(&expected), "{version:?}: {names:?}");
        }
        assert!(
            !names
                .iter()
                .any(|n| !n.starts_with("new__") && !n.starts_with("old__")),
            "{names:?}"
        );
        // The annotation survives the renaming: the listing still mirrors Region.
        let sql = listed
            .tools
            .iter()
            .find(|t| t.name == "new__execute_sql")
            .unwrap();
        assert_eq!(
            sql.input_schema.decode().unwrap()["properties"]["region"]["x-mcp-header"],
            "Region"
        );

        for server in ["new", "old"] {
            let r = client
                .call_tool(
                    &format!("{server}__echo"),
                    json!({"text": format!("{version:?} to {server}")}),
                )
                .await
                .unwrap();
            assert_eq!(text(&r), format!("{version:?} to {server}"));
        }
        // `new` checks every SEP-2243 header against the body: this call passes only if the
        // gateway sent `Mcp-Name: execute_sql` and `Mcp-Param-Region: eu-west-1`.
        let r = client
            .call_tool(
                "new__execute_sql",
                json!({"region": "eu-west-1", "query": "SELECT 1"}),
            )
            .await
            .unwrap();
        assert_eq!(text(&r), "region=eu-west-1 rows=1 query=SELECT 1");
        let r = client
            .call_tool("old__add", json!({"a": 40, "b": 2}))
            .await
            .unwrap();
        assert_eq!(r.structured_content, Some(json!({"sum": 42})));
        client.close().await;
    }
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_reach_the_client_as_the_upstream_sent_them() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new", "old"]).await;
    let client = client(&front.url(), LEGACY);

    // A JSON-RPC error: code and message as the upstream wrote them.
    match client.call_tool("old__protocol_error", json!({})).await {
        Err(Error::Server(e)) => {
            assert_eq!(e.code, -32603);
            assert_eq!(e.message, "protocol_error answers with a JSON-RPC error");
        }
        other => panic!("{other:?}"),
    }
    // The legacy URL elicitation error keeps its data: the client can act on it.
    match client.call_tool("old__link_account", json!({})).await {
        Err(Error::Input(InputError::UrlElicitationRequired {
            error,
            elicitations,
        })) => {
            assert_eq!(error.code, -32042);
            assert_eq!(elicitations.len(), 1);
            assert!(elicitations[0].is_url());
        }
        other => panic!("{other:?}"),
    }
    // A name no upstream has.
    match client.call_tool("nowhere__echo", json!({})).await {
        Err(Error::Server(e)) => {
            assert_eq!(e.code, -32602);
            assert!(e.message.contains("nowhere__echo"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    // A tool error is a result, relayed whole.
    let r = client.call_tool("new__fail", json!({})).await.unwrap();
    assert_eq!(r.is_error, Some(true));
    client.close().await;
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_larger_than_a_page_arrives_whole_in_name_order() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = setup(
        |new, old| json!({"new": {"url": new.url()}, "old": {"url": old.url()}}),
        Naming::Qualified,
        Some(3),
    )
    .await;
    let expected: Vec<String> = gateway
        .host()
        .tools()
        .names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert!(expected.len() > 6, "{expected:?}");

    // The first page alone: three tools and a cursor.
    let (status, page) = post(
        front.addr(),
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["result"]["tools"].as_array().unwrap().len(), 3);
    assert_eq!(page["result"]["nextCursor"], "3");

    // A client walks every page.
    let client = client(&front.url(), ProtocolMode::Auto);
    let listed = client.list_tools().await.unwrap();
    let names: Vec<String> = listed.tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, expected);
    client.close().await;
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_safe_names_are_served_and_routed() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = setup(
        |new, _| json!({"my.server": {"url": new.url()}}),
        Naming::ProviderSafe,
        None,
    )
    .await;
    let client = client(&front.url(), ProtocolMode::Auto);
    let listed = client.list_tools().await.unwrap();
    // `.` is not allowed: the short form, with its digest.
    let echo = toolwire_host::provider_safe("my.server", "__", "echo");
    assert_ne!(echo, "my.server__echo");
    assert!(listed.tools.iter().any(|t| t.name == echo), "{echo}");
    for tool in &listed.tools {
        assert!(toolwire_host::is_provider_safe(&tool.name), "{}", tool.name);
    }
    let r = client
        .call_tool(&echo, json!({"text": "safe"}))
        .await
        .unwrap();
    assert_eq!(text(&r), "safe");
    client.close().await;
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_dies_takes_only_its_tools_out_and_clients_hear_of_it() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = setup(
        |new, _| {
            json!({
                "new": {"url": new.url()},
                "mortal": {"command": SCRIPTED, "args": ["modern"],
                    "env": {toolwire_test_support::EXIT_AFTER_VAR: "1"}},
            })
        },
        Naming::Qualified,
        None,
    )
    .await;
    // `mortal` exits after answering its first call.

    for mode in [ProtocolMode::Auto, LEGACY] {
        let legacy = mode == LEGACY;
        let client = client(&front.url(), mode);
        let names: Vec<String> = client
            .list_tools()
            .await
            .unwrap()
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect();
        if legacy {
            // The second round: `mortal` is gone already.
            assert!(
                !names.iter().any(|n| n.starts_with("mortal__")),
                "{names:?}"
            );
            continue;
        }
        assert!(names.contains(&"mortal__echo".to_owned()), "{names:?}");
        let mut notices = client.notifications();
        client.listening().await.unwrap();

        let r = client
            .call_tool("mortal__echo", json!({"text": "last words"}))
            .await
            .unwrap();
        assert_eq!(text(&r), "last words");

        // The child exits; the gateway says the list changed, and the listing lost exactly
        // the dead server's tools.
        let heard = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(notice) = notices.recv().await {
                if matches!(notice.notification, ServerNotification::ToolsListChanged(_)) {
                    return;
                }
            }
            panic!("the client ended before a list change");
        })
        .await;
        assert!(heard.is_ok(), "no notifications/tools/list_changed");
        let after: Vec<String> = client
            .list_tools()
            .await
            .unwrap()
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect();
        let kept: Vec<&String> = names
            .iter()
            .filter(|n| !n.starts_with("mortal__"))
            .collect();
        assert_eq!(after.iter().collect::<Vec<_>>(), kept);
        assert!(matches!(
            gateway.host().state("mortal"),
            Some(ServerState::Failed { .. })
        ));
        // The other server still answers.
        let r = client
            .call_tool("new__echo", json!({"text": "still here"}))
            .await
            .unwrap();
        assert_eq!(text(&r), "still here");
        client.close().await;
    }
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_registered_upstream_reaches_the_listing_and_the_client_hears_it() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new"]).await;
    let client = client(&front.url(), LEGACY);
    let before = client.list_tools().await.unwrap().tools.len();
    let mut notices = client.notifications();
    client.listening().await.unwrap();

    // `unlock_files` registers two tools upstream a moment after it answers.
    // The result names them as the gateway does, so the client waits for those names.
    let r = client
        .call_tool("new__unlock_files", json!({}))
        .await
        .unwrap();
    assert_eq!(
        r.registers,
        Some(vec![
            "new__read_file".to_owned(),
            "new__write_file".to_owned()
        ])
    );
    let first = tokio::time::timeout(Duration::from_secs(10), notices.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        first.notification,
        ServerNotification::ToolsListChanged(_)
    ));
    let after = client.list_tools().await.unwrap().tools;
    assert_eq!(after.len(), before + 2);
    let r = client
        .call_tool("new__write_file", json!({"path": "a", "content": "b"}))
        .await
        .unwrap();
    assert_eq!(text(&r), "wrote a");
    client.close().await;
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_client_in_order_under_its_own_token_in_both_eras() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["old"]).await;
    for mode in [ProtocolMode::Auto, LEGACY] {
        let client = client(&front.url(), mode);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let r = client
            .call_tool_with_progress(
                "old__slow",
                json!({"steps": 3, "delay_ms": 20}),
                toolwire::CallOptions::default(),
                move |p| {
                    record
                        .lock()
                        .unwrap()
                        .push((p.progress, p.total, p.message.clone()));
                },
            )
            .await
            .unwrap();
        assert_eq!(text(&r), "done after 3 steps");
        let seen = seen.lock().unwrap().clone();
        let expected: Vec<(f64, Option<f64>, Option<String>)> = (1..=3)
            .map(|k| (k as f64, Some(3.0), Some(format!("step {k} of 3"))))
            .collect();
        assert_eq!(seen, expected);
        client.close().await;
    }
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_client_drops_is_cancelled_on_the_upstream() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["old"]).await;
    let old = &_upstreams[1];
    let client = client(&front.url(), LEGACY);
    client.ready().await.unwrap();
    let (started, running) = tokio::sync::oneshot::channel();
    let started = std::sync::Mutex::new(Some(started));
    let mut call = Box::pin(client.call_tool_with_progress(
        "old__slow",
        json!({"steps": 1000, "delay_ms": 20}),
        toolwire::CallOptions::default(),
        move |_| {
            if let Some(started) = started.lock().unwrap().take() {
                let _ = started.send(());
            }
        },
    ));
    // Dropped once the upstream has made progress: the call is running there, and nothing
    // was cancelled while it was held.
    tokio::select! {
        r = &mut call => panic!("the call ended: {r:?}"),
        _ = running => {}
    }
    assert_eq!(old.cancellations(), 0);
    drop(call);
    // The client tells the gateway, the gateway drops its own call, its client tells the
    // upstream.
    let told = tokio::time::timeout(Duration::from_secs(10), async {
        while old.cancellations() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(told.is_ok(), "the upstream never heard of the cancellation");
    assert_eq!(old.cancellations(), 1);
    // The connection goes on.
    let r = client
        .call_tool("old__echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(text(&r), "after");
    client.close().await;
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_prompts_and_completions_of_every_server_under_the_gateways_names() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new", "old"]).await;
    let direct = Client::builder("direct", "0")
        .connect_http(HttpTransport::builder(_upstreams[1].url()))
        .unwrap();
    let readme = direct.read_resource("toolwire://readme").await.unwrap();
    let greeting = direct
        .get_prompt("greet", [("who".to_owned(), "Ada".to_owned())])
        .await
        .unwrap();
    for mode in [ProtocolMode::Auto, LEGACY] {
        let client = client(&front.url(), mode);
        let resources = client.list_all_resources().await.unwrap();
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
        assert!(
            uris.contains(&"toolwire://new__readme") && uris.contains(&"toolwire://old__readme"),
            "{uris:?}"
        );
        let templates = client.list_all_resource_templates().await.unwrap();
        assert!(
            templates
                .iter()
                .any(|t| t.uri_template == "toolwire://old__files/{path}"),
            "{templates:?}"
        );
        // A read through the gateway is the server's, under the gateway's URI.
        let read = client
            .read_resource("toolwire://old__readme")
            .await
            .unwrap();
        let (through, own) = (
            serde_json::to_value(&read.contents).unwrap(),
            serde_json::to_value(&readme.contents).unwrap(),
        );
        assert_eq!(through[0]["uri"], "toolwire://old__readme");
        assert_eq!(through[0]["text"], own[0]["text"]);
        assert!(own[0]["text"].as_str().is_some_and(|t| !t.is_empty()));

        let prompts = client.list_all_prompts().await.unwrap();
        let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
        assert!(
            names.contains(&"new__greet") && names.contains(&"old__greet"),
            "{names:?}"
        );
        let got = client
            .get_prompt("old__greet", [("who".to_owned(), "Ada".to_owned())])
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&got.messages).unwrap(),
            serde_json::to_value(&greeting.messages).unwrap()
        );

        // Completions, by a prompt's name and by a template's URI.
        let by_prompt = client
            .complete(
                toolwire::types::CompletionReference::prompt("new__greet"),
                "who",
                "",
                [],
            )
            .await
            .unwrap();
        assert!(!by_prompt.completion.values.is_empty(), "{by_prompt:?}");

        // A URI no server gave is refused, and named.
        for uri in ["toolwire://nowhere__readme", "toolwire://readme"] {
            match client.read_resource(uri).await {
                Err(Error::Server(e)) => {
                    assert_eq!(e.code, -32602);
                    assert!(e.message.contains(uri), "{}", e.message);
                }
                other => panic!("{other:?}"),
            }
        }
        client.close().await;
    }
    direct.close().await;
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_of_a_subscribed_resource_reach_the_client_under_the_gateways_uri() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new", "old"]).await;
    // `write_file` (which announces what it wrote) comes with `unlock_files`.
    let unlocker = client(&front.url(), LEGACY);
    for server in ["new", "old"] {
        unlocker
            .call_tool(&format!("{server}__unlock_files"), json!({}))
            .await
            .unwrap();
    }
    unlocker.close().await;
    // Each downstream era against each upstream era.
    let rounds = [
        (ProtocolMode::Auto, "new"),
        (ProtocolMode::Auto, "old"),
        (LEGACY, "new"),
        (LEGACY, "old"),
    ];
    for (round, (mode, server)) in rounds.into_iter().enumerate() {
        let client = client(&front.url(), mode.clone());
        client.ready().await.unwrap();
        let path = format!("round-{round}.txt");
        let uri = format!("toolwire://{server}__files/{path}");
        let mut notices = client.notifications();
        client.subscribe_resource(&uri).await.unwrap();
        client
            .call_tool(
                &format!("{server}__write_file"),
                json!({"path": path, "content": "x"}),
            )
            .await
            .unwrap();
        let heard = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(notice) = notices.recv().await {
                let params: serde_json::Value = notice
                    .params
                    .as_deref()
                    .map(|p| serde_json::from_str(p.get()).unwrap())
                    .unwrap_or_default();
                if notice.method == "notifications/resources/updated" {
                    return params["uri"].as_str().map(str::to_owned);
                }
            }
            None
        })
        .await;
        assert_eq!(
            heard,
            Ok(Some(uri.clone())),
            "round {round}: {mode:?} via {server}"
        );
        client.unsubscribe_resource(&uri).await.unwrap();
        client.close().await;
    }
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_at_the_level_a_legacy_client_set_reach_it_named_after_their_server() {
    // A 2026-07-28 server answering with SSE (a JSON answer carries no log messages).
    let streaming = reference(Eras::Modern, Framing::Sse).await;
    let Setup {
        gateway,
        front,
        _upstreams,
    } = setup(
        |_, old| json!({"new": {"url": streaming.url()}, "old": {"url": old.url()}}),
        Naming::Qualified,
        None,
    )
    .await;
    let client = client(&front.url(), LEGACY);
    client.ready().await.unwrap();
    let mut notices = client.notifications();
    client
        .set_log_level(toolwire::LoggingLevel::Warning)
        .await
        .unwrap();
    client.listening().await.unwrap();
    for server in ["old", "new"] {
        client
            .call_tool(&format!("{server}__log"), json!({"message": server}))
            .await
            .unwrap();
        // The upstream logs at four levels; the level set lets two through, in order.
        let heard = tokio::time::timeout(Duration::from_secs(10), async {
            let mut heard = Vec::new();
            while let Some(notice) = notices.recv().await {
                if notice.method != "notifications/message" {
                    continue;
                }
                let p: serde_json::Value =
                    serde_json::from_str(notice.params.as_deref().unwrap().get()).unwrap();
                heard.push((p["level"].clone(), p["logger"].clone(), p["data"].clone()));
                if p["level"] == "error" {
                    return heard;
                }
            }
            heard
        })
        .await
        .unwrap();
        let logger = format!("{server}/refserver");
        assert_eq!(
            heard,
            vec![
                (
                    json!("warning"),
                    json!(logger),
                    json!(format!("warning: {server}"))
                ),
                (
                    json!("error"),
                    json!(logger),
                    json!(format!("error: {server}"))
                ),
            ]
        );
    }
    client.close().await;
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_alias_from_the_config_is_listed_and_called_and_names_what_it_registers() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = setup(
        |_, old| {
            json!({"old": {"url": old.url(),
                "aliases": {"echo": "say", "read_file": "cat"}}})
        },
        Naming::Qualified,
        None,
    )
    .await;
    let client = client(&front.url(), LEGACY);
    let names: Vec<String> = client
        .list_tools()
        .await
        .unwrap()
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"say".to_owned()), "{names:?}");
    assert!(!names.contains(&"old__echo".to_owned()), "{names:?}");
    assert!(names.contains(&"old__add".to_owned()), "{names:?}");
    let r = client
        .call_tool("say", json!({"text": "aliased"}))
        .await
        .unwrap();
    assert_eq!(text(&r), "aliased");
    // What a call registers is named as listed: the alias where there is one.
    let r = client
        .call_tool("old__unlock_files", json!({}))
        .await
        .unwrap();
    assert_eq!(
        r.registers,
        Some(vec!["cat".to_owned(), "old__write_file".to_owned()])
    );
    client.close().await;
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_passed_on_as_it_came_is_exactly_what_each_era_of_client_expects() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new"]).await;
    let modern_meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    fn modern_headers(name: &str) -> [(&'static str, &str); 3] {
        [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", name),
        ]
    }
    let call = |name: &str, arguments| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": name, "arguments": arguments, "_meta": modern_meta.clone()}})
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, session, _) = exchange(front.addr(), &[], &initialize).await;
    assert_eq!(status, 200);
    let session = session.expect("a session id");
    let legacy_headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];

    for (tool, arguments) in [
        ("echo", json!({"text": "as it came \"quoted\" é"})),
        ("fail", json!({})),
    ] {
        // What the upstream itself answers a 2026-07-28 client.
        let (status, direct) = post(
            _upstreams[0].addr(),
            &modern_headers(tool),
            &call(tool, arguments.clone()),
        )
        .await;
        assert_eq!(status, 200, "{direct}");
        let direct = &direct["result"];
        assert_eq!(direct["resultType"], "complete", "{direct}");

        // A 2026-07-28 client of the gateway gets it whole.
        let name = format!("new__{tool}");
        let (status, modern) = post(
            front.addr(),
            &modern_headers(&name),
            &call(&name, arguments.clone()),
        )
        .await;
        assert_eq!(status, 200, "{modern}");
        assert_eq!(modern["id"], 7);
        assert_eq!(&modern["result"], direct);

        // A legacy client gets it without what its era does not have.
        let legacy_call = json!({"jsonrpc": "2.0", "id": "legacy", "method": "tools/call",
            "params": {"name": name, "arguments": arguments}});
        let (status, legacy) = post(front.addr(), &legacy_headers, &legacy_call).await;
        assert_eq!(status, 200, "{legacy}");
        assert_eq!(legacy["id"], "legacy");
        let mut expected = direct.clone();
        expected.as_object_mut().unwrap().remove("resultType");
        assert_eq!(legacy["result"], expected);
    }
    gateway.host().shutdown().await;
}

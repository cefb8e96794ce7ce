//! Progressive discovery through the gateway: above a size, `search_tools`, `describe_tool`
//! and `call_tool` in place of every tool, for clients of either era.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod gateway_common;

use std::sync::Arc;

use gateway_common::*;
use serde_json::json;
use toolwire::{Error, ProtocolMode};
use toolwire_host::Naming;
use toolwire_refserver::{Eras, Framing};

/// A gateway in front of `new` and `old` that lists the discovery tools when `when` says.
async fn progressive(
    when: toolwire_gateway::Progressive,
) -> (
    Arc<toolwire_gateway::Gateway>,
    toolwire_server::HttpServer,
    [toolwire_refserver::HttpServer; 2],
) {
    let new = reference(Eras::Modern, Framing::Json).await;
    let old = reference(Eras::Legacy, Framing::Sse).await;
    let host = host(
        json!({"new": {"url": new.url()}, "old": {"url": old.url()}}),
        Naming::Qualified,
    )
    .await;
    let gateway = toolwire_gateway::Gateway::builder(host)
        .progressive(when)
        .build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    (gateway, front, [new, old])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_the_threshold_three_tools_find_describe_and_call_every_tool() {
    let (gateway, front, _upstreams) = progressive(toolwire_gateway::Progressive {
        above_tools: Some(3),
        above_tokens: None,
    })
    .await;
    let served = gateway.host().load().len();
    assert!(served > 3, "{served}");
    for mode in [ProtocolMode::Auto, LEGACY] {
        let client = client(&front.url(), mode.clone());
        let listed = client.list_all_tools().await.unwrap();
        let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["search_tools", "describe_tool", "call_tool"],
            "{mode:?}"
        );

        // Search: the SQL tool of each server, by what it does.
        let found = client
            .call_tool(
                "search_tools",
                json!({"query": "run a SQL query in a region", "limit": 2}),
            )
            .await
            .unwrap();
        let hits = found.structured_content.as_ref().unwrap()["tools"]
            .as_array()
            .unwrap()
            .clone();
        let mut hit_names: Vec<&str> = hits.iter().map(|h| h["name"].as_str().unwrap()).collect();
        hit_names.sort_unstable();
        assert_eq!(
            hit_names,
            ["new__execute_sql", "old__execute_sql"],
            "{mode:?}"
        );
        assert!(
            text(&found).contains("new__execute_sql: Runs a query"),
            "{}",
            text(&found)
        );

        // Describe: the definition as the full listing would give it, annotations kept.
        let described = client
            .call_tool("describe_tool", json!({"name": "old__execute_sql"}))
            .await
            .unwrap();
        let definition = described.structured_content.unwrap();
        assert_eq!(definition["name"], "old__execute_sql");
        assert_eq!(
            definition["inputSchema"]["properties"]["region"]["x-mcp-header"],
            "Region"
        );

        // Call by name through call_tool, and directly: the same tool answers.
        let through = client
            .call_tool(
                "call_tool",
                json!({"name": "old__add", "arguments": {"a": 40, "b": 2}}),
            )
            .await
            .unwrap();
        assert_eq!(text(&through), "42");
        let direct = client
            .call_tool("new__add", json!({"a": 1, "b": 2}))
            .await
            .unwrap();
        assert_eq!(text(&direct), "3");

        // What a model gets wrong comes back as a tool error it can read.
        for (tool, arguments, says) in [
            ("search_tools", json!({"query": "  "}), "needs a query"),
            (
                "describe_tool",
                json!({"name": "nope__x"}),
                "No tool is named \"nope__x\"",
            ),
            (
                "call_tool",
                json!({"name": "nope__x"}),
                "No tool is named \"nope__x\"",
            ),
            ("call_tool", json!({}), "needs the name"),
        ] {
            let answer = client.call_tool(tool, arguments).await.unwrap();
            assert!(answer.is_error(), "{tool}");
            assert!(text(&answer).contains(says), "{tool}: {}", text(&answer));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_or_below_the_thresholds_every_tool_is_listed_and_the_three_are_unknown() {
    let (gateway, front, _upstreams) = progressive(toolwire_gateway::Progressive {
        above_tools: Some(usize::MAX),
        above_tokens: Some(usize::MAX),
    })
    .await;
    let served = gateway.host().load().len();
    let client = client(&front.url(), ProtocolMode::Auto);
    assert_eq!(client.list_all_tools().await.unwrap().len(), served);
    match client
        .call_tool("search_tools", json!({"query": "sql"}))
        .await
    {
        Err(Error::Server(e)) => assert!(e.message.contains("search_tools"), "{e:?}"),
        other => panic!("search_tools answered without progressive discovery: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_estimate_alone_switches_to_progressive_discovery() {
    let (_gateway, front, _upstreams) = progressive(toolwire_gateway::Progressive {
        above_tools: None,
        above_tokens: Some(500),
    })
    .await;
    let client = client(&front.url(), ProtocolMode::Auto);
    assert_eq!(client.list_all_tools().await.unwrap().len(), 3);
}

//! The gateway over HTTP as operators and proxies meet it: SEP-2243 headers checked against
//! the body under the gateway's names, foreign origins refused on loopback, health,
//! readiness and metrics.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod gateway_common;
mod procs;

use std::time::Duration;

use gateway_common::*;
use serde_json::{Value, json};
use toolwire::{Client, ProtocolMode};
use toolwire_gateway::Gateway;
use toolwire_host::{Host, Naming, ServerState, ServersConfig};
use toolwire_refserver::{Eras, Framing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbound_headers_are_checked_against_the_body_under_the_gateways_names() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new"]).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "new__execute_sql", "arguments": {"region": "us-east-1", "query": "SELECT 1"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let headers = |region| {
        [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "new__execute_sql"),
            ("mcp-param-region", region),
        ]
    };

    let (status, body) = post(front.addr(), &headers("eu-west-1"), &call).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");

    let (status, body) = post(front.addr(), &headers("us-east-1"), &call).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["content"][0]["text"],
        "region=us-east-1 rows=1 query=SELECT 1"
    );
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_from_another_origin_is_refused_on_loopback() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new"]).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let modern = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "ping"),
    ];

    let (status, body) = post(
        front.addr(),
        &[modern[0], modern[1], ("origin", "http://evil.example")],
        &ping,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    // A local page may.
    let (status, body) = post(
        front.addr(),
        &[modern[0], modern[1], ("origin", "http://localhost:6274")],
        &ping,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness_say_how_each_upstream_is() {
    let new = reference(Eras::Modern, Framing::Json).await;
    let servers = json!({
        "new": {"url": new.url()},
        "broken": {"command": "/nonexistent/toolwire-test-binary"},
        // Never answers its handshake: starting for as long as the test runs.
        "mute": {"command": "sleep", "args": ["600"]},
        "off": {"command": SCRIPTED, "args": ["modern"], "disabled": true},
    });
    let config =
        ServersConfig::parse(&json!({ "mcpServers": servers }).to_string(), |_| None).unwrap();
    let host = Host::builder(Client::builder("gateway-e2e", "0"))
        .reconnect(None)
        .start(&config)
        .unwrap();
    let mut new_state = host.watch("new").unwrap();
    let mut broken_state = host.watch("broken").unwrap();
    // `mute` never starts: calls wait for it no longer than this.
    let gateway = Gateway::builder(host)
        .startup_wait(Duration::from_millis(100))
        .build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    let (status, body) = get(front.addr(), "/healthz").await;
    assert_eq!((status, body.trim()), (200, "ok"));

    new_state
        .wait_for(|s| matches!(s, ServerState::Ready { .. }))
        .await
        .unwrap();
    broken_state
        .wait_for(|s| matches!(s, ServerState::Failed { .. }))
        .await
        .unwrap();
    let (status, body) = get(front.addr(), "/readyz").await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["ready"], false);
    assert_eq!(body["servers"]["new"]["state"], "ready");
    assert_eq!(body["servers"]["new"]["version"], "2026-07-28");
    assert!(body["servers"]["new"]["tools"].as_u64().unwrap() > 5);
    assert_eq!(body["servers"]["broken"]["state"], "failed");
    assert!(
        body["servers"]["broken"]["reason"]
            .as_str()
            .unwrap()
            .contains("nonexistent")
    );
    assert_eq!(body["servers"]["mute"]["state"], "starting");
    assert_eq!(body["servers"]["off"]["state"], "disabled");
    // The MCP endpoint is the only other path.
    assert_eq!(get(front.addr(), "/nothing").await.0, 404);

    // Calls counted by upstream, tool and outcome; states as gauges.
    let client = client(&front.url(), ProtocolMode::Auto);
    for text in ["a", "b"] {
        client
            .call_tool("new__echo", json!({"text": text}))
            .await
            .unwrap();
    }
    client.call_tool("new__fail", json!({})).await.unwrap();
    let _ = client
        .call_tool("new__protocol_error", json!({}))
        .await
        .unwrap_err();
    // Arguments the tool refuses (`-32602`): the caller's side.
    let _ = client
        .call_tool("new__add", json!({"a": "one", "b": 2}))
        .await
        .unwrap_err();
    client.close().await;
    let (status, metrics) = get(front.addr(), "/metrics").await;
    assert_eq!(status, 200);
    for line in [
        r#"toolwire_gateway_tool_call_failures_total{upstream="new",side="upstream"} 1"#,
        r#"toolwire_gateway_tool_call_failures_total{upstream="new",side="downstream"} 1"#,
        r#"toolwire_gateway_tool_calls_total{upstream="new",tool="new__echo",outcome="ok"} 2"#,
        r#"toolwire_gateway_tool_calls_total{upstream="new",tool="new__fail",outcome="tool_error"} 1"#,
        r#"toolwire_gateway_tool_calls_total{upstream="new",tool="new__protocol_error",outcome="error"} 1"#,
        r#"toolwire_gateway_tool_call_duration_seconds_count{upstream="new",tool="new__echo"} 2"#,
        r#"toolwire_gateway_upstream_state{upstream="new",state="ready"} 1"#,
        r#"toolwire_gateway_upstream_state{upstream="broken",state="failed"} 1"#,
        r#"toolwire_gateway_upstream_state{upstream="mute",state="starting"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_names_both_tools_of_a_name_collision() {
    let new = reference(Eras::Modern, Framing::Json).await;
    // `a.b__echo` is not provider-safe: its short form is `a_b_`, 8 hex digits, `__echo`,
    // which a server named `a_b_` and those digits lists as a tool of its own.
    let short = toolwire_host::provider_safe("a.b", "__", "echo");
    let squatter = short.split_once("__").unwrap().0.to_owned();
    let mut servers = json!({"a.b": {"url": new.url()}});
    servers[&squatter] = json!({"url": new.url()});
    let host = host(servers, Naming::ProviderSafe).await;
    assert_eq!(
        host.load().collisions().len(),
        1,
        "{:?}",
        host.load().collisions()
    );
    let gateway = Gateway::builder(host).build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    let (status, body) = get(front.addr(), "/readyz").await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 200, "{body}");
    let collisions = body["collisions"].as_array().unwrap();
    assert_eq!(collisions.len(), 1, "{body}");
    let said = collisions[0].as_str().unwrap();
    assert!(
        said.contains(&squatter) && said.contains("a.b") && said.contains(&short),
        "{said}"
    );
    gateway.host().shutdown().await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sessions_share_one_stdio_child_and_none_outlives_the_gateway() {
    let host = host(
        json!({"scripted": {"command": SCRIPTED, "args": ["legacy"]}}),
        Naming::Qualified,
    )
    .await;
    let gateway = Gateway::builder(host).build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    let calls = (0..100).map(|i| {
        let url = front.url();
        async move {
            let client = client(&url, LEGACY);
            let r = client
                .call_tool("scripted__echo", json!({"text": format!("session {i}")}))
                .await
                .unwrap();
            let session = client.mcp_session_id();
            client.close().await;
            (r.content[0].as_text().unwrap().to_owned(), session)
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    let sessions: std::collections::BTreeSet<_> =
        answers.iter().filter_map(|(_, s)| s.clone()).collect();
    assert_eq!(sessions.len(), 100, "each client its own legacy session");
    for (i, (text, _)) in answers.iter().enumerate() {
        assert_eq!(text, &format!("session {i}"));
    }
    let running = procs::children(SCRIPTED);
    assert_eq!(running.len(), 1, "{running:?}");
    gateway.host().shutdown().await;
    assert!(procs::children(SCRIPTED).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_trace_context_reaches_its_upstream_in_either_era() {
    let Proxied {
        host,
        proxies,
        upstreams: _upstreams,
    } = proxied().await;
    let gateway = Gateway::builder(host).build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    for (n, (mode, tool, proxy)) in [
        (ProtocolMode::Auto, "new__echo", &proxies[0]),
        (LEGACY, "old__echo", &proxies[1]),
    ]
    .into_iter()
    .enumerate()
    {
        let trace = format!("4bf92f3577b34da6a3ce929d0e0e47{n:02}");
        let parent = format!("00-{trace}-00f067aa0ba902b7-01");
        let client = client(&front.url(), mode.clone());
        let options = toolwire::CallOptions::default()
            .with_meta("traceparent", parent.as_str())
            .with_meta("tracestate", "vendor=1")
            .with_meta("baggage", "user=alice");
        client
            .call_tool_with(tool, json!({"text": "traced"}), options)
            .await
            .unwrap();
        // In `_meta` and, over HTTP, as `traceparent`/`tracestate` headers too.
        assert_eq!(
            proxy.sent_count(&parent),
            2,
            "{mode:?}: the upstream never saw the trace"
        );
        assert_eq!(proxy.sent_count(&format!("traceparent: {parent}")), 1);
        assert_eq!(proxy.sent_count("vendor=1"), 2, "{mode:?}");
        assert_eq!(proxy.sent_count("user=alice"), 1, "{mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_header_wins_over_the_bodys_and_reaches_the_upstream_in_both_places() {
    let Proxied {
        host,
        proxies,
        upstreams: _upstreams,
    } = proxied().await;
    let gateway = Gateway::builder(host).build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    let in_header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let in_body = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "new__echo", "arguments": {"text": "traced"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "traceparent": in_body, "tracestate": "body=1"}}});
    let (status, body) = post(
        front.addr(),
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "new__echo"),
            ("traceparent", in_header),
            ("tracestate", "edge=1"),
        ],
        &call,
    )
    .await;
    // A disagreement between the two is no error: the header wins.
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "traced", "{body}");
    let upstream = &proxies[0];
    assert_eq!(
        upstream.sent_count("0af7651916cd43dd8448eb211c80319c"),
        2,
        "the header's trace, in `_meta` and as a header"
    );
    assert_eq!(upstream.sent_count("edge=1"), 2);
    assert_eq!(
        upstream.sent_count("4bf92f3577b34da6a3ce929d0e0e4736"),
        0,
        "the body's context was replaced"
    );
    assert_eq!(upstream.sent_count("body=1"), 0);
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_call_whose_client_went_away_is_cancelled_upstream() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Proxied {
        host,
        proxies,
        upstreams: _upstreams,
    } = proxied().await;
    let gateway = Gateway::builder(host).build();
    let mut options = toolwire_server::Options::default();
    options.limits.sse_keep_alive = Duration::from_millis(200);
    let front = gateway.serve_http(LOOPBACK, options).await.unwrap();
    // Five seconds of work on the legacy upstream, for a 2026-07-28 caller that reads the
    // head of its SSE answer and goes away.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "old__slow", "arguments": {"steps": 50, "delay_ms": 100},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: old__slow\r\ncontent-length: {}\r\n\r\n{body}",
        front.addr(),
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(front.addr()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(&head[9..12], b"200");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        proxies[1].sent_count("\"tools/call\""),
        1,
        "the call went upstream"
    );
    drop(stream);
    let cancelled = tokio::time::timeout(Duration::from_secs(4), async {
        while proxies[1].sent_count("notifications/cancelled") == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        cancelled.is_ok(),
        "the upstream never heard the call was cancelled"
    );
}

/// The metric names (`toolwire_gateway_…`) `text` mentions, each once, with the suffixes a
/// counter's or a histogram's series add (`_total`, `_bucket`, `_sum`, `_count`) taken off.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("toolwire_gateway_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        names.insert(base.to_owned());
        rest = &tail[end..];
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_rules_and_the_dashboard_name_only_metrics_the_gateway_exports() {
    // A gateway that has something in every family: a call, a refusal by traffic control,
    // a quarantined tool, an era repair (a family with no series is not shown at all).
    let upstream = reference(Eras::Both, Framing::Json).await;
    let pins_dir = std::env::temp_dir().join(format!("toolwire-ops-pins-{}", std::process::id()));
    let config = ServersConfig::parse(
        &json!({"mcpServers": {"up": {"url": upstream.url()}}}).to_string(),
        |_| None,
    )
    .unwrap();
    let host = Host::builder(toolwire_gateway::upstream_client(Client::builder(
        "ops", "0",
    )))
    .reconnect(None)
    .pin_tools(toolwire_host::PinFile::new(pins_dir.join("pins.json")))
    .start(&config)
    .unwrap();
    host.settled(Duration::from_secs(20)).await;
    let traffic = toolwire_gateway::Traffic::new(
        &serde_json::from_value(
            json!({"*": {"maxConcurrent": 1, "queue": 0, "breakerFailures": 3}}),
        )
        .unwrap(),
    )
    .unwrap();
    let gateway = Gateway::builder(host).traffic(traffic).build();
    let mut options = toolwire_server::Options::default();
    options.era_repair = true;
    let front = gateway.serve_http(LOOPBACK, options).await.unwrap();
    let client = client(&front.url(), ProtocolMode::Auto);
    client
        .call_tool("up__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    let slow = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .call_tool("up__slow", json!({"steps": 1, "delay_ms": 1000}))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        client
            .call_tool("up__echo", json!({"text": "busy"}))
            .await
            .is_err(),
        "refused past the cap"
    );
    slow.await.unwrap().unwrap();
    client
        .call_tool("up__redefine_echo", json!({}))
        .await
        .unwrap();
    let quarantined = async {
        while gateway.host().quarantined().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), quarantined)
        .await
        .expect("echo quarantined");
    let quirky = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "up__add", "arguments": {"a": 1, "b": 2},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let (status, served) = post(
        front.addr(),
        &[
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "up__add"),
        ],
        &quirky,
    )
    .await;
    assert_eq!(status, 200, "{served}");
    let (_, page) = get(front.addr(), "/metrics").await;
    let exported: std::collections::BTreeSet<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring");

    // Prometheus reads YAML, of which JSON is a part: the rule file is both.
    let rules: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("alerts.yml")).unwrap()).unwrap();
    let rules = rules["groups"][0]["rules"].as_array().unwrap();
    assert!(rules.len() >= 6, "{rules:?}");
    for rule in rules {
        let name = rule["alert"].as_str().unwrap();
        assert!(rule["expr"].is_string(), "{name}: no expr");
        assert!(
            rule["labels"]["severity"].is_string(),
            "{name}: no severity"
        );
        assert!(
            rule["annotations"]["summary"].is_string(),
            "{name}: no summary"
        );
        if let Some(wait) = rule.get("for") {
            let wait = wait.as_str().unwrap();
            let (number, unit) = wait.split_at(wait.len() - 1);
            assert!(
                number.parse::<u32>().is_ok() && ["s", "m", "h"].contains(&unit),
                "{name}: `for` {wait}"
            );
        }
        for metric in metric_names(rule["expr"].as_str().unwrap()) {
            assert!(
                exported.contains(&metric),
                "{name} names {metric}, which /metrics does not export: {exported:?}"
            );
        }
    }

    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("dashboard.json")).unwrap())
            .unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(!panels.is_empty());
    for panel in panels {
        let title = panel["title"].as_str().unwrap();
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            for metric in metric_names(target["expr"].as_str().unwrap()) {
                assert!(
                    exported.contains(&metric),
                    "panel {title} names {metric}, which /metrics does not export"
                );
            }
        }
    }
    gateway.host().shutdown().await;
    let _ = std::fs::remove_dir_all(pins_dir);
}

/// With required entries, `/readyz` waits for those alone: 200 while each serves though
/// another entry failed, 503 naming a required one that does not serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_the_required_entries_only_and_names_those_missing() {
    let up = reference(Eras::Both, Framing::Json).await;
    let servers = json!({
        "up": {"url": up.url()},
        "broken": {"command": "/nonexistent/toolwire-test-binary"},
    });
    let readyz = |required: Option<Vec<String>>| {
        let servers = servers.clone();
        async move {
            let config =
                ServersConfig::parse(&json!({ "mcpServers": servers }).to_string(), |_| None)
                    .unwrap();
            let host = Host::builder(Client::builder("gateway-e2e", "0"))
                .reconnect(None)
                .start(&config)
                .unwrap();
            // `up` ready and `broken` failed: neither is starting any more.
            host.settled(Duration::from_secs(20)).await;
            let mut gateway = Gateway::builder(host);
            if let Some(required) = required {
                gateway = gateway.required(required);
            }
            let gateway = gateway.build();
            let front = gateway
                .serve_http(LOOPBACK, toolwire_server::Options::default())
                .await
                .unwrap();
            let (status, body) = get(front.addr(), "/readyz").await;
            gateway.host().shutdown().await;
            (status, serde_json::from_str::<Value>(&body).unwrap())
        }
    };
    // Nothing required: every entry was tried, whatever became of it.
    let (status, body) = readyz(None).await;
    assert_eq!(status, 200, "{body}");
    // The one that serves required: ready although the other failed.
    let (status, body) = readyz(Some(vec!["up".into()])).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["required"], json!(["up"]));
    // The failed one required: not ready, and it says which.
    let (status, body) = readyz(Some(vec!["up".into(), "broken".into()])).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["waitingFor"], json!(["broken"]), "{body}");
    assert_eq!(body["servers"]["broken"]["state"], "failed");
}

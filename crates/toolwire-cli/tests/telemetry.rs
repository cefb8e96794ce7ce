//! `--otlp-endpoint`: one `tools/call` from the CLI through `toolwire gateway` to an upstream
//! (`toolwire serve --stdio`), three processes exporting to one collector, is one trace whose
//! spans link client → gateway → gateway's call upstream → upstream.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use toolwire_test_support::otlp::{Collector, ReceivedSpan};

/// Removes the configuration file when dropped.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Kills the gateway when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The CLI as the agent (`OTEL_SERVICE_NAME=agent`) against the gateway at `url`, exporting to
/// `endpoint`, with `args`.
async fn run_agent(url: &str, endpoint: &str, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(["--url", url, "--otlp-endpoint", endpoint, "--json"])
        .args(args)
        .env("OTEL_SERVICE_NAME", "agent")
        .stdin(Stdio::null());
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn find<'a>(
    spans: &'a [ReceivedSpan],
    service: &str,
    kind: &str,
    name: &str,
) -> Option<&'a ReceivedSpan> {
    spans
        .iter()
        .find(|s| s.service == service && s.kind == kind && s.name == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_through_the_gateway_is_one_trace_from_the_client_to_the_upstream() {
    let collector = Collector::start().await;
    let endpoint = collector.url();
    let config = TempFile(
        std::env::temp_dir().join(format!("toolwire-cli-otlp-{}.json", std::process::id())),
    );
    let text = serde_json::json!({"mcpServers": {"ref": {
        "command": BIN,
        "args": ["serve", "--stdio", "--otlp-endpoint", endpoint],
        "env": {"OTEL_SERVICE_NAME": "upstream", "OTEL_BSP_SCHEDULE_DELAY": "50"},
    }}});
    std::fs::write(&config.0, text.to_string()).unwrap();
    let (child, line) = spawn_listening_with(
        "gateway",
        &[
            "--config",
            config.0.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
            "--otlp-endpoint",
            &endpoint,
        ],
        &[
            ("OTEL_SERVICE_NAME", "gateway"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    let gateway = Killed(child);
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");

    let call = run_agent(
        &url,
        &endpoint,
        &["tools", "call", "ref__echo", "text=traced"],
    )
    .await;
    assert!(
        call.status.success(),
        "{}",
        String::from_utf8_lossy(&call.stderr)
    );
    assert_eq!(json(&call)["content"][0]["text"], "traced");

    // The client flushed as it exited; the gateway and the upstream export every 50 ms.
    let deadline = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let spans = collector.spans();
        let complete = find(&spans, "agent", "client", "tools/call ref__echo").is_some()
            && find(&spans, "gateway", "server", "tools/call ref__echo").is_some()
            && find(&spans, "gateway", "client", "tools/call echo").is_some()
            && find(&spans, "upstream", "server", "tools/call echo").is_some();
        if complete {
            break spans;
        }
        assert!(Instant::now() < deadline, "spans so far: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let agent = find(&spans, "agent", "client", "tools/call ref__echo").unwrap();
    let inbound = find(&spans, "gateway", "server", "tools/call ref__echo").unwrap();
    let outbound = find(&spans, "gateway", "client", "tools/call echo").unwrap();
    let upstream = find(&spans, "upstream", "server", "tools/call echo").unwrap();

    // One trace, each span the child of the one before: the gateway adopted the context the
    // client put in `_meta`, and the upstream the one the gateway's own call carried.
    for span in [inbound, outbound, upstream] {
        assert_eq!(span.trace_id, agent.trace_id, "{span:#?}");
    }
    // The CLI's run is the trace's root.
    let root = spans
        .iter()
        .find(|s| s.service == "agent" && s.span_id == agent.parent_span_id)
        .unwrap_or_else(|| panic!("the call has no parent in the CLI: {spans:#?}"));
    assert_eq!((root.name.as_str(), root.kind), ("toolwire", "internal"));
    assert_eq!(root.parent_span_id, "");
    assert_eq!(inbound.parent_span_id, agent.span_id);
    assert_eq!(outbound.parent_span_id, inbound.span_id);
    assert_eq!(upstream.parent_span_id, outbound.span_id);

    // The conventions' attributes.
    for span in [agent, inbound, outbound, upstream] {
        assert_eq!(span.attribute("mcp.method.name"), "tools/call");
        assert_eq!(span.attribute("gen_ai.operation.name"), "execute_tool");
        assert_eq!(span.attribute("error.type"), "", "{span:#?}");
    }
    assert_eq!(agent.attribute("gen_ai.tool.name"), "ref__echo");
    assert_eq!(upstream.attribute("gen_ai.tool.name"), "echo");
    assert_eq!(inbound.attribute("network.transport"), "tcp");
    assert_eq!(upstream.attribute("network.transport"), "pipe");
    assert!(!inbound.attribute("jsonrpc.request.id").is_empty());

    // The client's handshake carried the context of what opened the connection (the CLI's
    // run, or its first request): the gateway's span for it is in the same trace.
    let handshake = spans
        .iter()
        .find(|s| {
            s.service == "gateway"
                && s.kind == "server"
                && matches!(s.name.as_str(), "server/discover" | "initialize")
        })
        .unwrap_or_else(|| panic!("no handshake span: {spans:#?}"));
    assert_eq!(handshake.trace_id, agent.trace_id, "{spans:#?}");
    let opener = spans
        .iter()
        .find(|s| s.service == "agent" && s.span_id == handshake.parent_span_id)
        .unwrap_or_else(|| panic!("the handshake is no child of the client's: {spans:#?}"));
    assert!(
        opener.span_id == root.span_id || opener.parent_span_id == root.span_id,
        "{opener:#?}"
    );
    // Arguments and results never become attributes.
    assert!(
        spans
            .iter()
            .all(|s| s.attributes.values().all(|v| !v.contains("traced"))),
        "{spans:#?}"
    );

    // A legacy client: its session's id, digested, on its span and on the gateway's alike.
    let legacy = run_agent(
        &url,
        &endpoint,
        &[
            "--protocol",
            "2025-11-25",
            "tools",
            "call",
            "ref__echo",
            "text=old",
        ],
    )
    .await;
    assert!(
        legacy.status.success(),
        "{}",
        String::from_utf8_lossy(&legacy.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let (client_id, server_id) = loop {
        let spans = collector.spans();
        let with_session = |service: &str, kind: &str| {
            spans
                .iter()
                .find(|s| {
                    s.service == service
                        && s.kind == kind
                        && s.name == "tools/call ref__echo"
                        && !s.attribute("mcp.session.id").is_empty()
                })
                .map(|s| s.attribute("mcp.session.id").to_owned())
        };
        if let (Some(c), Some(s)) = (
            with_session("agent", "client"),
            with_session("gateway", "server"),
        ) {
            break (c, s);
        }
        assert!(Instant::now() < deadline, "no session ids: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(client_id, server_id);
    assert_eq!(client_id.len(), 32, "{client_id}");
    assert!(client_id.bytes().all(|b| b.is_ascii_hexdigit()));
    drop(gateway);
}

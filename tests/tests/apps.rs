//! MCP Apps: the extension declared only when the application opts in (in both eras), and a
//! tool's view read, checked and kept with its sandbox metadata (the reference server's
//! `show_clock`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::net::SocketAddr;

use serde_json::{Value, json};
use toolwire::{Client, HttpTransport, ProtocolMode, ProtocolVersion};
use toolwire_refserver::{Options, serve_http};
use toolwire_test_support::Eras;
use toolwire_test_support::http::{Framing, HttpPeer, scripted};

/// The capabilities the client declared in its first request to `peer`.
fn declared(peer: &HttpPeer) -> Value {
    let first = peer.requests().into_iter().next().expect("a request");
    let body: Value = serde_json::from_slice(&first.body).unwrap();
    match body["method"].as_str() {
        Some("initialize") => body["params"]["capabilities"].clone(),
        _ => body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_extension_is_declared_only_when_the_application_opts_in_in_both_eras() {
    for (eras, mode) in [
        (Eras::Modern, ProtocolMode::Auto),
        (
            Eras::Legacy,
            ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
        ),
    ] {
        for opted_in in [false, true] {
            let peer = HttpPeer::start(scripted(eras, Framing::Json)).await;
            let client = Client::builder("apps", "0")
                .mode(mode.clone())
                .apps(opted_in)
                .connect_http(HttpTransport::builder(peer.url()))
                .unwrap();
            client.ready().await.unwrap();
            let ui = declared(&peer)["extensions"]["io.modelcontextprotocol/ui"].clone();
            if opted_in {
                assert_eq!(
                    ui,
                    json!({"mimeTypes": ["text/html;profile=mcp-app"]}),
                    "{eras:?}"
                );
            } else {
                assert_eq!(ui, Value::Null, "{eras:?}: declared without opting in");
            }
            client.close().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_view_is_read_checked_and_kept_with_its_sandbox() {
    let server = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), Options::default())
        .await
        .unwrap();
    let client = Client::builder("apps", "0")
        .apps(true)
        .connect_http(HttpTransport::builder(server.url()))
        .unwrap();
    let view = client.app("show_clock").await.unwrap().expect("a view");
    assert_eq!(view.uri, "ui://toolwire/clock.html");
    assert!(view.html.starts_with("<!DOCTYPE html>"), "{}", view.html);
    let csp = view.meta.csp.clone().unwrap_or_default();
    assert_eq!(
        csp.connect_domains.unwrap_or_default(),
        ["https://time.example.com"]
    );
    assert!(
        view.meta
            .permissions
            .clone()
            .unwrap_or_default()
            .clipboard_write
            .is_some()
    );
    assert_eq!(view.meta.prefers_border, Some(true));
    assert!(view.tool_meta.model_visible());
    // Kept: the same view until the tools change.
    let again = client.app("show_clock").await.unwrap().unwrap();
    assert!(std::sync::Arc::ptr_eq(&view, &again));
    // A tool without a view, and one that does not exist.
    assert!(client.app("echo").await.unwrap().is_none());
    assert!(client.app("no_such_tool").await.unwrap().is_none());
    client.close().await;
}

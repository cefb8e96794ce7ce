//! Streamable HTTP over a Unix domain socket: the reference server listening on one, the client
//! reaching it with `HttpTransportBuilder::unix_socket` in both eras, and a host whose
//! `mcpServers` entry names the socket (`unixSocket`).

#![cfg(unix)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use toolwire::{Client, HttpTransport, ProtocolMode, ProtocolVersion};
use toolwire_host::{Host, ServerState, ServersConfig};
use toolwire_refserver::{Options, serve_http_unix};

/// A socket path of the test's own (short: socket paths are limited to ~100 bytes).
fn socket(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tw-{test}-{}.sock", std::process::id()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reaches_a_server_on_a_unix_socket_in_both_eras() {
    let path = socket("eras");
    let server = serve_http_unix(&path, Options::default()).await.unwrap();
    assert_eq!(server.url(), "http://localhost/mcp");
    assert!(path.exists());
    for mode in [
        ProtocolMode::Auto,
        ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
    ] {
        let client = Client::builder("unix", "0")
            .mode(mode.clone())
            .connect_http(HttpTransport::builder(server.url()).unix_socket(&path))
            .unwrap();
        let r = client
            .call_tool("echo", json!({"text": "over the socket"}))
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert_eq!(r.content[0].as_text(), Some("over the socket"));
        let legacy = matches!(mode, ProtocolMode::Pinned(_));
        assert_eq!(
            client.mcp_session_id().is_some(),
            legacy,
            "{mode:?}: a legacy session has its id over the socket too"
        );
        client.close().await;
    }
    drop(server);
    assert!(!path.exists(), "the socket file is removed with the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_socket_file_is_replaced_and_a_live_one_refused() {
    let path = socket("stale");
    // A file left by a server that is gone: nothing accepts on it.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let server = serve_http_unix(&path, Options::default()).await.unwrap();
    let err = serve_http_unix(&path, Options::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    drop(server);
}

#[test]
fn a_unix_socket_carries_plain_http_only() {
    let err = HttpTransport::builder("https://localhost/mcp")
        .unix_socket("/tmp/x.sock")
        .build()
        .unwrap_err();
    assert!(
        matches!(err, toolwire::HttpError::UnixSocket { .. }),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_entry_names_its_unix_socket() {
    let path = socket("host");
    let _server = serve_http_unix(&path, Options::default()).await.unwrap();
    let text = json!({"mcpServers": {"local": {"url": "http://localhost/mcp",
        "unixSocket": "${SOCKET_DIR}/tw-host-${PID}.sock"}}})
    .to_string();
    let dir = std::env::temp_dir().to_string_lossy().into_owned();
    let pid = std::process::id().to_string();
    let config = ServersConfig::parse(&text, |var| match var {
        "SOCKET_DIR" => Some(dir.clone()),
        "PID" => Some(pid.clone()),
        _ => None,
    })
    .unwrap();
    let host = Host::builder(Client::builder("unix", "0"))
        .start(&config)
        .unwrap();
    host.settled(Duration::from_secs(20)).await;
    assert!(
        matches!(host.state("local"), Some(ServerState::Ready { .. })),
        "{:?}",
        host.state("local")
    );
    let r = host
        .call_tool("local__echo", json!({"text": "through the host"}))
        .await
        .unwrap();
    assert_eq!(r.content[0].as_text(), Some("through the host"));
    host.shutdown().await;
}

//! Tool search against real servers: a client's index follows the server's list changes, and
//! a host's searches its merged catalog under the names it gives.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use toolwire::{Client, HttpTransport};
use toolwire_host::{Host, ServersConfig};
use toolwire_refserver::{Options, serve_http};

const SERVER: &str = env!("CARGO_BIN_EXE_toolwire-test-server");

fn names(found: &[toolwire::ToolMatch]) -> Vec<&str> {
    found.iter().map(|m| m.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_search_follows_the_servers_list_changes() {
    let server = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), Options::default())
        .await
        .unwrap();
    let client = Client::builder("search", "0")
        .connect_http(HttpTransport::builder(server.url()))
        .unwrap();
    client.list_tools().await.unwrap();
    let found = client.search_tools("add two integers", 3);
    assert_eq!(names(&found).first(), Some(&"add"), "{:?}", names(&found));
    assert_eq!(found[0].tool.name, "add");
    assert!(
        !names(&client.search_tools("write a file to disk", 5)).contains(&"write_file"),
        "not registered yet"
    );
    // `unlock_files` registers read_file and write_file and announces them.
    let mut changes = client.subscribe_tools();
    client.call_tool("unlock_files", json!({})).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while !client.tools().contains("write_file") {
            let _ = changes.recv().await;
        }
    })
    .await
    .expect("write_file never arrived");
    let found = client.search_tools("write a file", 5);
    assert_eq!(
        names(&found).first(),
        Some(&"write_file"),
        "{:?}",
        names(&found)
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_search_ranks_its_merged_catalog_by_the_names_it_gives() {
    let server = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), Options::default())
        .await
        .unwrap();
    let text = json!({"mcpServers": {
        "scripted": {"command": SERVER, "args": ["modern"]},
        "ref": {"type": "http", "url": server.url()},
    }})
    .to_string();
    let config = ServersConfig::parse(&text, |_| None).unwrap();
    let host = Host::builder(Client::builder("search", "0"))
        .start(&config)
        .unwrap();
    host.settled(Duration::from_secs(20)).await;
    let found = host.search_tools("run a sql query in a region", 2);
    assert_eq!(
        found.first().map(|m| &*m.name),
        Some("ref__execute_sql"),
        "{found:?}"
    );
    assert_eq!(found[0].tool.server.as_ref(), "ref");
    assert_eq!(
        found[0].tool.tool.name, "execute_sql",
        "the server's own name"
    );
    // Both servers have an echo tool: both are found.
    let echoes: Vec<String> = host
        .search_tools("echo", 5)
        .into_iter()
        .map(|m| m.name.to_string())
        .filter(|n| n.ends_with("__echo"))
        .collect();
    assert_eq!(echoes.len(), 2, "{echoes:?}");
    host.shutdown().await;
}

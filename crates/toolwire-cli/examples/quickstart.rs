//! The library in one page: connect, pre-load a known tool, call it with its headers, and
//! call a tool that registers tools (the settle barrier returns only once they are listed).
//!
//! `cargo run -p toolwire-cli --example quickstart [URL]` — without a URL it starts the
//! reference server on a loopback port.

#![allow(clippy::print_stdout, reason = "an example prints what it does")]

use std::net::SocketAddr;

use serde_json::json;
use toolwire::{Client, HttpTransport, Tool};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A server: the one named on the command line, or the reference server in-process.
    let mut embedded = None;
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let server = toolwire_refserver::serve_http(
                SocketAddr::from(([127, 0, 0, 1], 0)),
                toolwire_refserver::Options::default(),
            )
            .await?;
            let url = server.url();
            embedded = Some(server);
            url
        }
    };

    // Connect (nothing is sent until the first call; the era is negotiated then).
    let client = Client::builder("quickstart", "1.0")
        .title("Toolwire quickstart")
        .connect_http(HttpTransport::builder(url))?;

    // A known tool: its calls carry Mcp-Param-Region without a tools/list first.
    let execute_sql: Tool = serde_json::from_value(json!({
        "name": "execute_sql",
        "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"}}}
    }))?;
    client.add_known_tools([execute_sql])?;

    let args = json!({"region": "us-west-2", "query": "SELECT 1"});
    let result = client.call_tool("execute_sql", args.clone()).await?;
    println!(
        "negotiated {}",
        client
            .protocol_version()
            .map(|v| v.to_string())
            .unwrap_or_default()
    );
    for (name, value) in client.call_headers("execute_sql", &args)? {
        println!("  {name}: {value}");
    }
    println!(
        "execute_sql -> {}",
        result.content[0].as_text().unwrap_or("(not text)")
    );

    // A tool that registers tools: the call returns once they are in the cache.
    client.list_tools().await?;
    let unlocked = client.call_tool("unlock_files", json!({})).await?;
    println!(
        "unlock_files registered {:?}; read_file listed: {}; stale: {}",
        unlocked.registers.clone().unwrap_or_default(),
        client.tools().contains("read_file"),
        toolwire::tools_may_be_stale(&unlocked),
    );

    client.close().await;
    drop(embedded);
    Ok(())
}

//! Toolwire in one file, with `toolwire` as the only Toolwire crate it names: connect over
//! Streamable HTTP or stdio, list the tools, call one, answer the server's own requests, follow
//! a call's progress, send any typed request, and tell the errors apart.
//!
//! ```text
//! cargo run -p toolwire --example tour -- --url http://127.0.0.1:8080/mcp
//! cargo run -p toolwire --example tour -- --stdio npx -y @modelcontextprotocol/server-everything
//! ```
//!
//! `cargo test` builds it, so it keeps compiling against the public API.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example prints what it does"
)]

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use toolwire::types::error::code;
use toolwire::types::methods::method;
use toolwire::types::{ElicitationCapability, ListParams, RootsCapability};
use toolwire::{
    CallOptions, Client, ClientCapabilities, Error, ErrorChain, ErrorObject, HttpTransport,
    ServerRequest, StdioConfig,
};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Every level of the failure on one line: the call, the request, the transport.
            eprintln!("tour: {}", ErrorChain(&e));
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();

    // One builder holds every setting; a handler answers the server's requests (and the
    // `input_required` rounds of a call) for the capabilities it declares.
    let capabilities = ClientCapabilities {
        elicitation: Some(ElicitationCapability::default()),
        roots: Some(RootsCapability::default()),
        ..ClientCapabilities::default()
    };
    let builder = Client::builder("tour", "1.0")
        .title("Toolwire tour")
        .timeouts(Duration::from_secs(30), Duration::from_secs(5))
        .handler(capabilities, |request| {
            Box::pin(async move {
                match request {
                    ServerRequest::Elicit(params) => {
                        println!("the server asks: {}", params.message);
                        Ok(json!({"action": "decline"}))
                    }
                    ServerRequest::ListRoots(_) => Ok(json!({"roots": []})),
                    other => Err(ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        format!("tour does not answer {}", other.method()),
                    )),
                }
            })
        });
    let client = match (args.first().map(String::as_str), args.get(1)) {
        (Some("--url"), Some(url)) => builder.connect_http(HttpTransport::builder(url.as_str()))?,
        (Some("--stdio"), Some(program)) => {
            builder.connect_stdio(StdioConfig::new(program, &args[2..]))?
        }
        _ => {
            eprintln!("usage: tour --url URL | --stdio PROGRAM [ARGS…]");
            return Ok(());
        }
    };

    // Negotiation happens on first use; `ready` says what was agreed.
    let negotiated = client.ready().await?;
    println!("protocol {}", negotiated.version);

    // Every page of tools/list, in the server's order (they also land in the tool cache,
    // which gives each call its SEP-2243 headers).
    let tools = client.list_all_tools().await?;
    for tool in &tools {
        println!("tool {}", tool.name);
    }

    // A call. A tool's own failure is a result (`is_error`), not an `Err`; the errors are
    // the protocol's, the transport's and the caller's, each its own variant.
    if let Some(first) = tools.first() {
        match client.call_tool(&first.name, json!({})).await {
            Ok(result) if result.is_error() => println!("{} failed as a tool", first.name),
            Ok(result) => println!("{} answered {} block(s)", first.name, result.content.len()),
            Err(Error::Server(e)) if e.code == code::INVALID_PARAMS => {
                println!("{} wants arguments: {}", first.name, e.message)
            }
            Err(Error::Timeout(after)) => println!("no answer within {after:?}"),
            Err(Error::Connection(toolwire::ConnectionError::Undelivered(failure))) => {
                println!("not delivered: HTTP {:?}", failure.status)
            }
            Err(e) => return Err(e),
        }
    }

    // Progress: each notification reaches the callback and pushes the deadline forward.
    if tools.iter().any(|t| t.name == "longRunningOperation") {
        let options = CallOptions::default().with_timeout(Duration::from_secs(20));
        let result = client
            .call_tool_with_progress(
                "longRunningOperation",
                json!({"duration": 2, "steps": 4}),
                options,
                |p| println!("progress {}/{}", p.progress, p.total.unwrap_or(0.0)),
            )
            .await?;
        println!("long operation: {} block(s)", result.content.len());
    }

    // Any request by its method marker, with its params and result types.
    match client
        .request::<method::ListResources>(ListParams::default())
        .await
    {
        Ok(page) => println!("{} resource(s)", page.resources.len()),
        // A legacy server that did not declare `resources` is never asked.
        Err(Error::Usage(toolwire::UsageError::InvalidCall(e))) => println!("not asked: {e}"),
        Err(Error::Server(e)) if e.code == code::METHOD_NOT_FOUND => println!("no resources"),
        Err(e) => return Err(e),
    }

    // Final: the connection ends and later calls fail with `Error::Closed`.
    client.close().await;
    Ok(())
}

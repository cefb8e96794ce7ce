//! Decodes a `tools/list` response and shows each tool with the `x-mcp-header` annotations of
//! its input schema.
//!
//! ```text
//! cargo run -p toolwire-types --example decode_tools_list            # a built-in response
//! cargo run -p toolwire-types --example decode_tools_list -- FILE    # a response you captured
//! ```

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example prints its output"
)]

use std::process::ExitCode;

use serde_json::Value;
use toolwire_types::methods::method::ListTools;
use toolwire_types::{Message, Outcome, RequestMethod};

/// A `tools/list` response in the shape a Python `mcp` 2.3 server sends for a tool whose
/// `region` argument is annotated `x-mcp-header: Region`.
const BUILT_IN: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[
 {"name":"add","description":"Add two integers.","inputSchema":{"properties":{"a":{"title":"A","type":"integer"},"b":{"title":"B","type":"integer"}},"required":["a","b"],"title":"addArguments","type":"object"},"outputSchema":{"properties":{"result":{"title":"Result","type":"integer"}},"required":["result"],"title":"addOutput","type":"object"}},
 {"name":"where","description":"Echo the region (mirrored to Mcp-Param-Region).","inputSchema":{"properties":{"region":{"title":"Region","type":"string","x-mcp-header":"Region"},"q":{"default":"","title":"Q","type":"string"}},"required":["region"],"title":"whereArguments","type":"object"}}
]}}"#;

fn main() -> ExitCode {
    let bytes = match std::env::args().nth(1) {
        Some(path) => match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("cannot read {path}: {e}");
                return ExitCode::from(2);
            }
        },
        None => BUILT_IN.as_bytes().to_vec(),
    };
    match run(&bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&*e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

fn run(bytes: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
    let Message::Response(response) = Message::decode(bytes)? else {
        return Err("not a response".into());
    };
    let raw = response
        .payload
        .map_err(|e| format!("server error {}: {}", e.code, e.message))?;
    let Outcome::Complete(list) = ListTools::decode_result(&raw)? else {
        return Err("tools/list cannot require input".into());
    };
    for tool in &list.tools {
        println!(
            "{}: {}",
            tool.name,
            tool.description.as_deref().unwrap_or("")
        );
        let schema = tool.input_schema.decode_object()?;
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, schema) in properties.into_iter().flatten() {
            let ty = schema.get("type").and_then(Value::as_str).unwrap_or("?");
            match schema.get("x-mcp-header").and_then(Value::as_str) {
                Some(header) => println!("  {name}: {ty}  -> header Mcp-Param-{header}"),
                None => println!("  {name}: {ty}"),
            }
        }
    }
    if let Some(cursor) = &list.next_cursor {
        println!("(more on the next page: cursor {cursor:?})");
    }
    Ok(())
}

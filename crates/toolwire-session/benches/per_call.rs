//! Criterion bench for the work a `tools/call` costs above the wire (issue #10): the request id,
//! the pending table, the tool-cache snapshot load, the header plan, the serialisation of the
//! request into bytes, and on the way back the decoding of the answer, for a tool with three
//! `x-mcp-header` parameters (one of them Base64-encoded), in the 2026-07-28 era.
//!
//! The session is sans-IO, so one iteration is a whole call with no sockets: `call_tool`,
//! `poll_transmit`, the answer through `handle_inbound`, and `poll_event` for the result.
//! Calibration rows put it next to what plain `serde_json` costs for the same bytes.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    reason = "bench harness"
)]

use std::hint::black_box;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolwire_cache::ToolCache;
use toolwire_session::{CallOptions, Event, Session, SessionConfig};
use toolwire_types::methods::method::CallTool;
use toolwire_types::{CallToolResult, Implementation, JsonObject, RequestMethod, Tool};

fn tool() -> Tool {
    serde_json::from_value(
        json!({"name": "execute_sql", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "tenant": {"type": "string", "x-mcp-header": "Tenant"},
        "query": {"type": "string"}
    }, "required": ["region", "query"]}}),
    )
    .unwrap()
}

fn arguments() -> JsonObject {
    match json!({"region": "us-west-2", "priority": 42, "tenant": "Zürich AG", "query": "SELECT 1"})
    {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

const RESULT: &str = r#"{"content":[{"type":"text","text":"1 row"}],"isError":false}"#;

/// A session negotiated in the 2026-07-28 era over a transport that carries headers, with the
/// tool in its cache.
fn ready_session() -> Session {
    let config = SessionConfig::new(Implementation::new("toolwire-bench", "0.1.0"))
        .with_listen(false)
        .with_auto_refresh(false);
    let cache = Arc::new(ToolCache::default());
    cache.add_known_tools([tool()]).unwrap();
    let mut session = Session::new(config, cache, true);
    let now = Instant::now();
    session.start(now);
    let discover: Value = serde_json::from_slice(&session.poll_transmit().unwrap().body).unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": discover["id"], "result": {
        "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv", "version": "1"}}}});
    session.handle_inbound(answer.to_string().as_bytes(), now);
    assert!(matches!(session.poll_event(), Some(Event::Ready(_))));
    session
}

/// One whole call; returns the raw result, the request's bytes and its header count.
fn one_call(
    session: &mut Session,
    args: &JsonObject,
    answer: &mut Vec<u8>,
    now: Instant,
) -> (Box<serde_json::value::RawValue>, bytes::Bytes, usize) {
    let op = session
        .call_tool(
            "execute_sql",
            Some(args.clone()),
            CallOptions::default(),
            now,
        )
        .unwrap();
    let transmit = session.poll_transmit().unwrap();
    // The answer echoes the request's id; finding it costs a short scan of the body's start,
    // which is part of the figure (a server would parse the whole body).
    let id = request_id(&transmit.body);
    answer.clear();
    answer.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    answer.extend_from_slice(id);
    write!(answer, r#","result":{RESULT}}}"#).unwrap();
    session.handle_inbound(answer, now);
    match session.poll_event() {
        Some(Event::Completed { op: done, result }) if done == op => {
            (result.unwrap(), transmit.body, transmit.headers.len())
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn request_id(body: &[u8]) -> &[u8] {
    let start = memchr_str(body, br#""id":"#).expect("the request has an id") + 5;
    let len = body[start..]
        .iter()
        .position(|b| *b == b',' || *b == b'}')
        .unwrap();
    &body[start..start + len]
}

fn memchr_str(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn bench(c: &mut Criterion) {
    let args = arguments();
    let mut session = ready_session();
    let mut answer = Vec::with_capacity(256);
    let now = Instant::now();

    // What one call sends: checked once, so the bench measures the real thing.
    let (raw, transmit_body, headers) = one_call(&mut session, &args, &mut answer, now);
    let size = transmit_body.len();
    assert_eq!(
        headers, 6,
        "MCP-Protocol-Version, Mcp-Method, Mcp-Name and three Mcp-Param-*"
    );
    let decoded: CallToolResult = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(decoded.content.len(), 1);
    eprintln!(
        "per_call: request {size} bytes with {headers} headers: {}",
        String::from_utf8_lossy(&transmit_body)
    );

    let mut group = c.benchmark_group("per_call");
    // id, pending table, snapshot load, header plan, request bytes; the answer's envelope.
    group.bench_function("session", |b| {
        b.iter(|| one_call(&mut session, black_box(&args), &mut answer, now))
    });
    // …and the `CallToolResult` the facade decodes from the raw result, as it does.
    group.bench_function("session+result", |b| {
        b.iter(|| {
            let (raw, _, _) = one_call(&mut session, black_box(&args), &mut answer, now);
            CallTool::decode_result(&raw).unwrap()
        })
    });

    // Calibration: the same request bytes from a prebuilt `Value`, and the same answer parsed,
    // with no protocol logic at all.
    let request: Value = serde_json::from_slice(&transmit_body).unwrap();
    group.bench_function("calibration/encode_value", |b| {
        b.iter(|| serde_json::to_vec(black_box(&request)).unwrap())
    });
    let answer_bytes = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{RESULT}}}"#);
    group.bench_function("calibration/parse_answer_value", |b| {
        b.iter(|| serde_json::from_str::<Value>(black_box(&answer_bytes)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! The server-side check of a request of an older era (`check_present`): its routing headers
//! are optional, and each one sent must say what the body says.

#![allow(clippy::unwrap_used, reason = "tests fail by panicking")]

use serde_json::{Value, json};
use toolwire_headers::*;

/// A schema property of `kind` annotated with the header `name`.
fn prop(kind: &str, name: Value) -> Value {
    json!({"type": kind, "x-mcp-header": name})
}

#[test]
fn an_older_eras_request_may_omit_the_routing_headers_but_never_contradict_its_body() {
    let schema = json!({"properties": {"region": prop("string", json!("Region"))}});
    let plan = HeaderPlan::from_input_schema("t", schema.as_object().unwrap()).unwrap();
    let params = json!({"name": "where", "arguments": {"region": "us-prod-1"}});
    let check = |headers: &[(&str, &str)], method: &str| {
        let received = ReceivedHeaders::new(headers.iter().map(|(n, v)| (*n, v.as_bytes())));
        check_present(&received, method, params.as_object(), Some(&plan))
    };
    // None, some or all of them, each saying what the body says (as a client that sends them
    // in every era does).
    assert_eq!(check(&[], "tools/call"), Ok(()));
    assert_eq!(check(&[("Mcp-Method", "tools/call")], "tools/call"), Ok(()));
    let all = [
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "where"),
        ("Mcp-Param-Region", "us-prod-1"),
    ];
    assert_eq!(check(&all, "tools/call"), Ok(()));
    // Each one that says otherwise is refused, naming itself.
    for (name, value) in [
        ("Mcp-Method", "tools/list"),
        ("Mcp-Name", "echo"),
        ("Mcp-Param-Region", "eu-west-1"),
    ] {
        let refused = check(&[(name, value)], "tools/call").unwrap_err();
        assert!(refused.to_string().contains(name), "{refused}");
        assert_eq!(refused.to_error().code, -32020);
    }
}

//! Criterion benches for the header rules (targets from the issue: ≤ 250 ns for all headers of
//! a `tools/call` with three annotated arguments, one needing Base64; ≤ 20 µs to validate a
//! 50-property schema).

#![allow(missing_docs, clippy::unwrap_used, reason = "bench harness")]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolwire_headers::{HeaderPlan, standard_headers};

fn three_param_schema() -> Value {
    json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "tenant": {"type": "string", "x-mcp-header": "Tenant"},
        "query": {"type": "string"}
    }, "required": ["region", "query"]})
}

fn fifty_property_schema() -> Value {
    let mut props = serde_json::Map::new();
    for i in 0..50 {
        let prop = match i % 5 {
            0 => json!({"type": "string", "x-mcp-header": format!("P{i}")}),
            1 => json!({"type": "integer", "minimum": 0, "description": "a count"}),
            2 => {
                json!({"type": "object", "properties": {"x": {"type": "boolean", "x-mcp-header": format!("N{i}")}, "y": {"type": "string"}}})
            }
            3 => json!({"type": "array", "items": {"type": "string"}}),
            _ => json!({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}),
        };
        props.insert(format!("p{i}"), prop);
    }
    json!({"type": "object", "properties": props, "$defs": {"unused": {"type": "string"}}})
}

fn bench(c: &mut Criterion) {
    let schema = three_param_schema();
    let plan = HeaderPlan::from_input_schema("execute_sql", schema.as_object().unwrap()).unwrap();
    let args =
        json!({"region": "us-west-2", "priority": 42, "tenant": "Zürich AG", "query": "SELECT 1"});
    let args = args.as_object().unwrap();
    assert_eq!(plan.param_headers(Some(args)).unwrap().len(), 3);

    c.bench_function("tools/call headers: method+name+3 params (1 base64)", |b| {
        b.iter(|| {
            let mut headers =
                standard_headers(black_box("tools/call"), Some(black_box("execute_sql")));
            plan.write_param_headers(Some(black_box(args)), &mut headers)
                .unwrap();
            headers
        })
    });

    // Calibration for this machine: the allocations the result is made of (a Vec of five
    // entries and three short heap strings), with no header logic at all.
    c.bench_function(
        "calibration: Vec of 5 + 3 short Strings, built and dropped",
        |b| {
            b.iter(|| {
                let mut v: Vec<String> = Vec::with_capacity(5);
                v.push(black_box("us-west-2").to_owned());
                v.push(black_box("=?base64?WsO8cmljaCBBRw==?=").to_owned());
                v.push(black_box("execute_sql_in_region").to_owned());
                v
            })
        },
    );

    let big = fifty_property_schema();
    let big = big.as_object().unwrap();
    assert_eq!(
        HeaderPlan::from_input_schema("big", big)
            .unwrap()
            .params()
            .len(),
        20
    );
    c.bench_function("validate 50-property schema", |b| {
        b.iter(|| HeaderPlan::from_input_schema("big", black_box(big)).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

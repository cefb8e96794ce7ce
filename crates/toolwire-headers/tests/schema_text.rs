//! A tool's input schema kept as text (`toolwire_types::Schema`) yields the plan its decoded
//! tree yields: at the depth limit and past it.

#![allow(clippy::unwrap_used, reason = "tests fail by panicking")]

use serde_json::{Value, json};
use toolwire_headers::*;

fn obj(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap()
}

/// `depth` levels of `properties` around an annotated property.
fn nested(depth: usize) -> Value {
    let mut schema = json!({"type": "string", "x-mcp-header": "Deep"});
    for _ in 0..depth {
        schema = json!({"type": "object", "properties": {"p": schema}});
    }
    schema
}

#[test]
fn an_annotation_nested_past_the_depth_limit_is_refused_from_tree_and_text() {
    let rules = |r: Result<HeaderPlan, InvalidToolHeaders>| {
        r.unwrap_err()
            .problems
            .into_iter()
            .map(|p| p.rule)
            .collect::<Vec<_>>()
    };
    let deep = nested(MAX_SCHEMA_DEPTH + 1);
    assert_eq!(
        rules(HeaderPlan::from_input_schema("t", &obj(deep.clone()))),
        vec![HeaderRule::TooDeep]
    );
    let text = toolwire_types::Schema::from(&deep);
    assert_eq!(
        rules(HeaderPlan::for_schema("t", &text)),
        vec![HeaderRule::TooDeep]
    );
    // Within the limit, both find it.
    let shallow = nested(3);
    let plan = HeaderPlan::for_schema("t", &toolwire_types::Schema::from(&shallow)).unwrap();
    assert_eq!(plan.params().len(), 1);
    assert_eq!(plan.params()[0].header_name(), "Mcp-Param-Deep");
}

#[test]
fn a_schema_without_annotations_has_an_empty_plan_at_any_depth() {
    let mut deep = json!({"type": "string"});
    for _ in 0..(MAX_SCHEMA_DEPTH + 10) {
        deep = json!({"type": "object", "properties": {"p": deep}});
    }
    let plan = HeaderPlan::for_schema("t", &toolwire_types::Schema::from(&deep)).unwrap();
    assert!(plan.params().is_empty());
}

//! SEP-2243 rules as tables: schema validation, value extraction, the server-side check, and
//! property tests for the codec.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

use proptest::prelude::*;
use serde_json::{Value, json};
use toolwire_headers::*;

fn obj(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap()
}

/// `(header, path, kind)` of each mirrored argument.
type Params = Vec<(String, String, ParamKind)>;
/// `(pointer, rule text)` of each problem.
type Problems = Vec<(String, String)>;

/// Validates `schema` into its params, or its problems.
fn validate(schema: Value) -> Result<Params, Problems> {
    match HeaderPlan::from_input_schema("t", &obj(schema)) {
        Ok(plan) => Ok(plan
            .params()
            .iter()
            .map(|p| (p.header_name().to_owned(), p.path().join("."), p.kind()))
            .collect()),
        Err(e) => {
            assert_eq!(e.tool, "t");
            Err(e
                .problems
                .iter()
                .map(|p| (p.pointer.clone(), p.rule.to_string()))
                .collect())
        }
    }
}

fn check_valid(schema: Value, expected: &[(&str, &str, ParamKind)]) {
    let got = validate(schema.clone()).unwrap_or_else(|e| panic!("{schema}: {e:?}"));
    let expected: Vec<_> = expected
        .iter()
        .map(|(h, p, k)| (h.to_string(), p.to_string(), *k))
        .collect();
    assert_eq!(got, expected, "{schema}");
}

fn check_invalid(schema: Value, pointer: &str, rule_contains: &str) {
    let problems = validate(schema.clone())
        .err()
        .unwrap_or_else(|| panic!("{schema} should be invalid"));
    assert!(
        problems
            .iter()
            .any(|(p, r)| p == pointer && r.contains(rule_contains)),
        "{schema}: want {pointer} / {rule_contains}, got {problems:?}"
    );
}

fn prop(t: &str, header: Value) -> Value {
    json!({"type": t, "x-mcp-header": header})
}

/// The conformance scenario `http-invalid-tool-headers`: one valid tool and ten invalid ones.
#[test]
fn conformance_invalid_tool_headers() {
    check_valid(
        json!({"type": "object", "properties": {"region": prop("string", json!("Region"))}}),
        &[("Mcp-Param-Region", "region", ParamKind::String)],
    );
    let invalid: [(&str, Value, &str, &str); 10] = [
        (
            "invalid_empty_header",
            json!({"region": prop("string", json!(""))}),
            "/properties/region",
            "must not be empty",
        ),
        (
            "invalid_object_header",
            json!({"cfg": prop("object", json!("Cfg"))}),
            "/properties/cfg",
            "not object",
        ),
        (
            "invalid_array_header",
            json!({"list": prop("array", json!("List"))}),
            "/properties/list",
            "not array",
        ),
        (
            "invalid_null_header",
            json!({"nothing": prop("null", json!("Nothing"))}),
            "/properties/nothing",
            "not null",
        ),
        (
            "invalid_duplicate_same_case",
            json!({"a": prop("string", json!("Region")), "b": prop("string", json!("Region"))}),
            "/properties/b",
            "repeats the one at /properties/a",
        ),
        (
            "invalid_duplicate_diff_case",
            json!({"a": prop("string", json!("Region")), "b": prop("string", json!("REGION"))}),
            "/properties/b",
            "case-insensitive",
        ),
        (
            "invalid_space_in_name",
            json!({"r": prop("string", json!("My Region"))}),
            "/properties/r",
            "character ' '",
        ),
        (
            "invalid_colon_in_name",
            json!({"r": prop("string", json!("Region:Primary"))}),
            "/properties/r",
            "character ':'",
        ),
        (
            "invalid_non_ascii_name",
            json!({"r": prop("string", json!("Région"))}),
            "/properties/r",
            "character 'é'",
        ),
        (
            "invalid_control_char_name",
            json!({"r": prop("string", json!("Region\t1"))}),
            "/properties/r",
            "character '\\t'",
        ),
    ];
    for (tool, props, pointer, rule) in invalid {
        let schema = json!({"type": "object", "properties": props});
        let err = HeaderPlan::from_input_schema(tool, &obj(schema.clone())).unwrap_err();
        assert_eq!(err.tool, tool);
        assert!(
            err.to_string()
                .starts_with(&format!("tool `{tool}` has invalid x-mcp-header"))
        );
        check_invalid(schema, pointer, rule);
    }
}

#[test]
fn reachability() {
    // Nested objects through `properties` only are fine.
    check_valid(
        json!({"type": "object", "properties": {"loc": {"type": "object", "properties": {
            "region": prop("string", json!("Region")), "zone": {"type": "object", "properties": {"id": prop("integer", json!("Zone"))}}}}}}),
        &[
            ("Mcp-Param-Region", "loc.region", ParamKind::String),
            ("Mcp-Param-Zone", "loc.zone.id", ParamKind::Integer),
        ],
    );
    let h = prop("string", json!("X"));
    let table: [(Value, &str, &str); 13] = [
        (
            json!({"x-mcp-header": "Root", "type": "object"}),
            "",
            "root schema",
        ),
        (
            json!({"properties": {"a": {"type": "array", "items": h}}}),
            "/properties/a/items",
            "under `items`",
        ),
        (
            json!({"properties": {"a": {"type": "array", "prefixItems": [h]}}}),
            "/properties/a/prefixItems/0",
            "under `prefixItems`",
        ),
        (
            json!({"properties": {"a": {"anyOf": [{"type": "object", "properties": {"b": h}}]}}}),
            "/properties/a/anyOf/0/properties/b",
            "under `anyOf`",
        ),
        (
            json!({"allOf": [{"properties": {"b": h}}]}),
            "/allOf/0/properties/b",
            "under `allOf`",
        ),
        (json!({"oneOf": [h]}), "/oneOf/0", "under `oneOf`"),
        (json!({"not": h}), "/not", "under `not`"),
        (
            json!({"if": {"properties": {"a": h}}, "then": {}, "else": {}}),
            "/if/properties/a",
            "under `if`",
        ),
        (
            json!({"then": {"properties": {"a": h}}}),
            "/then/properties/a",
            "under `then`",
        ),
        (
            json!({"$defs": {"r": h}, "properties": {"a": {"$ref": "#/$defs/r"}}}),
            "/$defs/r",
            "under `$defs`",
        ),
        (
            json!({"additionalProperties": h}),
            "/additionalProperties",
            "under `additionalProperties`",
        ),
        (
            json!({"patternProperties": {"^a/b~": h}}),
            "/patternProperties/^a~1b~0",
            "under `patternProperties`",
        ),
        (
            json!({"properties": {"a": {"type": "object", "dependentSchemas": {"b": {"properties": {"c": h}}}}}}),
            "/properties/a/dependentSchemas/b/properties/c",
            "under `dependentSchemas`",
        ),
    ];
    for (schema, pointer, rule) in table {
        check_invalid(schema, pointer, rule);
    }
    // Annotations in data keywords are not schemas and are not read.
    check_valid(
        json!({"properties": {"a": {"type": "string", "default": {"x-mcp-header": 1}, "examples": [{"x-mcp-header": ""}]}}}),
        &[],
    );
}

/// Where the spec is silent, the documented decisions.
#[test]
fn type_decisions() {
    let table: [(Value, Result<ParamKind, &str>); 10] = [
        (json!({"type": "string"}), Ok(ParamKind::String)),
        (json!({"type": "integer"}), Ok(ParamKind::Integer)),
        (json!({"type": "boolean"}), Ok(ParamKind::Boolean)),
        (json!({"type": "number"}), Err("not number")),
        (json!({}), Err("declares no type")),
        (json!({"type": ["string", "null"]}), Ok(ParamKind::String)),
        (
            json!({"type": ["string", "integer"]}),
            Err("union of several types"),
        ),
        (
            json!({"anyOf": [{"type": "integer"}, {"type": "null"}]}),
            Ok(ParamKind::Integer),
        ),
        (
            json!({"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/x"}]}),
            Err("declares no type"),
        ),
        (json!({"type": ["null"]}), Err("not null")),
    ];
    for (mut schema, expected) in table {
        schema["x-mcp-header"] = json!("H");
        let full = json!({"type": "object", "properties": {"p": schema}});
        match expected {
            Ok(kind) => check_valid(full, &[("Mcp-Param-H", "p", kind)]),
            Err(rule) => check_invalid(full, "/properties/p", rule),
        }
    }
    check_invalid(
        json!({"properties": {"p": {"type": "string", "x-mcp-header": 7}}}),
        "/properties/p",
        "must be a string, found 7",
    );
    // Several problems are all reported.
    let problems = validate(
        json!({"properties": {"a": prop("number", json!("A")), "b": prop("string", json!(""))}}),
    )
    .unwrap_err();
    assert_eq!(problems.len(), 2, "{problems:?}");
}

#[test]
fn deep_schemas_are_a_problem_not_a_crash() {
    let mut schema = json!({"type": "string", "x-mcp-header": "Deep"});
    for _ in 0..(MAX_SCHEMA_DEPTH + 5) {
        schema = json!({"type": "object", "properties": {"n": schema}});
    }
    let problems = validate(schema).unwrap_err();
    assert!(
        problems.iter().any(|(_, r)| r.contains("deeper than")),
        "{problems:?}"
    );
}

/// `(header, value)` pairs for `arguments` under `schema`.
fn headers_for(schema: &Value, arguments: Value) -> Result<Vec<(String, String)>, ArgumentError> {
    let plan = HeaderPlan::from_input_schema("t", schema.as_object().unwrap()).unwrap();
    plan.param_headers(arguments.as_object()).map(|hs| {
        hs.into_iter()
            .map(|h| (h.name.as_str().to_owned(), h.value.as_str().to_owned()))
            .collect()
    })
}

/// The calls of the conformance scenario `http-custom-headers`.
#[test]
fn conformance_custom_headers() {
    let schema = json!({"type": "object", "properties": {
        "region": prop("string", json!("Region")),
        "priority": prop("integer", json!("Priority")),
        "verbose": prop("boolean", json!("Verbose")),
        "debug": prop("boolean", json!("Debug")),
        "empty_val": prop("string", json!("EmptyVal")),
        "method_val": prop("string", json!("Method")),
        "float_val": {"type": "number"},
        "non_ascii": prop("string", json!("NonAscii")),
        "whitespace": prop("string", json!("Whitespace")),
        "leading": prop("string", json!("Leading")),
        "internal": prop("string", json!("Internal")),
        "newline": prop("string", json!("Newline")),
        "crlf": prop("string", json!("Crlf")),
        "tab": prop("string", json!("Tab")),
        "query": {"type": "string"}
    }});
    let got = headers_for(&schema, json!({
        "region": "us-west1", "priority": 42, "verbose": false, "debug": true, "empty_val": "",
        "method_val": "m", "float_val": 2.5, "non_ascii": "Hello, 世界", "whitespace": " padded ",
        "leading": " us-west1", "internal": "us west 1", "newline": "line1\nline2",
        "crlf": "line1\r\nline2", "tab": "\tindented", "query": "SELECT 1"
    })).unwrap();
    let expected = [
        ("Mcp-Param-Region", "us-west1"),
        ("Mcp-Param-Priority", "42"),
        ("Mcp-Param-Verbose", "false"),
        ("Mcp-Param-Debug", "true"),
        ("Mcp-Param-EmptyVal", ""),
        ("Mcp-Param-Method", "m"),
        ("Mcp-Param-NonAscii", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        ("Mcp-Param-Whitespace", "=?base64?IHBhZGRlZCA=?="),
        ("Mcp-Param-Leading", "=?base64?IHVzLXdlc3Qx?="),
        ("Mcp-Param-Internal", "us west 1"),
        ("Mcp-Param-Newline", "=?base64?bGluZTEKbGluZTI=?="),
        ("Mcp-Param-Crlf", "=?base64?bGluZTENCmxpbmUy?="),
        ("Mcp-Param-Tab", "=?base64?CWluZGVudGVk?="),
    ];
    let mut got_sorted = got.clone();
    got_sorted.sort();
    let mut want: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    want.sort();
    assert_eq!(got_sorted, want);
    // `test_custom_headers_null`: a null value means no header.
    assert_eq!(
        headers_for(&schema, json!({"region": "us-west1", "verbose": null})).unwrap(),
        [("Mcp-Param-Region".to_owned(), "us-west1".to_owned())]
    );
    assert_eq!(headers_for(&schema, json!({})).unwrap(), []);
}

#[test]
fn integer_and_type_rules() {
    let schema = json!({"properties": {"n": prop("integer", json!("N")), "s": prop("string", json!("S")), "b": prop("boolean", json!("B"))}});
    let one = |args: Value| {
        headers_for(&schema, args).map(|v| v.into_iter().map(|(_, v)| v).collect::<Vec<_>>())
    };
    assert_eq!(one(json!({"n": 42.0})).unwrap(), ["42"]);
    assert_eq!(one(json!({"n": -7})).unwrap(), ["-7"]);
    assert_eq!(
        one(json!({"n": 9007199254740991_i64})).unwrap(),
        ["9007199254740991"]
    );
    assert_eq!(
        one(json!({"n": -9007199254740991_i64})).unwrap(),
        ["-9007199254740991"]
    );
    let errs: [(Value, &str); 7] = [
        (json!({"n": 3.5}), "must be an integer, found 3.5"),
        (
            json!({"n": 9007199254740992_i64}),
            "outside ±(2^53 − 1): 9007199254740992",
        ),
        (json!({"n": 18446744073709551615_u64}), "outside"),
        (json!({"n": 1e300}), "outside"),
        (
            json!({"n": "42"}),
            "Mcp-Param-N must be a integer, found string",
        ),
        (
            json!({"s": 5}),
            "Mcp-Param-S must be a string, found integer",
        ),
        (json!({"b": "true"}), "must be a boolean, found string"),
    ];
    for (args, expected) in errs {
        let err = one(args.clone()).unwrap_err();
        assert!(err.to_string().contains(expected), "{args}: {err}");
    }
    // A failed call leaves the caller's header list as it was.
    let plan = HeaderPlan::from_input_schema("t", schema.as_object().unwrap()).unwrap();
    let mut out = standard_headers("tools/call", Some("t"));
    assert!(
        plan.write_param_headers(json!({"s": "ok", "n": 0.5}).as_object(), &mut out)
            .is_err()
    );
    assert_eq!(out.len(), 2);
}

#[test]
fn per_call_header_maps() {
    let plan = HeaderPlan::from_param_map("t", [("region", "Region"), ("n", "Count")]).unwrap();
    let hs = plan
        .param_headers(json!({"region": "eu", "n": 3, "other": 1}).as_object())
        .unwrap();
    let pairs: Vec<_> = hs
        .iter()
        .map(|h| (h.name.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [("Mcp-Param-Region", "eu"), ("Mcp-Param-Count", "3")]
    );
    assert!(plan.param_headers(json!({"n": 0.5}).as_object()).is_err());
    assert!(
        plan.param_headers(json!({"region": {"a": 1}}).as_object())
            .is_err()
    );
    let err =
        HeaderPlan::from_param_map("t", [("a", "X"), ("b", "x"), ("", "Y"), ("c", "bad name")])
            .unwrap_err();
    let rules: Vec<_> = err.problems.iter().map(|p| p.rule.to_string()).collect();
    assert_eq!(err.problems.len(), 3, "{rules:?}");
    assert!(rules.iter().any(|r| r.contains("names no argument")));
    assert!(rules.iter().any(|r| r.contains("not an HTTP token")));
    assert!(rules.iter().any(|r| r.contains("repeats")));
}

fn server_check(
    headers: &[(&str, &str)],
    body: Value,
    schema: Option<Value>,
) -> Result<(), Mismatch> {
    let received = ReceivedHeaders::new(headers.iter().map(|(n, v)| (*n, v.as_bytes())));
    let plan = schema.map(|s| HeaderPlan::from_input_schema("t", s.as_object().unwrap()).unwrap());
    check_request(
        &received,
        body["method"].as_str().unwrap(),
        body["params"].as_object(),
        plan.as_ref(),
    )
}

#[test]
fn server_side_check() {
    let schema = json!({"properties": {"region": prop("string", json!("Region")), "n": prop("integer", json!("N"))}});
    let body = |args: Value| {
        json!({"method": "tools/call", "params": {"name": "where", "arguments": args,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    };
    let good = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("Mcp-Name", "where"),
        ("Mcp-Param-Region", "eu-west1"),
    ];
    assert_eq!(
        server_check(
            &good,
            body(json!({"region": "eu-west1"})),
            Some(schema.clone())
        ),
        Ok(())
    );

    type Row<'a> = (Vec<(&'a str, &'a str)>, Value, &'a str);
    let rows: Vec<Row<'_>> = vec![
        (
            good[1..].to_vec(),
            body(json!({"region": "eu-west1"})),
            "MCP-Protocol-Version header is missing",
        ),
        (
            vec![
                ("MCP-Protocol-Version", "2025-11-25"),
                good[1],
                good[2],
                good[3],
            ],
            body(json!({"region": "eu-west1"})),
            "\"2025-11-25\" does not match the body value \"2026-07-28\"",
        ),
        (
            good.to_vec(),
            json!({"method": "tools/call", "params": {"name": "where", "arguments": {"region": "eu-west1"}}}),
            "carries no protocol version",
        ),
        (
            vec![good[0], good[2], good[3]],
            body(json!({"region": "eu-west1"})),
            "Mcp-Method header is missing",
        ),
        (
            vec![good[0], ("Mcp-Method", "TOOLS/CALL"), good[2], good[3]],
            body(json!({"region": "eu-west1"})),
            "\"TOOLS/CALL\" does not match",
        ),
        (
            vec![good[0], good[1], ("Mcp-Name", "elsewhere"), good[3]],
            body(json!({"region": "eu-west1"})),
            "Mcp-Name header value \"elsewhere\"",
        ),
        (
            good[..3].to_vec(),
            body(json!({"region": "eu-west1"})),
            "Mcp-Param-Region header is missing",
        ),
        (
            vec![good[0], good[1], good[2], ("Mcp-Param-Region", "xx")],
            body(json!({"region": "eu-west1"})),
            "\"xx\" does not match the body value \"eu-west1\"",
        ),
        (
            vec![
                good[0],
                good[1],
                good[2],
                ("Mcp-Param-Region", "=?base64?WsO8cmljaA?="),
            ],
            body(json!({"region": "Zürich"})),
            "invalid Base64",
        ),
        (
            vec![
                good[0],
                good[1],
                good[2],
                good[3],
                ("mcp-param-region", "eu-west1"),
            ],
            body(json!({"region": "eu-west1"})),
            "sent more than once",
        ),
        (
            vec![good[0], good[1], good[2], ("Mcp-Param-N", "41")],
            body(json!({"n": 42})),
            "\"41\" does not match the body value \"42\"",
        ),
    ];
    for (headers, body, expected) in rows {
        let err = server_check(&headers, body.clone(), Some(schema.clone())).unwrap_err();
        assert!(
            err.to_string().contains(expected),
            "{headers:?} {body}: got `{err}`"
        );
        let error = err.to_error();
        assert_eq!(error.code, -32020);
        assert!(error.message.starts_with("Header mismatch: "));
        assert_eq!(Mismatch::HTTP_STATUS, 400);
    }
    // Accepted: the wrapper decoded, integers numerically, a header with no argument.
    let ok_rows: [(&[(&str, &str)], Value); 3] = [
        (
            &[
                good[0],
                good[1],
                good[2],
                ("Mcp-Param-Region", "=?base64?WsO8cmljaA==?="),
            ],
            body(json!({"region": "Zürich"})),
        ),
        (
            &[good[0], good[1], good[2], ("Mcp-Param-N", "42")],
            body(json!({"n": 42.0})),
        ),
        (&good, body(json!({}))),
    ];
    for (headers, body) in ok_rows {
        assert_eq!(
            server_check(headers, body.clone(), Some(schema.clone())),
            Ok(()),
            "{headers:?} {body}"
        );
    }
    // Methods without a name source need only version and method.
    let list = json!({"method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    assert_eq!(
        server_check(&[good[0], ("Mcp-Method", "tools/list")], list, None),
        Ok(())
    );
    // resources/read compares the (possibly wrapped) uri.
    let read = json!({"method": "resources/read", "params": {"uri": "file:///ü", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let uri = name_header("file:///ü");
    assert_eq!(
        server_check(
            &[
                good[0],
                ("Mcp-Method", "resources/read"),
                ("Mcp-Name", uri.value.as_str())
            ],
            read,
            None
        ),
        Ok(())
    );
}

/// The client's headers always pass the server's check, for any string value.
#[test]
fn client_output_passes_server_check() {
    let schema = json!({"properties": {"v": prop("string", json!("V"))}});
    let plan = HeaderPlan::from_input_schema("t", schema.as_object().unwrap()).unwrap();
    for v in [
        "",
        " ",
        "a\u{0}b",
        "=?base64?x?=",
        "tab\tinside",
        "ünïcödé",
        "   ",
    ] {
        let args = json!({"v": v});
        let mut headers = standard_headers("tools/call", Some("t"));
        headers.push(protocol_version_header(
            &toolwire_types::ProtocolVersion::V2026_07_28,
        ));
        plan.write_param_headers(args.as_object(), &mut headers)
            .unwrap();
        let received = ReceivedHeaders::new(
            headers
                .iter()
                .map(|h| (h.name.as_str(), h.value.as_bytes())),
        );
        let params = json!({"name": "t", "arguments": args, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        assert_eq!(
            check_request(&received, "tools/call", params.as_object(), Some(&plan)),
            Ok(()),
            "{v:?}"
        );
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop::sample::select(vec![
            "string",
            "integer",
            "boolean",
            "number",
            "object",
            "x-mcp-header",
            "Region",
            ""
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "type",
                    "properties",
                    "items",
                    "anyOf",
                    "oneOf",
                    "x-mcp-header",
                    "$defs",
                    "not",
                    "a",
                    "b",
                    "additionalProperties",
                    "prefixItems",
                    "if",
                ])
                .prop_map(str::to_owned),
                inner,
                0..5,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn encode_decode_round_trips(s in any::<String>()) {
        let v = encode_value(&s);
        prop_assert_eq!(decode_value(v.as_bytes()).unwrap(), s);
    }

    #[test]
    fn encoded_values_are_printable_ascii(s in any::<String>()) {
        let v = encode_value(&s);
        prop_assert!(v.as_bytes().iter().all(|b| (0x20..=0x7e).contains(b)), "{:?}", v);
        prop_assert!(!v.as_str().starts_with(' ') && !v.as_str().ends_with(' '));
    }

    #[test]
    fn any_schema_validates_without_panicking(schema in arb_json()) {
        if let Value::Object(map) = &schema {
            match HeaderPlan::from_input_schema("t", map) {
                Ok(plan) => {
                    for p in plan.params() {
                        prop_assert!(p.header_name().starts_with(PARAM_PREFIX));
                    }
                }
                Err(e) => prop_assert!(!e.problems.is_empty()),
            }
        }
    }

    #[test]
    fn a_schema_kept_as_text_yields_the_plan_its_tree_yields(schema in arb_json()) {
        if let Value::Object(map) = &schema {
            let summary = |plan: Result<HeaderPlan, InvalidToolHeaders>| match plan {
                Ok(plan) => Ok(plan
                    .params()
                    .iter()
                    .map(|p| (p.header_name().to_owned(), p.path().join("."), p.kind()))
                    .collect::<Vec<_>>()),
                Err(e) => Err(e.problems),
            };
            let text = toolwire_types::Schema::from(map);
            prop_assert_eq!(
                summary(HeaderPlan::for_schema("t", &text)),
                summary(HeaderPlan::from_input_schema("t", map))
            );
        }
    }

    #[test]
    fn any_header_bytes_decode_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_value(&bytes);
        let mut wrapped = b"=?base64?".to_vec();
        wrapped.extend_from_slice(&bytes);
        wrapped.extend_from_slice(b"?=");
        let _ = decode_value(&wrapped);
    }
}

#[test]
fn call_headers_carry_method_name_and_params() {
    let schema = json!({"properties": {"region": prop("string", json!("Region"))}});
    let plan = HeaderPlan::from_input_schema("exécute", schema.as_object().unwrap()).unwrap();
    assert_eq!(plan.tool(), "exécute");
    let hs = plan
        .call_headers(json!({"region": "eu"}).as_object())
        .unwrap();
    let pairs: Vec<_> = hs
        .iter()
        .map(|h| (h.name.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "=?base64?ZXjDqWN1dGU=?="),
            ("Mcp-Param-Region", "eu")
        ]
    );
    let bare = HeaderPlan::without_params("noop")
        .call_headers(None)
        .unwrap();
    assert_eq!(bare.len(), 2);
}

/// The server-side table (`name_source`, which starts from a method string) and each method's
/// own `mcp_name` (which the client uses) name the same member.
#[test]
fn the_server_side_name_table_agrees_with_each_methods_mcp_name() {
    use toolwire_types::RequestMethod;
    use toolwire_types::methods::method::*;

    fn check<M: RequestMethod>(params: serde_json::Value, expected: Option<&str>) {
        let params: M::Params = serde_json::from_value(params).unwrap();
        assert_eq!(M::mcp_name(&params), expected, "{}", M::NAME);
        let member = toolwire_headers::name_source(M::NAME);
        assert_eq!(member.is_some(), expected.is_some(), "{}", M::NAME);
    }
    check::<CallTool>(json!({"name": "execute_sql"}), Some("execute_sql"));
    check::<GetPrompt>(json!({"name": "greet"}), Some("greet"));
    check::<ReadResource>(json!({"uri": "file:///a"}), Some("file:///a"));
    check::<ListTools>(json!({}), None);
    check::<ListPrompts>(json!({}), None);
    check::<Subscribe>(json!({"uri": "file:///a"}), None);
    check::<Complete>(
        json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "v"}}),
        None,
    );
}

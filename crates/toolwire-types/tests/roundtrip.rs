//! Every fixture message round-trips through phase one (envelope) and phase two (typed params or
//! result) and re-encodes to the same JSON; every method has fixtures.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use toolwire_types::methods::method;
use toolwire_types::{
    ClientNotification, ClientRequest, Frame, Message, Method, Outcome, RequestMethod,
    ServerNotification, ServerRequest,
};

struct Case {
    file: &'static str,
    name: String,
    method: Option<String>,
    message: Value,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (file, text) in [
        ("legacy.json", include_str!("fixtures/legacy.json")),
        ("modern.json", include_str!("fixtures/modern.json")),
    ] {
        let items: Vec<Value> = serde_json::from_str(text).unwrap();
        for item in items {
            out.push(Case {
                file,
                name: item["name"].as_str().unwrap().to_owned(),
                method: item["method"].as_str().map(str::to_owned),
                message: item["message"].clone(),
            });
        }
    }
    out
}

/// JSON equality where numbers compare by value (`50` equals `50.0`): typed fields such as
/// `progress` are `f64` and re-encode with a fraction.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn to_value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap()
}

/// Hands every request method's marker to `$then!`: one list for the params and the results.
macro_rules! request_markers {
    ($then:ident) => {
        $then!(
            Initialize,
            Discover,
            Ping,
            ListTools,
            CallTool,
            ListResources,
            ListResourceTemplates,
            ReadResource,
            Subscribe,
            Unsubscribe,
            ListPrompts,
            GetPrompt,
            Complete,
            SetLevel,
            Listen,
            ListSkills,
            GetSkill,
            ReadDirectory,
            GetTask,
            UpdateTask,
            CancelTask,
            CreateMessage,
            Elicit,
            ListRoots
        )
    };
}

/// Decodes the params of `method` as its typed params and re-encodes them. `None` for a
/// method this crate has no marker for.
fn params_roundtrip(method: &str, params: Option<&RawValue>) -> Option<Value> {
    macro_rules! try_methods {
        ($($m:ident),*) => {$(
            if method == <method::$m as Method>::NAME {
                let text = params.map_or("{}", RawValue::get);
                let typed: <method::$m as Method>::Params = serde_json::from_str(text)
                    .unwrap_or_else(|e| panic!("params of {method}: {e}"));
                return Some(to_value(&typed));
            }
        )*};
    }
    request_markers!(try_methods);
    try_methods!(
        Initialized,
        Cancelled,
        Progress,
        LoggingMessage,
        ToolsListChanged,
        PromptsListChanged,
        ResourcesListChanged,
        ResourceUpdated,
        RootsListChanged,
        SubscriptionsAcknowledged,
        ElicitationComplete,
        TaskStatusChanged
    );
    None
}

/// Decodes a raw result as the typed result of `method` and re-encodes it.
fn result_roundtrip(method: &str, raw: &RawValue) -> Value {
    fn one<M: RequestMethod>(raw: &RawValue) -> Value {
        match M::decode_result(raw).unwrap_or_else(|e| panic!("result of {}: {e:?}", M::NAME)) {
            Outcome::Complete(r) => to_value(&r),
            Outcome::InputRequired(r) => {
                assert!(M::MAY_REQUIRE_INPUT);
                for (key, request) in r.input_requests.iter().flatten() {
                    let decoded =
                        ServerRequest::decode_value(&request.method, request.params.clone())
                            .unwrap_or_else(|e| panic!("input request {key}: {e}"));
                    assert!(!matches!(decoded, ServerRequest::Other { .. }), "{key}");
                }
                to_value(&r)
            }
        }
    }
    macro_rules! dispatch {
        ($($m:ident),*) => {$(
            if method == <method::$m as Method>::NAME {
                return one::<method::$m>(raw);
            }
        )*};
    }
    request_markers!(dispatch);
    panic!("no marker for result method {method}");
}

#[test]
fn every_fixture_round_trips() {
    let cases = cases();
    assert!(cases.len() > 70, "fixtures went missing: {}", cases.len());
    for case in &cases {
        let label = format!("{} / {}", case.file, case.name);
        let bytes = serde_json::to_vec(&case.message).unwrap();
        let message = Message::decode(&bytes).unwrap_or_else(|e| panic!("{label}: {e}"));

        // Phase one alone loses nothing.
        let reencoded: Value = serde_json::from_slice(&message.encode().unwrap()).unwrap();
        assert_eq!(reencoded, case.message, "{label}: envelope round trip");

        // Phase two: typed payload, re-encoded, equals the original payload.
        match &message {
            Message::Request(r) => {
                let typed = params_roundtrip(&r.method, r.params.as_deref())
                    .unwrap_or_else(|| panic!("{label}: no marker for {}", r.method));
                let original = case
                    .message
                    .get("params")
                    .cloned()
                    .unwrap_or(Value::Object(Default::default()));
                assert!(
                    json_eq(&typed, &original),
                    "{label}:\n typed {typed}\n original {original}"
                );
                let known = !matches!(
                    ClientRequest::decode(&r.method, r.params.as_deref()).unwrap(),
                    ClientRequest::Other { .. }
                ) || !matches!(
                    ServerRequest::decode(&r.method, r.params.as_deref()).unwrap(),
                    ServerRequest::Other { .. }
                );
                assert!(known, "{label}: no dispatch enum knows {}", r.method);
            }
            Message::Notification(n) => {
                let typed = params_roundtrip(&n.method, n.params.as_deref())
                    .unwrap_or_else(|| panic!("{label}: no marker for {}", n.method));
                let original = case
                    .message
                    .get("params")
                    .cloned()
                    .unwrap_or(Value::Object(Default::default()));
                assert!(
                    json_eq(&typed, &original),
                    "{label}:\n typed {typed}\n original {original}"
                );
                let known = !matches!(
                    ClientNotification::decode(&n.method, n.params.as_deref()).unwrap(),
                    ClientNotification::Other { .. }
                ) || !matches!(
                    ServerNotification::decode(&n.method, n.params.as_deref()).unwrap(),
                    ServerNotification::Other { .. }
                );
                assert!(known, "{label}: no dispatch enum knows {}", n.method);
            }
            Message::Response(r) => match &r.payload {
                Ok(raw) => {
                    let method = case
                        .method
                        .as_deref()
                        .unwrap_or_else(|| panic!("{label}: say which method"));
                    let typed = result_roundtrip(method, raw);
                    let original = &case.message["result"];
                    assert!(
                        json_eq(&typed, original),
                        "{label}:\n typed {typed}\n original {original}"
                    );
                }
                Err(error) => {
                    assert_eq!(to_value(error), case.message["error"], "{label}");
                }
            },
        }
    }
}

#[test]
fn every_method_has_fixtures() {
    let cases = cases();
    let mut requests = BTreeSet::new();
    let mut notifications = BTreeSet::new();
    let mut results = BTreeSet::new();
    for case in &cases {
        match (case.message.get("method"), &case.method) {
            (Some(m), _) if case.message.get("id").is_some() => {
                requests.insert(m.as_str().unwrap().to_owned());
            }
            (Some(m), _) => {
                notifications.insert(m.as_str().unwrap().to_owned());
            }
            (None, Some(m)) if case.message.get("result").is_some() => {
                results.insert(m.clone());
            }
            _ => {}
        }
    }
    let all_requests: BTreeSet<String> = ClientRequest::METHODS
        .iter()
        .chain(ServerRequest::METHODS)
        .map(|s| s.to_string())
        .collect();
    let all_notifications: BTreeSet<String> = ClientNotification::METHODS
        .iter()
        .chain(ServerNotification::METHODS)
        .map(|s| s.to_string())
        .collect();
    // Requests whose modern form differs: every list request is also in the modern file.
    let missing_requests: Vec<_> = all_requests.difference(&requests).collect();
    let missing_results: Vec<_> = all_requests.difference(&results).collect();
    let missing_notifications: Vec<_> = all_notifications.difference(&notifications).collect();
    assert!(
        missing_requests.is_empty(),
        "requests without a fixture: {missing_requests:?}"
    );
    assert!(
        missing_results.is_empty(),
        "results without a fixture: {missing_results:?}"
    );
    assert!(
        missing_notifications.is_empty(),
        "notifications without a fixture: {missing_notifications:?}"
    );
}

#[test]
fn every_modern_request_carries_the_envelope() {
    for case in cases().iter().filter(|c| c.file == "modern.json") {
        if case.message.get("id").is_some() && case.message.get("method").is_some() {
            let meta = &case.message["params"]["_meta"];
            assert!(
                meta["io.modelcontextprotocol/protocolVersion"].is_string(),
                "{}",
                case.name
            );
            assert!(
                meta["io.modelcontextprotocol/clientCapabilities"].is_object(),
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn a_2025_03_26_batch_decodes() {
    let frame = Frame::decode(
        br#"[{"jsonrpc":"2.0","id":1,"result":{"tools":[]}},{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}]"#,
    )
    .unwrap();
    let Frame::Batch(items) = frame else {
        panic!("not a batch")
    };
    assert_eq!(items.len(), 2);
    let Ok(Message::Response(r)) = &items[0] else {
        panic!()
    };
    let Outcome::Complete(list) =
        method::ListTools::decode_result(r.payload.as_ref().unwrap()).unwrap()
    else {
        panic!()
    };
    assert!(list.tools.is_empty());
}

/// Malformed payloads: each is a typed error that names what is wrong.
#[test]
fn malformed_payloads_are_typed_errors() {
    let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "tools/call",
            r#"{"resultType":"streaming","content":[]}"#,
            r#"unknown resultType "streaming""#,
        ),
        (
            "tools/list",
            r#"{"resultType":"input_required"}"#,
            "cannot answer with resultType \"input_required\"",
        ),
        (
            "tools/list",
            r#"{"tools":[{"name":"x","inputSchema":null}]}"#,
            "invalid result for `tools/list`",
        ),
        (
            "tools/call",
            r#"{"resultType":7}"#,
            "invalid result for `tools/call`",
        ),
        (
            "initialize",
            r#"{"protocolVersion":"","capabilities":{},"serverInfo":{"name":"s","version":"1"}}"#,
            "invalid result for `initialize`",
        ),
    ];
    for (m, text, expected) in cases {
        let r = raw(text);
        let err = match *m {
            "tools/call" => method::CallTool::decode_result(&r).map(|_| ()).unwrap_err(),
            "tools/list" => method::ListTools::decode_result(&r)
                .map(|_| ())
                .unwrap_err(),
            _ => method::Initialize::decode_result(&r)
                .map(|_| ())
                .unwrap_err(),
        };
        assert!(err.to_string().contains(expected), "{m} {text}: {err}");
    }
    // The typed error for a null inputSchema names the field in its source.
    let err =
        method::ListTools::decode_result(&raw(r#"{"tools":[{"name":"x","inputSchema":null}]}"#))
            .map(|_| ())
            .unwrap_err();
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(source.contains("invalid type: null"), "{source}");
}

#[test]
fn typed_error_data() {
    let m = Message::decode(
        br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2026-07-28"],"requested":"2027-01-01"}}}"#,
    )
    .unwrap();
    let Message::Response(r) = m else { panic!() };
    let e = r.payload.unwrap_err();
    assert!(e.is_modern_era_evidence());
    assert_eq!(e.unsupported_version().unwrap().supported, ["2026-07-28"]);
    assert!(e.missing_capability().is_none());
    let mismatch = toolwire_types::ErrorObject::new(-32001, "old");
    assert!(mismatch.is_header_mismatch() && !mismatch.is_modern_era_evidence());
}

#[test]
fn a_url_elicitation_required_error_reads_its_url_elicitations_and_drops_the_rest() {
    let m = Message::decode(
        br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"Link your account first","data":{"elicitations":[
            {"mode":"url","elicitationId":"e1","url":"https://example.com/link?e=1","message":"Link GitHub"},
            {"mode":"form","message":"not a URL one","requestedSchema":{"type":"object","properties":{}}},
            {"mode":"url","message":"no URL or id"}]}}}"#,
    )
    .unwrap();
    let Message::Response(r) = m else { panic!() };
    let e = r.payload.unwrap_err();
    let data = e.url_elicitations().unwrap();
    assert_eq!(data.elicitations.len(), 1, "{data:?}");
    let first = &data.elicitations[0];
    assert!(first.is_url());
    assert_eq!(first.url.as_deref(), Some("https://example.com/link?e=1"));
    assert_eq!(first.elicitation_id.as_deref(), Some("e1"));
    assert_eq!(first.message, "Link GitHub");
    // Another code, or data of another shape, is not one.
    let other = toolwire_types::ErrorObject {
        code: -32603,
        ..e.clone()
    };
    assert!(other.url_elicitations().is_none());
    let shapeless = toolwire_types::ErrorObject {
        data: Some(serde_json::json!({"elicitations": "none"})),
        ..e.clone()
    };
    assert!(shapeless.url_elicitations().is_none());
    // Round trip of the constructor's shape.
    let made =
        toolwire_types::ElicitParams::url_mode("Link GitHub", "https://example.com/link?e=1", "e1");
    assert_eq!(&made, first);
}

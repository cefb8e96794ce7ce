//! The client compiled to wasm32 and run under Node (`wasm-bindgen-test-runner`) against the
//! reference server, over Node's own `fetch`: `cargo xtask wasm` starts the server and names
//! it in `TOOLWIRE_WEB_TEST_URL`.

#![cfg(target_arch = "wasm32")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail by panicking"
)]

use toolwire_web::Client;
use wasm_bindgen::JsValue;
use wasm_bindgen::convert::TryFromJsValue as _;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::wasm_bindgen_test;

/// `process.env[name]` in Node.
fn env(name: &str) -> Option<String> {
    let process = js_sys::Reflect::get(&js_sys::global(), &"process".into()).ok()?;
    let env = js_sys::Reflect::get(&process, &"env".into()).ok()?;
    js_sys::Reflect::get(&env, &name.into()).ok()?.as_string()
}

fn get(value: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(value, &key.into()).unwrap()
}

async fn connect(url: &str, protocol: Option<&str>) -> Client {
    let connected = JsFuture::from(Client::connect(
        url.to_owned(),
        protocol.map(str::to_owned),
        None,
    ))
    .await
    .unwrap_or_else(|e| panic!("connect {protocol:?}: {e:?}"));
    Client::try_from_js_value(connected).unwrap()
}

#[wasm_bindgen_test]
async fn lists_and_calls_tools_over_fetch_in_both_eras() {
    let url =
        env("TOOLWIRE_WEB_TEST_URL").expect("TOOLWIRE_WEB_TEST_URL names the reference server");
    for (protocol, expected) in [(None, "2026-07-28"), (Some("2025-11-25"), "2025-11-25")] {
        let client = connect(&url, protocol).await;
        assert_eq!(client.protocol_version().as_deref(), Some(expected));

        let tools = JsFuture::from(client.list_tools()).await.unwrap();
        let names: Vec<String> = js_sys::Array::from(&tools)
            .iter()
            .map(|t| get(&t, "name").as_string().unwrap())
            .collect();
        assert!(names.iter().any(|n| n == "echo"), "{names:?}");

        let args = js_sys::JSON::parse(r#"{"text": "from wasm"}"#).unwrap();
        let result = JsFuture::from(client.call_tool("echo".into(), args))
            .await
            .unwrap();
        let first = js_sys::Array::from(&get(&result, "content")).get(0);
        assert_eq!(
            get(&first, "text").as_string().as_deref(),
            Some("from wasm")
        );

        // A tool whose argument travels as a header (`x-mcp-header`): the server checks the
        // header against the body and answers only when they agree.
        let args = js_sys::JSON::parse(r#"{"region": "eu-west-1", "query": "SELECT 1"}"#).unwrap();
        let result = JsFuture::from(client.call_tool("execute_sql".into(), args))
            .await
            .unwrap_or_else(|e| panic!("{expected}: {e:?}"));
        let text = get(
            &js_sys::Array::from(&get(&result, "content")).get(0),
            "text",
        );
        assert!(
            text.as_string()
                .unwrap_or_default()
                .contains("region=eu-west-1"),
            "{text:?}"
        );

        // An unknown tool rejects with the server's error.
        let refused = JsFuture::from(client.call_tool("no_such_tool".into(), JsValue::NULL)).await;
        assert!(refused.is_err());
    }
}

#[wasm_bindgen_test]
async fn an_unreachable_server_rejects_the_connection() {
    let refused = JsFuture::from(Client::connect(
        "http://127.0.0.1:1/mcp".into(),
        Some("2026-07-28".into()),
        None,
    ))
    .await;
    assert!(refused.is_err());
}

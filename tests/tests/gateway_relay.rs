//! The requests an upstream makes during a call (elicitation, sampling, roots), relayed by the
//! gateway to the downstream client whose call caused them, in every pairing of eras: a legacy
//! client is sent the request on its call's stream, a 2026-07-28 client gets `input_required`
//! and retries; a legacy upstream asks on the call's stream, a 2026-07-28 one in an MRTR round.
//! Also what else travels with a call: URL elicitation completions, tasks, a 2026-07-28
//! caller's log messages.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gateway_common;

use std::sync::{Arc, Mutex};

use gateway_common::*;
use serde_json::{Value, json};
use toolwire::{
    Client, ClientCapabilities, ErrorObject, HttpTransport, ProtocolMode, ServerRequest,
};
use toolwire_host::Naming;

/// What a downstream client was asked, in order.
type Heard = Arc<Mutex<Vec<(String, Value)>>>;

/// A downstream client that declares `declared` and answers as a person named `name` would:
/// accepts the form, says `hello from NAME` as the model, has one root, `file:///NAME`.
fn answering(url: &str, mode: ProtocolMode, name: &str, declared: Value) -> (Client, Heard) {
    let heard: Heard = Arc::default();
    let (log, name) = (heard.clone(), name.to_owned());
    let capabilities: ClientCapabilities = serde_json::from_value(declared).unwrap();
    let client = Client::builder("downstream", "0")
        .mode(mode)
        .handler(capabilities, move |request: ServerRequest| {
            let params = request.params_value().unwrap().unwrap();
            log.lock()
                .unwrap()
                .push((request.method().to_owned(), params));
            let answer = match request.method() {
                "elicitation/create" => json!({"action": "accept", "content": {"name": name}}),
                "sampling/createMessage" => json!({"role": "assistant", "model": "test",
                    "content": {"type": "text", "text": format!("hello from {name}")}}),
                "roots/list" => json!({"roots": [{"uri": format!("file:///{name}")}]}),
                other => {
                    let refused = ErrorObject::new(-32601, format!("no {other} here"));
                    return Box::pin(async move { Err(refused) });
                }
            };
            Box::pin(async move { Ok(answer) })
        })
        .connect_http(HttpTransport::builder(url))
        .unwrap();
    (client, heard)
}

fn everything() -> Value {
    json!({"elicitation": {"form": {}}, "sampling": {}, "roots": {}})
}

const MODERN: ProtocolMode = ProtocolMode::Auto;

/// `ask_client` with `what`, called through the gateway on the upstream `server`.
async fn ask(client: &Client, server: &str, what: &str) -> String {
    let result = client
        .call_tool(&format!("{server}__ask_client"), json!({"what": what}))
        .await
        .unwrap();
    text(&result).to_owned()
}

#[tokio::test]
async fn an_elicitation_reaches_the_client_that_called_in_every_pairing_of_eras() {
    let s = serving(&["new", "old"]).await;
    for (downstream, mode) in [("legacy", LEGACY), ("modern", MODERN)] {
        let (client, heard) = answering(&s.front.url(), mode, "Ada", everything());
        for upstream in ["old", "new"] {
            let said = ask(&client, upstream, "name").await;
            assert_eq!(
                said, "Hello, Ada!",
                "{downstream} client, {upstream} server"
            );
        }
        let heard = heard.lock().unwrap().clone();
        assert_eq!(
            heard.len(),
            2,
            "{downstream}: asked once per call: {heard:?}"
        );
        // In call order, each attributed to the upstream that asked (so that no upstream can
        // pass its question off as the gateway's or another's).
        for ((method, params), upstream) in heard.iter().zip(["old", "new"]) {
            assert_eq!(method, "elicitation/create");
            assert_eq!(
                params["message"],
                format!("[{upstream}] What is your name?"),
                "{params}"
            );
            assert_eq!(params["_meta"][toolwire_gateway::UPSTREAM_META], upstream);
            assert_eq!(params["requestedSchema"]["required"], json!(["name"]));
        }
    }
}

#[tokio::test]
async fn sampling_and_roots_are_relayed_and_their_answers_come_back() {
    let s = serving(&["new", "old"]).await;
    for mode in [LEGACY, MODERN] {
        let (client, _) = answering(&s.front.url(), mode, "Grace", everything());
        for upstream in ["old", "new"] {
            assert_eq!(
                ask(&client, upstream, "sample").await,
                "the model said: hello from Grace"
            );
            assert_eq!(
                ask(&client, upstream, "roots").await,
                "roots: file:///Grace"
            );
        }
    }
}

#[tokio::test]
async fn a_request_the_calling_client_did_not_declare_is_refused_without_asking_it() {
    let s = serving(&["new", "old"]).await;
    for mode in [LEGACY, MODERN] {
        // Elicitation only: no sampling.
        let declared = json!({"elicitation": {"form": {}}});
        let (client, heard) = answering(&s.front.url(), mode, "Alan", declared);
        // A legacy upstream hears the refusal as the answer to its request.
        let said = ask(&client, "old", "sample").await;
        assert!(
            said.starts_with("the client refused (-32601)") && said.contains("`sampling`"),
            "{said}"
        );
        // A 2026-07-28 upstream hears the caller's own capabilities, so it never asks.
        let said = ask(&client, "new", "sample").await;
        assert_eq!(
            said,
            "the client refused (-32600): the client did not declare sampling"
        );
        assert!(heard.lock().unwrap().is_empty(), "never asked");
    }
}

#[tokio::test]
async fn concurrent_callers_on_one_upstream_each_answer_their_own_question() {
    let s = serving(&["new", "old"]).await;
    for mode in [LEGACY, MODERN] {
        let names = ["Ada", "Grace", "Alan", "Edsger"];
        let clients: Vec<_> = names
            .iter()
            .map(|name| answering(&s.front.url(), mode.clone(), name, everything()))
            .collect();
        for upstream in ["old", "new"] {
            let calls = clients
                .iter()
                .map(|(client, _)| ask(client, upstream, "name"));
            let said = futures_util::future::join_all(calls).await;
            let expected: Vec<String> = names.iter().map(|n| format!("Hello, {n}!")).collect();
            assert_eq!(said, expected, "{upstream}");
        }
    }
}

#[tokio::test]
async fn a_retry_with_a_request_state_the_gateway_never_gave_is_refused() {
    let s = serving(&["new"]).await;
    let addr = s.front.addr();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "new__ask_client", "arguments": {"what": "name"},
        "inputResponses": {"ask-1": {"action": "accept", "content": {"name": "Eve"}}},
        "requestState": "gw-0123456789abcdef0123456789abcdef",
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let headers = [
        ("mcp-method", "tools/call"),
        ("mcp-name", "new__ask_client"),
        ("mcp-protocol-version", "2026-07-28"),
    ];
    let (status, answer) = post(addr, &headers, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("requestState"), "{message}");
}

/// A gateway over the entries `servers` (an `mcpServers` object), and its HTTP front.
async fn front_over(
    servers: Value,
) -> (Arc<toolwire_gateway::Gateway>, toolwire_server::HttpServer) {
    let gateway =
        toolwire_gateway::Gateway::builder(host(servers, Naming::Qualified).await).build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    (gateway, front)
}

/// A gateway over the reference server as stdio children: `old` (legacy only) and `new`
/// (2026-07-28 only), and its HTTP front.
async fn over_stdio() -> (Arc<toolwire_gateway::Gateway>, toolwire_server::HttpServer) {
    const REF: &str = env!("CARGO_BIN_EXE_toolwire-ref-stdio");
    front_over(json!({"old": {"command": REF, "args": ["legacy"]},
        "new": {"command": REF, "args": ["modern"]}}))
    .await
}

#[tokio::test]
async fn over_stdio_a_legacy_upstreams_request_reaches_the_only_call_in_flight() {
    let (gateway, front) = over_stdio().await;
    for mode in [LEGACY, MODERN] {
        let (client, heard) = answering(&front.url(), mode, "Barbara", everything());
        for upstream in ["old", "new"] {
            assert_eq!(ask(&client, upstream, "name").await, "Hello, Barbara!");
            assert_eq!(
                ask(&client, upstream, "roots").await,
                "roots: file:///Barbara"
            );
        }
        assert_eq!(heard.lock().unwrap().len(), 4);
    }
    gateway.host().shutdown().await;
}

#[tokio::test]
async fn over_stdio_a_legacy_upstreams_request_during_two_calls_is_refused_not_guessed() {
    let (gateway, front) = over_stdio().await;
    let (busy, _) = answering(&front.url(), LEGACY, "Busy", everything());
    let (asker, heard) = answering(&front.url(), LEGACY, "Ada", everything());
    // A call that stays in flight upstream: its first progress says it got there.
    let (started, running) = tokio::sync::oneshot::channel();
    let started = Mutex::new(Some(started));
    let slow = busy.call_tool_with_progress(
        "old__slow",
        json!({"steps": 3, "delay_ms": 1000}),
        toolwire::CallOptions::default(),
        move |_| {
            if let Some(started) = started.lock().unwrap().take() {
                let _ = started.send(());
            }
        },
    );
    let question = async {
        running.await.unwrap();
        ask(&asker, "old", "name").await
    };
    let (slow, said) = tokio::join!(slow, question);
    assert_eq!(text(&slow.unwrap()), "done after 3 steps");
    assert!(
        said.starts_with("the client refused (-32603)") && said.contains("outside any call"),
        "{said}"
    );
    assert!(heard.lock().unwrap().is_empty(), "no client was asked");
    gateway.host().shutdown().await;
}

#[tokio::test]
async fn a_url_elicitation_an_upstream_completes_is_announced_to_legacy_clients() {
    let s = serving(&["new", "old"]).await;
    let (client, _) = answering(&s.front.url(), LEGACY, "Ada", everything());
    let mut notices = client.notifications();
    let refused = client
        .call_tool("old__link_account", json!({}))
        .await
        .unwrap_err();
    let toolwire::Error::Input(toolwire::InputError::UrlElicitationRequired { error, .. }) =
        &refused
    else {
        panic!("{refused:?}");
    };
    let id = error.data.as_ref().unwrap()["elicitations"][0]["elicitationId"].clone();
    assert!(id.is_string(), "{error:?}");
    client
        .call_tool("old__finish_link", json!({}))
        .await
        .unwrap();
    let announced = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let notice = notices.recv().await.unwrap();
            if notice.method == "notifications/elicitation/complete" {
                break notice;
            }
        }
    })
    .await
    .expect("the completion reached the client");
    let params: Value = serde_json::from_str(announced.params.as_deref().unwrap().get()).unwrap();
    assert_eq!(params["elicitationId"], id);
    let linked = client.call_tool("old__link_account", json!({})).await;
    assert_eq!(text(&linked.unwrap()), "account linked");
}

/// A gateway over a reference server with the tasks fixtures (`ref`, both eras).
async fn with_task_fixtures() -> (
    Arc<toolwire_gateway::Gateway>,
    toolwire_server::HttpServer,
    toolwire_refserver::HttpServer,
) {
    let mut o = toolwire_refserver::Options::default();
    o.task_fixtures = true;
    let upstream = toolwire_refserver::serve_http(LOOPBACK, o).await.unwrap();
    let (gateway, front) = front_over(json!({"ref": {"url": upstream.url()}})).await;
    (gateway, front, upstream)
}

#[tokio::test]
async fn a_task_reaches_a_client_that_follows_tasks_under_an_id_naming_its_server() {
    let (_gateway, front, _upstream) = with_task_fixtures().await;
    let client = Client::builder("downstream", "0")
        .tasks(true)
        .connect_http(HttpTransport::builder(front.url()))
        .unwrap();
    let called = client
        .call_tool_as_task(
            "ref__slow_compute",
            json!({"seconds": 1}),
            toolwire::CallOptions::default(),
        )
        .await
        .unwrap();
    let toolwire::Called::Task(handle) = called else {
        panic!("{called:?}");
    };
    assert!(handle.id().starts_with("ref__"), "{}", handle.id());
    let result = handle.result().await.unwrap();
    assert!(!text(&result).is_empty());
    // An id that names no server, or a task the server does not know.
    for id in ["no-server-here", "ref__no-such-task"] {
        let refused = client.get_task(id, None).await.unwrap_err();
        let toolwire::Error::Server(e) = &refused else {
            panic!("{refused:?}");
        };
        assert_eq!(e.code, -32602, "{id}: {e:?}");
    }
}

#[tokio::test]
async fn a_client_that_does_not_follow_tasks_gets_the_result_and_never_a_task() {
    let (_gateway, front, _upstream) = with_task_fixtures().await;
    for mode in [LEGACY, MODERN] {
        let client = client(&front.url(), mode.clone());
        let result = client
            .call_tool("ref__slow_compute", json!({"seconds": 0}))
            .await
            .unwrap();
        assert!(!text(&result).is_empty(), "{mode:?}");
        // tasks/get declares the extension for itself: a 2026-07-28 client's is routed (and
        // the server knows no such task); a legacy client has no tasks/get through the gateway.
        let refused = client.get_task("ref__anything", None).await.unwrap_err();
        let toolwire::Error::Server(e) = &refused else {
            panic!("{refused:?}");
        };
        let expected = if mode == LEGACY { -32601 } else { -32602 };
        assert_eq!(e.code, expected, "{mode:?}: {e:?}");
    }
}

#[tokio::test]
async fn a_modern_callers_log_level_reaches_the_upstream_and_only_it_hears_the_messages() {
    // Both upstreams answer on SSE streams, where log messages can travel with the answer.
    let new = reference(
        toolwire_refserver::Eras::Modern,
        toolwire_refserver::Framing::Sse,
    )
    .await;
    let old = reference(
        toolwire_refserver::Eras::Legacy,
        toolwire_refserver::Framing::Sse,
    )
    .await;
    let servers = json!({"new": {"url": new.url()}, "old": {"url": old.url()}});
    let (_gateway, front) = front_over(servers).await;
    let watcher = client(&front.url(), LEGACY);
    watcher
        .set_log_level(toolwire::LoggingLevel::Debug)
        .await
        .unwrap();
    let mut overheard = watcher.notifications();
    let caller = Client::builder("downstream", "0")
        .log_level(toolwire::LoggingLevel::Warning)
        .connect_http(HttpTransport::builder(front.url()))
        .unwrap();
    let mut heard = caller.notifications();
    for upstream in ["new", "old"] {
        caller
            .call_tool(&format!("{upstream}__log"), json!({"message": "m"}))
            .await
            .unwrap();
    }
    let mut messages = Vec::new();
    while let Ok(Some(notice)) =
        tokio::time::timeout(std::time::Duration::from_millis(300), heard.recv()).await
    {
        if notice.method == "notifications/message" {
            let params: Value =
                serde_json::from_str(notice.params.as_deref().unwrap().get()).unwrap();
            messages.push((params["logger"].clone(), params["data"].clone()));
        }
    }
    let expected = [
        (json!("new/refserver"), json!("warning: m")),
        (json!("new/refserver"), json!("error: m")),
        (json!("old/refserver"), json!("warning: m")),
        (json!("old/refserver"), json!("error: m")),
    ];
    assert_eq!(messages, expected);
    // The legacy session next door heard none of the modern caller's messages.
    while let Ok(Some(notice)) =
        tokio::time::timeout(std::time::Duration::from_millis(100), overheard.recv()).await
    {
        assert_ne!(notice.method, "notifications/message", "{notice:?}");
    }
}

/// A call's result that links to a resource (`write_file` links the file it wrote) names it by
/// the gateway's URI, which the same client reads back through the gateway, in both eras.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_a_call_links_to_is_read_back_through_the_gateway_in_both_eras() {
    let Setup {
        gateway,
        front,
        _upstreams,
    } = serving(&["new", "old"]).await;
    for (server, mode) in [("new", ProtocolMode::Auto), ("old", LEGACY)] {
        let client = client(&front.url(), mode.clone());
        // Registers read_file and write_file; the call returns once they are listed.
        client
            .call_tool(&format!("{server}__unlock_files"), json!({}))
            .await
            .unwrap();
        let wrote = client
            .call_tool(
                &format!("{server}__write_file"),
                json!({"path": "list", "content": "milk, bread"}),
            )
            .await
            .unwrap();
        let wrote = serde_json::to_value(&wrote).unwrap();
        let link = &wrote["content"][1];
        assert_eq!(link["type"], "resource_link", "{wrote}");
        let uri = link["uri"].as_str().unwrap();
        assert_eq!(uri, format!("toolwire://{server}__files/list"), "{mode:?}");
        let read = client.read_resource(uri).await.unwrap();
        let read = serde_json::to_value(&read.contents).unwrap();
        assert_eq!(read[0]["text"], "milk, bread", "{mode:?}: {read}");
        client.close().await;
    }
    gateway.host().shutdown().await;
}

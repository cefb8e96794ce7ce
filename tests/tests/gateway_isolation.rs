//! No caller of the gateway can read or steer another's traffic: for each relayed request,
//! notification and task, a second caller (another principal, or the same principal on
//! another session where that matters) tries to answer, hear, read or cancel the first one's,
//! and is refused or hears nothing, while the rightful caller's flow still completes. Real
//! sockets throughout: callers authenticate with API keys over loopback HTTP, the upstreams are
//! reference servers (`old` legacy-only on SSE, `new` both eras with the task fixtures).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gateway_common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gateway_common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use toolwire::{Client, HttpTransport, ProtocolMode};
use toolwire_gateway::{Access, AccessConfig, Gateway};
use toolwire_host::Naming;
use toolwire_refserver::{Eras, Framing};

const ALICE: &str = "tw-key-alice-0000000000000001";
const BOB: &str = "tw-key-bob-00000000000000000002";
const CAROL: &str = "tw-key-carol-000000000000000003";
/// A caller no rule names: it sees nothing.
const DAVE: &str = "tw-key-dave-0000000000000000004";

struct Fleet {
    _gateway: Arc<Gateway>,
    front: toolwire_server::HttpServer,
    _upstreams: [toolwire_refserver::HttpServer; 2],
}

/// Alice and Bob see both upstreams, Carol only `new`, Dave nothing.
async fn fleet() -> Fleet {
    let mut o = toolwire_refserver::Options::default();
    o.task_fixtures = true;
    let new = toolwire_refserver::serve_http(LOOPBACK, o).await.unwrap();
    let old = reference(Eras::Legacy, Framing::Sse).await;
    let host = host(
        json!({"new": {"url": new.url()}, "old": {"url": old.url()}}),
        Naming::Qualified,
    )
    .await;
    let key = |name: &str, key: &str| json!({"name": name, "sha256": sha256_hex(key)});
    let section = json!({
        "resource": "https://gw.example/mcp",
        "apiKeys": [key("alice", ALICE), key("bob", BOB), key("carol", CAROL), key("dave", DAVE)],
        "policy": [
            {"callers": {"apiKey": "alice"}, "servers": ["new", "old"]},
            {"callers": {"apiKey": "bob"}, "servers": ["new", "old"]},
            {"callers": {"apiKey": "carol"}, "servers": ["new"]},
        ],
    });
    let config = AccessConfig::from_json(&section).unwrap();
    let access = Access::new(&config, "http://unused/mcp").await.unwrap();
    let (gateway, front) = serve_guarded(host, access).await;
    Fleet {
        _gateway: gateway,
        front,
        _upstreams: [new, old],
    }
}

fn caller(front: &toolwire_server::HttpServer, key: &str, mode: ProtocolMode) -> Client {
    Client::builder("downstream", "0")
        .mode(mode)
        .connect_http(HttpTransport::builder(front.url()).credentials(key))
        .unwrap()
}

/// A raw HTTP/1.1 POST whose answer is read event by event as it arrives.
struct Streamed {
    status: u16,
    head: String,
    body: BufReader<TcpStream>,
}

async fn open(addr: SocketAddr, key: &str, session: Option<&str>, body: &Value) -> Streamed {
    open_with(addr, key, session, &[], body).await
}

async fn open_with(
    addr: SocketAddr,
    key: &str,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: &Value,
) -> Streamed {
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nauthorization: Bearer {key}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(session) = session {
        request.push_str(&format!("mcp-session-id: {session}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut body = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        body.read_line(&mut line).await.unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    let status = head[9..12].parse().unwrap();
    Streamed { status, head, body }
}

impl Streamed {
    /// The next JSON message of the answer (an SSE event's data, or the JSON body), within
    /// five seconds; None when the answer ended.
    async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let mut line = String::new();
                if self.body.read_line(&mut line).await.ok()? == 0 {
                    return None;
                }
                let line = line.trim_end();
                let data = line.strip_prefix("data: ").unwrap_or(line);
                if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(data) {
                    return Some(value);
                }
            }
        })
        .await
        .expect("the answer went quiet")
    }

    fn session(&self) -> Option<String> {
        header_of(&self.head, "mcp-session-id").map(str::to_owned)
    }
}

/// A legacy session of `key` that declares every client capability.
async fn legacy_session(addr: SocketAddr, key: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "clientInfo": {"name": "raw", "version": "0"},
        "capabilities": {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}}});
    let mut opened = open(addr, key, None, &init).await;
    assert_eq!(opened.status, 200);
    let session = opened.session().expect("a session id");
    assert!(opened.next().await.unwrap()["result"].is_object());
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_question_is_answered_only_by_the_session_it_was_sent_to() {
    let f = fleet().await;
    let addr = f.front.addr();
    let alice = legacy_session(addr, ALICE).await;
    let alice_again = legacy_session(addr, ALICE).await;
    let bob = legacy_session(addr, BOB).await;
    let cases = [
        (
            "name",
            json!({"action": "accept", "content": {"name": "MALLORY"}}),
            json!({"action": "accept", "content": {"name": "Ada"}}),
            "Hello, Ada!",
        ),
        (
            "sample",
            json!({"role": "assistant", "model": "m",
                "content": {"type": "text", "text": "injected"}}),
            json!({"role": "assistant", "model": "m",
                "content": {"type": "text", "text": "from Ada"}}),
            "the model said: from Ada",
        ),
        (
            "roots",
            json!({"roots": [{"uri": "file:///etc"}]}),
            json!({"roots": [{"uri": "file:///ada"}]}),
            "roots: file:///ada",
        ),
    ];
    for (n, (what, forged, own, expected)) in cases.into_iter().enumerate() {
        let call = json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
            "params": {"name": "old__ask_client", "arguments": {"what": what}}});
        let mut stream = open(addr, ALICE, Some(&alice), &call).await;
        assert_eq!(stream.status, 200);
        let asked = loop {
            let message = stream.next().await.expect("the question");
            if message.get("method").is_some() && message.get("id").is_some() {
                break message;
            }
        };
        let id = asked["id"].clone();
        // Bob, and Alice's own other session, answer with the very id.
        for (key, session) in [(BOB, &bob), (ALICE, &alice_again)] {
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": forged});
            let refused = open(addr, key, Some(session), &answer).await;
            assert_eq!(refused.status, 202, "{what}: a response is acknowledged");
        }
        // The question still waits for its own session: Alice's answer completes the call.
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": own});
        assert_eq!(open(addr, ALICE, Some(&alice), &answer).await.status, 202);
        let result = loop {
            let message = stream.next().await.expect("the call's answer");
            if message["id"] == json!(10 + n) {
                break message;
            }
        };
        assert_eq!(
            result["result"]["content"][0]["text"], expected,
            "{what}: {result}"
        );
    }
}

/// Every notification `client` heard within `quiet` of the last one.
async fn heard(notices: &mut toolwire::Notifications, quiet: Duration) -> Vec<(String, Value)> {
    let mut heard = Vec::new();
    while let Ok(Some(notice)) = tokio::time::timeout(quiet, notices.recv()).await {
        let params = notice
            .params
            .as_deref()
            .map_or(Value::Null, |p| serde_json::from_str(p.get()).unwrap());
        heard.push((notice.method.clone(), params));
    }
    heard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_resource_updates_and_completions_reach_only_the_session_they_belong_to() {
    let f = fleet().await;
    // Bob sees what Alice sees and asks for every log line; Carol sees only `new`.
    let bob = caller(&f.front, BOB, LEGACY);
    bob.set_log_level(toolwire::LoggingLevel::Debug)
        .await
        .unwrap();
    let mut bob_heard = bob.notifications();
    let carol = caller(&f.front, CAROL, LEGACY);
    carol
        .set_log_level(toolwire::LoggingLevel::Debug)
        .await
        .unwrap();
    let mut carol_heard = carol.notifications();
    let alice = caller(&f.front, ALICE, LEGACY);
    let mut alice_heard = alice.notifications();

    // Alice's call logs; the tool list changes; she subscribes to a file and writes it; she is
    // asked to link an account, and the upstream completes that.
    let logged = alice
        .call_tool("old__log", json!({"message": "alice's secret"}))
        .await
        .unwrap();
    assert_eq!(text(&logged), "logged 4 messages");
    alice
        .call_tool("old__unlock_files", json!({}))
        .await
        .unwrap();
    let uri = "toolwire://old__files/payroll.txt";
    tokio::time::timeout(Duration::from_secs(10), async {
        while alice
            .call_tool("old__write_file", json!({"path": "x", "content": "-"}))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("write_file came");
    alice.subscribe_resource(uri).await.unwrap();
    alice
        .call_tool(
            "old__write_file",
            json!({"path": "payroll.txt", "content": "42"}),
        )
        .await
        .unwrap();
    let linking = alice.call_tool("old__link_account", json!({})).await;
    assert!(linking.is_err(), "a URL elicitation first");
    alice
        .call_tool("old__finish_link", json!({}))
        .await
        .unwrap();

    let alice_heard = heard(&mut alice_heard, Duration::from_millis(1500)).await;
    let methods = |heard: &[(String, Value)]| -> Vec<String> {
        heard.iter().map(|(m, _)| m.clone()).collect()
    };
    let own = methods(&alice_heard);
    // Alice hears her own: her call's log lines, her resource's update, her completion.
    assert!(
        alice_heard.iter().any(|(m, p)| m == "notifications/message"
            && p["data"] == "debug: alice's secret"
            && p["logger"] == "old/refserver"),
        "{alice_heard:?}"
    );
    assert!(
        alice_heard
            .iter()
            .any(|(m, p)| m == "notifications/resources/updated" && p["uri"] == uri),
        "{own:?}"
    );
    assert!(
        own.contains(&"notifications/elicitation/complete".to_owned()),
        "{own:?}"
    );
    for (who, notices) in [("bob", &mut bob_heard), ("carol", &mut carol_heard)] {
        let overheard = heard(notices, Duration::from_millis(500)).await;
        let methods = methods(&overheard);
        // Their streams were open: they heard the tool list change everyone hears.
        assert!(
            methods.contains(&"notifications/tools/list_changed".to_owned()),
            "{who}: {methods:?}"
        );
        for private in [
            "notifications/message",
            "notifications/resources/updated",
            "notifications/elicitation/complete",
        ] {
            assert!(
                !methods.contains(&private.to_owned()),
                "{who} heard {private}: {overheard:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_sees_nothing_cannot_set_the_log_level() {
    let f = fleet().await;
    let dave = caller(&f.front, DAVE, LEGACY);
    let refused = dave
        .set_log_level(toolwire::LoggingLevel::Debug)
        .await
        .unwrap_err();
    let toolwire::Error::Server(e) = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(e.code, -32600, "{e:?}");
    assert!(e.message.contains("may see no server"), "{e:?}");
    // Carol may: she sees `new`.
    let carol = caller(&f.front, CAROL, LEGACY);
    carol
        .set_log_level(toolwire::LoggingLevel::Debug)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_got_updated_and_cancelled_by_its_caller_alone() {
    let f = fleet().await;
    let with_tasks = |key: &str| {
        Client::builder("downstream", "0")
            .tasks(true)
            .connect_http(HttpTransport::builder(f.front.url()).credentials(key))
            .unwrap()
    };
    let (alice, bob, carol) = (with_tasks(ALICE), with_tasks(BOB), with_tasks(CAROL));
    let called = alice
        .call_tool_as_task(
            "new__slow_compute",
            json!({"seconds": 1}),
            toolwire::CallOptions::default(),
        )
        .await
        .unwrap();
    let toolwire::Called::Task(handle) = called else {
        panic!("{called:?}");
    };
    let id = handle.id().to_owned();
    assert!(id.starts_with("new__"), "{id}");
    // Bob sees `new` as Alice does; Carol sees it too. Neither can touch her task.
    for (who, other) in [("bob", &bob), ("carol", &carol)] {
        let refusals = [
            other.get_task(&id, None).await.map(|_| ()),
            other.cancel_task(&id, None).await,
            other.update_task(&id, serde_json::Map::new(), None).await,
        ];
        for refused in refusals {
            let Err(toolwire::Error::Server(e)) = &refused else {
                panic!("{who}: {refused:?}");
            };
            assert_eq!(e.code, -32602, "{who}: {e:?}");
            assert!(e.message.starts_with("Unknown task"), "{who}: {e:?}");
        }
    }
    // Alice's own: it runs on and ends with its result.
    let task = alice.get_task(&id, None).await.unwrap();
    assert_eq!(task.task_id, id);
    let result = handle.result().await.unwrap();
    assert!(!text(&result).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_call_is_resumed_by_its_caller_alone() {
    let f = fleet().await;
    let addr = f.front.addr();
    let call = |state: Option<&str>| {
        let mut params = json!({"name": "new__ask_client", "arguments": {"what": "name"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}});
        if let Some(state) = state {
            params["requestState"] = json!(state);
            params["inputResponses"] =
                json!({"ask-1": {"action": "accept", "content": {"name": "Ada"}}});
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    };
    let headers = |key: &'static str| {
        [
            ("mcp-method", "tools/call"),
            ("mcp-name", "new__ask_client"),
            ("mcp-protocol-version", "2026-07-28"),
            ("authorization", key),
        ]
    };
    let (alice_auth, bob_auth) = (format!("Bearer {ALICE}"), format!("Bearer {BOB}"));
    let alice_auth: &'static str = Box::leak(alice_auth.into_boxed_str());
    let bob_auth: &'static str = Box::leak(bob_auth.into_boxed_str());
    let (status, asked) = post(addr, &headers(alice_auth), &call(None)).await;
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    // Bob retries Alice's call with her state: refused, and her call stays parked.
    let (_, stolen) = post(addr, &headers(bob_auth), &call(Some(&state))).await;
    assert_eq!(stolen["error"]["code"], -32602, "{stolen}");
    let (_, resumed) = post(addr, &headers(alice_auth), &call(Some(&state))).await;
    assert_eq!(
        resumed["result"]["content"][0]["text"], "Hello, Ada!",
        "{resumed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_is_acknowledged_only_for_resources_its_caller_may_see() {
    let f = fleet().await;
    let addr = f.front.addr();
    let hidden = "toolwire://old__files/payroll.txt";
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"notifications": {"resourceSubscriptions": [hidden], "toolsListChanged": true},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    // Carol sees only `new`: her stream is acknowledged for the tool list alone.
    let mut carol = open_with(addr, CAROL, None, &headers, &listen).await;
    assert_eq!(carol.status, 200);
    let acknowledged = carol.next().await.unwrap();
    let agreed = &acknowledged["params"]["notifications"];
    assert_eq!(agreed["toolsListChanged"], true, "{acknowledged}");
    assert!(
        agreed.get("resourceSubscriptions").is_none(),
        "{acknowledged}"
    );
    // Alice sees `old`: hers names the file.
    let mut alice = open_with(addr, ALICE, None, &headers, &listen).await;
    let acknowledged = alice.next().await.unwrap();
    assert_eq!(
        acknowledged["params"]["notifications"]["resourceSubscriptions"],
        json!([hidden]),
        "{acknowledged}"
    );
}

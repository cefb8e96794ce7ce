//! The facade over Streamable HTTP, in both eras, against the scripted server on a loopback
//! socket.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use toolwire::{CallOptions, Client, Error, HttpTransport, ProtocolVersion};
use toolwire_test_support::Eras;
use toolwire_test_support::http::{Framing, HttpPeer, Reply, scripted};

async fn client(peer: &HttpPeer) -> Client {
    Client::builder("e2e", "0")
        .connect_http(HttpTransport::builder(peer.url()))
        .unwrap()
}

#[tokio::test]
async fn modern_over_http_with_sep2243_headers_and_progress() {
    let peer = HttpPeer::start(scripted(Eras::Both, Framing::Sse)).await;
    let client = client(&peer).await;
    assert_eq!(
        client.ready().await.unwrap().version,
        ProtocolVersion::V2026_07_28
    );
    assert_eq!(client.mcp_session_id(), None, "the stateless era has none");
    client.list_tools().await.unwrap();
    let result = client
        .call_tool(
            "execute_sql",
            json!({"region": "us-west1", "query": "select 1"}),
        )
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text(), Some("region=us-west1 rows=1"));

    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let counted = client
        .call_tool_with_progress(
            "count",
            json!({"to": 3}),
            CallOptions::default(),
            move |p| sink.lock().unwrap().push(p.progress),
        )
        .await
        .unwrap();
    assert_eq!(counted.content[0].as_text(), Some("counted to 3"));
    assert_eq!(*seen.lock().unwrap(), [1.0, 2.0, 3.0]);

    let call = &peer.calls("tools/call")[0];
    assert_eq!(call.header("mcp-protocol-version"), "2026-07-28");
    assert_eq!(call.header("mcp-method"), "tools/call");
    assert_eq!(call.header("mcp-name"), "execute_sql");
    assert_eq!(call.header("mcp-param-region"), "us-west1");
    client.close().await;
    for r in peer.requests() {
        assert_eq!(r.method, http::Method::POST, "modern: POST only");
        assert_eq!(r.header("mcp-session-id"), "");
    }
}

#[tokio::test]
async fn a_legacy_http_server_is_reached_through_the_fallback_with_a_session() {
    let peer = HttpPeer::start(scripted(Eras::Legacy, Framing::Json)).await;
    let client = client(&peer).await;
    let n = client.ready().await.unwrap();
    assert_eq!(n.version, ProtocolVersion::V2025_11_25);
    // What a caller once kept the transport for, the client says.
    assert_eq!(client.mcp_session_id().as_deref(), Some("session-1"));
    assert!(client.carries_headers());
    client.list_tools().await.unwrap();
    let echo = client
        .call_tool("echo", json!({"text": "over http"}))
        .await
        .unwrap();
    assert_eq!(echo.content[0].as_text(), Some("over http"));
    // A JSON-RPC error in a 200 body is a server error, not a transport failure.
    let err = client.call_tool("nope", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, Error::Server(e) if e.code == -32602),
        "{err}"
    );
    client.close().await;
    assert_eq!(
        client.mcp_session_id(),
        None,
        "a closed client names no session"
    );

    let methods: Vec<(String, String)> = peer
        .requests()
        .iter()
        .map(|r| {
            (
                r.rpc_method().unwrap_or_else(|| r.method.to_string()),
                r.header("mcp-session-id").to_owned(),
            )
        })
        .collect();
    assert_eq!(methods[0], ("server/discover".to_owned(), String::new()));
    assert_eq!(methods[1], ("initialize".to_owned(), String::new()));
    assert!(
        methods[2..].iter().all(|(_, s)| s == "session-1"),
        "every later request carries the session: {methods:?}"
    );
    assert!(
        methods.iter().any(|(m, _)| m == "GET"),
        "the GET stream was tried"
    );
    assert_eq!(methods.last().unwrap().0, "DELETE");
    let list = &peer.calls("tools/list")[0];
    assert_eq!(list.header("mcp-protocol-version"), "2025-11-25");
    assert_eq!(
        list.header("mcp-method"),
        "",
        "no SEP-2243 headers before 2026-07-28"
    );
}

#[tokio::test]
async fn legacy_sse_answers_carry_progress() {
    let peer = HttpPeer::start(scripted(Eras::Legacy, Framing::Sse)).await;
    let client = client(&peer).await;
    let seen = Arc::new(Mutex::new(0));
    let sink = seen.clone();
    let counted = client
        .call_tool_with_progress(
            "count",
            json!({"to": 2}),
            CallOptions::default(),
            move |_| *sink.lock().unwrap() += 1,
        )
        .await
        .unwrap();
    assert_eq!(counted.content[0].as_text(), Some("counted to 2"));
    assert_eq!(*seen.lock().unwrap(), 2);
    client.close().await;
}

#[tokio::test]
async fn dropping_a_modern_call_closes_its_stream_instead_of_notifying() {
    let peer = HttpPeer::start(scripted(Eras::Modern, Framing::Sse)).await;
    let client = client(&peer).await;
    client.ready().await.unwrap();
    let slow = client.call_tool("slow", json!({}));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), slow)
            .await
            .is_err()
    );
    let echo = client
        .call_tool("echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(echo.content[0].as_text(), Some("after"));
    assert!(
        peer.calls("notifications/cancelled").is_empty(),
        "2026-07-28 over HTTP cancels by closing the stream"
    );
    client.close().await;
}

#[tokio::test]
async fn http_failures_fail_the_call_not_the_client() {
    let script = scripted(Eras::Modern, Framing::Json);
    let peer = HttpPeer::start(move |req| {
        if req.body.windows(6).any(|w| w == b"\"boom\"") {
            Reply::json(500, "internal error")
        } else {
            script(req)
        }
    })
    .await;
    let client = client(&peer).await;
    let err = client.call_tool("boom", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, Error::Connection(toolwire::ConnectionError::Undelivered(f)) if f.status == Some(500)),
        "{err}"
    );
    let echo = client
        .call_tool("echo", json!({"text": "ok"}))
        .await
        .unwrap();
    assert_eq!(echo.content[0].as_text(), Some("ok"));
    client.close().await;
}

#[tokio::test]
async fn an_auth_challenge_fails_negotiation_instead_of_falling_back() {
    let peer =
        HttpPeer::start(|_| Reply::status(401).header("www-authenticate", r#"Bearer scope="mcp""#))
            .await;
    let client = client(&peer).await;
    let err = client.ready().await.unwrap_err();
    assert!(err.to_string().contains("negotiation"), "{err}");
    // Each level says its own part: negotiation failed, the probe got no answer, HTTP 401.
    let chain = toolwire::ErrorChain(&err).to_string();
    assert!(
        chain.starts_with("protocol negotiation failed: server/discover got no answer: request"),
        "{chain}"
    );
    assert!(chain.contains("failed with HTTP 401"), "{chain}");
    assert_eq!(peer.requests().len(), 1, "401 says nothing about the era");
}

/// `unlock` registers `read_file` and announces it; the list change follows the result.
async fn unlock_returns_with_read_file_listed(client: &Client) {
    let mut changes = client.subscribe_tools();
    client.list_tools().await.unwrap();
    assert!(!client.tools().contains("read_file"));
    let result = client.call_tool("unlock", json!({})).await.unwrap();
    assert_eq!(
        result.registers.as_deref(),
        Some(&["read_file".to_owned()][..])
    );
    assert!(!toolwire::tools_may_be_stale(&result));
    assert!(
        client.tools().contains("read_file"),
        "the result came back before the tool it registered was listed"
    );
    let mut added = Vec::new();
    while let Ok(commit) = changes.try_recv() {
        added.extend(commit.diff.added);
    }
    assert!(added.iter().any(|n| n == "read_file"), "{added:?}");
}

#[tokio::test]
async fn the_settle_barrier_over_http_in_both_eras() {
    for (eras, framing) in [
        (Eras::Modern, Framing::Sse),
        (Eras::Modern, Framing::Json),
        (Eras::Legacy, Framing::Sse),
    ] {
        let peer = HttpPeer::start(scripted(eras, framing)).await;
        let client = client(&peer).await;
        unlock_returns_with_read_file_listed(&client).await;
        client.close().await;
        let listens = peer.calls("subscriptions/listen").len();
        // Modern: one listen stream (the SSE server keeps it open and announces on it; the
        // JSON one refuses it, so the barrier fetches the list itself). Legacy: none.
        assert_eq!(
            listens,
            usize::from(eras == Eras::Modern),
            "{eras:?} {framing:?}"
        );
    }
}

#[tokio::test]
async fn a_barrier_that_times_out_says_so_on_the_result() {
    // Legacy JSON answers cannot carry the list change, and this server has no GET stream:
    // the change never arrives.
    let peer = HttpPeer::start(scripted(Eras::Legacy, Framing::Json)).await;
    let client = Client::builder("e2e", "0")
        .settle(toolwire::SettleMode::Announced, Duration::from_millis(300))
        .connect_http(HttpTransport::builder(peer.url()))
        .unwrap();
    client.list_tools().await.unwrap();
    let started = std::time::Instant::now();
    let result = client.call_tool("unlock", json!({})).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(toolwire::tools_may_be_stale(&result));
    assert!(!client.tools().contains("read_file"));
    client.close().await;
}

/// Legacy era: the `logging/setLevel` a new session sends is answered before anything else is
/// sent, so a call made at once already runs at the level asked (over HTTP the two requests
/// would otherwise race, and the server could log the call at its default level).
#[tokio::test]
async fn a_legacy_log_level_is_in_force_before_the_first_call() {
    let arrivals: Arc<Mutex<Vec<(String, std::time::Instant)>>> = Arc::default();
    let seen = arrivals.clone();
    let peer = HttpPeer::start(move |req| {
        let method = req.rpc_method().unwrap_or_default();
        seen.lock()
            .unwrap()
            .push((method.clone(), std::time::Instant::now()));
        let Some(id) = req.rpc_id() else {
            return Reply::status(if req.method == http::Method::GET {
                405
            } else {
                202
            });
        };
        let result = match method.as_str() {
            "initialize" => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"logging": {}, "tools": {}},
                "serverInfo": {"name": "levels", "version": "0"}
            }),
            "tools/list" => json!({"tools": []}),
            _ => json!({}),
        };
        let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        let reply = Reply::status(200).header("content-type", "application/json");
        let reply = if method == "logging/setLevel" {
            reply.part(toolwire_test_support::http::Part::Sleep(
                Duration::from_millis(300),
            ))
        } else {
            reply
        };
        reply.part(toolwire_test_support::http::Part::Data(body.into()))
    })
    .await;
    let client = Client::builder("e2e", "0")
        .mode(toolwire::ProtocolMode::Pinned(ProtocolVersion::V2025_11_25))
        .log_level(toolwire::LoggingLevel::Warning)
        .connect_http(HttpTransport::builder(peer.url()))
        .unwrap();
    client.list_tools().await.unwrap();
    let arrivals = arrivals.lock().unwrap().clone();
    let at = |m: &str| {
        arrivals
            .iter()
            .find(|(method, _)| method == m)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| panic!("no {m}: {arrivals:?}"))
    };
    assert!(
        at("tools/list") >= at("logging/setLevel") + Duration::from_millis(300),
        "tools/list was sent before logging/setLevel was answered: {arrivals:?}"
    );
    client.close().await;
}

/// A legacy server with (or without) the skills extension: one skill, its SKILL.md and one
/// supporting file; `tamper` serves a supporting file that is not what the manifest says.
fn skills_server(
    declared: bool,
    tamper: bool,
) -> impl Fn(&toolwire_test_support::http::Recorded) -> Reply + Send + Sync {
    const SKILL: &str = "---\nname: pdf\ndescription: Work with PDFs\n---\n\nBody.\n";
    const FORMS: &str = "Forms.\n";
    let digest = |text: &str| format!("sha256:{}", sha256_hex(text.as_bytes()));
    let manifest = json!({
        "uri": "skill://pdf/SKILL.md",
        "frontmatter": {"name": "pdf", "description": "Work with PDFs"},
        "resources": [
            {"uri": "skill://pdf/SKILL.md", "digest": digest(SKILL), "size": SKILL.len()},
            {"uri": "skill://pdf/FORMS.md", "digest": digest(FORMS), "size": FORMS.len()},
        ]
    });
    move |req| {
        let method = req.rpc_method().unwrap_or_default();
        let Some(id) = req.rpc_id() else {
            return Reply::status(if req.method == http::Method::GET {
                405
            } else {
                202
            });
        };
        let mut capabilities = json!({"resources": {}});
        if declared {
            capabilities["extensions"] = json!({"io.modelcontextprotocol/skills": {}});
        }
        let params: serde_json::Value = serde_json::from_slice::<serde_json::Value>(&req.body)
            .map(|v| v["params"].clone())
            .unwrap_or_default();
        let result = match method.as_str() {
            "initialize" => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "serverInfo": {"name": "skills", "version": "0"}
            }),
            "skills/list" => json!({"skills": [manifest.clone()]}),
            "skills/get" => json!({"skill": manifest.clone()}),
            "resources/read" => {
                let uri = params["uri"].as_str().unwrap_or("");
                let text = match uri {
                    "skill://pdf/FORMS.md" if tamper => "Forms!\n",
                    "skill://pdf/FORMS.md" => FORMS,
                    _ => SKILL,
                };
                json!({"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]})
            }
            _ => json!({}),
        };
        Reply::json(
            200,
            json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        )
    }
}

/// SHA-256 in hex, for the test server's manifest.
fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn legacy_client(peer: &HttpPeer) -> Client {
    Client::builder("e2e", "0")
        .mode(toolwire::ProtocolMode::Pinned(ProtocolVersion::V2025_11_25))
        .connect_http(HttpTransport::builder(peer.url()).get_stream(false))
        .unwrap()
}

#[tokio::test]
async fn skills_are_listed_without_reading_and_loaded_with_every_file_verified() {
    let peer = HttpPeer::start(skills_server(true, false)).await;
    let client = legacy_client(&peer).await;
    let skills = client.list_all_skills().await.unwrap();
    assert_eq!(skills.len(), 1);
    assert!(
        peer.calls("resources/read").is_empty(),
        "listing reads nothing"
    );
    let loaded = client.load_skill(&skills[0]).await.unwrap();
    assert!(loaded.text.ends_with("Body.\n"));
    let forms = client
        .read_skill_file(&skills[0], "skill://pdf/FORMS.md")
        .await
        .unwrap();
    assert_eq!(forms, b"Forms.\n");
    assert_eq!(
        client.get_skill("skill://pdf/SKILL.md").await.unwrap(),
        skills[0]
    );
    // A file the manifest does not list is refused before anything is read.
    let before = peer.calls("resources/read").len();
    let e = client
        .read_skill_file(&skills[0], "skill://pdf/secrets.env")
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Protocol(toolwire::ProtocolError::SkillVerification { .. })
        ),
        "{e}"
    );
    assert_eq!(peer.calls("resources/read").len(), before);
    client.close().await;
}

#[tokio::test]
async fn a_file_that_differs_from_its_manifest_is_never_returned() {
    let peer = HttpPeer::start(skills_server(true, true)).await;
    let client = legacy_client(&peer).await;
    let skills = client.list_all_skills().await.unwrap();
    client.load_skill(&skills[0]).await.unwrap();
    let e = client
        .read_skill_file(&skills[0], "skill://pdf/FORMS.md")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::Protocol(toolwire::ProtocolError::SkillVerification { uri, reason }) if uri == "skill://pdf/FORMS.md" && reason.contains("digest")),
        "{e}"
    );
    client.close().await;
}

#[tokio::test]
async fn skills_of_a_server_that_did_not_declare_them_are_refused_locally() {
    let peer = HttpPeer::start(skills_server(false, false)).await;
    let client = legacy_client(&peer).await;
    let e = client.list_skills(None).await.unwrap_err();
    assert!(
        matches!(e, Error::Usage(toolwire::UsageError::InvalidCall(_))),
        "{e}"
    );
    assert!(
        toolwire::ErrorChain(&e)
            .to_string()
            .contains("io.modelcontextprotocol/skills"),
        "{e}"
    );
    assert!(peer.calls("skills/list").is_empty(), "nothing was sent");
    client.close().await;
}

/// A person who takes their time in the browser: approves after `delay`.
#[derive(Debug)]
struct SlowPerson {
    delay: Duration,
    browser: toolwire::auth::FetchRedirect,
}

impl toolwire::auth::AuthorizationHandler for SlowPerson {
    fn redirect_uri<'a>(
        &'a self,
        previous: Option<&'a str>,
    ) -> toolwire::BoxFuture<'a, Result<String, toolwire::auth::AuthError>> {
        self.browser.redirect_uri(previous)
    }

    fn authorize<'a>(
        &'a self,
        url: &'a str,
        http: &'a toolwire::HttpExecutor,
    ) -> toolwire::BoxFuture<'a, Result<toolwire::auth::CallbackParams, toolwire::auth::AuthError>>
    {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.browser.authorize(url, http).await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_slower_than_the_probe_still_ends_in_the_modern_era_and_the_call_runs() {
    use toolwire::auth::{FetchRedirect, MemoryStore, OAuthConfig};
    // A dual-era server behind OAuth; the first request (the probe) meets a 401, and the
    // person takes four probe timeouts, and longer than the call's own deadline, to approve.
    let (peer, state) = toolwire_test_support::oauth::protected_server(|_| {}).await;
    let oauth = OAuthConfig::new()
        .store(Arc::new(MemoryStore::new()))
        .handler(Arc::new(SlowPerson {
            delay: Duration::from_millis(1200),
            browser: FetchRedirect::new("http://127.0.0.1:9/callback"),
        }));
    let client = Client::builder("slow-login", "0")
        .timeouts(Duration::from_millis(800), Duration::from_millis(300))
        .oauth(oauth)
        .connect_http(HttpTransport::builder(peer.url()))
        .unwrap();
    let tools = client.list_all_tools().await;
    assert!(tools.is_ok(), "{tools:?}");
    let negotiated = client.ready().await.unwrap();
    assert_eq!(
        negotiated.version,
        ProtocolVersion::V2026_07_28,
        "the probe waited for the login"
    );
    assert_eq!(state.lock().unwrap().authorizations, 1);
    client.close().await;
}

/// A legacy server whose sessions (`s1`, `s2`, …) expire when the test moves the counter (a
/// request naming another session gets a 404), declaring tools, logging and resource
/// subscriptions; every request is answered with an empty result (`echo` with its text).
async fn expiring_legacy(session: Arc<std::sync::atomic::AtomicUsize>) -> HttpPeer {
    use std::sync::atomic::Ordering;
    let handler = move |req: &toolwire_test_support::http::Recorded| {
        let method = req.rpc_method().unwrap_or_default();
        let answer = |result: serde_json::Value| {
            let id = req.rpc_id().unwrap_or_default();
            Reply::json(
                200,
                json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
            )
        };
        match (req.method.as_str(), method.as_str()) {
            ("GET", _) => Reply::status(405),
            ("DELETE", _) => Reply::status(200),
            (_, "initialize") => {
                let n = session.fetch_add(1, Ordering::SeqCst) + 1;
                answer(json!({"protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}, "logging": {}, "resources": {"subscribe": true}},
                    "serverInfo": {"name": "expiring", "version": "1"}}))
                .header("mcp-session-id", &format!("s{n}"))
            }
            _ if req.header("mcp-session-id") != format!("s{}", session.load(Ordering::SeqCst)) => {
                Reply::status(404)
            }
            (_, "tools/list") => answer(json!({"tools": [
                {"name": "write", "inputSchema": {"type": "object"}}]})),
            (_, "tools/call") => answer(json!({"content": [{"type": "text", "text": "done"}]})),
            _ if req.rpc_id().is_some() => answer(json!({})),
            _ => Reply::status(202),
        }
    };
    HttpPeer::start(handler).await
}

/// The session owns the MCP session: when the server forgets it (404), the client opens a new
/// one over the same transport, gives it the log level and the subscriptions still held (not
/// the one dropped), lists the tools again and sends the call that found the session gone,
/// which the server never processed, although it is not safe to repeat.
#[tokio::test]
async fn a_lost_legacy_session_is_opened_again_with_its_log_level_and_subscriptions() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let session = Arc::new(AtomicUsize::new(0));
    let peer = expiring_legacy(session.clone()).await;
    let transport = HttpTransport::new(peer.url()).unwrap();
    let client = Client::builder("e2e", "0")
        .connect(transport.clone())
        .unwrap();
    client.list_tools().await.unwrap();
    client
        .set_log_level(toolwire::LoggingLevel::Debug)
        .await
        .unwrap();
    client
        .set_log_level(toolwire::LoggingLevel::Error)
        .await
        .unwrap();
    client.subscribe_resource("file:///a").await.unwrap();
    client.subscribe_resource("file:///b").await.unwrap();
    client.unsubscribe_resource("file:///a").await.unwrap();
    let before = peer.requests().len();
    session.store(5, Ordering::SeqCst);
    let result = client.call_tool("write", json!({"n": 1})).await.unwrap();
    assert_eq!(result.content[0].as_text(), Some("done"));
    assert_eq!(transport.session_id().as_deref(), Some("s6"));

    let after: Vec<(String, String, serde_json::Value)> = peer.requests()[before..]
        .iter()
        .filter(|r| r.method == http::Method::POST)
        .map(|r| {
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            (
                r.rpc_method().unwrap_or_default(),
                r.header("mcp-session-id").to_owned(),
                body["params"].clone(),
            )
        })
        .collect();
    let methods: Vec<(&str, &str)> = after
        .iter()
        .map(|(m, s, _)| (m.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        methods,
        [
            ("tools/call", "s1"),
            ("initialize", ""),
            ("notifications/initialized", "s6"),
            ("logging/setLevel", "s6"),
            ("resources/subscribe", "s6"),
            ("tools/list", "s6"),
            ("tools/call", "s6"),
        ]
    );
    assert_eq!(after[3].2["level"], "error");
    assert_eq!(after[4].2["uri"], "file:///b");
    assert_eq!(after[6].2["arguments"], json!({"n": 1}));
    client.close().await;
}

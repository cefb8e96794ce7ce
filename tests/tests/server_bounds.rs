//! What one client can hold open or make a server keep is bounded (`toolwire_server::Limits`):
//! idle and half-sent connections are closed and cannot starve a legitimate request; a caller
//! opening session after session keeps at most its share; stored answers stay within their
//! byte bound; a legacy request under 2026-07-28 routing headers is refused. Real loopback
//! sockets against the reference server, with limits small enough to reach in a test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gateway_common;

use std::net::SocketAddr;
use std::time::Duration;

use gateway_common::{GetStream, LOOPBACK, event_ids, exchange_all, post_request, raw, raw_text};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn serve(
    limits: impl FnOnce(&mut toolwire_server::Limits),
) -> toolwire_refserver::HttpServer {
    let mut o = toolwire_refserver::Options::default();
    limits(&mut o.server.limits);
    toolwire_refserver::serve_http(LOOPBACK, o).await.unwrap()
}

/// [`exchange_all`] on the reference server.
async fn post(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String, Vec<Value>) {
    exchange_all(addr, headers, body).await
}

fn session_of(head: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    })
}

fn initialize(capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": capabilities,
        "clientInfo": {"name": "raw", "version": "0"}}})
}

fn ping() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_and_half_sent_connections_is_closed_and_a_real_request_is_served() {
    let server = serve(|l| {
        l.max_connections = 50;
        l.idle_timeout = Duration::from_millis(500);
        l.header_timeout = Duration::from_millis(500);
        l.body_timeout = Duration::from_millis(500);
    })
    .await;
    let addr = server.addr();
    // 600 connections: a third say nothing, a third send half a head, a third a whole head
    // and part of a body that never ends. Past the cap they wait in the backlog.
    let mut held = Vec::new();
    for n in 0..600 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        match n % 3 {
            0 => {}
            1 => s
                .write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
                .await
                .unwrap(),
            _ => {
                s.write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 1000\r\n\r\n{\"jsonrpc\"")
                    .await
                    .unwrap();
            }
        }
        held.push(s);
    }
    // A legitimate request is still served, while every flooding connection is held open by
    // its client.
    let (status, _, answer) = post(addr, &[], &initialize(json!({}))).await;
    assert_eq!(status, 200, "{answer:?}");
    assert_eq!(answer[0]["result"]["protocolVersion"], "2025-06-18");
    // The server closed the ones it served (an EOF, or a 408 for the body that never ended);
    // none is left open past the timeouts.
    let mut closed = 0;
    for mut s in held.drain(..50) {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
        if read.is_ok() {
            closed += 1;
        }
    }
    assert_eq!(closed, 50, "the server closed every connection it took");
}

/// One request on `stream`, kept alive: the status of its answer, or None when the server
/// closed the connection instead of answering.
async fn ping_on(stream: &mut TcpStream) -> Option<u16> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: ping\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    // The whole answer, head and body, so that nothing of it is left for the next read.
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })?;
            if body.len() >= length {
                return head.get(9..12)?.parse().ok();
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_accepts_only_json_is_answered_in_json_by_a_server_that_streams() {
    // The reference server answers with SSE streams by default.
    let server = serve(|_| {}).await;
    let body = initialize(json!({})).to_string();
    let request = |accept: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: {accept}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let (status, head, answer) = raw(server.addr(), request("application/json").as_bytes()).await;
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    assert_eq!(
        answer[0]["result"]["protocolVersion"], "2025-06-18",
        "{answer:?}"
    );
    let (_, head, _) = raw(
        server.addr(),
        request("application/json, text/event-stream").as_bytes(),
    )
    .await;
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_idle_past_the_header_timeout_serves_its_next_request() {
    // The head's timeout runs from a head's first byte: a pooled connection reused after a
    // pause six times as long (a client pinging every 10 s against a 10 s timeout) is served.
    // (The idle timeout, far above the pause here, is the flood test's.)
    let server = serve(|l| {
        l.header_timeout = Duration::from_millis(100);
        l.idle_timeout = Duration::from_secs(30);
    })
    .await;
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    assert_eq!(ping_on(&mut stream).await, Some(200));
    for pause in [600, 300] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        assert_eq!(
            ping_on(&mut stream).await,
            Some(200),
            "closed at the header timeout"
        );
    }
    // A head that trickles in is still cut off at the header timeout.
    let mut slow = TcpStream::connect(server.addr()).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(3), slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "a half-sent head was left open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_opening_session_after_session_keeps_only_its_newest_share() {
    let server = serve(|l| l.sessions_per_caller = 4).await;
    let addr = server.addr();
    let mut sessions = Vec::new();
    for _ in 0..10 {
        let (status, head, _) = post(addr, &[], &initialize(json!({}))).await;
        assert_eq!(status, 200);
        sessions.push(session_of(&head).unwrap());
    }
    let mut live = Vec::new();
    for sid in &sessions {
        let (status, _, _) = post(addr, &[("mcp-session-id", sid)], &ping()).await;
        live.push(status);
    }
    // The six oldest were pushed out (404, as an expired session is); the newest four serve.
    assert_eq!(live, [404, 404, 404, 404, 404, 404, 200, 200, 200, 200]);
}

/// The last chunk of a chunked answer: the stream's end.
const ENDED: &str = "\r\n0\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_streams_past_their_bound_end_the_sessions_oldest_only() {
    let server = serve(|l| l.get_streams_per_session = 2).await;
    let addr = server.addr();
    let mut sids = Vec::new();
    for _ in 0..2 {
        let (_, head, _) = post(addr, &[], &initialize(json!({}))).await;
        sids.push(session_of(&head).unwrap());
    }
    let (sid, other) = (&sids[0], &sids[1]);
    let mut others = GetStream::open(addr, other, &[]).await;
    let mut first = GetStream::open(addr, sid, &[]).await;
    let mut second = GetStream::open(addr, sid, &[]).await;
    let quiet = Duration::from_millis(300);
    assert!(
        !first.during(quiet).await.contains(ENDED),
        "two are within the bound"
    );
    let mut third = GetStream::open(addr, sid, &[]).await;
    first.until(ENDED).await;
    assert!(
        !second.during(quiet).await.contains(ENDED),
        "only the oldest ends"
    );
    assert!(!third.during(quiet).await.contains(ENDED));
    assert!(
        !others.during(quiet).await.contains(ENDED),
        "another session's goes on"
    );
    let (status, _, _) = post(addr, &[("mcp-session-id", sid)], &ping()).await;
    assert_eq!(status, 200, "the session itself goes on");
}

/// A 2026-07-28 `subscriptions/listen` request, whole.
fn listen_request(addr: SocketAddr) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    .to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: subscriptions/listen\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A [`listen_request`] on a connection of its own: the connection, and the answer's head and
/// what came of its body so far.
async fn listen(addr: SocketAddr) -> (TcpStream, String) {
    opened(addr, &listen_request(addr)).await
}

/// Sends `request` again and again until it is answered 200 (a place given back), within 10 s.
async fn admitted_within_10s(addr: SocketAddr, request: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, head) = opened(addr, request).await;
        if head.starts_with("HTTP/1.1 200") {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never given back: {head}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `request` on a connection of its own: the connection, and the answer's head and what came
/// of its body so far.
async fn opened(addr: SocketAddr, request: &str) -> (TcpStream, String) {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut got = String::new();
    while !got.contains("\r\n\r\n") {
        let mut chunk = [0u8; 4096];
        let read = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut chunk));
        let n = read.await.expect("an answer's head in time").unwrap();
        assert!(n > 0, "closed before its head: {got}");
        got.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
    (tcp, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_streams_past_their_bound_are_refused_until_one_ends() {
    let server = serve(|l| {
        l.listens_per_caller = 2;
        l.sse_keep_alive = Duration::from_millis(100);
    })
    .await;
    let addr = server.addr();
    let (first, head) = listen(addr).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_second, head) = listen(addr).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_, refused) = listen(addr).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 5"),
        "{refused}"
    );
    // The body says why, as a JSON-RPC error for the listen's id.
    let (_, _, answers) = raw(addr, listen_request(addr).as_bytes()).await;
    assert_eq!(answers[0]["id"], 1, "{answers:?}");
    assert!(
        answers[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2 listen streams"),
        "{answers:?}"
    );
    // The client of the first goes away: once the server finds out (its next keep-alive),
    // the place is given back.
    drop(first);
    admitted_within_10s(addr, &listen_request(addr)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_of_the_2024_11_05_transport_past_the_callers_sessions_are_refused_until_one_ends()
{
    let mut o = toolwire_refserver::Options::default();
    o.server.sse = true;
    o.server.limits.sessions_per_caller = 2;
    o.server.limits.sse_keep_alive = Duration::from_millis(100);
    let server = toolwire_refserver::serve_http(LOOPBACK, o).await.unwrap();
    let addr = server.addr();
    let request = format!(
        "GET /mcp/sse HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nconnection: close\r\n\r\n"
    );
    let (first, head) = opened(addr, &request).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (mut second, head) = opened(addr, &request).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_, refused) = opened(addr, &request).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 5"),
        "{refused}"
    );
    // A quiet stream hears a comment now and then: that is how a client gone is found out.
    let mut heard = String::new();
    while !heard.contains(": keep-alive") {
        let mut chunk = [0u8; 1024];
        let read = tokio::time::timeout(Duration::from_secs(5), second.read(&mut chunk));
        let n = read.await.expect("a keep-alive in time").unwrap();
        assert!(n > 0, "the stream ended: {heard}");
        heard.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
    drop(first);
    admitted_within_10s(addr, &request).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_expires_and_answers_404() {
    let server = serve(|l| l.session_idle = Duration::from_millis(300)).await;
    let addr = server.addr();
    let (_, head, _) = post(addr, &[], &initialize(json!({}))).await;
    let sid = session_of(&head).unwrap();
    let (status, _, _) = post(addr, &[("mcp-session-id", &sid)], &ping()).await;
    assert_eq!(status, 200, "used within its idle time");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (status, _, _) = post(addr, &[("mcp-session-id", &sid)], &ping()).await;
    assert_eq!(status, 404, "expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declaration_larger_than_the_bound_is_refused_and_no_session_is_made() {
    let server = serve(|l| l.max_declaration = 1024).await;
    let huge = json!({"experimental": {"padding": "x".repeat(4096)}});
    let (status, head, answer) = post(server.addr(), &[], &initialize(huge)).await;
    assert_eq!(status, 200);
    assert_eq!(answer[0]["error"]["code"], -32602, "{answer:?}");
    assert!(session_of(&head).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_kept_for_resumption_stay_within_their_byte_bound() {
    let server = serve(|l| l.events_per_session = 64 * 1024).await;
    let addr = server.addr();
    let (_, head, _) = post(addr, &[], &initialize(json!({}))).await;
    let sid = session_of(&head).unwrap();
    let text = "y".repeat(20 * 1024);
    // Each answer's priming event: where a client whose stream broke resumes from.
    let mut primed = Vec::new();
    for n in 0..10 {
        let call = json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}});
        let request = post_request(addr, &[("mcp-session-id", &sid)], &call);
        let (status, _, body) = raw_text(addr, request.as_bytes()).await;
        assert_eq!(status, 200);
        assert!(body.contains(&text));
        primed.push(event_ids(&body).into_iter().next().unwrap());
    }
    let replay = |last: &str| {
        format!(
            "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nmcp-session-id: {sid}\r\nlast-event-id: {last}\r\nconnection: close\r\n\r\n"
        )
    };
    // The first calls' answers are gone (past 64 KiB): the call is told so, not sent an empty
    // stream to come back to. The last one's is kept.
    let (_, _, first) = raw(addr, replay(&primed[0]).as_bytes()).await;
    let (_, _, last) = raw(addr, replay(&primed[9]).as_bytes()).await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["id"], 10);
    let message = first[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("no longer kept"), "{message}");
    assert_eq!(last.len(), 1, "the newest is kept");
    assert_eq!(last[0]["id"], 19);
    assert_eq!(last[0]["result"]["content"][0]["text"], text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_body_under_routing_headers_that_contradict_it_is_refused() {
    let server = serve(|_| {}).await;
    let addr = server.addr();
    let (_, head, _) = post(addr, &[], &initialize(json!({}))).await;
    let sid = session_of(&head).unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "execute_sql", "arguments": {"region": "us-prod-1", "query": "q"}}});
    for (name, value) in [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
        ("mcp-name", "echo"),
        ("mcp-param-region", "eu-west-1"),
    ] {
        let (status, _, answer) =
            post(addr, &[("mcp-session-id", &sid), (name, value)], &call).await;
        assert_eq!(status, 400, "{name}: {answer:?}");
        assert_eq!(answer[0]["error"]["code"], -32020, "{name}");
    }
    // The same call without them, or under headers that agree with it (some clients send
    // them in every era), is served.
    let agreeing = [
        ("mcp-method", "tools/call"),
        ("mcp-name", "execute_sql"),
        ("mcp-param-region", "us-prod-1"),
    ];
    for headers in [&[][..], &agreeing[..]] {
        let mut headers = headers.to_vec();
        headers.push(("mcp-session-id", &sid));
        let (status, _, answer) = post(addr, &headers, &call).await;
        assert_eq!(status, 200, "{headers:?}");
        assert!(answer.last().unwrap()["result"].is_object(), "{answer:?}");
    }
}

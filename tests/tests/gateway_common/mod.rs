//! What the gateway's end-to-end test files share: reference servers to put behind it, a
//! host and a gateway over them, clients, and raw HTTP requests.

#![allow(dead_code, reason = "each test file uses its own part")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolwire::{Client, HttpTransport, ProtocolMode, ProtocolVersion};
use toolwire_gateway::Gateway;
use toolwire_host::{Host, Naming, ServersConfig};
use toolwire_refserver::{Eras, Framing, Options};

pub(crate) const SCRIPTED: &str = env!("CARGO_BIN_EXE_toolwire-test-server");
pub(crate) const LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

pub(crate) async fn reference(eras: Eras, framing: Framing) -> toolwire_refserver::HttpServer {
    let mut o = Options::default();
    o.server.eras = eras;
    o.server.framing = framing;
    toolwire_refserver::serve_http(LOOPBACK, o).await.unwrap()
}

/// A host over `servers` (an `mcpServers` object), settled, with no reconnect.
pub(crate) async fn host(servers: Value, naming: Naming) -> Host {
    let config =
        ServersConfig::parse(&json!({ "mcpServers": servers }).to_string(), |_| None).unwrap();
    let upstream = toolwire_gateway::upstream_client(Client::builder("gateway-e2e", "0"));
    let host = Host::builder(upstream)
        .reconnect(None)
        .naming(naming)
        .start(&config)
        .unwrap();
    host.settled(Duration::from_secs(20)).await;
    host
}

/// A gateway serving over loopback HTTP, and the two reference servers it may front.
pub(crate) struct Setup {
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) front: toolwire_server::HttpServer,
    pub(crate) _upstreams: [toolwire_refserver::HttpServer; 2],
}

/// Starts `new` (2026-07-28 only) and `old` (legacy only), a host over the entries `servers`
/// names (given both), and a gateway over it with `page_size` tools a page if given.
pub(crate) async fn setup(
    servers: impl FnOnce(&toolwire_refserver::HttpServer, &toolwire_refserver::HttpServer) -> Value,
    naming: Naming,
    page_size: Option<usize>,
) -> Setup {
    let new = reference(Eras::Modern, Framing::Json).await;
    let old = reference(Eras::Legacy, Framing::Sse).await;
    let host = host(servers(&new, &old), naming).await;
    let mut gateway = Gateway::builder(host);
    if let Some(page) = page_size {
        gateway = gateway.page_size(page);
    }
    let gateway = gateway.build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    Setup {
        gateway,
        front,
        _upstreams: [new, old],
    }
}

/// `new` (2026-07-28) and `old` (legacy) behind pass-through proxies that record what each
/// upstream received, and a host over them.
pub(crate) struct Proxied {
    pub(crate) host: Host,
    /// In front of `new` and `old`.
    pub(crate) proxies: [toolwire_test_support::proxy::FaultProxy; 2],
    pub(crate) upstreams: [toolwire_refserver::HttpServer; 2],
}

/// A gateway over `host` with `access`, serving over loopback HTTP.
pub(crate) async fn serve_guarded(
    host: Host,
    access: toolwire_gateway::Access,
) -> (Arc<Gateway>, toolwire_server::HttpServer) {
    let gateway = Gateway::builder(host).access(access).build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    (gateway, front)
}

pub(crate) async fn proxied() -> Proxied {
    use toolwire_test_support::proxy::{Fault, FaultProxy, Rule};
    let new = reference(Eras::Modern, Framing::Json).await;
    let old = reference(Eras::Legacy, Framing::Sse).await;
    let proxies = [
        FaultProxy::start(new.addr(), Rule::connections(Fault::Pass, 0)).await,
        FaultProxy::start(old.addr(), Rule::connections(Fault::Pass, 0)).await,
    ];
    let host = host(
        json!({"new": {"url": proxies[0].url("/mcp")}, "old": {"url": proxies[1].url("/mcp")}}),
        Naming::Qualified,
    )
    .await;
    Proxied {
        host,
        proxies,
        upstreams: [new, old],
    }
}

/// [`setup`] with the reference servers `entries` names (`new`, `old` or both) as entries of
/// those names, qualified names, pages of the default size.
pub(crate) async fn serving(entries: &[&str]) -> Setup {
    setup(
        |new, old| {
            let mut servers = json!({});
            for (name, server) in [("new", new), ("old", old)] {
                if entries.contains(&name) {
                    servers[name] = json!({"url": server.url()});
                }
            }
            servers
        },
        Naming::Qualified,
        None,
    )
    .await
}

pub(crate) fn client(url: &str, mode: ProtocolMode) -> Client {
    Client::builder("downstream", "0")
        .mode(mode)
        .connect_http(HttpTransport::builder(url))
        .unwrap()
}

/// `gateway` served over loopback HTTP, and a ready client of it (either era).
pub(crate) async fn front_of(
    gateway: &std::sync::Arc<toolwire_gateway::Gateway>,
) -> (toolwire_server::HttpServer, Client) {
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    let client = client(&front.url(), ProtocolMode::Auto);
    client.ready().await.unwrap();
    (front, client)
}

pub(crate) const LEGACY: ProtocolMode = ProtocolMode::Pinned(ProtocolVersion::V2025_06_18);

pub(crate) fn text(result: &toolwire::CallToolResult) -> &str {
    result.content[0].as_text().unwrap()
}

/// One raw HTTP/1.1 POST of `body` with `headers`; the status and the body.
pub(crate) async fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
    let (status, _, json) = exchange(addr, headers, body).await;
    (status, json)
}

/// [`post`], with the `Mcp-Session-Id` the answer carried.
pub(crate) async fn exchange(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Option<String>, Value) {
    let (status, head, json) = exchange_whole(addr, headers, body).await;
    let session = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    });
    (status, session, json)
}

/// The value of header `name` in a response's `head`.
pub(crate) fn header_of<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, value) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// [`post`], with the response's head (status line and headers) whole.
pub(crate) async fn exchange_whole(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String, Value) {
    let (status, head, messages) = exchange_all(addr, headers, body).await;
    (
        status,
        head,
        messages.into_iter().next().unwrap_or(Value::Null),
    )
}

/// One raw HTTP/1.1 POST of `body` with `headers`: the status, the head, and every JSON
/// message of the body (the JSON body, or each SSE event's data).
pub(crate) async fn exchange_all(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String, Vec<Value>) {
    raw(addr, post_request(addr, headers, body).as_bytes()).await
}

/// The raw HTTP/1.1 POST [`exchange_all`] sends.
pub(crate) fn post_request(addr: SocketAddr, headers: &[(&str, &str)], body: &Value) -> String {
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    request
}

/// `request` written to `addr` as it is: the status, the head, and every JSON message of the
/// answer's body (the JSON body, or each SSE event's data, between chunk sizes).
pub(crate) async fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<Value>) {
    let (status, head, rest) = raw_text(addr, request).await;
    let messages = rest
        .lines()
        .filter_map(|line| {
            serde_json::from_str::<Value>(line.strip_prefix("data: ").unwrap_or(line)).ok()
        })
        .filter(Value::is_object)
        .collect();
    (status, head, messages)
}

/// `request` written to `addr` as it is: the status, the head and the body as they came.
pub(crate) async fn raw_text(addr: SocketAddr, request: &[u8]) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        stream.read_to_string(&mut response),
    )
    .await
    .expect("an answer in time")
    .unwrap();
    let status = response[9..12].parse().unwrap();
    let (head, rest) = response.split_once("\r\n\r\n").unwrap();
    (status, head.to_owned(), rest.to_owned())
}

/// The id of every SSE event in `body`, in order.
pub(crate) fn event_ids(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|line| line.strip_prefix("id: "))
        .map(str::to_owned)
        .collect()
}

/// One raw GET of `path` (HTTP/1.0: the body arrives whole, not chunked): the status and the
/// body.
pub(crate) async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nhost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let (_, body) = response.split_once("\r\n\r\n").unwrap();
    (status, body.to_owned())
}

/// GETs `url` from `addr` (whatever host the URL names): the status and the `Location`.
pub(crate) async fn follow(addr: std::net::SocketAddr, url: &str) -> (u16, Option<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let target = url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("/");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {target} HTTP/1.0\r\nhost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let (head, _) = response.split_once("\r\n\r\n").unwrap();
    (status, header_of(head, "location").map(str::to_owned))
}

/// The SHA-256 of `text` in hex, as an API key is written in the `gateway` section.
pub(crate) fn sha256_hex(text: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The sign-in link of a `-32042` URL elicitation (a per-user upstream without a login).
pub(crate) fn sign_in_link(e: toolwire::Error) -> String {
    match e {
        toolwire::Error::Input(toolwire::InputError::UrlElicitationRequired {
            elicitations,
            ..
        }) => elicitations[0].url.clone().unwrap(),
        other => panic!("not a sign-in: {other}"),
    }
}

/// One raw GET of `url`'s path and query from `addr` (whatever host the URL names), with
/// `cookie` if given: the status, the head and the body.
pub(crate) async fn fetch(
    addr: SocketAddr,
    url: &str,
    cookie: Option<&str>,
) -> (u16, String, String) {
    let target = url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or(url);
    let mut request = format!("GET {target} HTTP/1.0\r\nhost: {addr}\r\n");
    if let Some(cookie) = cookie {
        request.push_str(&format!("cookie: {cookie}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (status, head.to_owned(), body.to_owned())
}

/// What a browser does with a gateway's sign-in `link`: the gateway's page (served by
/// `gateway`) says whose account the login is for; going on, the browser is bound to the login
/// (a cookie) and sent to the authorization server (`authorization_server`, which approves at
/// once); back at the gateway's callback (served by `callback`), with the cookie. The page's
/// body, and the callback's status. Also the authorization server's link and the callback
/// URL, for tests that take them out of the flow.
pub(crate) struct SignIn {
    pub(crate) page: String,
    pub(crate) authorize: String,
    pub(crate) callback: String,
    pub(crate) cookie: String,
    pub(crate) status: u16,
}

pub(crate) async fn browse_sign_in(
    gateway: SocketAddr,
    authorization_server: SocketAddr,
    callback: SocketAddr,
    link: &str,
) -> SignIn {
    let (status, _, page) = fetch(gateway, link, None).await;
    assert_eq!(status, 200, "the sign-in page: {page}");
    let (status, head, _) = fetch(gateway, &format!("{link}&go=1"), None).await;
    assert_eq!(status, 303, "going on: {head}");
    let authorize = header_of(&head, "location").unwrap().to_owned();
    let cookie = header_of(&head, "set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let (status, back) = follow(authorization_server, &authorize).await;
    assert_eq!(status, 302, "the authorization server approves");
    let back = back.unwrap();
    let (status, _, _) = fetch(callback, &back, Some(&cookie)).await;
    SignIn {
        page,
        authorize,
        callback: back,
        cookie,
        status,
    }
}

/// A legacy session's GET stream (2025-06-18), as raw text read as it comes.
pub(crate) struct GetStream(tokio::net::TcpStream, pub(crate) String);

impl GetStream {
    /// Opens `sid`'s GET stream at `addr`, with `headers` besides the session's, and reads
    /// its `200 OK`.
    pub(crate) async fn open(addr: SocketAddr, sid: &str, headers: &[(&str, &str)]) -> Self {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let extra: String = headers
            .iter()
            .map(|(n, v)| format!("{n}: {v}\r\n"))
            .collect();
        let request = format!(
            "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\nmcp-session-id: {sid}\r\nmcp-protocol-version: 2025-06-18\r\n{extra}\r\n"
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut stream = Self(tcp, String::new());
        stream.until("200 OK").await;
        stream
    }

    /// Reads until `needle` has come (within 10 s); everything read so far.
    pub(crate) async fn until(&mut self, needle: &str) -> &str {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self.1.contains(needle) {
            let read = tokio::time::timeout_at(deadline, self.read()).await;
            let n = read.unwrap_or_else(|_| panic!("never came: {needle}; got {}", self.1));
            assert!(n > 0, "the stream ended before {needle}: {}", self.1);
        }
        &self.1
    }

    /// Reads what comes for `wait`; everything read so far.
    pub(crate) async fn during(&mut self, wait: Duration) -> &str {
        let deadline = tokio::time::Instant::now() + wait;
        while let Ok(n) = tokio::time::timeout_at(deadline, self.read()).await {
            if n == 0 {
                break;
            }
        }
        &self.1
    }

    async fn read(&mut self) -> usize {
        let mut chunk = [0u8; 4096];
        let n = self.0.read(&mut chunk).await.unwrap();
        self.1.push_str(&String::from_utf8_lossy(&chunk[..n]));
        n
    }
}

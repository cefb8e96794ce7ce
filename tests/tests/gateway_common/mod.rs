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
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let (head, rest) = response.split_once("\r\n\r\n").unwrap();
    // A JSON body, or the data of an SSE stream's events (between chunk sizes).
    let json = rest
        .lines()
        .filter_map(|line| {
            serde_json::from_str::<Value>(line.strip_prefix("data: ").unwrap_or(line)).ok()
        })
        .find(Value::is_object)
        .unwrap_or(Value::Null);
    (status, head.to_owned(), json)
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

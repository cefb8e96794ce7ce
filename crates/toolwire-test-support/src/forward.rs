//! A small HTTP forward proxy for loopback tests, as corporate networks have: `CONNECT
//! host:port` opens a tunnel (for `https://`), and an absolute-form request
//! (`POST http://host:port/path`) is forwarded to its origin. It may demand basic credentials
//! (407 without them), and it records what it was asked, so tests can check that traffic went
//! through it and with which `Proxy-Authorization`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One request the proxy was asked, on one client connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The request line: `CONNECT 127.0.0.1:443 HTTP/1.1`, `POST http://… HTTP/1.1`.
    pub line: String,
    /// Its `Proxy-Authorization` header, if any.
    pub authorization: Option<String>,
}

/// A running forward proxy; stops when dropped.
#[derive(Debug)]
pub struct ForwardProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    asked: Arc<Mutex<Vec<Asked>>>,
    /// Every byte clients sent through the proxy, tunnelled or forwarded: what anyone on
    /// the client's side of the proxy, or the proxy itself, could read.
    seen: Arc<Mutex<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ForwardProxy {
    /// Starts on 127.0.0.1 (panics without a loopback port); with `credentials` (`user:password`) every request must carry
    /// them as basic `Proxy-Authorization`, else it gets 407.
    pub async fn start(credentials: Option<&str>) -> Self {
        let (listener, addr) = crate::http::bind_loopback().await;
        let asked = Arc::new(Mutex::new(Vec::new()));
        let expected = credentials.map(|c| format!("Basic {}", STANDARD.encode(c)));
        let log = asked.clone();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let capture = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(
                    client,
                    expected.clone(),
                    log.clone(),
                    capture.clone(),
                ));
            }
        });
        Self {
            addr,
            asked,
            seen,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`, with `user:password@` when given.
    pub fn url(&self, credentials: Option<&str>) -> String {
        match credentials {
            Some(c) => format!("http://{c}@{}", self.addr),
            None => format!("http://{}", self.addr),
        }
    }

    /// Whether `needle` crossed the proxy in clear, in any byte a client sent through it.
    pub fn saw(&self, needle: &[u8]) -> bool {
        self.seen
            .lock()
            .is_ok_and(|s| !needle.is_empty() && s.windows(needle.len()).any(|w| w == needle))
    }

    /// Every request asked so far, in order.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

/// Reads one request head (up to the blank line), at most 64 KiB.
async fn read_head(client: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if buf.len() > 64 * 1024 || client.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    Some(buf)
}

/// Logs one request head's line and `Proxy-Authorization`, and returns them.
fn record(head: &str, log: &Mutex<Vec<Asked>>) -> Asked {
    let mut lines = head.split("\r\n");
    let asked = Asked {
        line: lines.next().unwrap_or("").to_owned(),
        authorization: lines
            .filter_map(|l| l.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("proxy-authorization"))
            .map(|(_, value)| value.trim().to_owned()),
    };
    if let Ok(mut log) = log.lock() {
        log.push(asked.clone());
    }
    asked
}

/// Appends what a client sent to the capture.
fn capture(seen: &Mutex<Vec<u8>>, bytes: &[u8]) {
    if let Ok(mut s) = seen.lock() {
        s.extend_from_slice(bytes);
    }
}

async fn serve(
    mut client: TcpStream,
    expected: Option<String>,
    log: Arc<Mutex<Vec<Asked>>>,
    seen: Arc<Mutex<Vec<u8>>>,
) {
    let Some(head) = read_head(&mut client).await else {
        return;
    };
    capture(&seen, &head);
    let text = String::from_utf8_lossy(&head).into_owned();
    let Asked {
        line,
        authorization,
    } = record(&text, &log);
    if expected.is_some() && authorization != expected {
        let _ = client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        return;
    }
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    if method == "CONNECT" {
        let Ok(upstream) = TcpStream::connect(target).await else {
            let _ = client
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                .await;
            return;
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        // Relayed by hand so that every byte the client sends is captured.
        let (mut from_client, mut to_client) = client.into_split();
        let (mut from_upstream, mut to_upstream) = upstream.into_split();
        let answers = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut from_upstream, &mut to_client).await;
        });
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = from_client.read(&mut buf).await {
            if n == 0 {
                break;
            }
            capture(&seen, &buf[..n]);
            if to_upstream.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = to_upstream.shutdown().await;
        let _ = answers.await;
        return;
    }
    // Absolute form: `http://host:port/path`. Each request's head goes on without the
    // proxy's own credentials (hyper takes the absolute form), then its body; answers flow
    // back as they come.
    let Some(authority) = target
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .map(str::to_owned)
    else {
        let _ = client
            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    let Ok(upstream) = TcpStream::connect(&authority).await else {
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_upstream, mut to_upstream) = upstream.into_split();
    let answers = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_upstream, &mut to_client).await;
    });
    let mut text = text;
    loop {
        let stripped: String = text
            .split_inclusive("\r\n")
            .filter(|l| {
                !l.split_once(':')
                    .is_some_and(|(name, _)| name.eq_ignore_ascii_case("proxy-authorization"))
            })
            .collect();
        let length: usize = text
            .split("\r\n")
            .filter_map(|l| l.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        let read = from_client.read_exact(&mut body).await;
        capture(&seen, &body);
        if read.is_err()
            || to_upstream.write_all(stripped.as_bytes()).await.is_err()
            || to_upstream.write_all(&body).await.is_err()
        {
            break;
        }
        let Some(next) = read_head(&mut from_client).await else {
            break;
        };
        capture(&seen, &next);
        text = String::from_utf8_lossy(&next).into_owned();
        record(&text, &log);
    }
    answers.abort();
}

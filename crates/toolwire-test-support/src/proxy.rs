//! A fault-injecting TCP proxy for loopback tests: it sits between a client and a server and
//! delays responses, cuts a response after N bytes, stalls it, or refuses connections. A fault
//! can be aimed at the response to a request whose bytes contain a needle (HTTP/1.1 answers in
//! order on a connection, so the bytes after such a request are its response), a given number
//! of times.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the proxy does to one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Bytes pass both ways.
    Pass,
    /// Every chunk of the response waits this long.
    Delay(Duration),
    /// The response is cut (both sockets closed) after this many bytes.
    CutResponseAfter(usize),
    /// Requests go through; responses never come back.
    Stall,
    /// The connection is closed at once, before anything is read.
    Refuse,
}

/// Which requests a fault hits.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The fault.
    pub fault: Fault,
    /// Only the responses to requests containing this (every connection if `None`).
    pub needle: Option<String>,
    /// How many times (connections for `Refuse`, matching requests otherwise).
    pub times: usize,
}

impl Rule {
    /// `fault` on the next `times` requests containing `needle`.
    pub fn on(needle: &str, fault: Fault, times: usize) -> Self {
        Self {
            fault,
            needle: Some(needle.to_owned()),
            times,
        }
    }

    /// `fault` on the next `times` connections.
    pub fn connections(fault: Fault, times: usize) -> Self {
        Self {
            fault,
            needle: None,
            times,
        }
    }
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    connections: Arc<AtomicU64>,
    /// Bumped by [`FaultProxy::cut_all`]: every open connection ends.
    cut: tokio::sync::watch::Sender<u64>,
    requests: Arc<Mutex<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Proxies to `upstream`, applying `rule`. Panics without a loopback port.
    pub async fn start(upstream: SocketAddr, rule: Rule) -> Self {
        let (listener, addr) = crate::http::bind_loopback().await;
        let connections = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let remaining = Arc::new(AtomicUsize::new(rule.times));
        let rule = Arc::new(rule);
        let (c, r) = (connections.clone(), requests.clone());
        let cut = tokio::sync::watch::channel(0).0;
        let cuts = cut.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                c.fetch_add(1, Ordering::SeqCst);
                let take = |remaining: &AtomicUsize| {
                    remaining
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok()
                };
                if rule.needle.is_none() && rule.fault == Fault::Refuse {
                    if take(&remaining) {
                        drop(client);
                        continue;
                    }
                    tokio::spawn(relay(
                        client,
                        upstream,
                        None,
                        remaining.clone(),
                        (r.clone(), cuts.subscribe()),
                    ));
                    continue;
                }
                tokio::spawn(relay(
                    client,
                    upstream,
                    Some(rule.clone()),
                    remaining.clone(),
                    (r.clone(), cuts.subscribe()),
                ));
            }
        });
        Self {
            addr,
            connections,
            cut,
            requests,
            task,
        }
    }

    /// Closes every connection open now, both ways (as a proxy or NAT that drops idle
    /// connections does); new ones pass as before.
    pub fn cut_all(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// The URL of `path` through the proxy.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// How often `needle` occurs in everything clients sent.
    pub fn sent_count(&self, needle: &str) -> usize {
        let sent = self.requests.lock().map(|r| r.clone()).unwrap_or_default();
        let needle = needle.as_bytes();
        if needle.is_empty() {
            return 0;
        }
        sent.windows(needle.len()).filter(|w| *w == needle).count()
    }
}

async fn relay(
    mut client: TcpStream,
    upstream: SocketAddr,
    rule: Option<Arc<Rule>>,
    remaining: Arc<AtomicUsize>,
    (log, mut cut): (Arc<Mutex<Vec<u8>>>, tokio::sync::watch::Receiver<u64>),
) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // Connection-wide rules apply from the start; needle rules once a request matches.
    let triggered = AtomicBool::new(false);
    if let Some(rule) = &rule
        && rule.needle.is_none()
        && remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        triggered.store(true, Ordering::SeqCst);
    }
    let fault = rule.as_ref().map_or(Fault::Pass, |r| r.fault);
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = server.split();
    let upstream_leg = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Ok(mut l) = log.lock() {
                        l.extend_from_slice(&buf[..n]);
                    }
                    if let Some(needle) = rule.as_ref().and_then(|r| r.needle.as_deref())
                        && !triggered.load(Ordering::SeqCst)
                        && buf[..n]
                            .windows(needle.len())
                            .any(|w| w == needle.as_bytes())
                        && remaining
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                            .is_ok()
                    {
                        triggered.store(true, Ordering::SeqCst);
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = sw.shutdown().await;
    };
    let downstream_leg = async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut cut_budget: Option<usize> = None;
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if triggered.load(Ordering::SeqCst) {
                match fault {
                    Fault::Stall => continue,
                    Fault::Delay(d) => tokio::time::sleep(d).await,
                    Fault::CutResponseAfter(limit) => {
                        let room = *cut_budget.get_or_insert(limit);
                        let take = n.min(room);
                        let _ = cw.write_all(&buf[..take]).await;
                        cut_budget = Some(room - take);
                        if room - take == 0 {
                            return;
                        }
                        continue;
                    }
                    Fault::Pass | Fault::Refuse => {}
                }
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = cw.shutdown().await;
    };
    // A cut ends the downstream leg; dropping both sockets then closes the connection.
    tokio::select! {
        () = downstream_leg => {}
        () = async { upstream_leg.await; std::future::pending::<()>().await } => {}
        _ = cut.changed() => {}
    }
}

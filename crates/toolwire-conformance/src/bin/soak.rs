//! `toolwire-soak-client URL CALLERS CALLS RATE TOOL...`: the callers of `cargo xtask soak`.
//!
//! `CALLERS` clients of the library call through `URL` (a gateway fleet behind a balancer),
//! half of them in the legacy era (2025-11-25, a session each) and half in 2026-07-28, until
//! `CALLS` calls were made in all, at about `RATE` calls a second together, each call to the
//! next of the `TOOL`s in turn. Every call carries its own id (`CALLER-N`) as the `id`
//! argument of a counting tool (the reference server's `tally`), so the driver can compare
//! what each caller was told with what each upstream recorded as run.
//!
//! With `SOAK_PRINCIPALS=N`, the callers are N OAuth clients of the gateway's authorization
//! server (one that approves at once: each registers itself and logs in headless), caller `n`
//! calling as client `n` modulo N; with `SOAK_LOGIN` (a tool of a per-user upstream), each
//! of them first signs in to that upstream as a person would: the call is answered with the
//! gateway's sign-in link (a URL elicitation), which is followed as a browser follows it (the gateway's
//! page, on to the authorization server, which approves at once, back to the gateway's
//! callback with the cookie it set), and the call is made again until it goes through.
//!
//! It prints `start` on stderr when the callers begin (after the sign-ins: the driver's faults
//! and clock start there), then `progress N` each time another 500 calls are done (the driver
//! samples the replicas' memory at those marks); at the end one JSON object on stdout:
//! the calls made, the ids answered correctly (`ok`), every other call with its class and
//! error (`failed`), the latency percentiles of the answered calls per tool, and each call's
//! start and end in milliseconds since the start for the failures (so the driver can match them with
//! the faults it injected). A call that hangs is cut after 30 s and counted `hung`.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the driver reads the report from stdout and progress from stderr"
)]

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire::auth::{FetchRedirect, MemoryStore, OAuthConfig};
use toolwire::{
    Client, ConnectionError, Error, HttpTransport, ProtocolMode, ProtocolVersion, ReconnectPolicy,
};

/// How long one call may take before it counts as hung.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// How often progress is printed, in calls.
const PROGRESS_EVERY: usize = 500;

/// What became of one call.
struct Outcome {
    id: String,
    tool: String,
    era: &'static str,
    /// `ok`, or the failure's class.
    class: &'static str,
    error: String,
    started_ms: u128,
    ended_ms: u128,
    latency_us: u128,
}

/// Sorts a failure into what the caller was told: whether the call may have run.
fn classify(error: &Error) -> &'static str {
    match error {
        Error::Connection(ConnectionError::Lost {
            may_have_run: false,
            ..
        }) => "never-sent",
        Error::Connection(ConnectionError::Lost { .. }) => "may-have-run",
        // An HTTP status and no JSON-RPC answer: a balancer whose replica died under the
        // request (502) had sent it on.
        Error::Connection(ConnectionError::Undelivered(_)) => "undelivered",
        Error::Connection(_) => "connection",
        Error::Server(_) => "server-error",
        Error::Timeout(_) => "timeout",
        Error::Closed => "closed",
        _ => "other",
    }
}

/// The error and its causes on one line.
fn chain(error: &Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn client(url: &str, era: &'static str, login: Option<&Login>) -> Result<Client, Error> {
    let version = if era == "legacy" {
        ProtocolVersion::LATEST_LEGACY
    } else {
        ProtocolVersion::V2026_07_28
    };
    let mut builder = Client::builder("toolwire-soak", env!("CARGO_PKG_VERSION"))
        .mode(ProtocolMode::Pinned(version))
        .reconnect(ReconnectPolicy::default());
    if let Some(login) = login {
        builder = builder.oauth(login.config());
    }
    builder.connect_http(HttpTransport::builder(url))
}

/// One principal: an OAuth client of the gateway's authorization server, its registration
/// and tokens kept in a store its callers share.
struct Login {
    name: String,
    store: Arc<MemoryStore>,
}

impl Login {
    fn config(&self) -> OAuthConfig {
        OAuthConfig::new()
            .client_name(self.name.clone())
            .handler(Arc::new(FetchRedirect::new("http://127.0.0.1:9/callback")))
            .store(self.store.clone())
    }
}

/// One GET as a browser makes it (HTTP/1.0, the cookie if any): the status and the head.
async fn get(url: &str, cookie: Option<&str>) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("not an http:// URL: {url}"))?;
    let (host, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let target = if target.is_empty() { "/" } else { target };
    let mut request = format!("GET {target} HTTP/1.0\r\nhost: {host}\r\n");
    if let Some(cookie) = cookie {
        request.push_str(&format!("cookie: {cookie}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = tokio::net::TcpStream::connect(host.replace("localhost", "127.0.0.1"))
        .await
        .map_err(|e| format!("{host}: {e}"))?;
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    let response = String::from_utf8_lossy(&response);
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status from {url}"))?;
    let head = response.split("\r\n\r\n").next().unwrap_or("").to_owned();
    Ok((status, head))
}

/// A header's value in a response head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Follows a sign-in link as a browser would: the gateway's page, going on (a cookie and the
/// authorization server's page), the authorization server's approval, the gateway's callback.
async fn browse(link: &str) -> Result<(), String> {
    let (status, _) = get(link, None).await?;
    if status != 200 {
        return Err(format!("the sign-in page answered {status}"));
    }
    let (status, head) = get(&format!("{link}&go=1"), None).await?;
    let (Some(authorize), Some(cookie)) = (header(&head, "location"), header(&head, "set-cookie"))
    else {
        return Err(format!(
            "going on answered {status} without a link and a cookie"
        ));
    };
    let cookie = cookie.split(';').next().unwrap_or("").to_owned();
    let (status, head) = get(authorize, None).await?;
    let Some(back) = header(&head, "location") else {
        return Err(format!(
            "the authorization server answered {status} without a redirect"
        ));
    };
    let (status, _) = get(back, Some(&cookie)).await?;
    if status != 200 {
        return Err(format!("the gateway's callback answered {status}"));
    }
    Ok(())
}

/// Logs `login` in to the gateway, signs it in to the per-user upstream of `tool`, and waits
/// until a call to that goes through.
async fn sign_in(url: &str, login: &Login, tool: &str) -> Result<(), String> {
    let key = &login.name;
    let client = client(url, "legacy", Some(login)).map_err(|e| chain(&e))?;
    let deadline = Instant::now() + CALL_LIMIT;
    let mut browsed = false;
    let outcome = loop {
        let id = format!("sign-in-{key}");
        match client.call_tool(tool, json!({"id": id})).await {
            Ok(result) if !result.is_error() => break Ok(()),
            Err(Error::Input(toolwire::InputError::UrlElicitationRequired {
                elicitations,
                ..
            })) if !browsed => {
                let link = elicitations
                    .first()
                    .and_then(|e| e.url.clone())
                    .ok_or("a sign-in without a link")?;
                browse(&link).await?;
                browsed = true;
            }
            other if Instant::now() > deadline => {
                break Err(format!(
                    "the sign-in never completed: {:?}",
                    other.map_err(|e| chain(&e))
                ));
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    client.close().await;
    outcome
}

/// What every caller shares.
struct Shared {
    url: String,
    /// The callers' principals (none: no authorization).
    logins: Vec<Login>,
    tools: Vec<String>,
    callers: usize,
    /// The next call's turn, from 0.
    next: AtomicUsize,
    /// Calls to make in all.
    total: usize,
    /// Between two calls of one caller.
    period: Duration,
    start: Instant,
}

/// One caller: its calls, each at its turn of the shared pace.
async fn caller(n: usize, shared: Arc<Shared>) -> Vec<Outcome> {
    let Shared {
        url,
        logins,
        tools,
        callers,
        next,
        total,
        period,
        start,
    } = &*shared;
    let (callers, total, period, start) = (*callers, *total, *period, *start);
    let era = if n.is_multiple_of(2) {
        "legacy"
    } else {
        "modern"
    };
    let mut outcomes = Vec::new();
    let login = (!logins.is_empty()).then(|| &logins[n % logins.len()]);
    let client = match client(url, era, login) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("caller {n}: {}", chain(&e));
            return outcomes;
        }
    };
    // The callers' turns spread over the period, not all at its start.
    let offset = period.mul_f64(n as f64 / f64::from(u32::try_from(callers).unwrap_or(u32::MAX)));
    let mut pace = tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut own = 0usize;
    loop {
        pace.tick().await;
        let turn = next.fetch_add(1, Ordering::SeqCst);
        if turn >= total {
            break;
        }
        own += 1;
        let id = format!("{n}-{own}");
        let tool = &tools[turn % tools.len()];
        let started = Instant::now();
        let answer =
            tokio::time::timeout(CALL_LIMIT, client.call_tool(tool, json!({"id": id}))).await;
        let latency = started.elapsed();
        let (class, error) = match answer {
            Err(_) => ("hung", format!("no answer in {CALL_LIMIT:?}")),
            Ok(Ok(result)) if result.is_error() => (
                "tool-error",
                result
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .unwrap_or("")
                    .to_owned(),
            ),
            Ok(Ok(result)) => match result.content.first().and_then(|c| c.as_text()) {
                Some(said) if said == id => ("ok", String::new()),
                said => ("wrong-answer", format!("answered {said:?}")),
            },
            Ok(Err(e)) => (classify(&e), chain(&e)),
        };
        outcomes.push(Outcome {
            id,
            tool: tool.clone(),
            era,
            class,
            error,
            started_ms: started.duration_since(start).as_millis(),
            ended_ms: start.elapsed().as_millis(),
            latency_us: latency.as_micros(),
        });
        if (turn + 1).is_multiple_of(PROGRESS_EVERY) {
            eprintln!("progress {}", turn + 1);
        }
    }
    client.close().await;
    outcomes
}

fn percentile(sorted: &[u128], p: f64) -> u128 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, callers, calls, rate, tools @ ..] = &args[..] else {
        eprintln!("usage: toolwire-soak-client URL CALLERS CALLS RATE TOOL...");
        return ExitCode::from(2);
    };
    let (Ok(callers), Ok(calls), Ok(rate)) = (
        callers.parse::<usize>(),
        calls.parse::<usize>(),
        rate.parse::<f64>(),
    ) else {
        eprintln!("CALLERS and CALLS are counts, RATE calls a second");
        return ExitCode::from(2);
    };
    if callers == 0 || tools.is_empty() || !rate.is_finite() || rate <= 0.0 {
        eprintln!("at least one caller, one tool and a positive rate");
        return ExitCode::from(2);
    }
    let principals: usize = std::env::var("SOAK_PRINCIPALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let logins: Vec<Login> = (0..principals)
        .map(|n| Login {
            name: format!("soak-caller-{n}"),
            store: Arc::new(MemoryStore::new()),
        })
        .collect();
    if let Ok(tool) = std::env::var("SOAK_LOGIN") {
        for login in &logins {
            if let Err(e) = sign_in(url, login, &tool).await {
                eprintln!("signing {} in to {tool}: {e}", login.name);
                return ExitCode::FAILURE;
            }
        }
    }
    let shared = Arc::new(Shared {
        url: url.clone(),
        logins,
        tools: tools.to_vec(),
        callers,
        next: AtomicUsize::new(0),
        total: calls,
        period: Duration::from_secs_f64(callers as f64 / rate),
        start: Instant::now(),
    });
    eprintln!("start");
    let running: Vec<_> = (0..callers)
        .map(|n| tokio::spawn(caller(n, shared.clone())))
        .collect();
    let mut outcomes = Vec::new();
    for task in running {
        match task.await {
            Ok(done) => outcomes.extend(done),
            Err(e) => eprintln!("a caller failed: {e}"),
        }
    }
    // Latency of the answered calls, per tool.
    let mut latency = serde_json::Map::new();
    for tool in &shared.tools {
        let mut of_tool: Vec<u128> = outcomes
            .iter()
            .filter(|o| o.class == "ok" && &o.tool == tool)
            .map(|o| o.latency_us)
            .collect();
        of_tool.sort_unstable();
        latency.insert(
            tool.clone(),
            json!({"p50_us": percentile(&of_tool, 0.50), "p99_us": percentile(&of_tool, 0.99),
                "max_us": of_tool.last().copied().unwrap_or(0)}),
        );
    }
    let ok: Vec<Value> = outcomes
        .iter()
        .filter(|o| o.class == "ok")
        .map(|o| json!([o.id, o.tool]))
        .collect();
    let failed: Vec<Value> = outcomes
        .iter()
        .filter(|o| o.class != "ok")
        .map(|o| {
            json!({"id": o.id, "tool": o.tool, "era": o.era, "class": o.class, "error": o.error,
                "started_ms": o.started_ms, "ended_ms": o.ended_ms})
        })
        .collect();
    let report = json!({
        "calls": outcomes.len(),
        "elapsed_ms": shared.start.elapsed().as_millis(),
        "ok": ok,
        "failed": failed,
        "latency": latency,
    });
    println!("{report}");
    ExitCode::SUCCESS
}

//! The floors the clients are measured against: over HTTP a bare hyper keep-alive client
//! sending pre-built bytes, over stdio a blocking pipe and the same pipe on tokio.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::json;
use toolwire_bench::{Measurement, usage};

use super::{EXPECTED, Error, Job, REGION, TOOL, arguments, finish, measure, modern_meta, tool};

/// The floor over HTTP: pre-built bytes, a bare hyper keep-alive client.
pub(super) async fn floor_http(job: &Job) -> Result<Measurement, Error> {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    let client: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector);
    let uri: http::Uri = job.target.parse()?;
    let post = {
        let client = client.clone();
        let uri = uri.clone();
        move |headers: Vec<(&'static str, String)>, body: Bytes| {
            let client = client.clone();
            let uri = uri.clone();
            async move {
                let mut req = http::Request::post(uri)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream");
                for (name, value) in headers {
                    req = req.header(name, value);
                }
                let resp = client.request(req.body(Full::new(body))?).await?;
                let session = resp
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body = resp.into_body().collect().await?.to_bytes();
                Ok::<_, Error>((session, body))
            }
        }
    };
    let legacy = job.case.contains("legacy") || job.case.contains("stall");
    let (headers, body) = if legacy {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "floor", "version": "0"}}});
        let (session, _) = post(vec![], Bytes::from(init.to_string())).await?;
        // A stateless server (rmcp's, here) mints no session.
        let mut base = vec![("mcp-protocol-version", "2025-11-25".to_owned())];
        if let Some(session) = session {
            base.push(("mcp-session-id", session));
        }
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        post(base.clone(), Bytes::from(initialized.to_string())).await?;
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool(&job.case), "arguments": arguments()}});
        (base, Bytes::from(call.to_string()))
    } else {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool(&job.case), "arguments": arguments(), "_meta": modern_meta()}});
        let headers = vec![
            ("mcp-protocol-version", "2026-07-28".to_owned()),
            ("mcp-method", "tools/call".to_owned()),
            ("mcp-name", tool(&job.case).to_owned()),
            ("mcp-param-region", REGION.to_owned()),
        ];
        (headers, Bytes::from(call.to_string()))
    };
    // The first answer is checked for the expected text; the measured calls check only that an
    // answer came: the floor parses nothing.
    let (_, first) = post(headers.clone(), body.clone()).await?;
    if !String::from_utf8_lossy(&first).contains(EXPECTED) {
        return Err(format!("unexpected answer: {}", String::from_utf8_lossy(&first)).into());
    }
    measure(job, move || {
        let post = post.clone();
        let headers = headers.clone();
        let body = body.clone();
        async move {
            let (_, answer) = post(headers, body).await?;
            if answer.is_empty() {
                return Err("empty answer".into());
            }
            Ok(())
        }
    })
    .await
}

/// The arguments of the stdio server a case starts (its program is the job's target); `None`
/// for a case over HTTP.
pub(super) fn stdio_args(case: &str) -> Option<&'static [&'static str]> {
    match toolwire_bench::base_case(case) {
        "stdio-seq" => Some(&["serve", "--stdio"]),
        "rmcp-server-stdio-seq" => Some(&["--serve-rmcp-stdio"]),
        _ => None,
    }
}

/// The `tools/call` both stdio floors send, built once: one line with its newline.
fn call_line() -> String {
    let mut line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": TOOL, "arguments": arguments(), "_meta": modern_meta()}})
    .to_string();
    line.push('\n');
    line
}

/// The stdio floor: a blocking newline-JSON pipe to the case's server.
pub(super) fn floor_stdio(job: &Job, args: &[&str]) -> Result<Measurement, Error> {
    let mut child = Command::new(&job.target)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let line = call_line();
    let mut answer = String::new();
    let mut round_trip = |answer: &mut String| -> Result<Duration, Error> {
        let t = Instant::now();
        stdin.write_all(line.as_bytes())?;
        stdin.flush()?;
        answer.clear();
        if stdout.read_line(answer)? == 0 {
            return Err("the server closed stdout".into());
        }
        Ok(t.elapsed())
    };
    // The first answer is checked for the expected text, as over HTTP; the measured calls only
    // read a line.
    round_trip(&mut answer)?;
    if !answer.contains(EXPECTED) {
        return Err(format!("unexpected answer: {answer}").into());
    }
    for _ in 0..(job.calls / 10).max(10) {
        round_trip(&mut answer)?;
    }
    let before = usage()?;
    let start = Instant::now();
    let mut latencies = Vec::with_capacity(job.calls);
    for _ in 0..job.calls {
        latencies.push(round_trip(&mut answer)?);
    }
    let measured = finish(job, latencies, start, before);
    drop(stdin);
    let _ = child.wait();
    measured
}

/// The stdio floor on the runtime the clients use: the same pre-built line written and one line
/// read back through tokio's child pipes, in the bench's spawned caller. What is left between
/// it and the blocking floor is the runtime's; between it and a client, the client's own work.
pub(super) async fn floor_stdio_tokio(job: &Job) -> Result<Measurement, Error> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let args = stdio_args(&job.case).ok_or("floor-tokio runs over stdio only")?;
    let mut child = tokio::process::Command::new(&job.target)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let line = Bytes::from(call_line());
    // The first answer is checked for the expected text, as over HTTP.
    let mut answer = String::new();
    stdin.write_all(&line).await?;
    stdout.read_line(&mut answer).await?;
    if !answer.contains(EXPECTED) {
        return Err(format!("unexpected answer: {answer}").into());
    }
    let pipes = Arc::new(tokio::sync::Mutex::new((stdin, stdout, answer)));
    let measured = measure(job, move || {
        let pipes = Arc::clone(&pipes);
        let line = line.clone();
        async move {
            let mut pipes = pipes.lock().await;
            let (stdin, stdout, answer) = &mut *pipes;
            stdin.write_all(&line).await?;
            answer.clear();
            if stdout.read_line(answer).await? == 0 {
                return Err("the server closed stdout".into());
            }
            Ok(())
        }
    })
    .await;
    // The closure, and with it stdin, is gone: the server sees EOF and ends.
    let _ = child.wait().await;
    measured
}

//! The reconnect policy against real child processes: servers killed with SIGKILL in the middle
//! of a call, frozen with SIGSTOP with calls in flight, exiting after a number of calls, and
//! commands that never start. What ran is read from the server's own log (one line per
//! process start and per `tools/call` received).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use toolwire::{
    CallOptions, Client, ConnectionState, Error, ReconnectPolicy, StderrMode, StdioConfig, Tool,
};
use toolwire_test_support::{EXIT_AFTER_VAR, LOG_VAR};

const SERVER: &str = env!("CARGO_BIN_EXE_toolwire-test-server");

/// A log file of its own for each test, removed when the test ends.
struct Log(PathBuf);

impl Log {
    fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!("toolwire-{test}-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Self(path)
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.0)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The pids of every server process started, in order.
    fn starts(&self) -> Vec<u32> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("start ")?.parse().ok())
            .collect()
    }

    /// The `tools/call`s received, as `NAME ARGUMENTS`, in order.
    fn calls(&self) -> Vec<String> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("call ").map(str::to_owned))
            .collect()
    }

    /// Waits until `ready` holds for the log, up to 10 s.
    async fn until(&self, what: &str, ready: impl Fn(&Self) -> bool) {
        let give_up = Instant::now() + Duration::from_secs(10);
        while !ready(self) {
            assert!(Instant::now() < give_up, "never happened: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn server(log: &Log) -> StdioConfig {
    StdioConfig::new(SERVER, ["modern"])
        .with_env(LOG_VAR, log.0.to_string_lossy())
        .with_stderr(StderrMode::Discard)
}

fn fast() -> ReconnectPolicy {
    ReconnectPolicy::new(5, Duration::from_millis(20), Duration::from_millis(200))
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// Whether `pid` runs (a zombie nobody reaps counts as gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// Every state the client's connection goes through from now on.
fn record(client: &Client) -> std::sync::Arc<std::sync::Mutex<Vec<ConnectionState>>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut rx = client.watch_connection();
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let state = rx.borrow_and_update().clone();
            sink.lock().unwrap().push(state);
        }
    });
    seen
}

async fn echo(client: &Client, text: &str) -> Result<String, Error> {
    let result = client.call_tool("echo", json!({"text": text})).await?;
    Ok(result.content[0].as_text().unwrap_or_default().to_owned())
}

async fn wait_ready(client: &Client) {
    let mut rx = client.watch_connection();
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(ConnectionState::is_ready),
    )
    .await
    .expect("the connection never came back")
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_is_respawned_and_the_call_in_flight_may_have_run() {
    let log = Log::new("killed");
    let client = Client::builder("reconnect", "0")
        .reconnect(fast())
        .connect_stdio(server(&log))
        .unwrap();
    client.list_tools().await.unwrap();
    let states = record(&client);
    let first = log.starts()[0];

    // `slow` never answers, and is not safe to repeat.
    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { client.call_tool("slow", json!({})).await }
    });
    log.until("the server received the call", |l| {
        l.calls().iter().any(|c| c.starts_with("slow"))
    })
    .await;
    signal(first, "-KILL");

    let err = in_flight.await.unwrap().unwrap_err();
    let Error::Connection(toolwire::ConnectionError::Lost {
        may_have_run: true,
        cause: Some(cause),
    }) = &err
    else {
        panic!("expected ConnectionLost that may have run, got {err:?}")
    };
    assert!(cause.to_string().contains("signal 9"), "{cause}");

    assert_eq!(echo(&client, "after").await.unwrap(), "after");
    let starts = log.starts();
    assert_eq!(starts.len(), 2, "one respawn: {starts:?}");
    assert_ne!(starts[0], starts[1]);
    assert!(
        !alive(first),
        "the killed server {first} is still in the process table"
    );
    assert_eq!(
        log.calls().iter().filter(|c| c.starts_with("slow")).count(),
        1,
        "the call that may have run was sent again"
    );
    let states = states.lock().unwrap().clone();
    assert!(
        matches!(
            states.first(),
            Some(ConnectionState::Reconnecting { attempt: 1 })
        ),
        "{states:?}"
    );
    assert!(
        matches!(states.last(), Some(ConnectionState::Ready(_))),
        "{states:?}"
    );
    // The tools were listed again on the new connection.
    assert!(client.tools().contains("echo"));
    client.close().await;
    assert!(matches!(client.connection_state(), ConnectionState::Closed));
    assert!(!alive(starts[1]), "close left the second server running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_after_each_few_calls_is_respawned_and_every_call_answered_once() {
    let log = Log::new("exits");
    let client = Client::builder("reconnect", "0")
        .reconnect(fast())
        .connect_stdio(server(&log).with_env(EXIT_AFTER_VAR, "2"))
        .unwrap();
    for round in 0..3 {
        for i in 0..2 {
            let text = format!("{round}-{i}");
            assert_eq!(echo(&client, &text).await.unwrap(), text);
        }
        // The server exits after its second call; the next call waits for the new one.
        let mut rx = client.watch_connection();
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|s| !s.is_ready()))
            .await
            .expect("the exit was never noticed")
            .unwrap();
    }
    assert_eq!(echo(&client, "last").await.unwrap(), "last");
    let calls = log.calls();
    let expected: Vec<String> = ["0-0", "0-1", "1-0", "1-1", "2-0", "2-1", "last"]
        .iter()
        .map(|t| format!(r#"echo {{"text":"{t}"}}"#))
        .collect();
    assert_eq!(calls, expected, "each call ran exactly once, in order");
    let starts = log.starts();
    assert_eq!(starts.len(), 4, "{starts:?}");
    assert!(
        starts[..3].iter().all(|pid| !alive(*pid)),
        "an exited server is still in the process table"
    );
    client.close().await;
}

/// A frozen server received nothing: what was in flight is sent again if it is safe to repeat
/// (the caller said so, or the tool is annotated idempotent) and fails otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_a_frozen_server_never_read_are_all_sent_again_safe_or_not() {
    let log = Log::new("replay");
    let (connector, mut calls_sent) = counting(server(&log), "tools/call");
    let client = Client::builder("reconnect", "0")
        .reconnect(fast())
        .connect_with(connector)
        .unwrap();
    client.list_tools().await.unwrap();
    let idempotent: Tool = serde_json::from_value(
        json!({"name": "execute_sql", "inputSchema": {"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}},
            "annotations": {"idempotentHint": true}}),
    )
    .unwrap();
    let first = log.starts()[0];
    signal(first, "-STOP");

    let call = |name: &'static str, options: CallOptions| {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .call_tool_with(name, json!({"text": name, "region": "eu"}), options)
                .await
        })
    };
    let opted_in = call("echo", CallOptions::default().with_retry_safe(true));
    let annotated = call("execute_sql", CallOptions::default().with_tool(idempotent));
    let plain = call("echo", CallOptions::default());
    // All three are in the frozen server's pipe.
    until_sent(&mut calls_sent, 3, "three calls to the frozen server").await;
    signal(first, "-KILL");

    assert_eq!(
        opted_in.await.unwrap().unwrap().content[0].as_text(),
        Some("echo")
    );
    assert_eq!(
        annotated.await.unwrap().unwrap().content[0].as_text(),
        Some("region=eu rows=1")
    );
    // Not safe to repeat, but it never left the pipe of the frozen server: it never reached
    // it, so it goes out again too (a call the server read is may-have-run:
    // `a_server_killed_mid_call_is_respawned_and_the_call_in_flight_may_have_run`).
    assert_eq!(
        plain.await.unwrap().unwrap().content[0].as_text(),
        Some("echo")
    );
    let mut calls = log.calls();
    calls.sort();
    assert_eq!(
        calls,
        [
            r#"echo {"region":"eu","text":"echo"}"#,
            r#"echo {"region":"eu","text":"echo"}"#,
            r#"execute_sql {"region":"eu","text":"execute_sql"}"#
        ],
        "the frozen server ran nothing; the new one ran each call once"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_made_while_reconnecting_wait_up_to_their_deadline() {
    let log = Log::new("waiting");
    let slow_backoff = ReconnectPolicy::new(3, Duration::from_millis(1500), Duration::from_secs(2));
    let client = Client::builder("reconnect", "0")
        .reconnect(slow_backoff)
        .connect_stdio(server(&log))
        .unwrap();
    assert_eq!(echo(&client, "before").await.unwrap(), "before");
    let mut rx = client.watch_connection();
    signal(log.starts()[0], "-KILL");
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|s| matches!(s, ConnectionState::Reconnecting { .. })),
    )
    .await
    .unwrap()
    .unwrap();

    // Shorter than the 1.5 s delay: it gives up, and was never sent.
    let started = Instant::now();
    let err = client
        .call_tool_with(
            "echo",
            json!({"text": "impatient"}),
            CallOptions::default().with_timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );

    // The default deadline (60 s) outlasts the delay: it waits and is answered.
    assert_eq!(echo(&client, "patient").await.unwrap(), "patient");
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "it did not wait"
    );
    assert!(
        !log.calls().iter().any(|c| c.contains("impatient")),
        "a call that timed out while queued was sent later"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_run_out_then_the_next_call_starts_over() {
    let log = Log::new("gives-up");
    // The first start is a working server; every later one exits at once.
    let script = format!(
        "if [ -s \"${LOG_VAR}\" ]; then echo start $$ >> \"${LOG_VAR}\"; exit 3; fi; exec '{SERVER}' modern"
    );
    let policy = ReconnectPolicy::new(2, Duration::from_millis(200), Duration::from_millis(400));
    let client = Client::builder("reconnect", "0")
        .reconnect(policy)
        .connect_stdio(
            StdioConfig::new("sh", ["-c", &script])
                .with_env(LOG_VAR, log.0.to_string_lossy())
                .with_stderr(StderrMode::Discard),
        )
        .unwrap();
    assert_eq!(echo(&client, "x").await.unwrap(), "x");
    let first = log.starts();
    assert_eq!(first.len(), 1, "{:?}", log.lines());
    signal(first[0], "-KILL");
    // Made while it reconnects, the call waits for the attempts, which run out.
    let give_up = Instant::now() + Duration::from_secs(10);
    while !matches!(
        client.connection_state(),
        ConnectionState::Reconnecting { .. }
    ) {
        assert!(Instant::now() < give_up, "{:?}", client.connection_state());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let err = echo(&client, "y").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Connection(toolwire::ConnectionError::Lost {
                may_have_run: false,
                ..
            })
        ),
        "{err:?}"
    );
    let ConnectionState::Failed { reason } = client.connection_state() else {
        panic!("{:?}", client.connection_state())
    };
    assert!(
        toolwire::ErrorChain(&reason)
            .to_string()
            .contains("exit code 3"),
        "{reason}"
    );
    // The working start, the legacy era's one retry (the new server died on the probe), then
    // the policy's two attempts: a connection that was once established is brought back even
    // when its new server dies at start.
    assert_eq!(log.starts().len(), 4, "{:?}", log.lines());
    // The next call starts over, and a server that never completes a handshake there is
    // not restarted: one start (the legacy retry was spent), its error at once.
    let again = echo(&client, "again").await.unwrap_err();
    assert!(
        matches!(
            again,
            Error::Connection(toolwire::ConnectionError::EndedBeforeHandshake { .. })
        ),
        "{again:?}"
    );
    assert_eq!(log.starts().len(), 5, "{:?}", log.lines());
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_policy_a_dead_server_stays_dead_until_disconnect() {
    let log = Log::new("no-policy");
    let client = Client::builder("reconnect", "0")
        .connect_stdio(server(&log))
        .unwrap();
    assert_eq!(echo(&client, "one").await.unwrap(), "one");
    signal(log.starts()[0], "-KILL");
    let mut rx = client.watch_connection();
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|s| matches!(s, ConnectionState::Failed { .. })),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(echo(&client, "two").await.is_err());
    assert_eq!(log.starts().len(), 1, "it reconnected without a policy");
    client.disconnect().await;
    assert_eq!(echo(&client, "three").await.unwrap(), "three");
    assert_eq!(log.starts().len(), 2);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_tools_survive_a_reconnect_and_the_listing_is_redone() {
    let log = Log::new("known");
    let client = Client::builder("reconnect", "0")
        .reconnect(fast())
        .connect_stdio(server(&log))
        .unwrap();
    let known: Tool =
        serde_json::from_value(json!({"name": "offline_tool", "inputSchema": {"type": "object"}}))
            .unwrap();
    client.add_known_tools([known]).unwrap();
    client.list_tools().await.unwrap();
    let before = client.tools().generation();
    signal(log.starts()[0], "-KILL");
    wait_ready(&client).await;
    // The listing on the new connection is committed as a new generation.
    let give_up = Instant::now() + Duration::from_secs(10);
    while client.tools().generation() == before {
        assert!(Instant::now() < give_up, "the tools were not listed again");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = client.tools();
    assert!(after.contains("offline_tool") && after.contains("echo"));
    assert_eq!(log.starts().len(), 2);
    client.close().await;
}

/// A stdio transport that counts the messages of one method it carries, for a test to wait
/// on; the count goes on across the connections a reconnecting client makes.
struct Counted {
    inner: toolwire::StdioTransport,
    method: &'static str,
    sent: std::sync::Arc<tokio::sync::watch::Sender<usize>>,
}

impl toolwire::Transport for Counted {
    fn carries_headers(&self) -> bool {
        false
    }
    fn send(
        &self,
        message: toolwire::Outbound,
    ) -> toolwire::BoxFuture<'_, Result<(), toolwire::TransportError>> {
        let counted = message.kind.method() == Some(self.method);
        Box::pin(async move {
            self.inner.send(message).await?;
            if counted {
                self.sent.send_modify(|n| *n += 1);
            }
            Ok(())
        })
    }
    fn recv(
        &self,
    ) -> toolwire::BoxFuture<'_, Option<Result<toolwire::Inbound, toolwire::TransportError>>> {
        self.inner.recv()
    }
    fn cancel(&self, id: &toolwire::RequestId) {
        self.inner.cancel(id);
    }
    fn unread(&self) -> Vec<toolwire::RequestId> {
        self.inner.unread()
    }
    fn peer_state(&self) -> Option<String> {
        self.inner.peer_state()
    }
    fn close(&self) -> toolwire::BoxFuture<'_, Result<(), toolwire::TransportError>> {
        self.inner.close()
    }
}

/// Connects to `stdio`'s server, counting the `method` messages written to each one.
fn counting(
    stdio: StdioConfig,
    method: &'static str,
) -> (toolwire::Connector, tokio::sync::watch::Receiver<usize>) {
    let (sent, count) = tokio::sync::watch::channel(0);
    let sent = std::sync::Arc::new(sent);
    let connector: toolwire::Connector = std::sync::Arc::new(move || {
        Ok(std::sync::Arc::new(Counted {
            inner: toolwire::StdioTransport::spawn(stdio.clone())?,
            method,
            sent: sent.clone(),
        }) as std::sync::Arc<dyn toolwire::Transport>)
    });
    (connector, count)
}

/// Waits up to 10 s for `count` to reach `n`.
async fn until_sent(count: &mut tokio::sync::watch::Receiver<usize>, n: usize, what: &str) {
    tokio::time::timeout(Duration::from_secs(10), count.wait_for(|c| *c >= n))
        .await
        .unwrap_or_else(|_| panic!("never sent: {what}"))
        .unwrap();
}

/// A quiet legacy connection to a real server is pinged again and again, and the server's
/// answers leave it as good as before. When a ping is due, that it waits for traffic to stop
/// and that the modern era is never pinged are the session's to decide, and are tested there
/// on a made-up clock (`upkeep.rs`, `a_quiet_modern_session_is_never_pinged`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_legacy_connection_is_pinged_and_the_answers_keep_it_usable() {
    let log = Log::new("keepalive-legacy");
    let (connector, mut pings) = counting(
        StdioConfig::new(SERVER, ["legacy"])
            .with_env(LOG_VAR, log.0.to_string_lossy())
            .with_stderr(StderrMode::Discard),
        "ping",
    );
    let client = Client::builder("reconnect", "0")
        .keep_alive(Duration::from_millis(100))
        .connect_with(connector)
        .unwrap();
    client.ready().await.unwrap();
    // A second ping goes only once the first was answered (one at a time).
    until_sent(&mut pings, 2, "a second keep-alive ping").await;
    assert_eq!(echo(&client, "after").await.unwrap(), "after");
    assert_eq!(log.starts().len(), 1, "pings never cost a reconnect");
    client.close().await;
}

/// A modern server in Python that reads its stdin one byte at a time (so what it did not
/// read stays in the pipe), answers `charge` calls, and in its first life exits 200 ms after
/// its first answer, before reading anything more.
const ONE_CALL_THEN_EXIT: &str = r#"
import json, os, sys, time
first_life = not os.path.exists(sys.argv[1])
open(sys.argv[1], "a").close()
answered = 0
def line():
    out = b""
    while True:
        b = os.read(0, 1)
        if not b:
            sys.exit(0)
        if b == b"\n":
            return out
        out += b
def reply(id, result):
    result["resultType"] = "complete"
    os.write(1, (json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n").encode())
while True:
    msg = json.loads(line())
    if "id" not in msg or "method" not in msg:
        continue
    m = msg["method"]
    if m == "server/discover":
        reply(msg["id"], {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "py", "version": "1"}}})
    elif m == "tools/list":
        reply(msg["id"], {"tools": [{"name": "charge", "inputSchema": {"type": "object"}}]})
    elif m == "tools/call":
        answered += 1
        reply(msg["id"], {"content": [{"type": "text", "text": "charged"}]})
        if first_life:
            time.sleep(0.2)
            sys.exit(3)
    else:
        reply(msg["id"], {})
"#;

#[tokio::test]
async fn a_call_the_dead_server_never_read_goes_out_again_after_the_respawn() {
    let dir = std::env::temp_dir().join(format!("toolwire-unread-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("server.py");
    std::fs::write(&script, ONE_CALL_THEN_EXIT).unwrap();
    let lives = dir.join("lived");
    let config = StdioConfig::new(
        "python3",
        [
            script.to_string_lossy().into_owned(),
            lives.to_string_lossy().into_owned(),
        ],
    )
    .with_stderr(StderrMode::Discard);
    let client = Client::builder("unread", "0")
        .reconnect(fast())
        .connect_stdio(config)
        .unwrap();
    let first = client.call_tool("charge", json!({})).await.unwrap();
    assert_eq!(first.content.len(), 1);
    // Written while the first life sleeps; it exits without reading it. `charge` is not safe
    // to repeat: it goes out again only because it never reached the server.
    let second = client.call_tool("charge", json!({})).await;
    assert!(second.is_ok(), "{second:?}");
    client.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

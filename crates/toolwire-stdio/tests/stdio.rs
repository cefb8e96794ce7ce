//! The stdio transport against real child processes (`sh` scripts; Windows has its own in
//! `stdio_windows.rs`).

#![cfg(unix)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use toolwire_stdio::*;
use toolwire_transport::*;

mod common;
use common::recv_text;

/// The kind every test message claims to be (stdio ignores it).
const NOTE: MessageKind = MessageKind::Notification { method: "test" };

const ECHO: &str = r#"while IFS= read -r line; do printf '%s\n' "$line"; done"#;

/// `sh -c script`, with short shutdown waits (most scripts here ignore stdin EOF).
fn sh(script: &str) -> StdioConfig {
    StdioConfig::new("sh", ["-c", script])
        .with_stderr(StderrMode::Discard)
        .with_shutdown_waits(Duration::from_millis(200), Duration::from_millis(200))
}

async fn recv_error(t: &StdioTransport) -> TransportError {
    let inbound = tokio::time::timeout(Duration::from_secs(10), t.recv())
        .await
        .expect("recv timed out");
    match inbound {
        Some(Err(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn messages_round_trip_line_by_line() {
    let t = StdioTransport::spawn(sh(ECHO)).unwrap();
    assert!(!t.carries_headers());
    for i in 0..3 {
        let msg = format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#);
        t.send(Outbound::new(msg.clone(), NOTE)).await.unwrap();
        assert_eq!(recv_text(&t).await, msg);
    }
    let pid = t.pid().unwrap();
    t.close().await.unwrap();
    assert!(t.recv().await.is_none(), "a closed transport yields None");
    assert!(!process_exists(pid), "the child was reaped");
    assert!(matches!(
        t.send(Outbound::new("{}", NOTE)).await,
        Err(TransportError::Closed)
    ));
}

#[tokio::test]
async fn outgoing_newlines_are_refused() {
    let t = StdioTransport::spawn(sh(ECHO)).unwrap();
    let err = t.send(Outbound::new("{\n}", NOTE)).await.unwrap_err();
    assert!(matches!(err, TransportError::EmbeddedNewline));
    t.close().await.unwrap();
}

#[tokio::test]
async fn blank_lines_and_crlf_are_tolerated() {
    let t = StdioTransport::spawn(sh(r#"printf '\n  \n{"a":1}\r\n{"b":2}'; sleep 5"#)).unwrap();
    assert_eq!(recv_text(&t).await, r#"{"a":1}"#);
    t.close().await.unwrap();
}

#[tokio::test]
async fn a_last_line_without_newline_is_delivered() {
    let t = StdioTransport::spawn(sh(r#"printf '{"partial":true}'"#)).unwrap();
    assert_eq!(recv_text(&t).await, r#"{"partial":true}"#);
    let err = recv_error(&t).await;
    assert!(matches!(err, TransportError::ChildExited { .. }), "{err}");
    assert!(t.recv().await.is_none());
}

#[tokio::test]
async fn stderr_goes_to_the_callback_and_into_errors() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let config = sh(r#"echo "starting up" >&2; read -r line; echo "fatal: boom" >&2; exit 3"#)
        .with_stderr(StderrMode::Callback(Arc::new(move |l: &str| {
            sink.lock().unwrap().push(l.to_owned())
        })));
    let t = StdioTransport::spawn(config).unwrap();
    t.send(Outbound::new("{}", NOTE)).await.unwrap();
    let err = recv_error(&t).await;
    let TransportError::ChildExited {
        status,
        stderr_tail,
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(status.code, Some(3));
    assert_eq!(stderr_tail, &["starting up", "fatal: boom"]);
    assert!(
        err.to_string().contains("exit code 3") && err.to_string().contains("fatal: boom"),
        "{err}"
    );
    assert_eq!(*lines.lock().unwrap(), ["starting up", "fatal: boom"]);
    assert!(t.recv().await.is_none());
}

#[tokio::test]
async fn a_childs_escape_sequences_reach_errors_and_logs_as_text() {
    let config = sh(r#"printf '\033]0;pwned\007\033[31mred\n' >&2; exit 2"#);
    let t = StdioTransport::spawn(config).unwrap();
    let err = recv_error(&t).await;
    let TransportError::ChildExited { stderr_tail, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(stderr_tail, &["\\u001b]0;pwned\\u0007\\u001b[31mred"]);
    assert!(!err.to_string().contains('\u{1b}'), "{err}");
}

#[tokio::test]
async fn a_stderr_flood_stays_bounded() {
    let config = sh(
        r#"i=0; while [ $i -lt 2000 ]; do echo "noise $i" >&2; i=$((i+1)); done; head -c 100000 /dev/zero | tr '\0' x >&2; echo >&2; exit 1"#,
    );
    let t = StdioTransport::spawn(config).unwrap();
    let err = recv_error(&t).await;
    let TransportError::ChildExited { stderr_tail, .. } = err else {
        panic!()
    };
    assert_eq!(stderr_tail.len(), 20, "only the last 20 lines are kept");
    assert!(
        stderr_tail.iter().all(|l| l.len() <= 8 * 1024),
        "long lines are split"
    );
}

#[test]
fn the_default_environment_carries_network_settings_and_no_cloud_keys() {
    let default = StdioConfig::new("true", Vec::<String>::new());
    for name in [
        "NODE_EXTRA_CA_CERTS",
        "https_proxy",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "PIP_INDEX_URL",
    ] {
        assert!(default.inherit_env.iter().any(|n| n == name), "{name}");
    }
    assert!(
        !default
            .inherit_env
            .iter()
            .any(|n| n.starts_with("AWS") || n.contains("TOKEN")),
        "{:?}",
        default.inherit_env
    );
}

#[tokio::test]
async fn the_environment_is_allow_listed() {
    // cargo sets CARGO_MANIFEST_DIR for this test process; it is not on the allow-list.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let config = sh(r#"printf '{"path":"%s","manifest":"%s","added":"%s"}\n' "${PATH:+set}" "${CARGO_MANIFEST_DIR:-unset}" "$ADDED"; sleep 5"#)
        .with_env("ADDED", "yes");
    let t = StdioTransport::spawn(config).unwrap();
    assert_eq!(
        recv_text(&t).await,
        r#"{"path":"set","manifest":"unset","added":"yes"}"#
    );
    t.close().await.unwrap();
}

#[tokio::test]
async fn oversized_messages_are_dropped_and_reading_goes_on() {
    let config = sh(r#"head -c 5000 /dev/zero | tr '\0' a; echo; echo '{"ok":1}'; sleep 5"#)
        .with_max_message_size(1024);
    let t = StdioTransport::spawn(config).unwrap();
    let err = recv_error(&t).await;
    assert!(
        matches!(err, TransportError::MessageTooLarge { limit: 1024 }),
        "{err}"
    );
    assert_eq!(recv_text(&t).await, r#"{"ok":1}"#);
    t.close().await.unwrap();
}

#[tokio::test]
async fn an_oversized_answer_fails_its_own_request_at_once() {
    // The head names request 9; the rest is over the limit.
    let config = sh(
        r#"printf '{"jsonrpc":"2.0","id":9,"result":{"text":"'; head -c 5000 /dev/zero | tr '\0' a; echo '"}}'; sleep 5"#,
    )
    .with_max_message_size(1024);
    let t = StdioTransport::spawn(config).unwrap();
    let err = recv_error(&t).await;
    let TransportError::Request(failure) = &err else {
        panic!("expected the request's failure, got {err}");
    };
    assert_eq!(failure.id, toolwire_transport::RequestId::Number(9));
    assert!(
        failure.cause.to_string().contains("1024"),
        "{}",
        failure.cause
    );
    t.close().await.unwrap();
}

#[tokio::test]
async fn a_child_that_closes_stdout_but_keeps_running_is_stopped() {
    let config = sh("exec 1>&-; echo 'closed stdout' >&2; exec sleep 30")
        .with_shutdown_waits(Duration::from_millis(300), Duration::from_millis(300));
    let t = StdioTransport::spawn(config).unwrap();
    let pid = t.pid().unwrap();
    let started = Instant::now();
    let err = recv_error(&t).await;
    assert!(matches!(err, TransportError::StdoutClosed { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!process_exists(pid), "the child was killed and reaped");
    assert!(t.recv().await.is_none());
}

#[tokio::test]
async fn a_child_ignoring_eof_and_sigterm_is_killed_within_bounds() {
    let config = sh(r#"trap '' TERM; while :; do sleep 0.05; done"#)
        .with_shutdown_waits(Duration::from_millis(200), Duration::from_millis(200));
    let t = StdioTransport::spawn(config).unwrap();
    let pid = t.pid().unwrap();
    let started = Instant::now();
    t.close().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!process_exists(pid), "the child was killed and reaped");
}

#[tokio::test]
async fn a_child_that_honours_sigterm_stops_there() {
    let config = sh(r#"trap 'exit 0' TERM; while :; do sleep 0.05; done"#)
        .with_shutdown_waits(Duration::from_millis(100), Duration::from_secs(10));
    let t = StdioTransport::spawn(config).unwrap();
    let started = Instant::now();
    t.close().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "SIGTERM, not the 10 s SIGKILL wait"
    );
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let err = StdioTransport::spawn(StdioConfig::new(
        "/nonexistent/mcp-server",
        Vec::<String>::new(),
    ))
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("could not start `/nonexistent/mcp-server`"),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn spawning_outside_a_runtime_is_an_error_not_a_panic() {
    let err = StdioTransport::spawn(sh(ECHO)).unwrap_err();
    assert!(matches!(err, TransportError::Spawn { .. }));
}

#[tokio::test]
async fn it_is_usable_as_dyn_transport() {
    let t: Arc<dyn Transport> = Arc::new(StdioTransport::spawn(sh(ECHO)).unwrap());
    let (a, b) = (t.clone(), t.clone());
    // Sending and receiving at once from two tasks.
    let reader = tokio::spawn(async move { a.recv().await.unwrap().unwrap().body });
    b.send(Outbound::new(r#"{"x":1}"#, NOTE)).await.unwrap();
    assert_eq!(&reader.await.unwrap()[..], br#"{"x":1}"#);
    t.close().await.unwrap();
}

/// `recv` dropped while it waits for the child's exit status (as a `select!` does) loses
/// nothing: the next call still reports how the child ended.
#[tokio::test]
async fn recv_is_cancel_safe_while_waiting_for_the_exit_status() {
    let config = sh("exec 1>&-; echo 'going down' >&2; sleep 0.3; exit 5")
        .with_shutdown_waits(Duration::from_secs(5), Duration::from_secs(1));
    let t = StdioTransport::spawn(config).unwrap();
    let mut cancelled = 0;
    let error = loop {
        match tokio::time::timeout(Duration::from_millis(50), t.recv()).await {
            Err(_) => cancelled += 1,
            Ok(Some(Err(e))) => break e,
            Ok(other) => panic!("unexpected {other:?}"),
        }
        assert!(cancelled < 100, "never answered");
    };
    assert!(cancelled >= 1, "the test did cancel a waiting recv");
    let TransportError::ChildExited {
        status,
        stderr_tail,
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(status.code, Some(5));
    assert_eq!(stderr_tail, &["going down"]);
    assert!(t.recv().await.is_none());
}

/// stdout is read inside `recv`: a `recv` dropped while half a line is in (a `select!` loop
/// does that all the time) loses none of it, and lines after it keep their order.
#[tokio::test]
async fn recv_is_cancel_safe_in_the_middle_of_a_line() {
    let t = StdioTransport::spawn(sh(
        r#"printf '{"part":'; sleep 0.3; printf '"one"}\n{"n":2}\n'; sleep 5"#,
    ))
    .unwrap();
    let mut cancelled = 0;
    let first = loop {
        match tokio::time::timeout(Duration::from_millis(20), t.recv()).await {
            Err(_) => cancelled += 1,
            Ok(Some(Ok(inbound))) => break String::from_utf8(inbound.body.to_vec()).unwrap(),
            Ok(other) => panic!("unexpected {other:?}"),
        }
        assert!(cancelled < 500, "never answered");
    };
    assert!(cancelled >= 1, "the test did cancel a reading recv");
    assert_eq!(first, r#"{"part":"one"}"#);
    assert_eq!(recv_text(&t).await, r#"{"n":2}"#);
}

/// Whether `pid` is a live process (a zombie waiting for a parent that never reaps counts as
/// gone: it runs nothing and holds no pipe).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to 5 s for `pid` to be gone.
async fn gone(pid: u32) -> bool {
    let give_up = Instant::now() + Duration::from_secs(5);
    while process_alive(pid) {
        if Instant::now() > give_up {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// A wrapper that starts a grandchild (as `npx` and `uvx` do), says its pid on stdout, then
/// echoes; `then` runs after the echo loop ends.
fn wrapper(then: &str) -> StdioConfig {
    sh(&format!(
        r#"sleep 300 & printf '{{"grandchild":%s}}\n' "$!"; {ECHO}; {then}"#
    ))
}

async fn grandchild(t: &StdioTransport) -> u32 {
    let line = recv_text(t).await;
    let pid = line
        .trim_start_matches(r#"{"grandchild":"#)
        .trim_end_matches('}')
        .parse()
        .unwrap();
    assert!(process_alive(pid), "the grandchild runs at first");
    pid
}

#[tokio::test]
async fn closing_ends_the_grandchildren_a_wrapper_started() {
    let t = StdioTransport::spawn(wrapper("exit 0")).unwrap();
    let child = t.pid().unwrap();
    let grandchild = grandchild(&t).await;
    t.close().await.unwrap();
    assert!(!process_alive(child), "the wrapper ended");
    assert!(
        gone(grandchild).await,
        "the wrapper's grandchild {grandchild} outlived close"
    );
}

#[tokio::test]
async fn dropping_the_transport_kills_the_whole_process_group() {
    let t = StdioTransport::spawn(wrapper("exit 0")).unwrap();
    let child = t.pid().unwrap();
    let grandchild = grandchild(&t).await;
    drop(t);
    assert!(gone(child).await, "the wrapper outlived the drop");
    assert!(
        gone(grandchild).await,
        "the grandchild {grandchild} outlived the drop"
    );
}

/// The grandchild inherited stdout: unless it dies with the wrapper, the pipe never reaches
/// EOF and the death goes unnoticed.
#[tokio::test]
async fn a_wrapper_that_dies_is_reported_even_though_its_grandchild_holds_stdout() {
    let t = StdioTransport::spawn(sh(
        r#"sleep 300 & printf '{"grandchild":%s}\n' "$!"; read -r line; exit 7"#,
    ))
    .unwrap();
    let grandchild = grandchild(&t).await;
    t.send(Outbound::new("{}", NOTE)).await.unwrap();
    let err = recv_error(&t).await;
    match &err {
        TransportError::ChildExited { status, .. } => assert_eq!(status.code, Some(7), "{err}"),
        other => panic!("expected ChildExited, got {other}"),
    }
    assert!(
        gone(grandchild).await,
        "the dead wrapper's grandchild {grandchild} was left running"
    );
    assert!(t.recv().await.is_none());
}

#[tokio::test]
async fn a_grandchild_ignoring_sigterm_is_killed_within_bounds() {
    // The grandchild says its pid once it ignores SIGTERM, not before.
    let config = sh(&format!(
        r#"sh -c 'trap "" TERM; printf "{{\"grandchild\":%s}}\n" "$$"; exec sleep 300' & {ECHO}"#
    ));
    let t = StdioTransport::spawn(config).unwrap();
    let grandchild = grandchild(&t).await;
    let started = Instant::now();
    t.close().await.unwrap();
    let took = started.elapsed();
    // The wrapper exits on stdin EOF; its grandchild waits out the 200 ms after SIGTERM.
    assert!(
        took >= Duration::from_millis(200),
        "SIGTERM was not ignored, the fault did not happen: {took:?}"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(
        gone(grandchild).await,
        "the grandchild {grandchild} ignoring SIGTERM survived"
    );
}

/// A request with this id.
fn request(id: i64) -> Outbound {
    Outbound::new(
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#),
        MessageKind::Request {
            id: toolwire_transport::RequestId::Number(id),
            method: "tools/call",
        },
    )
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn requests_a_dead_child_never_read_are_known_as_never_delivered() {
    // The child reads one line after both are written, then dies: the second never reached
    // it.
    let t = StdioTransport::spawn(sh("sleep 0.3; read -r line; exit 3")).unwrap();
    t.send(request(1)).await.unwrap();
    t.send(Outbound::new("{}", NOTE)).await.unwrap();
    t.send(request(2)).await.unwrap();
    assert!(t.unread().is_empty(), "nothing is known before the death");
    let err = recv_error(&t).await;
    assert!(matches!(err, TransportError::ChildExited { .. }), "{err}");
    assert_eq!(t.unread(), [toolwire_transport::RequestId::Number(2)]);

    // A child that read nothing: both never reached it.
    let t = StdioTransport::spawn(sh("sleep 0.3; exit 3")).unwrap();
    t.send(request(1)).await.unwrap();
    t.send(request(2)).await.unwrap();
    let _ = recv_error(&t).await;
    assert_eq!(
        t.unread(),
        [
            toolwire_transport::RequestId::Number(1),
            toolwire_transport::RequestId::Number(2)
        ]
    );
}

#[tokio::test]
async fn a_missing_working_directory_is_named_as_such_not_as_a_missing_program() {
    let config = sh("echo never").with_cwd("/nonexistent/toolwire-test-dir");
    let Err(err) = StdioTransport::spawn(config) else {
        panic!("started in a directory that does not exist")
    };
    let chain = std::iter::successors(Some(&err as &dyn std::error::Error), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ");
    assert!(
        chain.contains("working directory `/nonexistent/toolwire-test-dir` is not a directory"),
        "{chain}"
    );
}

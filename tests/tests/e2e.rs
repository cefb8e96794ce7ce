//! The sans-IO session over the stdio transport, against the scripted server as a real child
//! process, in both eras.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolwire_cache::ToolCache;
use toolwire_session::{
    CallOptions, Event, OpId, ProtocolMode, RequestError, Session, SessionConfig,
};
use toolwire_stdio::{StderrMode, StdioConfig, StdioTransport};
use toolwire_transport::Transport;
use toolwire_types::methods::method::CallTool;
use toolwire_types::{Implementation, Outcome, ProtocolVersion, RequestMethod};

struct Harness {
    session: Session,
    transport: StdioTransport,
}

impl Harness {
    fn spawn(eras: &str, mode: ProtocolMode) -> Self {
        let config = StdioConfig::new(env!("CARGO_BIN_EXE_toolwire-test-server"), [eras])
            .with_stderr(StderrMode::Discard);
        let transport = StdioTransport::spawn(config).unwrap();
        let session_config =
            SessionConfig::new(Implementation::new("toolwire-e2e", "0.1.0")).with_mode(mode);
        let session = Session::new(
            session_config,
            Arc::new(ToolCache::default()),
            transport.carries_headers(),
        );
        Self { session, transport }
    }

    /// Runs the session over the transport until `done` accepts an event; returns every event
    /// seen up to and including that one.
    async fn drive(&mut self, mut done: impl FnMut(&Event) -> bool) -> Vec<Event> {
        let mut events = Vec::new();
        let give_up = Instant::now() + Duration::from_secs(20);
        loop {
            while let Some(message) = self.session.poll_transmit() {
                self.transport.send(message).await.unwrap();
            }
            while let Some(e) = self.session.poll_event() {
                let stop = done(&e);
                events.push(e);
                if stop {
                    return events;
                }
            }
            assert!(
                Instant::now() < give_up,
                "no result in time; events: {events:?}"
            );
            let wake = self.session.poll_timeout().unwrap_or(give_up).min(give_up);
            tokio::select! {
                inbound = self.transport.recv() => {
                    let inbound = inbound.expect("the server went away").unwrap();
                    self.session.handle_inbound(&inbound.body, Instant::now());
                }
                () = tokio::time::sleep_until(wake.into()) => self.session.handle_timeout(Instant::now()),
            }
        }
    }

    async fn ready(&mut self) -> ProtocolVersion {
        self.session.start(Instant::now());
        match self
            .drive(|e| matches!(e, Event::Ready(_) | Event::Failed(_)))
            .await
            .pop()
        {
            Some(Event::Ready(n)) => n.version,
            other => panic!("negotiation: {other:?}"),
        }
    }

    async fn completed(&mut self, op: OpId) -> Vec<Event> {
        self.drive(|e| matches!(e, Event::Completed { op: o, .. } | Event::ToolsListed { op: o, .. } if *o == op)).await
    }

    async fn call_text(&mut self, name: &str, args: serde_json::Value) -> String {
        let op = self
            .session
            .call_tool(
                name,
                args.as_object().cloned(),
                CallOptions::default(),
                Instant::now(),
            )
            .unwrap();
        let Some(Event::Completed { result, .. }) = self.completed(op).await.pop() else {
            panic!()
        };
        let Outcome::Complete(result) = CallTool::decode_result(&result.unwrap()).unwrap() else {
            panic!()
        };
        result.content[0].as_text().unwrap().to_owned()
    }
}

#[tokio::test]
async fn modern_over_stdio_lists_calls_and_reports_progress() {
    let mut h = Harness::spawn("modern", ProtocolMode::Auto);
    assert_eq!(h.ready().await, ProtocolVersion::V2026_07_28);
    let op = h.session.list_tools(Instant::now()).unwrap();
    let Some(Event::ToolsListed { result, .. }) = h.completed(op).await.pop() else {
        panic!()
    };
    assert_eq!(result.unwrap().commit.diff.added.len(), 11, "both pages");
    assert_eq!(
        h.session.cache().load().names(),
        [
            "ask",
            "count",
            "echo",
            "execute_sql",
            "failing_liar",
            "liar",
            "login",
            "remote_ref",
            "slow",
            "unlock",
            "weather"
        ]
    );
    assert_eq!(
        h.call_text(
            "execute_sql",
            json!({"region": "eu-west1", "query": "SELECT 1"})
        )
        .await,
        "region=eu-west1 rows=1"
    );

    let op = h
        .session
        .call_tool(
            "count",
            json!({"to": 3}).as_object().cloned(),
            CallOptions::default().with_progress(),
            Instant::now(),
        )
        .unwrap();
    let events = h.completed(op).await;
    let progress: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Progress { op: o, params } if *o == op => Some(params.progress),
            _ => None,
        })
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0]);
    h.transport.close().await.unwrap();
}

#[tokio::test]
async fn a_legacy_server_is_reached_through_the_fallback() {
    let mut h = Harness::spawn("legacy", ProtocolMode::Auto);
    assert_eq!(h.ready().await, ProtocolVersion::V2025_11_25);
    assert_eq!(h.call_text("echo", json!({"text": "hello"})).await, "hello");
    h.transport.close().await.unwrap();
}

#[tokio::test]
async fn every_era_pinned() {
    for (eras, version) in [
        ("both", ProtocolVersion::V2026_07_28),
        ("both", ProtocolVersion::V2025_06_18),
        ("legacy", ProtocolVersion::V2024_11_05),
        ("legacy", ProtocolVersion::V2025_03_26),
    ] {
        let mut h = Harness::spawn(eras, ProtocolMode::Pinned(version.clone()));
        assert_eq!(h.ready().await, version);
        assert_eq!(
            h.call_text("echo", json!({"text": version.as_str()})).await,
            version.as_str()
        );
        h.transport.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_cancelled_call_completes_as_cancelled_and_the_session_goes_on() {
    let mut h = Harness::spawn("modern", ProtocolMode::Auto);
    h.ready().await;
    let op = h
        .session
        .call_tool("slow", None, CallOptions::default(), Instant::now())
        .unwrap();
    // Let the request reach the server, then cancel.
    while let Some(message) = h.session.poll_transmit() {
        h.transport.send(message).await.unwrap();
    }
    assert!(h.session.cancel(op, Some("test")).is_some());
    let Some(Event::Completed { result, .. }) = h.completed(op).await.pop() else {
        panic!()
    };
    assert!(matches!(result, Err(RequestError::Cancelled)));
    assert_eq!(
        h.call_text("echo", json!({"text": "still here"})).await,
        "still here"
    );
    h.transport.close().await.unwrap();
}

#[tokio::test]
async fn a_tool_that_registers_tools_returns_once_they_are_listed() {
    for eras in ["both", "legacy"] {
        let mut h = Harness::spawn(eras, ProtocolMode::Auto);
        h.ready().await;
        let op = h.session.list_tools(Instant::now()).unwrap();
        h.completed(op).await;
        assert!(!h.session.cache().load().contains("read_file"));
        let op = h
            .session
            .call_tool("unlock", None, CallOptions::default(), Instant::now())
            .unwrap();
        let events = h.completed(op).await;
        let Some(Event::Completed { result, .. }) = events.last() else {
            panic!()
        };
        let Outcome::Complete(r) = CallTool::decode_result(result.as_ref().unwrap()).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.registers.as_deref(), Some(&["read_file".to_owned()][..]));
        // The list change follows the result on the pipe (after it, as real servers send it); the settle
        // barrier held the result until a refreshed list had the tool.
        assert!(h.session.cache().load().contains("read_file"), "{eras}");
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::ToolsRefreshed(Ok(_)))),
            "{eras}: {events:?}"
        );
        h.transport.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_silent_child_is_described_when_the_handshake_times_out() {
    // A server stuck before it speaks (npx retrying a registry it cannot reach, say).
    let config = StdioConfig::new(
        "sh",
        [
            "-c",
            "echo 'npm warn: retrying the registry' >&2; exec sleep 30",
        ],
    )
    .with_stderr(StderrMode::Discard);
    let client = toolwire::Client::builder("e2e", "0")
        .timeouts(Duration::from_millis(400), Duration::from_millis(400))
        .connect_stdio(config)
        .unwrap();
    let err = client.ready().await.unwrap_err();
    let shown = err.to_string();
    assert!(
        matches!(
            err,
            toolwire::Error::Connection(toolwire::ConnectionError::Unanswered { .. })
        ),
        "{err:?}"
    );
    for part in [
        "is still running",
        "has written nothing to stdout",
        "npm warn: retrying the registry",
    ] {
        assert!(shown.contains(part), "{shown}");
    }
    client.close().await;
}

//! Load under faults: many calls from many tasks through one client, every result checked
//! against its arguments, none lost, none mismatched, none answered twice, and the faults
//! verified to have happened. And the reference server's `tally`, which the fleet soak counts
//! calls with.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use toolwire::{Client, HttpTransport, ProtocolMode, ProtocolVersion, RetryPolicy};
use toolwire_refserver::{Eras, Framing, Options, serve_http};

async fn run(mode: ProtocolMode, tasks: usize, per_task: usize, framing: Framing) {
    let mut options = Options::default();
    options.server.eras = Eras::Both;
    options.server.framing = framing;
    // Every 300th POST fails with 503; `echo` is read-only, so its calls are retried.
    options.faults.fail_503_every = Some(300);
    let server = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), options)
        .await
        .unwrap();
    let client = Client::builder("load", "0")
        .mode(mode)
        .connect_http(
            HttpTransport::builder(server.url()).retry_policy(RetryPolicy::new(
                5,
                Duration::from_millis(1),
                Duration::from_millis(20),
            )),
        )
        .unwrap();
    client.list_tools().await.unwrap();
    let workers: Vec<_> = (0..tasks)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut answers = Vec::with_capacity(per_task);
                for i in 0..per_task {
                    let text = format!("task {t} call {i}");
                    let r = client
                        .call_tool("echo", json!({ "text": text }))
                        .await
                        .unwrap_or_else(|e| panic!("{text}: {e}"));
                    let answer = r.content[0].as_text().map(str::to_owned);
                    assert_eq!(answer.as_deref(), Some(text.as_str()), "mismatched answer");
                    answers.extend(answer);
                }
                answers
            })
        })
        .collect();
    // Every call answered with its own text: as many distinct answers as calls, and exactly
    // the texts that were sent.
    let mut answered = BTreeSet::new();
    let mut count = 0;
    for w in workers {
        for answer in w.await.unwrap() {
            count += 1;
            answered.insert(answer);
        }
    }
    let sent: BTreeSet<String> = (0..tasks)
        .flat_map(|t| (0..per_task).map(move |i| format!("task {t} call {i}")))
        .collect();
    assert_eq!(count, tasks * per_task, "an answer went missing");
    assert_eq!(
        answered, sent,
        "an answer was lost, duplicated or mismatched"
    );
    // "Under faults": the server did fail some POSTs with 503 (every 300th), and every call
    // still succeeded, so those were retried.
    let posts = tasks * per_task;
    let faults = server.faults_injected();
    assert!(
        faults >= (posts / 300) as u64,
        "only {faults} faults injected over {posts} calls"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_from_64_tasks_under_faults_modern() {
    run(ProtocolMode::Auto, 64, 157, Framing::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_from_64_tasks_under_faults_legacy_sse() {
    run(
        ProtocolMode::Pinned(ProtocolVersion::V2025_11_25),
        64,
        40,
        Framing::Sse,
    )
    .await;
}

/// The counting tool the fleet soak (`cargo xtask soak`) proves its calls with.
#[tokio::test]
async fn tally_records_each_call_id_once_in_call_order_and_refuses_a_multiline_id() {
    let dir = std::env::temp_dir().join(format!("toolwire-tally-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tally.txt");
    let mut o = Options::default();
    o.tally = Some(file.clone());
    let s = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), o)
        .await
        .unwrap();
    let client = Client::builder("e2e", "0")
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    for id in ["a-1", "b-2", "a-3"] {
        let r = client.call_tool("tally", json!({"id": id})).await.unwrap();
        assert_eq!(r.content[0].as_text(), Some(id));
    }
    let refused = client
        .call_tool("tally", json!({"id": "x\ny"}))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("one non-empty line"),
        "{refused}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "a-1\nb-2\na-3\n");
    client.close().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

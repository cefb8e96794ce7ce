//! A reload under load: 64 callers calling through the gateway while its configuration gains
//! an entry, changes another and loses a third. No call to the unchanged entry fails.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod gateway_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use gateway_common::*;
use serde_json::json;
use toolwire_gateway::Gateway;
use toolwire_host::{Naming, ServersConfig};
use toolwire_refserver::{Eras, Framing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_64_callers_fails_no_call_to_an_unchanged_entry() {
    let keep = reference(Eras::Both, Framing::Json).await;
    let change = reference(Eras::Both, Framing::Json).await;
    let changed = reference(Eras::Both, Framing::Json).await;
    let remove = reference(Eras::Both, Framing::Json).await;
    let add = reference(Eras::Both, Framing::Json).await;
    let before = json!({
        "keep": {"url": keep.url()},
        "change": {"url": change.url()},
        "remove": {"url": remove.url()},
    });
    let host = host(before, Naming::Qualified).await;
    let gateway = Gateway::builder(host).build();
    let (_front, client) = front_of(&gateway).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (answered, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let callers: Vec<_> = (0..64)
        .map(|n| {
            let (client, stop) = (client.clone(), stop.clone());
            let (answered, failed) = (answered.clone(), failed.clone());
            tokio::spawn(async move {
                let mut failures = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let text = format!("caller {n}");
                    match client.call_tool("keep__echo", json!({"text": text})).await {
                        Ok(r) if r.content[0].as_text() == Some(text.as_str()) => {
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                        other => {
                            failed.fetch_add(1, Ordering::SeqCst);
                            failures.push(format!("{other:?}"));
                        }
                    }
                }
                failures
            })
        })
        .collect();
    // Calls under way before the reload, then the reload, then calls after it.
    let busy = async {
        while answered.load(Ordering::SeqCst) < 500 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), busy)
        .await
        .expect("the callers are calling");
    let after = json!({"mcpServers": {
        "keep": {"url": keep.url()},
        "change": {"url": changed.url()},
        "add": {"url": add.url()},
    }});
    let config = ServersConfig::parse(&after.to_string(), |_| None).unwrap();
    let done = gateway.host().reload(&config).unwrap();
    assert_eq!(done.kept, ["keep"]);
    assert_eq!(done.changed, ["change"]);
    assert_eq!(done.added, ["add"]);
    assert_eq!(done.removed, ["remove"]);
    let at_reload = answered.load(Ordering::SeqCst);
    let busy = async {
        while answered.load(Ordering::SeqCst) < at_reload + 500 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), busy)
        .await
        .expect("calls go on after the reload");
    // The added entry serves, and the removed one is gone.
    let added = async {
        loop {
            if client
                .call_tool("add__echo", json!({"text": "new"}))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), added)
        .await
        .expect("the added entry serves");
    assert!(
        client
            .call_tool("remove__echo", json!({"text": "gone"}))
            .await
            .is_err()
    );
    stop.store(true, Ordering::SeqCst);
    let mut failures = Vec::new();
    for caller in callers {
        failures.extend(caller.await.unwrap());
    }
    assert!(
        failures.is_empty(),
        "{} of {} calls to the unchanged entry failed: {:?}",
        failures.len(),
        answered.load(Ordering::SeqCst) + failures.len(),
        &failures[..failures.len().min(3)]
    );
    assert_eq!(failed.load(Ordering::SeqCst), 0);
    gateway.host().shutdown().await;
}

/// A call in flight to an entry a reload removes, or changes, completes with its answer; the
/// removed entry's tools are gone for the next call at once; the reload is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_to_a_removed_or_changed_entry_complete_with_their_answers() {
    let keep = reference(Eras::Both, Framing::Json).await;
    let remove = reference(Eras::Both, Framing::Json).await;
    let change = reference(Eras::Both, Framing::Json).await;
    let changed = reference(Eras::Both, Framing::Json).await;
    let before = json!({
        "keep": {"url": keep.url()},
        "remove": {"url": remove.url()},
        "change": {"url": change.url()},
    });
    let host = host(before, Naming::Qualified).await;
    let gateway = Gateway::builder(host).build();
    let (front, client) = front_of(&gateway).await;
    let slow = |tool: &'static str| {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .call_tool(tool, json!({"steps": 1, "delay_ms": 1500}))
                .await
        })
    };
    let (to_removed, to_changed) = (slow("remove__slow"), slow("change__slow"));
    // Both calls are at their upstreams before the reload.
    let at_upstreams = async {
        while remove.in_flight() == 0 || change.in_flight() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), at_upstreams)
        .await
        .expect("the calls reached their upstreams");
    let after = json!({"mcpServers": {
        "keep": {"url": keep.url()},
        "change": {"url": changed.url()},
    }});
    let config = ServersConfig::parse(&after.to_string(), |_| None).unwrap();
    let done = gateway.reload(&config).unwrap();
    assert_eq!(done.removed, ["remove"]);
    assert_eq!(done.changed, ["change"]);
    // Counted, with what it did.
    let (_, metrics) = get(front.addr(), "/metrics").await;
    for line in [
        "toolwire_gateway_reloads_total{outcome=\"applied\"} 1",
        "toolwire_gateway_reloaded_entries_total{outcome=\"removed\"} 1",
        "toolwire_gateway_reloaded_entries_total{outcome=\"changed\"} 1",
        "toolwire_gateway_reloaded_entries_total{outcome=\"added\"} 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    let gone = client
        .call_tool("remove__echo", json!({"text": "gone"}))
        .await;
    assert!(gone.is_err(), "{gone:?}");
    for (entry, call) in [("remove", to_removed), ("change", to_changed)] {
        let answer = call.await.unwrap();
        let answer = answer.unwrap_or_else(|e| panic!("the call to {entry} failed: {e}"));
        assert_ne!(answer.is_error, Some(true), "{entry}: {answer:?}");
    }
    gateway.host().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_removes_or_disables_a_required_entry_is_refused_and_readiness_stays() {
    let needed = reference(Eras::Both, Framing::Json).await;
    let other = reference(Eras::Both, Framing::Json).await;
    let before = json!({"needed": {"url": needed.url()}, "other": {"url": other.url()}});
    let host = host(before, Naming::Qualified).await;
    let gateway = Gateway::builder(host)
        .required(vec!["needed".to_owned()])
        .build();
    let (front, client) = front_of(&gateway).await;
    gateway.host().settled(Duration::from_secs(10)).await;
    assert!(gateway.readiness().0, "{}", gateway.readiness().1);
    for (after, refusal) in [
        (
            json!({"other": {"url": other.url()}}),
            "has no entry `needed`",
        ),
        (
            json!({"needed": {"url": needed.url(), "disabled": true}, "other": {"url": other.url()}}),
            "disables `needed`",
        ),
    ] {
        let file = json!({ "mcpServers": after });
        let config = ServersConfig::parse(&file.to_string(), |_| None).unwrap();
        let refused = gateway.reload(&config).expect_err("refused");
        assert!(refused.to_string().contains(refusal), "{refused}");
        // The running configuration stays: still ready, the entry still served.
        assert!(gateway.readiness().0, "{}", gateway.readiness().1);
        let r = client
            .call_tool("needed__echo", json!({"text": "still"}))
            .await
            .unwrap();
        assert_eq!(text(&r), "still");
    }
    // A reload that keeps it applies.
    let kept = json!({"mcpServers": {"needed": {"url": needed.url()}}});
    let config = ServersConfig::parse(&kept.to_string(), |_| None).unwrap();
    assert_eq!(gateway.reload(&config).unwrap().removed, ["other"]);
    let (status, _) = get(front.addr(), "/readyz").await;
    assert_eq!(status, 200);
    gateway.host().shutdown().await;
}

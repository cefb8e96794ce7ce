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
use toolwire::ProtocolMode;
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
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    let client = client(&front.url(), ProtocolMode::Auto);
    client.ready().await.unwrap();
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

//! The driver against the in-memory peer, on a paused clock.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::Client;
use crate::test_peer::{Peer, methods};

/// SEP-2549: an answer the server did not mark `cacheScope: public` is kept within one
/// authorization context. When the transport's identity changes (a new bearer token),
/// private answers are asked again and public ones still serve.
#[tokio::test(start_paused = true)]
async fn a_new_identity_asks_again_for_private_answers_and_keeps_public_ones() {
    let (peer, seen) = Peer::new(|method, params| match (method, params["uri"].as_str()) {
        ("resources/read", Some(uri)) => {
            let scope = uri.trim_start_matches("file:///");
            let mut result = json!({"resultType": "complete", "ttlMs": 60_000,
                "contents": [{"uri": uri, "text": scope}]});
            if scope != "unmarked" {
                result["cacheScope"] = json!(scope);
            }
            result
        }
        _ => json!({"resultType": "complete"}),
    });
    let identity = peer.identity();
    let client = Client::builder("cache-test", "0").connect(peer).unwrap();
    let uris = ["file:///public", "file:///private", "file:///unmarked"];
    let reads = async |client: &Client| {
        for uri in uris {
            let read = client.read_resource(uri).await.unwrap();
            assert_eq!(read.contents[0].uri(), uri);
        }
    };
    reads(&client).await;
    assert_eq!(methods(&seen).len(), 3);
    // One identity: each answer is fresh, nothing is asked.
    reads(&client).await;
    assert_eq!(methods(&seen).len(), 3, "answered from the cache");

    identity.fetch_add(1, Ordering::SeqCst);
    reads(&client).await;
    let asked: Vec<String> = seen.lock().unwrap()[3..]
        .iter()
        .map(|(_, _, params)| params["uri"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        asked,
        ["file:///private", "file:///unmarked"],
        "a missing scope is private"
    );
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn server_requests_past_the_cap_are_refused_at_once_and_the_rest_answered() {
    let (peer, _) = Peer::new(|_, _| json!({"resultType": "complete"}));
    let inject = peer.injector();
    let answers = peer.answers();
    let release = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let gate = release.clone();
    let capabilities: toolwire_types::ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {}})).unwrap();
    let client = Client::builder("cap-test", "0")
        .handler(capabilities, move |_| {
            let gate = gate.clone();
            Box::pin(async move {
                let _ = gate.acquire().await.map(|p| p.forget());
                Ok(json!({"action": "decline"}))
            })
        })
        .connect(peer)
        .unwrap();
    client.ready().await.unwrap();
    let total = crate::client::MAX_SERVER_REQUESTS + 16;
    for i in 0..total {
        let request = json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "elicitation/create",
            "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}}});
        inject
            .send(toolwire_transport::Inbound::new(
                serde_json::to_vec(&request).unwrap(),
            ))
            .unwrap();
    }
    let wait_for = async |n: usize| {
        while answers.lock().unwrap().len() < n {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    wait_for(16).await;
    {
        let refused = answers.lock().unwrap().clone();
        assert_eq!(
            refused.len(),
            16,
            "only the excess is answered while the handler works"
        );
        for (k, answer) in refused.iter().enumerate() {
            assert_eq!(answer["id"], 1000 + crate::client::MAX_SERVER_REQUESTS + k);
            assert_eq!(answer["error"]["code"], -32603);
        }
    }
    release.add_permits(total);
    wait_for(total).await;
    let all = answers.lock().unwrap().clone();
    let declined = all
        .iter()
        .filter(|a| a["result"]["action"] == "decline")
        .count();
    assert_eq!(
        declined,
        crate::client::MAX_SERVER_REQUESTS,
        "those within the cap were served"
    );
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_listing_whose_cursor_repeats_ends_instead_of_looping() {
    let (peer, seen) = Peer::new(|method, _| match method {
        "resources/list" => json!({"resultType": "complete",
            "resources": [{"uri": "file:///a", "name": "a"}], "nextCursor": "again"}),
        "prompts/list" => json!({"resultType": "complete",
            "prompts": [{"name": "p"}], "nextCursor": "again"}),
        _ => json!({"resultType": "complete"}),
    });
    let client = Client::builder("walk-test", "0").connect(peer).unwrap();
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(
        resources.len(),
        2,
        "the first page and the one that repeated its cursor"
    );
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 2);
    assert_eq!(
        methods(&seen),
        [
            "resources/list",
            "resources/list",
            "prompts/list",
            "prompts/list"
        ]
    );
    client.close().await;
}

/// A command that reaches the driver after negotiation failed gets that failure at once, not
/// a wait for a `Ready` that will never come (a CLI run against a server that refused it
/// would hang for its whole deadline when the refusal came back before the command arrived).
#[tokio::test(start_paused = true)]
async fn a_command_after_negotiation_failed_gets_the_failure_at_once() {
    let (peer, _) = Peer::new(|method, _| match method {
        "initialize" => json!({"protocolVersion": "1999-01-01", "capabilities": {},
            "serverInfo": {"name": "old", "version": "1"}}),
        _ => json!({}),
    });
    let client = Client::builder("refused", "0")
        .mode(toolwire_session::ProtocolMode::Pinned(
            toolwire_types::ProtocolVersion::V2025_11_25,
        ))
        .connect(peer)
        .unwrap();
    let refused = client.ready().await.unwrap_err();
    let started = tokio::time::Instant::now();
    let again = client.list_tools().await.unwrap_err();
    assert_eq!(
        started.elapsed(),
        std::time::Duration::ZERO,
        "no deadline waited out"
    );
    assert_eq!(again.to_string(), refused.to_string());
    client.close().await;
}

/// A refused negotiation ends the connection (`Failed`, said before the caller hears it):
/// with a reconnect policy the next call connects and negotiates again, and succeeds once the
/// server accepts; the connection watched says each step.
#[tokio::test(start_paused = true)]
async fn after_a_refused_negotiation_the_next_call_connects_again_under_a_policy() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let connects = Arc::new(AtomicUsize::new(0));
    let count = connects.clone();
    let connector: crate::Connector = Arc::new(move || {
        let version = match count.fetch_add(1, Ordering::SeqCst) {
            0 => "1999-01-01",
            _ => "2025-11-25",
        };
        let (peer, _) = Peer::new(move |method, _| match method {
            "initialize" => json!({"protocolVersion": version,
                "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}),
            _ => json!({}),
        });
        Ok(Arc::new(peer) as Arc<dyn toolwire_transport::Transport>)
    });
    let client = Client::builder("refused-once", "0")
        .mode(toolwire_session::ProtocolMode::Pinned(
            toolwire_types::ProtocolVersion::V2025_11_25,
        ))
        .reconnect(crate::ReconnectPolicy::default())
        .connect_with(connector)
        .unwrap();
    let refused = client.ready().await.unwrap_err();
    assert!(
        matches!(client.connection_state(), crate::ConnectionState::Failed { ref reason } if reason.to_string() == refused.to_string()),
        "{:?}",
        client.connection_state()
    );
    let negotiated = client.ready().await.expect("a new connection, accepted");
    assert_eq!(negotiated.version.as_str(), "2025-11-25");
    assert_eq!(connects.load(Ordering::SeqCst), 2);
    assert!(client.connection_state().is_ready());
    assert_eq!(
        client.negotiated().map(|n| n.version.clone()),
        Some(negotiated.version.clone())
    );
    client.close().await;
    assert!(matches!(
        client.connection_state(),
        crate::ConnectionState::Closed
    ));
}

/// A call's future is what every caller holds (and moves) while the call is in flight: 64
/// callers hold 64 of them. The rare paths (following a task, answering an MRTR round) are
/// boxed and the options carry their large members boxed, so the common call stays small
/// (it was 7 KB before they were; 2.5 KB since).
#[tokio::test]
async fn a_call_future_stays_small() {
    let (peer, _seen) = Peer::new(|_, _| json!({"resultType": "complete"}));
    let client = Client::builder("size-test", "0").connect(peer).unwrap();
    let call = client.call_tool("t", json!({}));
    let size = std::mem::size_of_val(&call);
    drop(call);
    let with_hooks = client.call_tool_with_hooks(
        "t",
        json!({}),
        crate::CallOptions::default(),
        crate::CallHooks::new(),
    );
    let hooks_size = std::mem::size_of_val(&with_hooks);
    drop(with_hooks);
    assert!(size <= 3072, "a call_tool future is {size} bytes");
    assert!(
        hooks_size <= 3072,
        "a call_tool_with_hooks future is {hooks_size} bytes"
    );
}

//! Two gateway replicas sharing a real Redis vault (Debian's `redis-server`): a caller signs in
//! to a per-user upstream through one replica, the authorization server sends the user back
//! to the other, and both then call with that login. What Redis holds is sealed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod gateway_common;

use std::sync::Arc;

use base64::Engine as _;
use gateway_common::*;
use serde_json::json;
use toolwire::{Client, HttpTransport};
use toolwire_gateway::{Access, AccessConfig, Gateway};
use toolwire_test_support::issuer::Issuer;
use toolwire_test_support::redis::RedisServer;

const RESOURCE: &str = "https://gw.example/mcp";

/// One replica: its own host (its own connection to the upstream) and front, the shared
/// settings.
async fn replica(
    upstream: &str,
    issuer: &Issuer,
    redis: &RedisServer,
) -> (Arc<Gateway>, toolwire_server::HttpServer) {
    let host = host(
        json!({"up": {"url": upstream, "headers": {"Authorization": "Bearer gw-own"}}}),
        toolwire_host::Naming::Qualified,
    )
    .await;
    let section = json!({
        "resource": RESOURCE,
        "authorizationServers": [issuer.url()],
        "upstreams": {"up": {"credentials": {"perUser": {}}, "resource": upstream}},
        "vault": {"redis": redis.url()},
    });
    let mut config = AccessConfig::from_json(&section).unwrap();
    config.vault.as_mut().unwrap().key = Some(toolwire::auth::Secret::new(
        base64::engine::general_purpose::STANDARD.encode([42u8; 32]),
    ));
    let access = Access::new(&config, RESOURCE).await.unwrap();
    serve_guarded(host, access).await
}

fn client(url: &str, token: &str) -> Client {
    Client::builder("downstream", "0")
        .connect_http(HttpTransport::builder(url).credentials(token))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_made_through_one_replica_is_used_by_the_other_through_a_shared_redis_vault() {
    let Some(redis) = RedisServer::start().await else {
        return;
    };
    let issuer = Issuer::start().await;
    let (upstream, upstream_as) = toolwire_test_support::oauth::protected_server(|s| {
        s.reuse_detection = true;
        s.live = vec!["gw-own".into()];
    })
    .await;
    let (_a, front_a) = replica(&upstream.url(), &issuer, &redis).await;
    let (_b, front_b) = replica(&upstream.url(), &issuer, &redis).await;
    let token = issuer.token("k1", RESOURCE, "alice", &json!({}));
    let (alice_a, alice_b) = (
        client(&front_a.url(), &token),
        client(&front_b.url(), &token),
    );

    // Through replica A: no login yet, a link.
    let link = sign_in_link(
        alice_a
            .call_tool("up__echo", json!({"text": "a"}))
            .await
            .unwrap_err(),
    );
    // The balancer sends the user's browser to replica B for the sign-in page (its link is
    // signed with the vault's key, which B holds too), and back to B for the callback: B
    // hands the callback to A, whose login it is, and says so only once A took it.
    let signed = browse_sign_in(front_b.addr(), upstream.addr, front_b.addr(), &link).await;
    assert_eq!(
        signed.status, 200,
        "replica B did not hand the callback over"
    );
    // A callback no replica waits for is still refused, by either.
    let unknown = "https://gw.example/oauth/callback?code=x&state=nope";
    assert_eq!(follow(front_b.addr(), unknown).await.0, 403);

    // A finishes the login and keeps it in the vault; B, which never saw the sign-in, calls
    // with it.
    let mut said = None;
    for _ in 0..100 {
        match alice_b
            .call_tool("up__echo", json!({"text": "via b"}))
            .await
        {
            Ok(result) => {
                said = Some(result);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    assert_eq!(
        text(&said.expect("replica B never used the login")),
        "via b"
    );
    let said = alice_a
        .call_tool("up__echo", json!({"text": "via a"}))
        .await
        .unwrap();
    assert_eq!(text(&said), "via a");
    let calls = upstream.calls("tools/call");
    assert_eq!(calls.len(), 2);
    let used: Vec<&str> = calls.iter().map(|c| c.header("authorization")).collect();
    assert!(
        used[0].starts_with("Bearer ") && used[0] != "Bearer gw-own",
        "{used:?}"
    );
    assert_eq!(
        used[0], used[1],
        "the replicas called with different logins"
    );
    assert_eq!(
        upstream_as.lock().unwrap().authorizations,
        1,
        "signed in twice"
    );

    // What the vault holds in Redis is sealed: no token in the clear.
    let bearer = used[0].trim_start_matches("Bearer ");
    let held = redis.dump();
    assert!(
        held.iter().any(|(k, _)| k.starts_with("toolwire:vault:")),
        "{held:?}"
    );
    assert!(
        held.iter().all(|(_, v)| !v.contains(bearer)),
        "a token is in the clear in Redis"
    );
}

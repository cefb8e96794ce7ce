//! With whose credentials the gateway calls each upstream: the caller's token passed on (only
//! to an upstream that token names), or a token exchanged for each caller (RFC 8693). What
//! each upstream received is read from a proxy in front of it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod gateway_common;

use std::sync::Arc;

use gateway_common::*;
use serde_json::{Value, json};
use toolwire::{Client, HttpTransport};
use toolwire_gateway::{Access, AccessConfig, Gateway};
use toolwire_test_support::issuer::{GATEWAY_CLIENT, Issuer};

const RESOURCE: &str = "https://gw.example/mcp";

struct Fronted {
    issuer: Issuer,
    front: toolwire_server::HttpServer,
    proxies: [toolwire_test_support::proxy::FaultProxy; 2],
    /// `new`'s URL through its proxy: the upstream's resource.
    new_url: String,
    _gateway: Arc<Gateway>,
    _upstreams: [toolwire_refserver::HttpServer; 2],
}

/// A gateway over `new` and `old` accepting the issuer's tokens, `new` called as `credentials`
/// says (its resource its proxied URL), `old` with its own.
async fn fronted(credentials: impl FnOnce(&Issuer) -> Value) -> Fronted {
    let issuer = Issuer::start().await;
    let Proxied {
        host,
        proxies,
        upstreams,
    } = proxied().await;
    let new_url = proxies[0].url("/mcp");
    let section = json!({
        "resource": RESOURCE,
        "authorizationServers": [issuer.url()],
        "apiKeys": [{"name": "ci", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}],
        "upstreams": {"new": {"credentials": credentials(&issuer), "resource": new_url}},
    });
    let mut config = AccessConfig::from_json(&section).unwrap();
    if let toolwire_gateway::UpstreamCredentials::Exchange(x) =
        &mut config.upstreams.get_mut("new").unwrap().credentials
    {
        x.client_secret = Some(toolwire::auth::Secret::new(GATEWAY_CLIENT.1));
    }
    let access = Access::new(&config, RESOURCE).await.unwrap();
    let gateway = Gateway::builder(host).access(access).build();
    let front = gateway
        .serve_http(LOOPBACK, toolwire_server::Options::default())
        .await
        .unwrap();
    Fronted {
        issuer,
        front,
        proxies,
        new_url,
        _gateway: gateway,
        _upstreams: upstreams,
    }
}

impl Fronted {
    fn client(&self, token: &str) -> Client {
        Client::builder("downstream", "0")
            .connect_http(HttpTransport::builder(self.front.url()).bearer_token(token))
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_carries_a_callers_token_only_to_an_upstream_the_token_names() {
    let f = fronted(|_| json!("passthrough")).await;
    // Alice's token names the gateway and `new`; Bob's the gateway alone.
    let alice = f.issuer.token(
        "k1",
        RESOURCE,
        "alice",
        &json!({"aud": [RESOURCE, f.new_url]}),
    );
    let bob = f.issuer.token("k1", RESOURCE, "bob", &json!({}));

    f.client(&alice)
        .call_tool("new__echo", json!({"text": "a"}))
        .await
        .unwrap();
    assert_eq!(f.proxies[0].sent_count(&format!("Bearer {alice}")), 1);

    let refused = f
        .client(&bob)
        .call_tool("new__echo", json!({"text": "b"}))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("not issued for"), "{refused}");
    assert_eq!(f.proxies[0].sent_count(&bob), 0, "bob's token reached new");
    assert_eq!(f.proxies[0].sent_count("\"tools/call\""), 1);

    // `old` keeps its own credentials: no caller's token goes there.
    f.client(&alice)
        .call_tool("old__echo", json!({"text": "a"}))
        .await
        .unwrap();
    assert_eq!(
        f.proxies[1].sent_count(&alice),
        0,
        "alice's token reached old"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_gets_its_own_exchanged_token_and_no_caller_sees_anothers() {
    let f = fronted(|issuer| {
        json!({"exchange": {"tokenEndpoint": format!("{}/token", issuer.url()),
            "clientId": GATEWAY_CLIENT.0}})
    })
    .await;
    let alice = f.issuer.token("k1", RESOURCE, "alice", &json!({}));
    let bob = f.issuer.token("k2", RESOURCE, "bob", &json!({}));
    let (a, b) = (f.client(&alice), f.client(&bob));
    for round in 0..2 {
        for (client, who) in [(&a, "alice"), (&b, "bob")] {
            let said = client
                .call_tool("new__echo", json!({"text": format!("{who} {round}")}))
                .await
                .unwrap();
            assert_eq!(text(&said), format!("{who} {round}"));
        }
    }
    // One exchange per caller (the token is kept), each for `new`'s resource.
    let exchanges = f.issuer.exchanges();
    let mut subjects: Vec<&str> = exchanges.iter().map(|(s, _, _)| s.as_str()).collect();
    subjects.sort_unstable();
    assert_eq!(subjects, ["alice", "bob"]);
    assert!(
        exchanges
            .iter()
            .all(|(_, resource, _)| *resource == f.new_url)
    );
    // Each caller's calls carried its own exchanged token, never the other's, never its own
    // access token.
    for (subject, _, issued) in &exchanges {
        assert_eq!(
            f.proxies[0].sent_count(&format!("Bearer {issued}")),
            2,
            "{subject}'s calls"
        );
    }
    for original in [&alice, &bob] {
        assert_eq!(
            f.proxies[0].sent_count(original),
            0,
            "a caller's own token went upstream"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_for_one_call_over_stdio_are_refused_not_dropped() {
    let client = Client::builder("downstream", "0")
        .connect_stdio(toolwire::StdioConfig::new(SCRIPTED, ["legacy"]))
        .unwrap();
    let header = toolwire_headers::authorization_header("Bearer secret-token").unwrap();
    assert!(
        !format!("{header:?}").contains("secret-token"),
        "{header:?}"
    );
    let options = toolwire::CallOptions::default().with_authorization(header);
    let refused = client
        .call_tool_with("echo", json!({"text": "x"}), options)
        .await
        .unwrap_err();
    let chain = toolwire::ErrorChain(&refused).to_string();
    assert!(
        matches!(refused, toolwire::Error::Usage(_)) && chain.contains("headers"),
        "{chain}"
    );
}

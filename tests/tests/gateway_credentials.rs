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
    let (gateway, front) = serve_guarded(host, access).await;
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
            .connect_http(HttpTransport::builder(self.front.url()).credentials(token))
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

/// A gateway in front of `up`, an MCP server behind OAuth whose callers sign in per user:
/// the gateway's own token lists its tools; each caller's sign-in gets a token of its own,
/// and the server accepts every token it issued.
struct PerUser {
    issuer: Issuer,
    upstream: toolwire_test_support::http::HttpPeer,
    upstream_as: Arc<std::sync::Mutex<toolwire_test_support::oauth::As>>,
    gateway: Arc<Gateway>,
    front: toolwire_server::HttpServer,
}

/// An MCP server behind OAuth that takes the gateway's own token (`gw-own`) and every token
/// its authorization server issues, and a host of it as `up`.
async fn protected_upstream() -> (
    toolwire_test_support::http::HttpPeer,
    Arc<std::sync::Mutex<toolwire_test_support::oauth::As>>,
    toolwire_host::Host,
) {
    let (upstream, upstream_as) = toolwire_test_support::oauth::protected_server(|s| {
        s.reuse_detection = true;
        s.live = vec!["gw-own".into()];
    })
    .await;
    let host = host(
        json!({"up": {"url": upstream.url(), "headers": {"Authorization": "Bearer gw-own"}}}),
        toolwire_host::Naming::Qualified,
    )
    .await;
    (upstream, upstream_as, host)
}

/// A client of the gateway at `front` with `issuer`'s token for `who`.
fn signed_in_as(front: &toolwire_server::HttpServer, issuer: &Issuer, who: &str) -> Client {
    Client::builder("downstream", "0")
        .connect_http(
            HttpTransport::builder(front.url()).credentials(issuer.token(
                "k1",
                RESOURCE,
                who,
                &json!({}),
            )),
        )
        .unwrap()
}

async fn per_user() -> PerUser {
    let issuer = Issuer::start().await;
    let (upstream, upstream_as, host) = protected_upstream().await;
    let section = json!({
        "resource": RESOURCE,
        "authorizationServers": [issuer.url()],
        "upstreams": {"up": {"credentials": {"perUser": {}}, "resource": upstream.url()}},
    });
    let config = AccessConfig::from_json(&section).unwrap();
    let access = Access::new(&config, RESOURCE).await.unwrap();
    let (gateway, front) = serve_guarded(host, access).await;
    PerUser {
        issuer,
        upstream,
        upstream_as,
        gateway,
        front,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_signs_in_to_a_per_user_upstream_through_a_url_elicitation_and_calls_as_itself() {
    let PerUser {
        issuer,
        upstream,
        upstream_as,
        front,
        ..
    } = per_user().await;
    let alice = signed_in_as(&front, &issuer, "alice");
    let bob = signed_in_as(&front, &issuer, "bob");

    // No login yet: a link to the gateway's sign-in page; asked again, the same.
    let first = alice
        .call_tool("up__echo", json!({"text": "a"}))
        .await
        .unwrap_err();
    let link = sign_in_link(first);
    assert!(
        link.starts_with("https://gw.example/oauth/connect?t="),
        "{link}"
    );
    let again = alice
        .call_tool("up__echo", json!({"text": "a"}))
        .await
        .unwrap_err();
    assert_eq!(sign_in_link(again), link);
    assert!(
        upstream.calls("tools/call").is_empty(),
        "a call went without a login"
    );

    // The user agent: the gateway's page names the account the login is for; going on, the
    // authorization server (at its own origin) approves and sends it to the gateway's
    // callback (at its public origin: the path and query go to the gateway itself).
    let signed = browse_sign_in(front.addr(), upstream.addr, front.addr(), &link).await;
    assert!(
        signed.page.contains("for the gateway account"),
        "{}",
        signed.page
    );
    assert!(signed.page.contains("#alice"), "{}", signed.page);
    assert!(
        signed
            .authorize
            .starts_with(&format!("http://{}/authorize", upstream.addr)),
        "{}",
        signed.authorize
    );
    assert!(
        signed
            .callback
            .starts_with("https://gw.example/oauth/callback?"),
        "{}",
        signed.callback
    );
    assert_eq!(signed.status, 200);
    // A callback nobody waits for, from a browser bound to no login.
    let unknown = "https://gw.example/oauth/callback?code=x&state=nope";
    assert_eq!(follow(front.addr(), unknown).await.0, 403);

    // The login finishes in the background; then alice's call goes with her own token.
    let mut said = None;
    for _ in 0..100 {
        match alice.call_tool("up__echo", json!({"text": "a"})).await {
            Ok(result) => {
                said = Some(result);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    assert_eq!(text(&said.expect("alice's call never went through")), "a");
    let calls = upstream.calls("tools/call");
    assert_eq!(calls.len(), 1);
    let used = calls[0].header("authorization").to_owned();
    assert!(
        used.starts_with("Bearer ") && used != "Bearer gw-own",
        "{used}"
    );
    assert_eq!(upstream_as.lock().unwrap().authorizations, 1);

    // Bob has no login of his own: he is asked to sign in, with a link of his own.
    let bobs = sign_in_link(
        bob.call_tool("up__echo", json!({"text": "b"}))
            .await
            .unwrap_err(),
    );
    assert_ne!(bobs, link);
    assert_eq!(
        upstream.calls("tools/call").len(),
        1,
        "bob called with alice's login"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_sign_in_is_announced_to_the_callers_own_sessions_only() {
    let PerUser {
        issuer,
        upstream,
        gateway,
        front,
        ..
    } = per_user().await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {"url": {}}},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let mut sessions = Vec::new();
    for who in ["alice", "bob"] {
        let token = issuer.token("k1", RESOURCE, who, &json!({}));
        let auth = format!("Bearer {token}");
        let (status, sid, _) =
            exchange(front.addr(), &[("authorization", &auth)], &initialize).await;
        assert_eq!(status, 200);
        let sid = sid.unwrap();
        let stream = GetStream::open(front.addr(), &sid, &[("authorization", &auth)]).await;
        sessions.push((token, sid, stream));
    }

    // Alice's call asks her to sign in; she does.
    let (alice_token, alice_sid) = (sessions[0].0.clone(), sessions[0].1.clone());
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "up__echo", "arguments": {"text": "a"}}});
    let auth = format!("Bearer {alice_token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", alice_sid.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let (_, _, answer) = exchange(front.addr(), &headers, &call).await;
    assert_eq!(answer["error"]["code"], -32042, "{answer}");
    let elicitation = &answer["error"]["data"]["elicitations"][0];
    let id = elicitation["elicitationId"].as_str().unwrap().to_owned();
    let link = elicitation["url"].as_str().unwrap();
    let signed = browse_sign_in(front.addr(), upstream.addr, front.addr(), link).await;
    assert_eq!(signed.status, 200);

    // Alice's stream hears the completion of her elicitation.
    let heard = sessions[0]
        .2
        .until("notifications/elicitation/complete")
        .await;
    assert!(heard.contains(&id), "{heard}");
    // Then a change every session hears: Bob's stream has it, and nothing about Alice's
    // sign-in before it.
    gateway
        .host()
        .add_known_tools(
            "up",
            [toolwire::Tool::new(
                "extra",
                serde_json::from_value(json!({"type": "object"})).unwrap(),
            )],
        )
        .unwrap();
    let bobs = sessions[1]
        .2
        .until("notifications/tools/list_changed")
        .await;
    assert!(!bobs.contains("elicitation/complete"), "{bobs}");
}

/// The `WWW-Authenticate` values of the HTTP refusal in `error`'s causes, with its status.
fn refusal(error: &toolwire::Error) -> Option<(u16, Vec<String>)> {
    match toolwire::HttpError::find(error)? {
        toolwire::HttpError::Status {
            status,
            www_authenticate,
            ..
        } => Some((status.as_u16(), www_authenticate.clone())),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_upstreams_refusal_of_a_passed_token_reaches_the_caller_as_it_came() {
    let issuer = Issuer::start().await;
    let (upstream, upstream_as, host) = protected_upstream().await;
    let section = json!({
        "resource": RESOURCE,
        "authorizationServers": [issuer.url()],
        "upstreams": {"up": {"credentials": "passthrough", "resource": upstream.url(),
            "relayChallenge": true}},
    });
    let config = AccessConfig::from_json(&section).unwrap();
    // Both framings of the gateway's answers: JSON, and SSE (whose head waits for the
    // call's first event when it may be a refusal).
    for framing in [
        toolwire_server::Framing::Json,
        toolwire_server::Framing::Sse,
    ] {
        let access = Access::new(&config, RESOURCE).await.unwrap();
        let gateway = Gateway::builder(host.clone()).access(access).build();
        let mut options = toolwire_server::Options::default();
        options.framing = framing;
        let front = gateway.serve_http(LOOPBACK, options).await.unwrap();
        let token = |who: &str| {
            issuer.token(
                "k1",
                RESOURCE,
                who,
                &json!({"aud": [RESOURCE, upstream.url()]}),
            )
        };
        let caller = |token: &str| {
            Client::builder("downstream", "0")
                .connect_http(HttpTransport::builder(front.url()).credentials(token))
                .unwrap()
        };

        // A token the upstream does not take: its 401 and challenge, unchanged.
        let refused = caller(&token("bob"))
            .call_tool("up__echo", json!({"text": "b"}))
            .await
            .unwrap_err();
        let expected = format!(
            r#"Bearer error="invalid_token", resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
            upstream.url().trim_end_matches("/mcp")
        );
        assert_eq!(
            refusal(&refused),
            Some((401, vec![expected])),
            "{framing:?}: {refused}"
        );

        // A token it takes, without the scope it wants: its 403 naming the scope.
        let alice = token("alice");
        {
            let mut s = upstream_as.lock().unwrap();
            s.live.push(alice.clone());
            s.require_scope = Some("admin".into());
        }
        let stepped = caller(&alice)
            .call_tool("up__echo", json!({"text": "a"}))
            .await
            .unwrap_err();
        let (status, challenge) = refusal(&stepped).unwrap_or_else(|| panic!("{stepped}"));
        assert_eq!(status, 403, "{framing:?}");
        assert!(
            challenge[0].starts_with(r#"Bearer error="insufficient_scope", scope="admin""#),
            "{challenge:?}"
        );
        {
            let mut s = upstream_as.lock().unwrap();
            s.require_scope = None;
        }
        // And with the scope, the call goes through as before.
        let said = caller(&alice)
            .call_tool("up__echo", json!({"text": "a"}))
            .await
            .unwrap();
        assert_eq!(text(&said), "a");
        upstream_as.lock().unwrap().live.retain(|t| t == "gw-own");
    }
}

#[tokio::test]
async fn relaying_challenges_needs_the_callers_token_passed_on() {
    let issuer = Issuer::start().await;
    let section = json!({
        "resource": RESOURCE,
        "authorizationServers": [issuer.url()],
        "upstreams": {"up": {"credentials": {"perUser": {}}, "resource": "https://up.example/mcp",
            "relayChallenge": true}},
    });
    let e = Access::new(&AccessConfig::from_json(&section).unwrap(), RESOURCE)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("relayChallenge"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_signs_out_of_a_per_user_upstream_and_is_asked_to_sign_in_again() {
    let PerUser {
        issuer,
        upstream,
        upstream_as,
        front,
        ..
    } = per_user().await;
    upstream_as.lock().unwrap().revocation = true;
    let (alice, bob) = (
        signed_in_as(&front, &issuer, "alice"),
        signed_in_as(&front, &issuer, "bob"),
    );
    let link = sign_in_link(
        alice
            .call_tool("up__echo", json!({"text": "a"}))
            .await
            .unwrap_err(),
    );
    let signed = browse_sign_in(front.addr(), upstream.addr, front.addr(), &link).await;
    assert_eq!(signed.status, 200);
    let mut signed_in = false;
    for _ in 0..100 {
        if alice
            .call_tool("up__echo", json!({"text": "a"}))
            .await
            .is_ok()
        {
            signed_in = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(signed_in, "alice never signed in");

    // The gateway's own tool is listed, after the upstream's.
    let listed = alice.list_all_tools().await.unwrap();
    assert_eq!(
        listed.last().map(|t| t.name.as_str()),
        Some(toolwire_gateway::SIGN_OUT)
    );

    // Bob was never signed in: nothing to end, and alice's login stays.
    let bobs = bob
        .call_tool(toolwire_gateway::SIGN_OUT, json!({"server": "up"}))
        .await
        .unwrap();
    assert!(text(&bobs).contains("not signed in"), "{}", text(&bobs));
    assert!(upstream_as.lock().unwrap().revoked.is_empty());

    // Alice signs out: her refresh token is revoked at the authorization server, and her
    // next call asks her to sign in again.
    let out = alice
        .call_tool(toolwire_gateway::SIGN_OUT, json!({"server": "up"}))
        .await
        .unwrap();
    assert!(text(&out).contains("Signed out of `up`"), "{}", text(&out));
    assert_eq!(out.structured_content.as_ref().unwrap()["signedOut"], true);
    {
        let s = upstream_as.lock().unwrap();
        assert_eq!(s.revoked.len(), 1, "{:?}", s.revoked);
        assert_eq!(s.latest_refresh.as_deref(), Some(s.revoked[0].as_str()));
    }
    let calls_before = upstream.calls("tools/call").len();
    let again = alice
        .call_tool("up__echo", json!({"text": "a"}))
        .await
        .unwrap_err();
    sign_in_link(again);
    assert_eq!(
        upstream.calls("tools/call").len(),
        calls_before,
        "a call went upstream after the sign-out"
    );

    // A server nobody signs in to is refused as a tool error.
    let unknown = alice
        .call_tool(toolwire_gateway::SIGN_OUT, json!({"server": "nope"}))
        .await
        .unwrap();
    assert_eq!(unknown.is_error, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorization_link_sent_to_someone_else_completes_nothing_and_the_page_names_the_account()
 {
    let PerUser {
        issuer,
        upstream,
        upstream_as,
        front,
        ..
    } = per_user().await;
    let mallory = signed_in_as(&front, &issuer, "mallory");
    let link = sign_in_link(
        mallory
            .call_tool("up__echo", json!({"text": "m"}))
            .await
            .unwrap_err(),
    );
    // Whoever opens the gateway's page is told whose account the login would be stored under.
    let (status, _, page) = fetch(front.addr(), &link, None).await;
    assert_eq!(status, 200);
    assert!(
        page.contains("#mallory") && page.contains("Go on only if"),
        "{page}"
    );
    // Mallory goes on in her browser and sends the authorization server's link itself to a
    // colleague, whose browser is signed in there: the colleague's browser comes back to the
    // callback without Mallory's binding, and nothing is completed.
    let (status, head, _) = fetch(front.addr(), &format!("{link}&go=1"), None).await;
    assert_eq!(status, 303);
    let authorize = header_of(&head, "location").unwrap().to_owned();
    let mallorys_cookie = header_of(&head, "set-cookie").unwrap().to_owned();
    assert!(
        mallorys_cookie.contains("HttpOnly") && mallorys_cookie.contains("SameSite=Lax"),
        "{mallorys_cookie}"
    );
    let (_, callback) = follow(upstream.addr, &authorize).await;
    let callback = callback.unwrap();
    let (status, _, refusal) = fetch(front.addr(), &callback, None).await;
    assert_eq!(status, 403, "{refusal}");
    // Nor does another binding (one of another sign-in) do.
    let forged = "toolwire-sign-in-000000000000=AAAA";
    assert_eq!(fetch(front.addr(), &callback, Some(forged)).await.0, 403);
    assert!(
        mallory
            .call_tool("up__echo", json!({"text": "m"}))
            .await
            .is_err(),
        "mallory has no login from the colleague's browser"
    );
    assert!(upstream.calls("tools/call").is_empty());
    assert_eq!(
        upstream_as.lock().unwrap().authorizations,
        1,
        "the authorization server did approve the colleague: the gateway refused it"
    );
    // The link the gateway made is still good for the browser it bound.
    let cookie = mallorys_cookie.split(';').next().unwrap();
    let (_, again) = follow(upstream.addr, &authorize).await;
    assert_eq!(
        fetch(front.addr(), &again.unwrap(), Some(cookie)).await.0,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_user_upstream_serves_tools_calls_only_and_refuses_what_would_run_as_the_operator() {
    let PerUser {
        issuer,
        upstream,
        front,
        ..
    } = per_user().await;
    let eve = signed_in_as(&front, &issuer, "eve");
    let refused = eve.read_resource("mem://up__inbox").await.unwrap_err();
    let toolwire::Error::Server(e) = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(e.code, -32600, "{e:?}");
    assert!(e.message.contains("each caller's own credentials"), "{e:?}");
    let refused = eve.get_prompt("up__greet", Vec::new()).await.unwrap_err();
    assert!(
        matches!(&refused, toolwire::Error::Server(e) if e.code == -32600 || e.code == -32602),
        "{refused:?}"
    );
    assert!(
        upstream.calls("resources/read").is_empty() && upstream.calls("prompts/get").is_empty(),
        "nothing went upstream as the operator"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_moves_a_per_user_upstream_stops_its_callers_tokens_from_following() {
    let PerUser {
        issuer,
        upstream,
        gateway,
        front,
        ..
    } = per_user().await;
    // Somewhere else an upstream listens: the entry is edited to point there.
    let (elsewhere, _) = toolwire_test_support::oauth::protected_server(|s| {
        s.reuse_detection = true;
        s.live = vec!["gw-own".into()];
    })
    .await;
    let moved = toolwire_host::ServersConfig::parse(
        &json!({"mcpServers": {"up": {"url": elsewhere.url(),
            "headers": {"Authorization": "Bearer gw-own"}}}})
        .to_string(),
        |_| None,
    )
    .unwrap();
    gateway.host().reload(&moved).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while gateway.host().load().get("up__echo").is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the moved entry's tools came back");
    let alice = signed_in_as(&front, &issuer, "alice");
    let refused = alice
        .call_tool("up__echo", json!({"text": "a"}))
        .await
        .unwrap_err();
    let toolwire::Error::Server(e) = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(e.code, -32600, "{e:?}");
    assert!(e.message.contains("moved to another URL"), "{e:?}");
    assert!(elsewhere.calls("tools/call").is_empty());
    assert!(upstream.calls("tools/call").is_empty());
}

//! URL elicitation against the reference server's `link_account` (it needs a page completed
//! until `finish_link` is called), in both eras: the legacy `-32042` answer as a typed error with
//! its completion notification, and the 2026-07-28 input request through the handler.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use toolwire::{Client, HttpTransport, ProtocolMode, ProtocolVersion};
use toolwire_refserver::{Eras, Options, serve_http};

async fn server(eras: Eras) -> toolwire_refserver::HttpServer {
    let mut options = Options::default();
    options.server.eras = eras;
    serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), options)
        .await
        .unwrap()
}

/// URL elicitation in the legacy era: a call the server cannot serve until the user completes
/// a URL elicitation fails with the typed error (its URL and id), the completion arrives as
/// `notifications/elicitation/complete` naming the id (here caused by another client, as the
/// user's visit to the URL would), and the same call then succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_url_elicitation_required_error_names_the_url_and_its_completion_arrives() {
    let s = server(Eras::Legacy).await;
    let legacy = |name: &str| {
        Client::builder(name, "0")
            .mode(ProtocolMode::Pinned(ProtocolVersion::V2025_11_25))
            .connect_http(HttpTransport::builder(s.url()))
            .unwrap()
    };
    let client = legacy("user");
    let mut notices = client.notifications();
    let err = client
        .call_tool("link_account", json!({}))
        .await
        .unwrap_err();
    let elicitations = match &err {
        toolwire::Error::Input(toolwire::InputError::UrlElicitationRequired {
            error,
            elicitations,
        }) => {
            assert_eq!(error.code, -32042);
            elicitations.clone()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(elicitations.len(), 1);
    let url = &elicitations[0];
    assert!(url.is_url());
    assert_eq!(
        url.url.as_deref(),
        Some("https://example.invalid/link?elicitation=link-account")
    );
    let id = url.elicitation_id.clone().unwrap();

    // The user completes it elsewhere; the server says so.
    let elsewhere = legacy("browser");
    elsewhere.call_tool("finish_link", json!({})).await.unwrap();
    let completed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let notice = notices.recv().await.expect("the client closed");
            if let toolwire::ServerNotification::ElicitationComplete(p) = &notice.notification {
                break p.elicitation_id.clone();
            }
        }
    })
    .await
    .expect("no notifications/elicitation/complete");
    assert_eq!(completed, id);
    let r = client.call_tool("link_account", json!({})).await.unwrap();
    assert_eq!(r.content[0].as_text(), Some("account linked"));
    elsewhere.close().await;
    client.close().await;
}

/// URL elicitation in the 2026-07-28 era: the call's input request is a URL-mode elicitation
/// the handler sees with its URL; the handler lets the user complete it (here by the call that
/// finishes the link) and accepts, and the call is retried to success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_url_elicitation_reaches_the_handler_and_the_call_completes_after_it() {
    let s = server(Eras::Modern).await;
    let helper = Client::builder("browser", "0")
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let capabilities: toolwire::ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {"url": {}}})).unwrap();
    let client = Client::builder("user", "0")
        .handler(capabilities, {
            let seen = seen.clone();
            let helper = helper.clone();
            move |request| {
                let seen = seen.clone();
                let helper = helper.clone();
                Box::pin(async move {
                    match request {
                        toolwire::ServerRequest::Elicit(params) if params.is_url() => {
                            seen.lock().unwrap().push(params.url.clone());
                            helper
                                .call_tool("finish_link", json!({}))
                                .await
                                .map_err(|e| toolwire::ErrorObject::new(-32603, e.to_string()))?;
                            Ok(json!({"action": "accept"}))
                        }
                        other => Err(toolwire::ErrorObject::new(
                            -32601,
                            format!("unexpected {}", other.method()),
                        )),
                    }
                })
            }
        })
        .connect_http(HttpTransport::builder(s.url()))
        .unwrap();
    let r = client.call_tool("link_account", json!({})).await.unwrap();
    assert_eq!(r.content[0].as_text(), Some("account linked"));
    assert_eq!(
        *seen.lock().unwrap(),
        [Some(
            "https://example.invalid/link?elicitation=link-account".to_owned()
        )]
    );
    client.close().await;
    helper.close().await;
}

//! `https://` through rustls, with HTTP/2 chosen by ALPN, against a TLS server on loopback.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolwire_http::{HttpTransport, Proxy, TlsRoots};
use toolwire_test_support::forward::ForwardProxy;
use toolwire_transport::{MessageKind, Outbound, RequestId, Transport, TransportError};

/// A TLS server offering h2 and http/1.1 that answers every request with a JSON result and
/// records the HTTP version of each request.
async fn tls_server(
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> (u16, Arc<Mutex<Vec<http::Version>>>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let versions = Arc::new(Mutex::new(Vec::new()));
    let seen = versions.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        seen.lock().unwrap().push(req.version());
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let v: Value = serde_json::from_slice(&body).unwrap();
                        let answer = json!({"jsonrpc": "2.0", "id": v["id"], "result": {}});
                        let mut resp =
                            http::Response::new(Full::new(Bytes::from(answer.to_string())));
                        resp.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, versions)
}

/// A TLS server with a fresh self-signed certificate for `localhost`: its port, the HTTP
/// versions it saw, and the certificate to trust.
async fn self_signed_server() -> (u16, Arc<Mutex<Vec<http::Version>>>, CertificateDer<'static>) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_der = cert.cert.der().clone();
    let key = PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
    let (port, versions) = tls_server(cert_der.clone(), key).await;
    (port, versions, cert_der)
}

fn ping(id: i64) -> Outbound {
    Outbound::new(
        json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string(),
        MessageKind::Request {
            id: RequestId::Number(id),
            method: "ping",
        },
    )
}

/// Sends `ping` `id` and checks that the next thing received is its answer.
async fn ping_answered(t: &HttpTransport, id: i64) {
    t.send(ping(id)).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), t.recv())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&got.body).unwrap()["id"],
        id
    );
}

#[tokio::test]
async fn https_speaks_h2_when_alpn_offers_it_and_checks_certificates() {
    let (port, versions, cert_der) = self_signed_server().await;
    let url = format!("https://localhost:{port}/mcp");

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Pre-set ALPN protocols are replaced, not a reason to fail.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let t = HttpTransport::builder(url.clone())
        .tls_roots(TlsRoots::Config(Arc::new(config)))
        .build()
        .unwrap();
    for id in 1..=2 {
        ping_answered(&t, id).await;
    }
    assert_eq!(
        *versions.lock().unwrap(),
        [http::Version::HTTP_2, http::Version::HTTP_2]
    );

    // The default (webpki) roots do not trust a self-signed certificate.
    let t = HttpTransport::new(url).unwrap();
    t.send(ping(1)).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(10), t.recv())
        .await
        .unwrap()
        .unwrap()
    {
        Err(TransportError::Request(f)) => {
            let mut chain = f.cause.to_string();
            let mut source = std::error::Error::source(&*f.cause);
            while let Some(s) = source {
                chain.push_str(&format!(" / {s}"));
                source = s.source();
            }
            assert!(chain.to_lowercase().contains("certificate"), "{chain}");
        }
        other => panic!("expected a certificate failure, got {other:?}"),
    }
}

/// TLS roots that trust `cert` alone.
fn trusting(cert: CertificateDer<'static>) -> TlsRoots {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsRoots::Config(Arc::new(config))
}

#[tokio::test]
async fn https_goes_through_a_connect_tunnel_with_tls_end_to_end() {
    let (port, versions, cert_der) = self_signed_server().await;
    let proxy = ForwardProxy::start(Some("alice:s3cret")).await;
    let t = HttpTransport::builder(format!("https://localhost:{port}/mcp"))
        .tls_roots(trusting(cert_der))
        .proxy(Proxy::Url(proxy.url(Some("alice:s3cret"))))
        .build()
        .unwrap();
    for id in 1..=2 {
        ping_answered(&t, id).await;
    }
    let asked = proxy.asked();
    assert_eq!(asked.len(), 1, "one tunnel, kept for both: {asked:?}");
    assert_eq!(asked[0].line, format!("CONNECT localhost:{port} HTTP/1.1"));
    assert_eq!(
        asked[0].authorization.as_deref(),
        Some("Basic YWxpY2U6czNjcmV0")
    );
    assert_eq!(
        versions.lock().unwrap().len(),
        2,
        "the server answered both"
    );
}

#[tokio::test]
async fn oauth_requests_to_an_https_server_are_tunnelled_whatever_route_the_mcp_server_takes() {
    // The MCP server is plain http behind a forwarding proxy; the authorization server the
    // same transport's executor reaches is https: its requests (code, verifier, secrets)
    // must go through a CONNECT tunnel, never in absolute form in clear.
    let (port, versions, cert_der) = self_signed_server().await;
    let proxy = ForwardProxy::start(Some("alice:s3cret")).await;
    let t = HttpTransport::builder("http://mcp.invalid:8080/mcp")
        .tls_roots(trusting(cert_der))
        .proxy(Proxy::Url(proxy.url(Some("alice:s3cret"))))
        .build()
        .unwrap();
    let body = r#"{"id":1,"code":"the-secret-code","code_verifier":"the-secret-verifier"}"#;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("https://localhost:{port}/token"))
        .body(Bytes::from_static(body.as_bytes()))
        .unwrap();
    let response = t.executor().execute(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(versions.lock().unwrap().len(), 1, "the server answered");
    let asked = proxy.asked();
    assert_eq!(
        asked.iter().map(|a| a.line.as_str()).collect::<Vec<_>>(),
        [format!("CONNECT localhost:{port} HTTP/1.1").as_str()],
        "one tunnel and nothing forwarded"
    );
    assert_eq!(
        asked[0].authorization.as_deref(),
        Some("Basic YWxpY2U6czNjcmV0"),
        "the proxy's credentials go on the CONNECT"
    );
    assert!(
        !proxy.saw(b"the-secret-code"),
        "the code crossed the proxy in clear"
    );
    assert!(!proxy.saw(b"the-secret-verifier"));
    assert!(proxy.saw(b"CONNECT"), "the capture sees what crosses it");
}

//! How each connection reaches its destination: straight, through a `CONNECT` tunnel, or to a
//! forwarding proxy, chosen **per destination** from that destination's own URL.
//!
//! One transport talks to more than its MCP server: its [`HttpExecutor`](crate::HttpExecutor)
//! carries an authorizer's requests (metadata, registration, token, revocation) to
//! authorization servers that live elsewhere. Each of those requests takes its own route:
//! `NO_PROXY` is applied to its host, and an `https://` destination is only ever reached
//! through a `CONNECT` tunnel with TLS end to end, never written in absolute form to a
//! forwarding proxy in clear, whatever route the MCP server's own URL took.

use std::fmt;

use http::{HeaderValue, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::Matcher;

use crate::HttpError;

/// The way to one destination.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Hop {
    /// Straight to it.
    Direct,
    /// Over the Unix domain socket at this path (the MCP endpoint's own, when one is set).
    Unix(std::sync::Arc<std::path::Path>),
    /// `https://` through an HTTP proxy: `CONNECT`, then TLS to the destination inside it.
    Tunnel {
        proxy: Uri,
        auth: Option<HeaderValue>,
    },
    /// `http://` through an HTTP proxy: the connection goes to the proxy, and requests name
    /// the destination in absolute form, with `Proxy-Authorization` when the proxy has
    /// credentials.
    Forward {
        proxy: Uri,
        auth: Option<HeaderValue>,
    },
}

impl fmt::Debug for Hop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Direct => f.write_str("Direct"),
            Self::Unix(path) => write!(f, "Unix({})", path.display()),
            Self::Tunnel { proxy, .. } => write!(f, "Tunnel({})", crate::redirect::origin(proxy)),
            Self::Forward { proxy, .. } => {
                write!(f, "Forward({})", crate::redirect::origin(proxy))
            }
        }
    }
}

impl Hop {
    /// The `Proxy-Authorization` a request to this destination carries itself (forwarding
    /// only: a tunnel's credentials go on its `CONNECT`).
    pub(crate) fn request_auth(&self) -> Option<&HeaderValue> {
        match self {
            Self::Forward { auth, .. } => auth.as_ref(),
            Self::Direct | Self::Unix(_) | Self::Tunnel { .. } => None,
        }
    }
}

/// The proxy rules and the connectors every hop is made from. Shared behind an `Arc`: the
/// HTTP client clones its connector for every request.
pub(crate) struct Router {
    /// `None`: no proxy for anything.
    matcher: Option<Matcher>,
    http: HttpConnector,
    tls: rustls::ClientConfig,
    direct: HttpsConnector<HttpConnector>,
    /// Requests to this authority go over this Unix socket, never through a proxy.
    unix: Option<(http::uri::Authority, std::sync::Arc<std::path::Path>)>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("proxied", &self.matcher.is_some())
            .finish_non_exhaustive()
    }
}

impl Router {
    pub(crate) fn new(
        matcher: Option<Matcher>,
        http: HttpConnector,
        tls: rustls::ClientConfig,
    ) -> Self {
        let direct = https(tls.clone()).wrap_connector(http.clone());
        Self {
            matcher,
            http,
            tls,
            direct,
            unix: None,
        }
    }

    /// Sends what goes to `authority` (the MCP endpoint's) over the Unix socket at `path`.
    pub(crate) fn with_unix_socket(
        mut self,
        authority: http::uri::Authority,
        path: std::sync::Arc<std::path::Path>,
    ) -> Self {
        self.unix = Some((authority, path));
        self
    }

    /// The hop to `dst`, from `dst`'s own scheme and host: the proxy the rules name for it
    /// (none for a `NO_PROXY` host), a tunnel for `https`, forwarding for `http`.
    pub(crate) fn hop(&self, dst: &Uri) -> Result<Hop, HttpError> {
        if let Some((authority, path)) = &self.unix
            && dst.authority() == Some(authority)
        {
            return Ok(Hop::Unix(path.clone()));
        }
        let Some(intercept) = self.matcher.as_ref().and_then(|m| m.intercept(dst)) else {
            return Ok(Hop::Direct);
        };
        let proxy = intercept.uri().clone();
        if proxy.scheme_str() != Some("http") {
            return Err(HttpError::InvalidProxy {
                proxy: crate::redirect::origin(&proxy),
                reason: "only http:// proxies are supported (not https:// or SOCKS)",
            });
        }
        let auth = intercept.basic_auth().cloned().map(|mut value| {
            value.set_sensitive(true);
            value
        });
        Ok(match dst.scheme_str() {
            Some("http") => Hop::Forward { proxy, auth },
            // Everything else that is proxied is tunnelled: nothing but plain `http` is ever
            // written to a proxy in absolute form.
            _ => Hop::Tunnel { proxy, auth },
        })
    }

    /// Straight to the destination (or to a forwarding proxy, named as the destination).
    pub(crate) fn direct(&self) -> HttpsConnector<HttpConnector> {
        self.direct.clone()
    }

    /// A tunnel through `proxy`, TLS inside it.
    pub(crate) fn tunnel(
        &self,
        proxy: Uri,
        auth: Option<HeaderValue>,
    ) -> HttpsConnector<Tunnel<HttpConnector>> {
        let mut tunnel = Tunnel::new(proxy, self.http.clone());
        if let Some(auth) = auth {
            tunnel = tunnel.with_auth(auth);
        }
        https(self.tls.clone()).wrap_connector(tunnel)
    }
}

fn https(
    tls: rustls::ClientConfig,
) -> hyper_rustls::HttpsConnectorBuilder<hyper_rustls::builderstates::WantsProtocols3> {
    HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(matcher: Matcher) -> Router {
        let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map(|b| {
            b.with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        });
        let Ok(tls) = tls else {
            unreachable!("ring offers the safe default versions")
        };
        Router::new(Some(matcher), HttpConnector::new(), tls)
    }

    fn uri(s: &str) -> Uri {
        s.parse().unwrap_or_default()
    }

    #[test]
    fn each_destination_takes_its_own_route() {
        let r = router(
            Matcher::builder()
                .http("http://proxy.example:3128".to_owned())
                .https("http://proxy.example:3128".to_owned())
                .no("internal.example".to_owned())
                .build(),
        );
        // The MCP server over http is forwarded; the authorization server over https on
        // the same transport is tunnelled, never forwarded in clear.
        assert!(matches!(
            r.hop(&uri("http://mcp.example:8080/mcp")),
            Ok(Hop::Forward { .. })
        ));
        assert!(matches!(
            r.hop(&uri("https://login.example/token")),
            Ok(Hop::Tunnel { .. })
        ));
        // NO_PROXY applies to each host on its own.
        assert_eq!(
            r.hop(&uri("https://internal.example/token")).ok(),
            Some(Hop::Direct)
        );
        assert_eq!(
            r.hop(&uri("http://internal.example/mcp")).ok(),
            Some(Hop::Direct)
        );
    }

    #[test]
    fn proxy_credentials_ride_forwarded_requests_only() {
        let r = router(
            Matcher::builder()
                .all("http://user:pw@proxy.example:3128".to_owned())
                .build(),
        );
        let forward = r.hop(&uri("http://mcp.example/mcp"));
        assert!(forward.as_ref().is_ok_and(|h| h.request_auth().is_some()));
        let tunnel = r.hop(&uri("https://login.example/token"));
        // A tunnel's credentials go on its CONNECT, not on the request inside it.
        assert!(matches!(&tunnel, Ok(Hop::Tunnel { auth: Some(_), .. })));
        assert!(tunnel.is_ok_and(|h| h.request_auth().is_none()));
        assert!(!format!("{forward:?}").contains("pw"));
    }

    #[test]
    fn an_https_or_socks_proxy_is_refused_for_the_destination_it_serves() {
        let r = router(
            Matcher::builder()
                .https("socks5://proxy.example:1080".to_owned())
                .build(),
        );
        assert!(matches!(
            r.hop(&uri("https://login.example/token")),
            Err(HttpError::InvalidProxy { .. })
        ));
        assert_eq!(
            r.hop(&uri("http://mcp.example/mcp")).ok(),
            Some(Hop::Direct)
        );
    }
}

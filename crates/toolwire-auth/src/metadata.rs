//! Protected resource metadata (RFC 9728) and authorization server metadata (RFC 8414, and
//! OpenID Connect discovery), with the checks made before anything is sent to a server they
//! name. Issuers and resources are kept as the exact strings received: `url` would turn
//! `http://h:1` into `http://h:1/`, and RFC 9207 compares `iss` as a string.

use serde::{Deserialize, Serialize};
use url::Url;

use crate::AuthError;

/// `/.well-known/oauth-protected-resource` (RFC 9728 §2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceMetadata {
    /// The resource these metadata are about.
    #[serde(default)]
    pub resource: Option<String>,
    /// The issuers that may authorize access to it.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// The scopes the resource knows.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// `/.well-known/oauth-authorization-server` (RFC 8414 §2), or an OpenID provider
/// configuration; only the members a client uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerMetadata {
    /// The issuer, as served.
    pub issuer: String,
    /// Where the user agent is sent.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Where tokens are requested.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// Dynamic client registration (RFC 7591).
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// Token revocation (RFC 7009).
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The scopes the server knows.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// `code`, …
    #[serde(default)]
    pub response_types_supported: Option<Vec<String>>,
    /// `authorization_code`, `refresh_token`, `client_credentials`, …
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    /// PKCE methods; must hold `S256`.
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// `none`, `client_secret_basic`, `client_secret_post`, `private_key_jwt`.
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// RFC 9207: authorization responses carry `iss`.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: Option<bool>,
    /// Client ID metadata documents are accepted as client ids.
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
    /// DPoP (RFC 9449) proof algorithms.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
}

impl ServerMetadata {
    /// The endpoints the 2025-03-26 revision defaults to when a server publishes no metadata:
    /// `/authorize`, `/token`, `/register` at the MCP server's origin (which is the issuer).
    pub fn defaults(origin: &str) -> Self {
        Self {
            issuer: origin.to_owned(),
            authorization_endpoint: Some(format!("{origin}/authorize")),
            token_endpoint: Some(format!("{origin}/token")),
            registration_endpoint: Some(format!("{origin}/register")),
            ..Self::default()
        }
    }

    /// Whether the server lists `value` in `list`, or lists nothing (absent lists say
    /// nothing either way).
    pub(crate) fn allows(list: Option<&[String]>, value: &str) -> bool {
        list.is_none_or(|l| l.iter().any(|v| v == value))
    }
}

/// The origin of a URL: `scheme://host[:port]`.
pub(crate) fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Checks that the protected resource metadata's `resource` is this server (RFC 9728 §3.3):
/// the same origin, and a path that is the server's path or a segment prefix of it.
pub fn check_resource(resource: Option<&str>, server: &str) -> Result<(), AuthError> {
    let mismatch = |resource: &str| AuthError::ResourceMismatch {
        resource: resource.to_owned(),
        server: server.to_owned(),
    };
    let Some(resource) = resource else {
        return Err(mismatch("(none)"));
    };
    let (Ok(r), Ok(s)) = (Url::parse(resource), Url::parse(server)) else {
        return Err(mismatch(resource));
    };
    if r.fragment().is_some() || origin(&r) != origin(&s) {
        return Err(mismatch(resource));
    }
    let segments = |u: &Url| -> Vec<String> {
        u.path()
            .split('/')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (rp, sp) = (segments(&r), segments(&s));
    if rp.len() > sp.len() || rp.iter().zip(&sp).any(|(a, b)| a != b) {
        return Err(mismatch(resource));
    }
    Ok(())
}

/// Whether metadata naming `found` may be used for the issuer `expected` it was fetched for
/// (RFC 8414 §3.3): the same string, or differing only in the `/` of an empty path.
pub fn issuer_matches(expected: &str, found: &str) -> bool {
    if expected == found {
        return true;
    }
    let bare = |s: &str| {
        s.strip_suffix('/')
            .filter(|b| Url::parse(b).is_ok_and(|u| u.path() == "/"))
            .map(str::to_owned)
    };
    bare(expected).as_deref() == Some(found) || bare(found).as_deref() == Some(expected)
}

/// Whether two URLs share an origin.
pub(crate) fn same_origin(a: &str, b: &str) -> bool {
    match (Url::parse(a), Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

/// Whether an endpoint may be used: https, or http to a loopback host.
pub(crate) fn secure_endpoint(url: &str) -> bool {
    let Ok(u) = Url::parse(url) else {
        return false;
    };
    match u.scheme() {
        "https" => true,
        "http" => match u.host() {
            Some(url::Host::Domain(d)) => {
                d.eq_ignore_ascii_case("localhost")
                    || d.to_ascii_lowercase().ends_with(".localhost")
            }
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// Whether `url` may be a client ID metadata document's URL (and so a client id): https, with
/// a path beyond `/`, no fragment.
pub(crate) fn metadata_document_url(url: &str) -> bool {
    Url::parse(url)
        .is_ok_and(|u| u.scheme() == "https" && u.path() != "/" && u.fragment().is_none())
}

/// Checks authorization server metadata before use: the authorization code flow with PKCE
/// S256 (when `code_flow`), and endpoints that are https or loopback.
pub(crate) fn check_server(meta: &ServerMetadata, code_flow: bool) -> Result<(), AuthError> {
    let unsafe_server = |reason: String| AuthError::UnsafeServer {
        issuer: meta.issuer.clone(),
        reason,
    };
    if code_flow {
        if !ServerMetadata::allows(meta.response_types_supported.as_deref(), "code") {
            return Err(unsafe_server(
                "it does not offer the `code` response type".into(),
            ));
        }
        match &meta.code_challenge_methods_supported {
            Some(methods) if methods.iter().any(|m| m == "S256") => {}
            Some(_) => return Err(unsafe_server("it does not support PKCE S256".into())),
            None => {
                return Err(unsafe_server(
                    "its metadata do not list PKCE methods (code_challenge_methods_supported)"
                        .into(),
                ));
            }
        }
        if meta.authorization_endpoint.is_none() {
            return Err(unsafe_server("it has no authorization endpoint".into()));
        }
    }
    if meta.token_endpoint.is_none() {
        return Err(unsafe_server("it has no token endpoint".into()));
    }
    check_endpoints(meta)
}

/// Checks that every endpoint a flow may send a secret to (authorization, token,
/// registration, revocation), and the issuer itself, is https or loopback: the same rule for
/// published metadata and the 2025-03-26 default endpoints.
pub(crate) fn check_endpoints(meta: &ServerMetadata) -> Result<(), AuthError> {
    for endpoint in [
        Some(&meta.issuer),
        meta.authorization_endpoint.as_ref(),
        meta.token_endpoint.as_ref(),
        meta.registration_endpoint.as_ref(),
        meta.revocation_endpoint.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        if !secure_endpoint(endpoint) {
            return Err(AuthError::UnsafeServer {
                issuer: meta.issuer.clone(),
                reason: format!("{endpoint} is neither https nor loopback"),
            });
        }
    }
    Ok(())
}

/// Whether `ip` is link-local or a cloud metadata service: a URL that a peer names (a
/// challenge's `resource_metadata`, an issuer) is never fetched there. Loopback stays
/// allowed (development servers live there).
pub(crate) fn forbidden_address(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            // 169.254.0.0/16 holds AWS, GCP and Azure metadata; 100.100.100.200 is
            // Alibaba's.
            v4.is_link_local() || v4.octets() == [100, 100, 100, 200]
        }
        std::net::IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden_address(std::net::IpAddr::V4(v4));
            }
            // fe80::/10, and AWS's IPv6 metadata address fd00:ec2::254.
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.segments() == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resource_must_be_this_server_or_a_segment_prefix_of_it() {
        let server = "http://localhost:3000/mcp";
        let table: &[(Option<&str>, bool)] = &[
            (Some("http://localhost:3000/mcp"), true),
            (Some("http://localhost:3000"), true),
            (Some("http://localhost:3000/"), true),
            (Some("http://localhost:3000/mcp/"), true),
            (Some("https://evil.example.com/mcp"), false),
            (Some("http://localhost:3001/mcp"), false),
            (Some("https://localhost:3000/mcp"), false),
            (Some("http://localhost:3000/mc"), false),
            (Some("http://localhost:3000/mcp/deeper"), false),
            (Some("http://localhost:3000/mcp#frag"), false),
            (Some("not a url"), false),
            (None, false),
        ];
        for (resource, ok) in table {
            assert_eq!(
                check_resource(*resource, server).is_ok(),
                *ok,
                "{resource:?}"
            );
        }
    }

    #[test]
    fn metadata_document_urls_are_https_with_a_path() {
        for (url, ok) in [
            ("https://conformance-test.local/client-metadata.json", true),
            ("https://app.example/", false),
            ("https://app.example", false),
            ("http://app.example/client.json", false),
            ("https://app.example/client.json#x", false),
        ] {
            assert_eq!(metadata_document_url(url), ok, "{url}");
        }
    }

    #[test]
    fn issuers_compare_as_strings_with_only_the_empty_path_slash_tolerated() {
        let table = [
            ("http://localhost:1", "http://localhost:1", true),
            ("http://localhost:1", "http://localhost:1/", true),
            ("http://localhost:1/", "http://localhost:1", true),
            (
                "http://localhost:1/tenant1",
                "http://localhost:1/tenant1",
                true,
            ),
            (
                "http://localhost:1/tenant1",
                "http://localhost:1/tenant1/",
                false,
            ),
            ("http://localhost:1", "https://attacker.example.com", false),
            ("http://localhost:1", "http://LOCALHOST:1", false),
        ];
        for (expected, found, ok) in table {
            assert_eq!(issuer_matches(expected, found), ok, "{expected} vs {found}");
        }
    }

    #[test]
    fn cleartext_issuers_and_revocation_endpoints_are_refused_unless_loopback() {
        let mut meta = ServerMetadata::defaults("http://as.example");
        assert!(matches!(
            check_endpoints(&meta),
            Err(AuthError::UnsafeServer { .. })
        ));
        meta = ServerMetadata::defaults("http://127.0.0.1:9000");
        assert!(check_endpoints(&meta).is_ok());
        meta.revocation_endpoint = Some("http://as.example/revoke".into());
        assert!(check_endpoints(&meta).is_err());
        meta = ServerMetadata::defaults("https://as.example");
        assert!(check_endpoints(&meta).is_ok());
    }

    #[test]
    fn link_local_and_metadata_addresses_are_forbidden_loopback_is_not() {
        for (ip, forbidden) in [
            ("169.254.169.254", true),
            ("169.254.0.1", true),
            ("100.100.100.200", true),
            ("fe80::1", true),
            ("fd00:ec2::254", true),
            ("::ffff:169.254.169.254", true),
            ("127.0.0.1", false),
            ("::1", false),
            ("10.0.0.1", false),
            ("93.184.216.34", false),
        ] {
            let ip: std::net::IpAddr = ip
                .parse()
                .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
            assert_eq!(forbidden_address(ip), forbidden, "{ip}");
        }
    }

    #[test]
    fn servers_without_pkce_s256_or_with_insecure_endpoints_are_refused() {
        let good = ServerMetadata {
            issuer: "https://as.example".into(),
            authorization_endpoint: Some("https://as.example/authorize".into()),
            token_endpoint: Some("https://as.example/token".into()),
            code_challenge_methods_supported: Some(vec!["S256".into()]),
            ..ServerMetadata::default()
        };
        assert!(check_server(&good, true).is_ok());
        let plain = ServerMetadata {
            code_challenge_methods_supported: Some(vec!["plain".into()]),
            ..good.clone()
        };
        assert!(check_server(&plain, true).is_err());
        let unlisted = ServerMetadata {
            code_challenge_methods_supported: None,
            ..good.clone()
        };
        assert!(check_server(&unlisted, true).is_err());
        assert!(
            check_server(&unlisted, false).is_ok(),
            "machine grants need no PKCE"
        );
        let http = ServerMetadata {
            token_endpoint: Some("http://as.example/token".into()),
            ..good.clone()
        };
        assert!(check_server(&http, true).is_err());
        for (url, ok) in [
            ("http://localhost:9/t", true),
            ("http://127.0.0.1:9/t", true),
            ("http://[::1]:9/t", true),
            ("http://app.localhost/t", true),
            ("http://10.0.0.1/t", false),
            ("https://x/t", true),
            ("ftp://x/t", false),
        ] {
            assert_eq!(secure_endpoint(url), ok, "{url}");
        }
    }
}

//! Where metadata are looked for, in order (RFC 9728 §3.1, RFC 8414 §3.1, OpenID Connect
//! Discovery §4, and the MCP authorization spec's priority rules). Pure: the flow fetches the
//! candidates one by one and stops at the first that answers.

use url::Url;

use crate::AuthError;
use crate::metadata::origin;

/// Protected resource metadata candidates for `server`: the challenge's `resource_metadata`
/// when given, then the path-aware well-known URL, then the root one (only for a server with
/// a path: the root is the path-aware URL otherwise).
pub fn resource_metadata_urls(
    server: &str,
    from_challenge: Option<&str>,
) -> Result<Vec<String>, AuthError> {
    let url = parse(server)?;
    let base = origin(&url);
    let path = url.path().trim_end_matches('/');
    let mut out = Vec::with_capacity(3);
    if let Some(u) = from_challenge {
        out.push(u.to_owned());
    }
    if !path.is_empty() {
        out.push(format!("{base}/.well-known/oauth-protected-resource{path}"));
    }
    out.push(format!("{base}/.well-known/oauth-protected-resource"));
    out.dedup();
    Ok(out)
}

/// Authorization server metadata candidates for `issuer`. Without a path: OAuth, then OpenID.
/// With one: OAuth with the path inserted, OpenID with it inserted, OpenID appended to it; the
/// root is never tried for an issuer with a path (it would be another issuer's).
pub fn server_metadata_urls(issuer: &str) -> Result<Vec<String>, AuthError> {
    let url = parse(issuer)?;
    let base = origin(&url);
    let path = url.path().trim_end_matches('/');
    Ok(if path.is_empty() {
        vec![
            format!("{base}/.well-known/oauth-authorization-server"),
            format!("{base}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{base}/.well-known/oauth-authorization-server{path}"),
            format!("{base}/.well-known/openid-configuration{path}"),
            format!("{base}{path}/.well-known/openid-configuration"),
        ]
    })
}

/// The MCP server's origin: its authorization server under the 2025-03-26 revision, when it
/// publishes no protected resource metadata.
pub(crate) fn legacy_issuer(server: &str) -> Result<String, AuthError> {
    Ok(origin(&parse(server)?))
}

fn parse(url: &str) -> Result<Url, AuthError> {
    let parsed = Url::parse(url)
        .map_err(|e| AuthError::discovery(url.to_owned(), "not a valid URL", Some(Box::new(e))))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(AuthError::discovery(
            url.to_owned(),
            "not an http(s) URL",
            None,
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_is_looked_for_at_the_header_url_then_path_aware_then_root() {
        let urls = resource_metadata_urls(
            "http://localhost:3000/mcp",
            Some("http://localhost:3000/custom/metadata/location.json"),
        )
        .expect("valid");
        assert_eq!(
            urls,
            [
                "http://localhost:3000/custom/metadata/location.json",
                "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
                "http://localhost:3000/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            resource_metadata_urls("https://h/", None).expect("valid"),
            ["https://h/.well-known/oauth-protected-resource"]
        );
        assert!(resource_metadata_urls("mailto:x@y", None).is_err());
    }

    #[test]
    fn server_metadata_for_a_path_issuer_never_falls_back_to_the_root() {
        assert_eq!(
            server_metadata_urls("http://localhost:4000/tenant1").expect("valid"),
            [
                "http://localhost:4000/.well-known/oauth-authorization-server/tenant1",
                "http://localhost:4000/.well-known/openid-configuration/tenant1",
                "http://localhost:4000/tenant1/.well-known/openid-configuration",
            ]
        );
        for issuer in ["http://localhost:4000", "http://localhost:4000/"] {
            assert_eq!(
                server_metadata_urls(issuer).expect("valid"),
                [
                    "http://localhost:4000/.well-known/oauth-authorization-server",
                    "http://localhost:4000/.well-known/openid-configuration",
                ]
            );
        }
        assert_eq!(
            legacy_issuer("http://localhost:9/a/mcp").expect("valid"),
            "http://localhost:9"
        );
    }
}

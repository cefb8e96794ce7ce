//! Which redirects a POST may follow: 307 and 308 keep the method and body, so they are
//! followed within the endpoint's origin; a redirect to another origin is refused (the bearer
//! token and session id must never reach it), and 301/302/303 are refused too (clients turn
//! them into a GET, which cannot carry a JSON-RPC message).

use http::{HeaderValue, StatusCode, Uri};

use crate::HttpError;

/// The most redirects one message follows.
pub(crate) const MAX_REDIRECTS: u32 = 5;

/// `scheme://host:port` of `uri`, the port explicit (the scheme's default when absent): what
/// two URLs must share to be the same origin. The path and query are left out, so the value
/// is safe to show in errors.
pub(crate) fn origin(uri: &Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("http").to_ascii_lowercase();
    let host = uri.host().unwrap_or("").to_ascii_lowercase();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    format!("{scheme}://{host}:{port}")
}

/// Where a redirect of a request to `from` leads, if it may be followed: the `Location`
/// resolved against `from` (RFC 3986: absolute, or relative to `from`'s path).
pub(crate) fn target(
    from: &Uri,
    status: StatusCode,
    location: Option<&HeaderValue>,
) -> Result<Uri, HttpError> {
    let refused = |reason: &'static str| HttpError::RedirectRefused { status, reason };
    if !matches!(status.as_u16(), 307 | 308) {
        return Err(refused(
            "only 307 and 308 keep the POST and its body; this one would turn it into a GET",
        ));
    }
    let location = location
        .and_then(|l| l.to_str().ok())
        .filter(|l| !l.trim().is_empty())
        .ok_or_else(|| refused("it has no usable Location header"))?;
    let base = url::Url::parse(&from.to_string())
        .map_err(|_| refused("the current URL cannot be a base"))?;
    let next = base
        .join(location)
        .map_err(|_| refused("its Location is not a URL"))?;
    let next: Uri = next
        .as_str()
        .parse()
        .map_err(|_| refused("its Location is not a URL"))?;
    if !matches!(next.scheme_str(), Some("http" | "https")) {
        return Err(refused("its Location is not http:// or https://"));
    }
    if origin(&next) != origin(from) {
        return Err(HttpError::CrossOriginRedirect {
            status,
            from: origin(from),
            to: origin(&next),
        });
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> Uri {
        s.parse().unwrap_or_default()
    }

    fn follow(from: &str, status: u16, location: &str) -> Result<String, String> {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
        let location = HeaderValue::from_str(location).ok();
        target(&uri(from), status, location.as_ref())
            .map(|u| u.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn same_origin_307_and_308_are_followed_and_resolved() {
        let from = "http://127.0.0.1:8080/mcp";
        for (status, location, expected) in [
            (307, "/v2/mcp", "http://127.0.0.1:8080/v2/mcp"),
            (308, "v2", "http://127.0.0.1:8080/v2"),
            (
                307,
                "http://127.0.0.1:8080/other",
                "http://127.0.0.1:8080/other",
            ),
            (
                308,
                "HTTP://127.0.0.1:8080/case",
                "http://127.0.0.1:8080/case",
            ),
            (307, "/mcp?x=1", "http://127.0.0.1:8080/mcp?x=1"),
        ] {
            assert_eq!(
                follow(from, status, location).as_deref(),
                Ok(expected),
                "{status} {location}"
            );
        }
        assert_eq!(
            follow(
                "https://example.com/mcp",
                308,
                "https://EXAMPLE.com:443/new"
            )
            .as_deref(),
            Ok("https://example.com/new"),
            "the default port and the host's case do not make another origin"
        );
    }

    #[test]
    fn another_origin_is_refused_naming_origins_only() {
        let from = "http://127.0.0.1:8080/mcp";
        for location in [
            "http://127.0.0.1:9090/mcp",
            "https://127.0.0.1:8080/mcp",
            "http://localhost:8080/mcp",
            "//evil.example/mcp?token=secret",
        ] {
            let err = follow(from, 307, location).unwrap_err();
            assert!(err.contains("another origin"), "{location}: {err}");
            assert!(!err.contains("secret") && !err.contains("/mcp"), "{err}");
        }
    }

    #[test]
    fn method_changing_or_broken_redirects_are_refused() {
        let from = "http://127.0.0.1:8080/mcp";
        for (status, location) in [
            (301, "/v2"),
            (302, "/v2"),
            (303, "/v2"),
            (307, ""),
            (308, "ftp://127.0.0.1:8080/mcp"),
        ] {
            let err = follow(from, status, location).unwrap_err();
            assert!(err.contains("redirect"), "{status} {location}: {err}");
        }
        let status = StatusCode::TEMPORARY_REDIRECT;
        assert!(target(&uri(from), status, None).is_err(), "no Location");
    }
}

//! Resource URIs under the gateway: each upstream's URI with the server's name put in front of
//! its authority (or its opaque part), so two servers' `file:///readme` stay apart and every
//! URI a client sees leads back to one server. The scheme is kept: a `ui://` view is still a
//! `ui://` view (MCP Apps), `https://` still names a web page.
//!
//! - `scheme://authority/path` ↔ `scheme://{server}__authority/path` (`file:///a` ↔
//!   `file://{server}__/a`);
//! - `scheme:opaque` ↔ `scheme:{server}__opaque` (`urn:x` ↔ `urn:{server}__x`).
//!
//! The server's name is percent-encoded where a URI would not take it as it is; server names
//! never contain the separator (the host refuses them), so the first separator ends the name.
//! A URI template (RFC 6570) maps the same way: its variables are after the name.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Everything but RFC 3986's unreserved characters is encoded in a server's name.
const NAME: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Where the part after the scheme begins, and whether it has an authority (`//`).
fn split(uri: &str) -> Option<(&str, &str, bool)> {
    let colon = uri.find(':')?;
    let scheme = &uri[..colon];
    let valid = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid {
        return None;
    }
    let rest = &uri[colon + 1..];
    Some(match rest.strip_prefix("//") {
        Some(after) => (scheme, after, true),
        None => (scheme, rest, false),
    })
}

/// `server`'s `uri` as the gateway names it; None for a string that is not a URI (no scheme).
pub(crate) fn outward(server: &str, separator: &str, uri: &str) -> Option<String> {
    let (scheme, rest, authority) = split(uri)?;
    let name = utf8_percent_encode(server, NAME);
    let slashes = if authority { "//" } else { "" };
    Some(format!("{scheme}:{slashes}{name}{separator}{rest}"))
}

/// The server and its own URI for a URI the gateway gave out; None when `uri` is not one.
pub(crate) fn inward(uri: &str, separator: &str) -> Option<(String, String)> {
    let (scheme, rest, authority) = split(uri)?;
    let (name, original) = rest.split_once(separator)?;
    let server = percent_decode_str(name).decode_utf8().ok()?.into_owned();
    let slashes = if authority { "//" } else { "" };
    Some((server, format!("{scheme}:{slashes}{original}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_of_every_shape_map_out_and_back() {
        for (server, uri, expected) in [
            (
                "ref",
                "ui://toolwire/clock.html",
                "ui://ref__toolwire/clock.html",
            ),
            ("ref", "file:///etc/readme", "file://ref__/etc/readme"),
            (
                "docs",
                "https://example.com/a?b=c#d",
                "https://docs__example.com/a?b=c#d",
            ),
            ("x", "urn:isbn:0451450523", "urn:x__isbn:0451450523"),
            (
                "ref",
                "toolwire://files/{path}",
                "toolwire://ref__files/{path}",
            ),
            ("my server", "mem://a", "mem://my%20server__a"),
            ("files.v2", "mem://a", "mem://files.v2__a"),
        ] {
            let out = outward(server, "__", uri).unwrap();
            assert_eq!(out, expected);
            assert_eq!(
                inward(&out, "__"),
                Some((server.to_owned(), uri.to_owned()))
            );
        }
    }

    #[test]
    fn what_is_not_a_gateway_uri_is_refused() {
        assert_eq!(outward("ref", "__", "no scheme here"), None);
        assert_eq!(outward("ref", "__", "1http://x"), None);
        assert_eq!(inward("ui://toolwire/clock.html", "__"), None);
        assert_eq!(inward("relative/path", "__"), None);
        // A name that is not UTF-8 once decoded.
        assert_eq!(inward("mem://%FF__a", "__"), None);
    }
}

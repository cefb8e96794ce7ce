//! The standard request headers: `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`.

use crate::value::{Header, HeaderName, HeaderValue, encode_value};

/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: HeaderName =
    HeaderName::from_static("MCP-Protocol-Version", "mcp-protocol-version");
/// `Mcp-Method`.
pub const MCP_METHOD: HeaderName = HeaderName::from_static("Mcp-Method", "mcp-method");
/// `Mcp-Name`.
pub const MCP_NAME: HeaderName = HeaderName::from_static("Mcp-Name", "mcp-name");

/// `traceparent` (W3C Trace Context).
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent", "traceparent");
/// `tracestate` (W3C Trace Context).
pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate", "tracestate");

/// The W3C Trace Context headers of a request whose `_meta` carries `trace`: `traceparent`,
/// and `tracestate` when it has one. HTTP proxies and tracing middleware read these, never a
/// body; the body's `_meta` keeps the same context for hops without headers (stdio). The
/// values are visible ASCII by [`toolwire_types::TraceContext`]'s own checks.
pub fn trace_headers(trace: &toolwire_types::TraceContext) -> Vec<Header> {
    let mut headers = Vec::with_capacity(2);
    for (name, value) in [
        (TRACEPARENT, Some(trace.traceparent())),
        (TRACESTATE, trace.tracestate()),
    ] {
        if let Some(value) = value.and_then(|v| http::HeaderValue::from_str(v).ok()) {
            headers.push(Header {
                name,
                value: HeaderValue::plain(value),
            });
        }
    }
    headers
}

/// `Authorization`.
pub const AUTHORIZATION: HeaderName = HeaderName::from_static("Authorization", "authorization");

/// `Authorization: <credentials>` for one request (a gateway calling an upstream on its
/// caller's behalf), marked sensitive: it never shows in `Debug` or `Display`, and HTTP/2 keeps
/// it out of its header tables. None for credentials a header cannot carry (control
/// characters, non-ASCII).
pub fn authorization_header(credentials: &str) -> Option<Header> {
    let value = http::HeaderValue::from_str(credentials).ok()?;
    Some(Header {
        name: AUTHORIZATION,
        value: HeaderValue::sensitive(value),
    })
}

/// Which params member `Mcp-Name` mirrors for a method: `name` for `tools/call` and
/// `prompts/get`, `uri` for `resources/read`, `taskId` for the tasks extension's `tasks/get`,
/// `tasks/update` and `tasks/cancel`; `None` for every other method.
pub fn name_source(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// `Mcp-Method: <method>`. Method names are case-sensitive and sent verbatim; one that is not
/// safe as a plain value is Base64-wrapped like any other value rather than sent broken.
pub fn method_header(method: &str) -> Header {
    let value = match KNOWN_METHODS.iter().find(|m| **m == method) {
        Some(known) => HeaderValue::from_static(known),
        None => encode_value(method),
    };
    Header {
        name: MCP_METHOD,
        value,
    }
}

/// Methods a client sends, so their header values need no allocation.
const KNOWN_METHODS: &[&str] = &[
    "tools/call",
    "tools/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "prompts/get",
    "prompts/list",
    "completion/complete",
    "server/discover",
    "subscriptions/listen",
    "initialize",
    "notifications/initialized",
    "notifications/cancelled",
    "ping",
];

/// `Mcp-Name: <value>`, Base64-wrapped when the value is not safe as plain ASCII (a URI with
/// non-ASCII characters, say).
pub fn name_header(value: &str) -> Header {
    Header {
        name: MCP_NAME,
        value: encode_value(value),
    }
}

/// `MCP-Protocol-Version: <version>`.
pub fn protocol_version_header(version: &toolwire_types::ProtocolVersion) -> Header {
    // The supported versions are a `'static` table, so their values need no allocation; any
    // other is non-empty visible ASCII by construction, so it is never wrapped.
    let value = match toolwire_types::ProtocolVersion::SUPPORTED
        .iter()
        .find(|v| *v == version)
    {
        Some(known) => HeaderValue::from_static(known.as_str()),
        None => encode_value(version.as_str()),
    };
    Header {
        name: PROTOCOL_VERSION,
        value,
    }
}

/// The standard headers of one request: `Mcp-Method`, and `Mcp-Name` when the method has a
/// name source and the caller passes its value.
pub fn standard_headers(method: &str, name: Option<&str>) -> Vec<Header> {
    let mut out = Vec::with_capacity(2);
    out.push(method_header(method));
    if let (Some(_), Some(name)) = (name_source(method), name) {
        out.push(name_header(name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_right_member() {
        let table = [
            ("tools/call", Some("name")),
            ("prompts/get", Some("name")),
            ("resources/read", Some("uri")),
            ("tasks/get", Some("taskId")),
            ("tasks/cancel", Some("taskId")),
            ("tools/list", None),
            ("TOOLS/CALL", None),
        ];
        for (method, expected) in table {
            assert_eq!(name_source(method), expected, "{method}");
        }
    }

    #[test]
    fn standard_headers_per_method() {
        let h = standard_headers("tools/call", Some("my-hyphenated-tool"));
        let pairs: Vec<_> = h
            .iter()
            .map(|h| (h.name.as_str(), h.value.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "my-hyphenated-tool")
            ]
        );
        let h = standard_headers("resources/read", Some("file:///résumé.txt"));
        assert_eq!(
            h[1].value.as_str(),
            "=?base64?ZmlsZTovLy9yw6lzdW3DqS50eHQ=?="
        );
        let h = standard_headers("tools/list", Some("ignored"));
        assert_eq!(h.len(), 1);
        let v = protocol_version_header(&toolwire_types::ProtocolVersion::V2026_07_28);
        assert_eq!(
            (v.name.as_str(), v.value.as_str()),
            ("MCP-Protocol-Version", "2026-07-28")
        );
    }
}

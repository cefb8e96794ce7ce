//! What can go wrong over HTTP.

use std::time::Duration;

use crate::auth::Challenge;
use crate::sse::SseError;

/// Why an HTTP exchange failed. The cause inside a
/// [`toolwire_transport::TransportError::Request`], and the error of
/// [`crate::HttpTransportBuilder::build`]. Never shows the bearer token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The URL is not an absolute `http://` or `https://` URL.
    #[error("`{url}` is not an absolute http:// or https:// URL")]
    InvalidUrl {
        /// The URL given, with its credentials and query values hidden.
        url: String,
    },
    /// A custom header is malformed or would clash with one the transport owns.
    #[error("header `{name}` cannot be set here: {reason}")]
    InvalidHeader {
        /// The header name given.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// TLS could not be set up.
    #[error("TLS set-up failed")]
    Tls(#[source] rustls::Error),
    /// [`crate::TlsRoots::Native`] was asked for and the platform store (or the bundle that
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR` names) holds no usable root certificate.
    #[error(
        "no usable root certificate in the platform store (or in SSL_CERT_FILE / SSL_CERT_DIR)"
    )]
    NoNativeRoots,
    /// No connection could be made within the connect timeout.
    #[error("could not connect within {0:?}")]
    ConnectTimeout(Duration),
    /// No connection could be made (refused, unreachable, the TLS handshake failed): nothing
    /// was sent, so any message may be sent again.
    #[error("no connection could be made")]
    Unreachable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The connection failed after it was made, before a response head came back (reset,
    /// closed): the request may have been sent, so a tool may have run.
    #[error("the connection failed before a response came (the request may have been sent)")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// No response head or body data within the read timeout.
    #[error("no data within the {0:?} read timeout")]
    ReadTimeout(Duration),
    /// The server answered with an error status (and no JSON-RPC error in the body). An
    /// error body in JSON (OAuth's `error` and `error_description`, a JSON-RPC error, a
    /// problem document's `detail`) is shown as its words.
    #[error(
        "HTTP {status}{}{}{}{}",
        proxy_note(*status),
        retry_note(*retry_after),
        challenge_summary(challenges),
        snippet_summary(snippet)
    )]
    Status {
        /// The status.
        status: http::StatusCode,
        /// How long the server asked the client to wait before trying again (`Retry-After`,
        /// with a 429 or a 503 mostly).
        retry_after: Option<Duration>,
        /// The start of the body, lossy UTF-8 (the words of a JSON error body).
        snippet: String,
        /// `WWW-Authenticate` challenges (401, 403).
        challenges: Vec<Challenge>,
        /// The `WWW-Authenticate` values as they came (printable ASCII only), for a gateway
        /// that relays them unchanged.
        www_authenticate: Vec<String>,
    },
    /// The server refused every `Accept` profile with 406.
    #[error("the server answered 406 Not Acceptable to every Accept profile")]
    NotAcceptable,
    /// A response body was larger than the limit.
    #[error("a response is larger than the {limit}-byte limit")]
    ResponseTooLarge {
        /// The limit.
        limit: usize,
    },
    /// A response head (status line and headers) was longer than the limit
    /// (`HttpTransportBuilder::max_response_head`).
    #[error("a response head is longer than the {limit}-byte limit")]
    ResponseHeadTooLarge {
        /// The limit.
        limit: usize,
    },
    /// An SSE stream broke a limit.
    #[error(transparent)]
    Sse(#[from] SseError),
    /// A response had a content type that is neither JSON nor SSE.
    #[error("unexpected content type {0:?} (want application/json or text/event-stream)")]
    UnexpectedContentType(String),
    /// The server accepted a request (202, or an empty body) without answering it.
    #[error("the server accepted the request without answering it (HTTP {0})")]
    NoAnswer(http::StatusCode),
    /// Reading the body failed mid-way.
    #[error("the response body broke")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The response stream ended before the answer, and it could not be resumed (2026-07-28
    /// never resumes: reissue the request with a new id). The server had accepted the
    /// request: a tool may have run.
    #[error("the response stream ended before the answer{} (the request had been accepted: it may have run)", if *.resumes > 0 { format!(", after {} resumption attempts", .resumes) } else { String::new() })]
    StreamEnded {
        /// How many resumptions were tried.
        resumes: u32,
    },
    /// The server no longer knows the legacy session (a 404 to a request that named it), or a
    /// new identity ended it: the request was not processed (one held back after that was not
    /// sent). The session above opens a new one and sends it again.
    #[error("the server no longer knows the MCP session (it expired or the identity changed)")]
    SessionExpired,
    /// The server redirected to another origin (scheme, host or port), which is never
    /// followed: the bearer token and session id must not reach it. Only the origins are
    /// shown; the URLs' paths and queries may hold secrets.
    #[error(
        "the server redirected (HTTP {status}) from {from} to another origin, {to}; not followed"
    )]
    CrossOriginRedirect {
        /// The redirect's status.
        status: http::StatusCode,
        /// The origin asked.
        from: String,
        /// The origin it pointed to.
        to: String,
    },
    /// A redirect that cannot be followed: 301/302/303 (they turn a POST into a GET), no
    /// usable `Location`, or more than five in a row.
    #[error("the server's redirect (HTTP {status}) was not followed: {reason}")]
    RedirectRefused {
        /// The redirect's status.
        status: http::StatusCode,
        /// Why.
        reason: &'static str,
    },
    /// The 2024-11-05 SSE stream named no message endpoint in time.
    #[error("the SSE stream named no message endpoint within {0:?}")]
    NoEndpoint(Duration),
    /// The 2024-11-05 SSE stream's `endpoint` event cannot be used.
    #[error("the SSE stream's endpoint cannot be used: {reason}")]
    BadEndpoint {
        /// Why.
        reason: &'static str,
    },
    /// A Unix socket that cannot be used: `https`, or a platform without them.
    #[error("the Unix socket {path} cannot be used: {reason}")]
    UnixSocket {
        /// The socket's path, as given.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// The proxy setting cannot be used (shown without its credentials).
    #[error("proxy {proxy} cannot be used: {reason}")]
    InvalidProxy {
        /// The proxy's origin.
        proxy: String,
        /// Why.
        reason: &'static str,
    },
    /// The authorizer could not supply or repair credentials (its error is the source: for
    /// OAuth, a `toolwire_auth::AuthError`).
    #[error("authorization failed")]
    Authorization(#[source] crate::AuthorizerError),
    /// The transport was closed.
    #[error("the transport is closed")]
    Closed,
}

impl HttpError {
    /// Whether the failure happened before anything of the request left (no connection was
    /// made): sending it again cannot run it twice.
    pub fn nothing_sent(&self) -> bool {
        matches!(self, Self::Unreachable(_) | Self::ConnectTimeout(_))
    }

    /// The HTTP failure among `error` and its causes, if there is one (a transport's failure
    /// is shared, `Arc<dyn Error>`: looked inside as well).
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a HttpError> {
        causes(error).find_map(|e| {
            e.downcast_ref::<HttpError>().or_else(|| {
                e.downcast_ref::<std::sync::Arc<dyn std::error::Error + Send + Sync>>()
                    .and_then(|shared| shared.downcast_ref::<HttpError>())
            })
        })
    }
}

/// What a proxy's failure status says about the request: it was passed on (or tried to be)
/// and its server failed or was cut off, so a tool may have run.
fn proxy_note(status: http::StatusCode) -> &'static str {
    match status {
        http::StatusCode::BAD_GATEWAY | http::StatusCode::GATEWAY_TIMEOUT => {
            " (a proxy's answer: the request may have run)"
        }
        _ => "",
    }
}

fn challenge_summary(challenges: &[Challenge]) -> String {
    match challenges.first() {
        None => String::new(),
        Some(c) => {
            let params: Vec<String> = c
                .params
                .iter()
                .map(|(n, v)| format!("{n}=\"{v}\""))
                .collect();
            format!(" ({} {})", c.scheme, params.join(", "))
        }
    }
}

/// The start of an error body as one line: an HTML page (what a web server answers for a
/// wrong path) as its text without tags, every run of whitespace one space, at most
/// [`SNIPPET_SHOWN`] characters. An error message is read on one line of a terminal or a log.
/// When the server said to try again.
fn retry_note(retry_after: Option<Duration>) -> String {
    retry_after.map_or_else(String::new, |wait| {
        format!(" (try again in {} s)", wait.as_secs_f64().ceil())
    })
}

/// The words of an error body in JSON: OAuth's `error_description` (after its `error` code),
/// a JSON-RPC error's `message`, a problem document's `detail` or `title`, or a `message`.
pub(crate) fn json_words(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let text = |v: &serde_json::Value, key: &str| {
        v.get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    if let Some(description) = text(&value, "error_description") {
        return Some(match text(&value, "error") {
            Some(code) => format!("{code}: {description}"),
            None => description,
        });
    }
    value
        .get("error")
        .and_then(|error| text(error, "message"))
        .or_else(|| text(&value, "detail"))
        .or_else(|| text(&value, "title"))
        .or_else(|| text(&value, "message"))
        .or_else(|| text(&value, "error"))
}

fn snippet_summary(snippet: &str) -> String {
    let trimmed = snippet.trim_start();
    let mut text = String::with_capacity(snippet.len().min(SNIPPET_SHOWN * 4));
    let mut in_tag = false;
    let html = trimmed.starts_with('<');
    for c in trimmed.chars() {
        match c {
            '<' if html => in_tag = true,
            '>' if html && in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if in_tag => {}
            c if c.is_whitespace() => text.push(' '),
            c => text.push(c),
        }
    }
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    let mut shown = String::new();
    for word in words {
        if shown.chars().count() + word.chars().count() + 1 > SNIPPET_SHOWN {
            shown.push_str(" …");
            break;
        }
        if !shown.is_empty() {
            shown.push(' ');
        }
        shown.push_str(word);
    }
    if shown.is_empty() {
        String::new()
    } else {
        format!(": {shown}")
    }
}

/// How many characters of an error body an error message shows.
const SNIPPET_SHOWN: usize = 200;

/// `error` and its causes, outermost first.
pub(crate) fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |e| e.source())
}

/// What a request hyper's client could not complete failed of: its response's head did not
/// fit the read buffer (`head_limit` bytes; hyper says so somewhere in the causes), no
/// connection could be made, or the connection failed once made.
pub(crate) fn request_failed(
    error: hyper_util::client::legacy::Error,
    head_limit: usize,
) -> HttpError {
    let head_too_large = causes(&error).any(|e| {
        e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_parse_too_large)
    });
    if head_too_large {
        HttpError::ResponseHeadTooLarge { limit: head_limit }
    } else if error.is_connect() {
        HttpError::Unreachable(Box::new(error))
    } else {
        HttpError::Connect(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::{HttpError, json_words, snippet_summary};

    fn status(code: u16) -> HttpError {
        HttpError::Status {
            status: http::StatusCode::from_u16(code).unwrap_or_default(),
            retry_after: None,
            snippet: String::new(),
            challenges: Vec::new(),
            www_authenticate: Vec::new(),
        }
    }

    #[test]
    fn a_proxys_bad_gateway_or_timeout_says_the_request_may_have_run_and_a_503_does_not() {
        assert_eq!(
            status(502).to_string(),
            "HTTP 502 Bad Gateway (a proxy's answer: the request may have run)"
        );
        assert!(status(504).to_string().contains("may have run"));
        assert_eq!(status(503).to_string(), "HTTP 503 Service Unavailable");
    }

    #[test]
    fn a_json_error_body_is_shown_as_its_words_and_retry_after_as_a_wait() {
        let oauth = br#"{"error":"rate_limited","error_description":"upstream `up`: calls are past their rate limit; try again in 3 s"}"#;
        let words = json_words(oauth).unwrap();
        assert_eq!(
            words,
            "rate_limited: upstream `up`: calls are past their rate limit; try again in 3 s"
        );
        let refused = HttpError::Status {
            status: http::StatusCode::TOO_MANY_REQUESTS,
            retry_after: Some(std::time::Duration::from_millis(2500)),
            snippet: words,
            challenges: Vec::new(),
            www_authenticate: Vec::new(),
        };
        assert_eq!(
            refused.to_string(),
            "HTTP 429 Too Many Requests (try again in 3 s): rate_limited: upstream `up`: calls are past their rate limit; try again in 3 s"
        );
        let rpc = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: no session"}}"#;
        assert_eq!(json_words(rpc).unwrap(), "Bad Request: no session");
        let problem = br#"{"type":"about:blank","title":"Forbidden","detail":"tenant suspended"}"#;
        assert_eq!(json_words(problem).unwrap(), "tenant suspended");
        assert_eq!(
            json_words(br#"{"error":"invalid_token"}"#).unwrap(),
            "invalid_token"
        );
        assert_eq!(json_words(b"<html>not json</html>"), None);
        assert_eq!(json_words(br#"{"ok":false}"#), None);
    }

    #[test]
    fn an_html_error_page_is_shown_as_one_line_of_its_text() {
        let page = "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <title>Error response</title>\n    </head>\n    <body>\n        <p>Error code: 404</p>\n        <p>Message: File not found.</p>\n";
        assert_eq!(
            snippet_summary(page),
            ": Error response Error code: 404 Message: File not found."
        );
        assert_eq!(snippet_summary("  \n "), "");
        assert_eq!(snippet_summary("no\nsuch\tpath"), ": no such path");
        // Text that is not HTML keeps its angle brackets.
        assert_eq!(snippet_summary("a < b"), ": a < b");
    }

    #[test]
    fn a_long_error_body_is_cut_at_a_word_and_marked() {
        let body = "word ".repeat(100);
        let shown = snippet_summary(&body);
        assert!(shown.ends_with(" …"), "{shown}");
        assert!(shown.chars().count() <= super::SNIPPET_SHOWN + 4, "{shown}");
    }
}

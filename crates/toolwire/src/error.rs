//! The one error type of the facade.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use toolwire_session::{RequestError, SessionError};
use toolwire_transport::{RequestFailure, TransportError};
use toolwire_types::{DecodeError, ErrorObject};

/// Everything that can go wrong, grouped by whose fault it is (as rustls groups its errors):
/// the server's answer ([`Error::Server`]), time ([`Error::Timeout`]), the connection
/// ([`ConnectionError`]), negotiation, the protocol ([`ProtocolError`]: the server broke it or
/// an answer failed a check), the caller's own request ([`UsageError`]), an `input_required`
/// round ([`InputError`]), authorization, a task, a closed client. A tool that fails is not an
/// error: its result has `is_error()` set. Cheap to clone (causes are shared).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with a JSON-RPC error (code, message, data as received).
    #[error("the server answered with error {}: {}", .0.code, .0.message)]
    Server(ErrorObject),
    /// No answer before the deadline (local; never a server error code).
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The connection failed or ended before the answer.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// Protocol negotiation failed.
    #[error("protocol negotiation failed")]
    Negotiation(#[source] Arc<SessionError>),
    /// The server broke the protocol, or its answer failed a check the client makes.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The request cannot be made as asked (the caller's side).
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The server asked for input (`input_required`) and it could not be given.
    #[error(transparent)]
    Input(#[from] InputError),
    /// Authorization failed: OAuth discovery, registration or a grant went wrong, the
    /// server refused new credentials, or it needs a login this client may not start. The
    /// source says which, with the authorization server's `error` and `error_description`
    /// when it sent them.
    #[error("authorization failed")]
    #[cfg(feature = "oauth")]
    Authorization(#[source] Arc<toolwire_auth::AuthError>),
    /// A task a `tools/call` became ended without a result: cancelled, or failed without a
    /// JSON-RPC error (a failure with one is [`Error::Server`]).
    #[error("the task {task_id} ended {status:?} without a result{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    TaskEnded {
        /// The task.
        task_id: String,
        /// How it ended.
        status: toolwire_types::TaskStatus,
        /// The server's `statusMessage`, if any.
        message: Option<String>,
    },
    /// The client was closed, or its connection ended.
    #[error("the client is closed")]
    Closed,
}

/// The connection failed or ended: the transport, a request that got no answer through it,
/// a server that never answered the handshake, or an end that came before the answer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The transport failed (the server process ended, a pipe broke).
    #[error("the transport failed")]
    Transport(#[source] Arc<TransportError>),
    /// This request got no answer: the server answered with an HTTP error status (and no
    /// JSON-RPC error), the connection failed, or the response stream broke. The client goes
    /// on; a request whose retry class allowed it was already retried. The failure carries the
    /// HTTP status, if any, and what the transport saw as its `source`.
    #[error(transparent)]
    Undelivered(RequestFailure),
    /// The server never answered the negotiation, and the transport can say what it saw of
    /// it: a child process that still runs, has written nothing to stdout, and what it last
    /// wrote to stderr (a server stuck installing itself, or waiting on the network).
    #[error("no answer to {method} in time: {peer}")]
    Unanswered {
        /// The negotiation request (`server/discover`, `initialize`), or `the handshake` for
        /// a call that waited for one.
        method: &'static str,
        /// What the transport saw of the server.
        peer: String,
    },
    /// The server ended before it completed a handshake: the connection was never
    /// established, so it is not started again. What the transport saw of the server (a
    /// child's exit status and its last stderr lines) when it can say, else what ended the
    /// connection (also the `source`).
    #[error("the server ended before completing the handshake{}", peer.as_ref().map(|p| format!(": {p}")).unwrap_or_default())]
    EndedBeforeHandshake {
        /// What the transport saw of the server.
        peer: Option<String>,
        /// What ended the connection, where the transport could not say more.
        #[source]
        cause: Option<Arc<TransportError>>,
    },
    /// The connection ended before this request's answer. If the request had been sent
    /// (`may_have_run`), the server may have acted on it: a tool with side effects may have
    /// run, so it is not sent again unless it is safe to repeat; if not, it never left the
    /// client. `cause` (also the `source`) is what ended the connection, when known.
    #[error("the connection ended before the answer ({})", if *may_have_run {
        "the request had been sent: it may have run"
    } else {
        "the request was never sent"
    })]
    Lost {
        /// Whether the request had reached the server.
        may_have_run: bool,
        /// What ended the connection.
        #[source]
        cause: Option<Arc<TransportError>>,
    },
}

/// The server broke the protocol, or its answer failed a check the client makes.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The server's answer could not be decoded.
    #[error("the server's answer could not be decoded")]
    Decode(#[source] Arc<DecodeError>),
    /// The server broke the protocol in a way the session caught (an endless or looping
    /// `tools/list`).
    #[error("the server broke the protocol")]
    Session(#[source] Arc<RequestError>),
    /// The tool's `structuredContent` does not match its `outputSchema`, or the schema cannot
    /// be used (it does not compile, or one value could cost more evaluations than validation
    /// safely spends). Switch validation off with `ClientBuilder::validate_structured_output`.
    #[error("structured output of `{tool}` is invalid: {message}")]
    StructuredOutput {
        /// The tool.
        tool: String,
        /// The validator's message, with the path into the value.
        message: String,
    },
    /// A skill's file failed a check against its manifest (size, SHA-256 digest) or its
    /// `SKILL.md` frontmatter differs from the listing's; the content was not returned.
    #[error("skill file {uri} failed verification: {reason}")]
    SkillVerification {
        /// The file.
        uri: String,
        /// What did not match.
        reason: String,
    },
    /// A tool's MCP Apps view broke the extension's rules (not a `ui://` URI, another MIME
    /// type than `text/html;profile=mcp-app`, no contents for its URI, a blob that is not
    /// base64 of UTF-8 HTML, or a `_meta.ui` of another shape); nothing was returned.
    #[error("the view {uri} of tool `{tool}` cannot be used: {reason}")]
    App {
        /// The tool.
        tool: String,
        /// The view's URI, as the tool named it.
        uri: String,
        /// What is wrong.
        reason: String,
    },
    /// The server's acknowledgement of the `2026-07-28` listen stream left out a resource
    /// subscription: it will send no updates of that resource (the subscription is dropped).
    #[error("the server did not accept the subscription to {uri}")]
    SubscriptionRefused {
        /// The resource.
        uri: String,
    },
}

/// The request cannot be made as asked: the caller's side, nothing was sent.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The call itself is invalid (a per-call tool definition that breaks the header rules, an
    /// argument that cannot be sent as its header, a capability the server did not declare).
    #[error("invalid call")]
    InvalidCall(#[source] Arc<RequestError>),
    /// Tool arguments must be a JSON object (or `null`).
    #[error("tool arguments must be a JSON object")]
    ArgumentsNotAnObject,
    /// Known tools were rejected; nothing was changed.
    #[error("known tools rejected")]
    KnownTools(#[source] Arc<toolwire_cache::KnownToolsError>),
    /// `connect` was called outside a tokio runtime.
    #[error("Toolwire needs a tokio runtime")]
    NoRuntime,
    /// A [`crate::blocking::Client`] method was called inside an async runtime (use the async
    /// client there).
    #[error("the blocking client cannot be used inside an async runtime")]
    BlockingInAsync,
}

/// The server asked for input (`input_required`, MRTR) and the call could not go on.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// No handler is configured to answer (`ClientBuilder::handler`), or a method other than
    /// `tools/call`, `prompts/get` or `resources/read` asked for it.
    #[error("the server asked for input (input_required) and this client has no handler for it")]
    NoHandler,
    /// The handler refused one of the server's input requests; the call was abandoned.
    #[error("an input request was refused: {}", .0.message)]
    Refused(ErrorObject),
    /// The server kept asking for input past the limit.
    #[error("the server asked for input more than {0} times")]
    TooManyRounds(usize),
    /// The server needs the user to complete URL elicitations first (`-32042`,
    /// `2025-11-25`): each names a URL to open out of band (an OAuth consent, a payment) and
    /// its `elicitationId`. Show the user the URL and its host, open it only with their
    /// consent, wait for `notifications/elicitation/complete` naming the id
    /// ([`crate::Client::notifications`]), then try the request again.
    #[error("the server needs {} URL elicitation(s) completed first: {}", .elicitations.len(), .error.message)]
    UrlElicitationRequired {
        /// The error as received.
        error: ErrorObject,
        /// The URL elicitations, each with its `url` and `elicitationId`.
        elicitations: Vec<toolwire_types::ElicitParams>,
    },
}

impl From<RequestError> for Error {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::Server { error } => Self::server(error),
            RequestError::Timeout(d) | RequestError::Unnegotiated(d) => Self::Timeout(d),
            RequestError::Decode(e) => ProtocolError::Decode(Arc::new(e)).into(),
            RequestError::Cancelled | RequestError::NotReady => Self::Closed,
            RequestError::Lost { may_have_run } => ConnectionError::Lost {
                may_have_run,
                cause: None,
            }
            .into(),
            RequestError::NotAcknowledged { uri } => {
                ProtocolError::SubscriptionRefused { uri }.into()
            }
            RequestError::Undelivered(failure) => match authorization(&failure) {
                Some(e) => e,
                None => ConnectionError::Undelivered(failure).into(),
            },
            e @ (RequestError::InvalidTool(_)
            | RequestError::Argument(_)
            | RequestError::Encode(_)
            | RequestError::NotAdvertised(_)
            | RequestError::ReservedMeta(_)
            | RequestError::CallCredentials) => UsageError::InvalidCall(Arc::new(e)).into(),
            e => ProtocolError::Session(Arc::new(e)).into(),
        }
    }
}

impl Error {
    /// A JSON-RPC error from the server: `-32042` with URL elicitations of the documented shape
    /// is [`InputError::UrlElicitationRequired`], any other [`Error::Server`].
    pub(crate) fn server(error: ErrorObject) -> Self {
        match error.url_elicitations() {
            Some(data) => InputError::UrlElicitationRequired {
                error,
                elicitations: data.elicitations,
            }
            .into(),
            None => Self::Server(error),
        }
    }

    /// How long the server asked the caller to wait before trying again, when it said so: an
    /// HTTP `Retry-After` (with a 429 or a 503, mostly), or a JSON-RPC error whose `data`
    /// carries `retryAfterSecs` (as Toolwire's gateway sends where there is no HTTP status,
    /// over stdio or an SSE stream).
    pub fn retry_after(&self) -> Option<Duration> {
        if let Self::Server(error) = self {
            return error
                .data
                .as_ref()
                .and_then(|data| data.get("retryAfterSecs"))
                .and_then(serde_json::Value::as_u64)
                .map(Duration::from_secs);
        }
        match toolwire_http::HttpError::find(self)? {
            toolwire_http::HttpError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A failed negotiation; one the server never answered says what the transport saw of it
    /// (`peer`: a child still running, silent on stdout, its last stderr lines).
    pub(crate) fn handshake(e: SessionError, peer: Option<String>) -> Self {
        match (e, peer) {
            (SessionError::Timeout { method }, Some(peer)) => {
                ConnectionError::Unanswered { method, peer }.into()
            }
            (e, _) => Self::negotiation(Arc::new(e)),
        }
    }

    /// A failed negotiation, or the authorization failure that caused it.
    pub(crate) fn negotiation(e: Arc<SessionError>) -> Self {
        match authorization(&*e) {
            Some(auth) => auth,
            None => Self::Negotiation(e),
        }
    }
}

/// [`Error::Authorization`] for the OAuth error somewhere in `e`'s chain of causes.
#[cfg(feature = "oauth")]
fn authorization(e: &(dyn std::error::Error + 'static)) -> Option<Error> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(auth) = e.downcast_ref::<toolwire_auth::AuthError>() {
            return Some(Error::Authorization(Arc::new(auth.clone())));
        }
        next = e.source();
    }
    None
}

/// Without OAuth no failure is an authorization's.
#[cfg(not(feature = "oauth"))]
fn authorization(_: &(dyn std::error::Error + 'static)) -> Option<Error> {
    None
}

/// An error and its causes on one line, outermost first: `error: cause: cause …`. Every error
/// of Toolwire's says only its own level in `Display` and keeps its cause in `source()`, so
/// each level appears once. For a log line or a terminal, where `Display` alone would drop the
/// causes.
///
/// ```
/// # use toolwire::ErrorChain;
/// let e = std::io::Error::other("connection reset");
/// assert_eq!(ErrorChain(&e).to_string(), "connection reset");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'a));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_elicitation_required_answer_is_an_input_error_with_its_urls() {
        let data = serde_json::json!({"elicitations": [{"mode": "url", "elicitationId": "e1",
            "url": "https://example.com/consent", "message": "Link your account"}]});
        let error = ErrorObject {
            data: Some(data),
            ..ErrorObject::new(-32042, "Link your account first")
        };
        let e = Error::from(RequestError::Server {
            error: error.clone(),
        });
        match &e {
            Error::Input(InputError::UrlElicitationRequired {
                error: kept,
                elicitations,
            }) => {
                assert_eq!(kept, &error);
                assert_eq!(
                    elicitations[0].url.as_deref(),
                    Some("https://example.com/consent")
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e.to_string(),
            "the server needs 1 URL elicitation(s) completed first: Link your account first"
        );
        // Without data of that shape it stays the server's error as received.
        let bare = ErrorObject::new(-32042, "no data");
        assert!(matches!(
            Error::from(RequestError::Server { error: bare }),
            Error::Server(_)
        ));
    }

    #[derive(Debug)]
    struct Wrap(&'static str, std::io::Error);

    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
    }

    #[test]
    fn the_chain_is_one_line_outermost_first() {
        let e = Wrap("call failed", std::io::Error::other("connection reset"));
        assert_eq!(ErrorChain(&e).to_string(), "call failed: connection reset");
        let e = Error::Timeout(Duration::from_secs(2));
        assert_eq!(ErrorChain(&e).to_string(), e.to_string());
    }

    #[test]
    fn retry_after_reads_the_gateways_json_rpc_data_and_the_http_header() {
        let limited = ErrorObject {
            data: Some(serde_json::json!({"reason": "rate_limited", "retryAfterSecs": 4})),
            ..ErrorObject::new(-32603, "past the rate limit")
        };
        assert_eq!(
            Error::Server(limited).retry_after(),
            Some(Duration::from_secs(4))
        );
        let plain = Error::Server(ErrorObject::new(-32603, "failed"));
        assert_eq!(plain.retry_after(), None);
        let http = Error::from(ConnectionError::Undelivered(RequestFailure {
            id: toolwire_types::RequestId::Number(3),
            status: Some(503),
            body: Default::default(),
            cause: Arc::new(toolwire_http::HttpError::Status {
                status: http::StatusCode::SERVICE_UNAVAILABLE,
                retry_after: Some(Duration::from_secs(9)),
                snippet: String::new(),
                challenges: Vec::new(),
                www_authenticate: Vec::new(),
            }),
            session_gone: false,
        }));
        assert_eq!(http.retry_after(), Some(Duration::from_secs(9)));
        assert_eq!(Error::Timeout(Duration::from_secs(1)).retry_after(), None);
    }

    /// Each level of a real failure says its own part once: the facade's error, the request
    /// that got no answer, the HTTP transport's error, the socket's.
    #[test]
    fn every_level_of_an_undelivered_call_appears_once() {
        let io = std::io::Error::other("connection refused");
        let e = Error::from(ConnectionError::Undelivered(RequestFailure {
            id: toolwire_types::RequestId::Number(3),
            status: None,
            body: Default::default(),
            cause: Arc::new(toolwire_http::HttpError::Connect(Box::new(io))),
            session_gone: false,
        }));
        assert_eq!(
            ErrorChain(&e).to_string(),
            "request 3 got no answer: the connection failed before a response came (the request may have been sent): connection refused"
        );
    }
}

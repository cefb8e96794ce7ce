//! Why negotiation failed ([`SessionError`]) and why one operation failed ([`RequestError`]):
//! each `Display` says its own level, the cause is the `source`.

use std::time::Duration;

use toolwire_headers::{ArgumentError, InvalidToolHeaders};
use toolwire_types::{Capability, DecodeError, EncodeError, ErrorObject, ProtocolVersion};
use toolwire_wire::RequestFailure;

/// Why negotiation failed; the session cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The server answered with an error that rules out every era this session may use.
    #[error("the server refused {method}: {} ({})", error.message, error.code)]
    Refused {
        /// The negotiation request.
        method: &'static str,
        /// Its error.
        error: ErrorObject,
    },
    /// The server picked a version this client does not speak.
    #[error("the server chose protocol version {version}, which this client does not speak")]
    UnsupportedVersion {
        /// What it chose.
        version: ProtocolVersion,
    },
    /// The negotiation request got no answer from the transport (a connection that failed,
    /// an HTTP status that decides nothing about the era, such as 401 or 503).
    #[error("{method} got no answer")]
    Unreachable {
        /// The negotiation request.
        method: &'static str,
        /// What the transport reported (the HTTP status, if any, is in it).
        #[source]
        failure: RequestFailure,
    },
    /// The negotiation request got no answer in time.
    #[error("no answer to {method} in time")]
    Timeout {
        /// The negotiation request.
        method: &'static str,
    },
    /// The server's answer could not be decoded.
    #[error("the server's answer to {method} is malformed")]
    Malformed {
        /// The negotiation request.
        method: &'static str,
        /// What is wrong.
        #[source]
        cause: DecodeError,
    },
    /// The negotiation request could not be encoded (the configured client info or
    /// capabilities do not serialise).
    #[error("{method} could not be encoded")]
    Encode {
        /// The negotiation request.
        method: &'static str,
        /// Why.
        #[source]
        cause: EncodeError,
    },
}

/// Why one operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered {}: {}", error.code, error.message)]
    Server {
        /// The error as received.
        error: ErrorObject,
    },
    /// No answer before the deadline (raised here, not by the server).
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// Negotiation failed, so nothing asked of this session will be sent.
    #[error("the session is not ready")]
    NotReady,
    /// Held until the session was ready ([`Session::is_ready`](crate::Session::is_ready)),
    /// and negotiation did not end within the caller's wait.
    #[error("the session was not ready within {0:?}")]
    Unnegotiated(Duration),
    /// The answer could not be decoded.
    #[error("the server's answer could not be decoded")]
    Decode(#[source] DecodeError),
    /// The request could not be encoded.
    #[error("the request could not be encoded")]
    Encode(#[source] EncodeError),
    /// The per-call tool definition or header map breaks the `x-mcp-header` rules.
    #[error("the tool definition given for this call is invalid")]
    InvalidTool(#[source] InvalidToolHeaders),
    /// An argument cannot become its `Mcp-Param-*` header.
    #[error("an argument cannot be sent as its header")]
    Argument(#[source] ArgumentError),
    /// A `tools/list` walk exceeded the page cap.
    #[error("tools/list went on for more than {0} pages")]
    TooManyPages(usize),
    /// A `tools/list` walk got a cursor it had already followed.
    #[error("tools/list repeated the cursor {0:?}")]
    RepeatedCursor(String),
    /// The caller cancelled the operation.
    #[error("cancelled")]
    Cancelled,
    /// The connection died under it and it does not go again
    /// ([`Session::lose_connection`](crate::Session::lose_connection)): the server may have
    /// acted on it (`may_have_run`, it read it), or there is no next connection.
    #[error("the connection to the server was lost")]
    Lost {
        /// Whether the dead server read it.
        may_have_run: bool,
    },
    /// The transport could not deliver the request or its answer (see
    /// [`Session::handle_undelivered`](crate::Session::handle_undelivered)).
    #[error(transparent)]
    Undelivered(RequestFailure),
    /// The server did not declare the capability this request needs (legacy era: both sides
    /// may use only what was negotiated).
    #[error("the server did not declare the `{0}` capability")]
    NotAdvertised(Capability),
    /// Credentials for one call ([`CallOptions::authorization`](crate::CallOptions::authorization))
    /// over a transport that carries no headers (stdio): the call would have gone with
    /// another identity, so it is not sent.
    #[error("credentials for one call need a transport that carries headers (HTTP)")]
    CallCredentials,
    /// The caller's `_meta` sets a key the session owns (`io.modelcontextprotocol/…` and other
    /// reserved prefixes, `progressToken`).
    #[error("`_meta` key `{0}` is the session's to set")]
    ReservedMeta(String),
    /// The server's acknowledgement of the listen stream (`2026-07-28`) left out a resource
    /// subscription the caller asked for: it will send no updates of that resource.
    #[error("the server did not acknowledge the subscription to {uri}")]
    NotAcknowledged {
        /// The resource.
        uri: String,
    },
}

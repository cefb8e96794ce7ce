//! What a session tells its driver ([`Event`]), about operations named by [`OpId`].

use serde_json::value::RawValue;
use toolwire_cache::ListOutcome;
use toolwire_types::{DecodeError, Implementation, ProtocolVersion, ServerCapabilities};

use crate::{RequestError, SessionError};

/// What negotiation settled on. It can be saved (serde) and given to a later session as its
/// [`SessionConfig::prior`](crate::SessionConfig::prior), which then skips the probe.
// tidy: not an MCP shape
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Negotiated {
    /// The version both sides speak.
    pub version: ProtocolVersion,
    /// The server's implementation info, if it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Implementation>,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's instructions for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// The `_meta` key set to `true` on a `tools/call` result that the settle barrier released
/// on its timeout, or that a connection's end released: the tool list may not show the changes
/// the result announced yet.
pub const TOOLS_STALE_META: &str = "dev.toolwire/toolsStale";

/// Identifies one operation the caller started (a request, or a whole `tools/list` walk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub(crate) u64);

impl OpId {
    /// An id for unit tests of the sub-machines.
    #[cfg(test)]
    pub(crate) fn for_test(n: u64) -> Self {
        Self(n)
    }
}

/// Something the caller should know.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// Negotiation finished; requests may be sent.
    Ready(Box<Negotiated>),
    /// Negotiation failed; the session cannot be used.
    Failed(SessionError),
    /// A request finished: its raw result (decode it with the method's
    /// [`RequestMethod::decode_result`](toolwire_types::RequestMethod::decode_result)) or why it failed.
    Completed {
        /// The operation.
        op: OpId,
        /// The raw result or the error.
        result: Result<Box<RawValue>, RequestError>,
    },
    /// A `tools/list` walk finished and its listing is in the cache (or why not).
    ToolsListed {
        /// The operation.
        op: OpId,
        /// What the cache did with the listing.
        result: Result<ListOutcome, RequestError>,
    },
    /// A progress notification for an operation that asked for progress.
    Progress {
        /// The operation.
        op: OpId,
        /// The notification's params.
        params: toolwire_types::ProgressParams,
    },
    /// A notification from the server that the session does not handle itself (a
    /// `tools/list_changed` is handled, marking the cache stale, and passed up too).
    Notification(toolwire_types::Notification),
    /// A log message (`notifications/message`) that came on the response stream of a
    /// `tools/call`: about that call (a 2026-07-28 server logs on the stream of the request
    /// that asked for a level).
    CallLog {
        /// The call's operation.
        op: OpId,
        /// The notification.
        notification: toolwire_types::Notification,
    },
    /// A request from the server for the caller to answer ([`Session::respond`](crate::Session::respond)
    /// with `id`), decoded; the session answered the others itself (see
    /// [`SessionConfig::max_server_requests`](crate::SessionConfig::max_server_requests)).
    ServerRequest {
        /// The request's id, for the answer.
        id: toolwire_types::RequestId,
        /// The request.
        request: toolwire_types::ServerRequest,
        /// The call whose caller answers it ([`CallOptions::answers_requests`](crate::CallOptions::answers_requests)):
        /// the one whose response stream carried it (a server asks about a call on that
        /// call's stream), or, when the transport cannot say (stdio, the standalone stream),
        /// the only such call in flight; `None`: the client's own handler answers.
        related: Option<OpId>,
    },
    /// Bytes from the server that are not JSON-RPC.
    Malformed(DecodeError),
    /// The session refetched the tool list by itself (after a list change, for the settle
    /// barrier, or to recover from a header mismatch), and what the cache did with it.
    ToolsRefreshed(Result<ListOutcome, RequestError>),
    /// The session stopped waiting for request `id` on its own (a listen stream replaced by
    /// one with other subscriptions): a transport that holds a stream for it closes it
    /// (`Transport::cancel`). Any `notifications/cancelled` it needs is already queued.
    CloseStream(toolwire_types::RequestId),
    /// The server no longer knows the legacy session (over HTTP, a 404 to a request that
    /// named its `Mcp-Session-Id`; see [`RequestFailure::session_gone`](toolwire_wire::RequestFailure::session_gone)).
    /// The session is spent: open a new one over the same transport
    /// ([`Session::successor`](crate::Session::successor)), after ending this one with
    /// [`Session::interrupt`](crate::Session::interrupt), whose requests that found the session
    /// gone count as never read.
    SessionGone,
    /// The `2026-07-28` version adopted from [`SessionConfig::prior`](crate::SessionConfig::prior)
    /// was refused (`-32022`, or the HTTP statuses of a legacy server): the session probes
    /// again, and [`Event::Ready`] (or [`Event::Failed`]) follows. Until then requests are
    /// held ([`Session::is_ready`](crate::Session::is_ready)).
    Renegotiating,
}

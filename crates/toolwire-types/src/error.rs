//! JSON-RPC error objects, MCP error codes, and the errors of decoding and encoding.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::{JsonObject, nullable};
use crate::{ClientCapabilities, ElicitParams, RequestId};

/// JSON-RPC and MCP error codes, by name.
pub mod code {
    /// Invalid JSON was received (HTTP 400 in the modern era).
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist, or its capability was not advertised (HTTP 404, modern).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid parameters: unknown tool, bad arguments, bad cursor, missing `_meta` fields,
    /// and (modern) resource not found.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Resource not found, up to `2025-11-25` (clients should still accept it).
    pub const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;
    /// `HeaderMismatch` as SEP-2243 first numbered it, before PR #2907 renumbered it.
    pub const HEADER_MISMATCH_PRE_RENAME: i64 = -32001;
    /// `HeaderMismatch`: an HTTP header disagrees with the body or is missing (`2026-07-28`).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// `MissingRequiredClientCapability`, with `data.requiredCapabilities` (`2026-07-28`).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// `UnsupportedProtocolVersion`, with `data.supported` and `data.requested` (`2026-07-28`).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// URL elicitation required (`2025-11-25` only).
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
}

/// The `error` member of a JSON-RPC error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code (see [`code`]).
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Additional information; `null` is kept apart from absent.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and a message and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Whether this is `HeaderMismatch`, under its current code or the pre-rename one.
    pub fn is_header_mismatch(&self) -> bool {
        self.code == code::HEADER_MISMATCH || self.code == code::HEADER_MISMATCH_PRE_RENAME
    }

    /// Whether the code is one that only a modern (`2026-07-28`+) server sends, which makes it
    /// era evidence during negotiation (`-32020`, `-32021`, `-32022`).
    pub fn is_modern_era_evidence(&self) -> bool {
        matches!(
            self.code,
            code::HEADER_MISMATCH
                | code::MISSING_REQUIRED_CLIENT_CAPABILITY
                | code::UNSUPPORTED_PROTOCOL_VERSION
        )
    }

    /// The typed `data` of an `UnsupportedProtocolVersion` error, if this is one and its data
    /// has the documented shape.
    pub fn unsupported_version(&self) -> Option<UnsupportedProtocolVersionData> {
        if self.code != code::UNSUPPORTED_PROTOCOL_VERSION {
            return None;
        }
        serde_json::from_value(self.data.clone()?).ok()
    }

    /// The typed `data` of a `URLElicitationRequired` error (`-32042`, `2025-11-25`) if this
    /// is one and its data has the documented shape: the URL elicitations the user must complete
    /// before the request can succeed. Entries that are not URL mode are dropped; none left is
    /// `None`.
    pub fn url_elicitations(&self) -> Option<UrlElicitationRequiredData> {
        if self.code != code::URL_ELICITATION_REQUIRED {
            return None;
        }
        let mut data: UrlElicitationRequiredData =
            serde_json::from_value(self.data.clone()?).ok()?;
        data.elicitations
            .retain(|e| e.is_url() && e.url.is_some() && e.elicitation_id.is_some());
        (!data.elicitations.is_empty()).then_some(data)
    }

    /// The typed `data` of a `MissingRequiredClientCapability` error, if this is one and its
    /// data has the documented shape.
    pub fn missing_capability(&self) -> Option<MissingClientCapabilityData> {
        if self.code != code::MISSING_REQUIRED_CLIENT_CAPABILITY {
            return None;
        }
        serde_json::from_value(self.data.clone()?).ok()
    }
}

/// `data` of `-32022 UnsupportedProtocolVersion`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnsupportedProtocolVersionData {
    /// The versions the server supports.
    pub supported: Vec<String>,
    /// The version the client asked for.
    pub requested: String,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `data` of `-32042 URLElicitationRequired` (`2025-11-25`): URL-mode elicitations, each with
/// its `url` and `elicitationId`, that the user must complete (the server says so with
/// `notifications/elicitation/complete`) before the request is tried again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UrlElicitationRequiredData {
    /// The elicitations, in the server's order.
    pub elicitations: Vec<ElicitParams>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `data` of `-32021 MissingRequiredClientCapability`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingClientCapabilityData {
    /// The capabilities the server needs the client to declare.
    pub required_capabilities: ClientCapabilities,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Why bytes from the peer could not be decoded into a message or a typed payload.
///
/// Every variant names what is wrong; the serde cause, where there is one, is the `source`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes are not JSON, or not the JSON shape of a JSON-RPC message.
    #[error("not a JSON-RPC message")]
    Json(#[source] serde_json::Error),
    /// The top-level value is not an object (or, where allowed, an array).
    #[error("a JSON-RPC message must be a JSON object")]
    NotAnObject,
    /// `jsonrpc` is missing or is not exactly `"2.0"`.
    #[error("the `jsonrpc` member must be \"2.0\", found {found}")]
    WrongJsonRpcVersion {
        /// What the member held, as JSON text (`absent` when missing).
        found: String,
    },
    /// A request has `"id": null`, which MCP forbids.
    #[error("request `{method}` has a null id")]
    NullRequestId {
        /// The request's method.
        method: String,
    },
    /// The `id` member is neither a string nor an integer.
    #[error("invalid id {found}: must be a string or an integer")]
    InvalidId {
        /// The id as JSON text.
        found: String,
    },
    /// A response carries both `result` and `error`.
    #[error("response {id} carries both `result` and `error`")]
    BothResultAndError {
        /// The response id, as JSON text.
        id: String,
    },
    /// An object with no `method` carries neither `result` nor `error`.
    #[error("message has no `method`, `result` or `error`")]
    NeitherResultNorError,
    /// A success response has no id (or a null one).
    #[error("a result response must carry a non-null id")]
    ResultWithoutId,
    /// The `error` member is not a JSON-RPC error object.
    #[error("malformed `error` object")]
    MalformedError(#[source] serde_json::Error),
    /// A batch (JSON array) held no messages.
    #[error("empty JSON-RPC batch")]
    EmptyBatch,
    /// The params of a known method do not have the shape that method requires.
    #[error("invalid params for `{method}`")]
    InvalidParams {
        /// The method.
        method: String,
        /// The serde error, which names the field.
        #[source]
        source: serde_json::Error,
    },
    /// A result does not have the shape its method's result requires.
    #[error("invalid result for `{method}`")]
    InvalidResult {
        /// The method the result answers.
        method: String,
        /// The serde error, which names the field.
        #[source]
        source: serde_json::Error,
    },
    /// A result carries a `resultType` this crate does not know; the spec says such a result
    /// MUST be considered invalid.
    #[error("result for `{method}` has unknown resultType {found:?}")]
    UnknownResultType {
        /// The method the result answers.
        method: String,
        /// The `resultType` received.
        found: String,
    },
    /// An `input_required` result for a method that cannot return one.
    #[error("`{method}` cannot answer with resultType \"input_required\"")]
    UnexpectedInputRequired {
        /// The method the result answers.
        method: String,
    },
    /// A task (`resultType: "task"`) where none can be: a method other than `tools/call`,
    /// or a caller that does not follow tasks.
    #[error("`{method}` answered with a task (resultType \"task\") where none is expected")]
    UnexpectedTask {
        /// The method the result answers.
        method: String,
    },
}

impl DecodeError {
    /// The JSON-RPC error code a server would answer this with.
    pub fn jsonrpc_code(&self) -> i64 {
        match self {
            Self::Json(e) if e.is_syntax() || e.is_eof() => code::PARSE_ERROR,
            Self::InvalidParams { .. } => code::INVALID_PARAMS,
            _ => code::INVALID_REQUEST,
        }
    }
}

/// A value could not be serialised (only possible for maps with non-string keys or a failing
/// custom `Serialize`).
#[derive(Debug, thiserror::Error)]
#[error("could not encode a JSON-RPC message")]
pub struct EncodeError(#[from] pub serde_json::Error);

/// Describes a request id for an error message.
pub(crate) fn describe_id(id: Option<&RequestId>) -> String {
    id.map_or_else(|| "without id".to_owned(), ToString::to_string)
}

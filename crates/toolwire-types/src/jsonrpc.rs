//! The JSON-RPC 2.0 envelope, decoded in two phases.
//!
//! Phase one ([`Message::decode`]) reads only the envelope: `jsonrpc`, `id`, `method`, and the
//! raw `params`, `result` or `error`. Phase two decodes the raw payload into the typed params or
//! result of the method ([`Request::params`], [`crate::decode_result`], the dispatch enums in
//! [`crate::ClientRequest`] and friends). A malformed envelope and a malformed payload are
//! different errors, and each names what is wrong.

use std::borrow::Cow;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::describe_id;
use crate::{DecodeError, EncodeError, ErrorObject, RequestId};

/// The only JSON-RPC version: `"2.0"`.
pub const JSONRPC_VERSION: &str = "2.0";

/// One JSON-RPC message.
#[derive(Debug, Clone)]
pub enum Message {
    /// A request: expects a response with the same id.
    Request(Request),
    /// A notification: no id, no response.
    Notification(Notification),
    /// A response to a request.
    Response(Response),
}

/// A JSON-RPC request with its params still raw.
#[derive(Debug, Clone)]
pub struct Request {
    /// The id, never null.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// The params, undecoded.
    pub params: Option<Box<RawValue>>,
}

/// A JSON-RPC notification with its params still raw.
#[derive(Debug, Clone)]
pub struct Notification {
    /// The method.
    pub method: String,
    /// The params, undecoded.
    pub params: Option<Box<RawValue>>,
}

/// A JSON-RPC response with its result still raw.
#[derive(Debug, Clone)]
pub struct Response {
    /// The id of the request it answers; `None` only for an error about a request whose id
    /// could not be read.
    pub id: Option<RequestId>,
    /// The raw result, or the error.
    pub payload: Result<Box<RawValue>, ErrorObject>,
}

/// What kind of JSON-RPC message an outgoing message is, known to whoever encoded it, so that
/// transports can route it without decoding it again (HTTP awaits an answer only for requests).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageKind {
    /// A request, answered by a response with this id.
    Request {
        /// Its id.
        id: RequestId,
        /// Its method.
        method: &'static str,
    },
    /// A notification: no answer.
    Notification {
        /// Its method.
        method: &'static str,
    },
    /// A response to a request from the other side.
    Response,
}

impl MessageKind {
    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&'static str> {
        match self {
            Self::Request { method, .. } | Self::Notification { method } => Some(method),
            Self::Response => None,
        }
    }

    /// The id, for requests.
    pub fn request_id(&self) -> Option<&RequestId> {
        match self {
            Self::Request { id, .. } => Some(id),
            _ => None,
        }
    }
}

/// A decoded frame: one message, or a batch (allowed by `2025-03-26` only). Each element of a
/// batch decodes on its own, so one bad element does not lose the others.
#[derive(Debug)]
pub enum Frame {
    /// A single message.
    Single(Message),
    /// A JSON array of messages.
    Batch(Vec<Result<Message, DecodeError>>),
}

pub(crate) fn decode_params<T: DeserializeOwned>(
    method: &str,
    params: Option<&RawValue>,
) -> Result<T, DecodeError> {
    // Absent params decode like `{}`, so methods whose params are all optional accept both.
    let text = params.map_or("{}", RawValue::get);
    serde_json::from_str(text).map_err(|source| DecodeError::InvalidParams {
        method: method.to_owned(),
        source,
    })
}

impl Request {
    /// Decodes the params as `T`; absent params decode as `{}`.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        decode_params(&self.method, self.params.as_deref())
    }
}

impl Notification {
    /// Decodes the params as `T`; absent params decode as `{}`.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        decode_params(&self.method, self.params.as_deref())
    }

    /// The `io.modelcontextprotocol/subscriptionId` in its params' `_meta`: which listen
    /// stream (`2026-07-28`) it belongs to, if it says.
    pub fn subscription_id(&self) -> Option<RequestId> {
        #[derive(Deserialize)]
        struct WithMeta {
            #[serde(rename = "_meta", default)]
            meta: Option<crate::Meta>,
        }
        let params = self.params.as_deref()?;
        serde_json::from_str::<WithMeta>(params.get())
            .ok()?
            .meta?
            .subscription_id
    }
}

fn raw_present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

fn raw_present_borrowed<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Phase one: the envelope. Members whose `null` matters are captured raw so that `"id": null`
/// is told apart from a missing id. The members read here and dropped (`jsonrpc`, `id`,
/// `error`) are borrowed from the input; only what a [`Message`] keeps is copied.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "raw_present_borrowed")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "raw_present_borrowed")]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "raw_present")]
    result: Option<Box<RawValue>>,
    #[serde(default, borrow, deserialize_with = "raw_present_borrowed")]
    error: Option<&'a RawValue>,
}

fn first_byte(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

fn not_an_object(bytes: &[u8]) -> DecodeError {
    match serde_json::from_slice::<IgnoredAny>(bytes) {
        Ok(_) => DecodeError::NotAnObject,
        Err(e) => DecodeError::Json(e),
    }
}

fn parse_id(raw: &RawValue) -> Result<Option<RequestId>, DecodeError> {
    if raw.get() == "null" {
        return Ok(None);
    }
    serde_json::from_str(raw.get())
        .map(Some)
        .map_err(|_| DecodeError::InvalidId {
            found: raw.get().to_owned(),
        })
}

impl Message {
    /// The id of an answer, from its envelope alone: which request an SSE event answers, and
    /// for an answer that does not decode as it is (invalid UTF-8 inside a string, say), the
    /// request that can fail at once instead of waiting out its deadline. `None` for requests
    /// and notifications (they have a method) and for bytes with no readable envelope.
    pub fn answered_id(bytes: &[u8]) -> Option<RequestId> {
        let text = String::from_utf8_lossy(bytes);
        let env: Envelope<'_> = serde_json::from_str(&text).ok()?;
        if env.method.is_some() {
            return None;
        }
        parse_id(env.id?).ok().flatten()
    }

    /// The `result.sessionId` of an answer, which some legacy servers send in the payload of
    /// the answer that opens a session instead of (or besides) the `Mcp-Session-Id` header.
    pub fn result_session_id(bytes: &[u8]) -> Option<String> {
        #[derive(Deserialize)]
        struct Answer {
            result: Option<WithSession>,
        }
        #[derive(Deserialize)]
        struct WithSession {
            #[serde(rename = "sessionId")]
            session_id: Option<String>,
        }
        serde_json::from_slice::<Answer>(bytes)
            .ok()?
            .result?
            .session_id
    }

    /// The id at the head of a message too large to read whole: the `"id"` member found in
    /// `head` (its first bytes) before any `result` or `error` member, as JSON-RPC libraries
    /// write envelopes. `None` when it is not there.
    pub fn leading_id(head: &[u8]) -> Option<RequestId> {
        let head = &head[..head.len().min(4096)];
        let text = String::from_utf8_lossy(head);
        let stop = ["\"result\"", "\"error\""]
            .iter()
            .filter_map(|k| text.find(k))
            .min()
            .unwrap_or(text.len());
        let at = text[..stop].find("\"id\"")?;
        let rest = text[at + 4..].trim_start().strip_prefix(':')?.trim_start();
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<RequestId>();
        values.next()?.ok()
    }

    /// Decodes one message (phase one: the envelope only).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if first_byte(bytes) != Some(b'{') {
            return Err(not_an_object(bytes));
        }
        let env: Envelope<'_> = serde_json::from_slice(bytes).map_err(DecodeError::Json)?;
        match env.jsonrpc {
            // The usual spelling first; an escaped one (`"2\u002e0"`) is still "2.0".
            Some(raw) if raw.get() == "\"2.0\"" => {}
            Some(raw)
                if serde_json::from_str::<Cow<'_, str>>(raw.get())
                    .ok()
                    .as_deref()
                    == Some(JSONRPC_VERSION) => {}
            Some(raw) => {
                return Err(DecodeError::WrongJsonRpcVersion {
                    found: raw.get().into(),
                });
            }
            None => {
                return Err(DecodeError::WrongJsonRpcVersion {
                    found: "absent".into(),
                });
            }
        }
        if let Some(method) = env.method {
            return match env.id {
                None => Ok(Self::Notification(Notification {
                    method,
                    params: env.params,
                })),
                Some(raw) => match parse_id(raw)? {
                    Some(id) => Ok(Self::Request(Request {
                        id,
                        method,
                        params: env.params,
                    })),
                    None => Err(DecodeError::NullRequestId { method }),
                },
            };
        }
        let id = match env.id {
            Some(raw) => parse_id(raw)?,
            None => None,
        };
        match (env.result, env.error) {
            (Some(_), Some(_)) => Err(DecodeError::BothResultAndError {
                id: describe_id(id.as_ref()),
            }),
            (Some(result), None) => match id {
                Some(id) => Ok(Self::Response(Response {
                    id: Some(id),
                    payload: Ok(result),
                })),
                None => Err(DecodeError::ResultWithoutId),
            },
            (None, Some(error)) => {
                let error: ErrorObject =
                    serde_json::from_str(error.get()).map_err(DecodeError::MalformedError)?;
                Ok(Self::Response(Response {
                    id,
                    payload: Err(error),
                }))
            }
            (None, None) => Err(DecodeError::NeitherResultNorError),
        }
    }

    /// Encodes the message as compact JSON (no embedded newlines, as stdio requires).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        Ok(serde_json::to_vec(self)?)
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Self::Request(r) => Some(&r.method),
            Self::Notification(n) => Some(&n.method),
            Self::Response(_) => None,
        }
    }
}

impl Frame {
    /// Decodes a single message or a batch.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        match first_byte(bytes) {
            Some(b'[') => {
                let items: Vec<Box<RawValue>> =
                    serde_json::from_slice(bytes).map_err(DecodeError::Json)?;
                if items.is_empty() {
                    return Err(DecodeError::EmptyBatch);
                }
                Ok(Self::Batch(
                    items
                        .iter()
                        .map(|raw| Message::decode(raw.get().as_bytes()))
                        .collect(),
                ))
            }
            _ => Message::decode(bytes).map(Self::Single),
        }
    }
}

#[derive(Serialize)]
struct OutRequest<'a, P: ?Sized> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Serialize)]
struct OutNotification<'a, P: ?Sized> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Serialize)]
struct OutResult<'a, R: ?Sized> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a R,
}

#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    error: &'a ErrorObject,
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Request(r) => OutRequest {
                jsonrpc: JSONRPC_VERSION,
                id: &r.id,
                method: &r.method,
                params: r.params.as_deref(),
            }
            .serialize(serializer),
            Self::Notification(n) => OutNotification {
                jsonrpc: JSONRPC_VERSION,
                method: &n.method,
                params: n.params.as_deref(),
            }
            .serialize(serializer),
            Self::Response(Response {
                id: Some(id),
                payload: Ok(result),
            }) => OutResult {
                jsonrpc: JSONRPC_VERSION,
                id,
                result: &**result,
            }
            .serialize(serializer),
            Self::Response(Response {
                id,
                payload: Err(error),
            }) => OutError {
                jsonrpc: JSONRPC_VERSION,
                id: id.as_ref(),
                error,
            }
            .serialize(serializer),
            Self::Response(Response {
                id: None,
                payload: Ok(_),
            }) => Err(serde::ser::Error::custom("a result response needs an id")),
        }
    }
}

/// Encodes a request straight from typed params, without an intermediate `Value`.
pub fn encode_request<P: Serialize + ?Sized>(
    id: &RequestId,
    method: &str,
    params: Option<&P>,
) -> Result<Vec<u8>, EncodeError> {
    // A 2026-07-28 `tools/call` with its `_meta` envelope is ~350 bytes: one allocation instead
    // of serde_json's 128 bytes grown twice.
    let mut out = Vec::with_capacity(REQUEST_CAPACITY);
    serde_json::to_writer(
        &mut out,
        &OutRequest {
            jsonrpc: JSONRPC_VERSION,
            id,
            method,
            params,
        },
    )?;
    Ok(out)
}

/// The initial buffer of an encoded request.
const REQUEST_CAPACITY: usize = 512;

/// Encodes a notification straight from typed params.
pub fn encode_notification<P: Serialize + ?Sized>(
    method: &str,
    params: Option<&P>,
) -> Result<Vec<u8>, EncodeError> {
    Ok(serde_json::to_vec(&OutNotification {
        jsonrpc: JSONRPC_VERSION,
        method,
        params,
    })?)
}

/// Encodes a success response.
pub fn encode_result<R: Serialize + ?Sized>(
    id: &RequestId,
    result: &R,
) -> Result<Vec<u8>, EncodeError> {
    Ok(serde_json::to_vec(&OutResult {
        jsonrpc: JSONRPC_VERSION,
        id,
        result,
    })?)
}

/// Encodes an error response (`id` is `null` when the request's id could not be read).
pub fn encode_error(id: Option<&RequestId>, error: &ErrorObject) -> Result<Vec<u8>, EncodeError> {
    Ok(serde_json::to_vec(&OutError {
        jsonrpc: JSONRPC_VERSION,
        id,
        error,
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` and checks the error's message names the problem.
    fn check_err(input: &str, expected: &str) {
        let err = Message::decode(input.as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains(expected),
            "{input}: got `{err}`, want `{expected}`"
        );
    }

    #[test]
    fn an_undecodable_answers_id_is_still_read_and_a_request_has_none() {
        let mut bad = br#"{"jsonrpc":"2.0","id":7,"result":{"text":""#.to_vec();
        bad.extend_from_slice(&[0xff, 0xfe]);
        bad.extend_from_slice(br#""}}"#);
        assert!(
            Message::decode(&bad).is_err(),
            "invalid UTF-8 does not decode"
        );
        assert_eq!(Message::answered_id(&bad), Some(RequestId::Number(7)));
        assert_eq!(
            Message::answered_id(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            None
        );
        assert_eq!(Message::answered_id(b"not json"), None);
    }

    #[test]
    fn the_leading_id_of_a_cut_message_is_read_before_its_result() {
        assert_eq!(
            Message::leading_id(br#"{"jsonrpc":"2.0","id":42,"result":{"content":[{"text":"aaaa"#),
            Some(RequestId::Number(42))
        );
        assert_eq!(
            Message::leading_id(br#"{"jsonrpc": "2.0", "id" : "x-1" , "error": {"#),
            Some(RequestId::String("x-1".into()))
        );
        // An "id" inside the result is not the envelope's.
        assert_eq!(
            Message::leading_id(br#"{"jsonrpc":"2.0","result":{"id":3,"big":"aaaa"#),
            None
        );
    }

    #[test]
    fn malformed_envelopes_name_what_is_wrong() {
        check_err(
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"found "1.0""#,
        );
        check_err(r#"{"jsonrpc":2,"id":1,"method":"ping"}"#, "found 2");
        check_err(r#"{"id":1,"method":"ping"}"#, "found absent");
        check_err(
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            "`ping` has a null id",
        );
        check_err(
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            "invalid id 1.5",
        );
        check_err(
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            "invalid id [1]",
        );
        check_err(
            r#"{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"x"}}"#,
            "7 carries both",
        );
        check_err(
            r#"{"jsonrpc":"2.0","id":7}"#,
            "no `method`, `result` or `error`",
        );
        check_err(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#, "non-null id");
        check_err(r#"{"jsonrpc":"2.0","result":{}}"#, "non-null id");
        check_err(
            r#"{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}"#,
            "malformed `error`",
        );
        check_err(r#"[1]"#, "must be a JSON object");
        check_err(r#"42"#, "must be a JSON object");
        check_err(r#"{"jsonrpc":"2.0","#, "not a JSON-RPC message");
        check_err(r#"{"jsonrpc":"2.0","method":5}"#, "not a JSON-RPC message");
        check_err(
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            "not a JSON-RPC message",
        );
    }

    #[test]
    fn error_response_may_have_null_id() {
        let m = Message::decode(
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        )
        .unwrap();
        let Message::Response(Response {
            id: None,
            payload: Err(e),
        }) = m
        else {
            panic!("{m:?}")
        };
        assert_eq!(e.code, crate::error::code::PARSE_ERROR);
    }

    #[test]
    fn borrowed_members_read_escapes_and_spacing() {
        // The envelope borrows `jsonrpc`, `id` and `error` from the input: an escaped version,
        // an escaped string id and spacing around the members must read as the plain ones.
        let m = Message::decode(
            br#"{ "jsonrpc" : "2\u002e0" , "id" : "a\u0062" , "error" : { "code" : -32601 , "message" : "no \u00e9" } }"#,
        )
        .unwrap();
        let Message::Response(Response {
            id: Some(id),
            payload: Err(e),
        }) = m
        else {
            panic!("{m:?}")
        };
        assert_eq!(id, RequestId::String("ab".into()));
        assert_eq!((e.code, e.message.as_str()), (-32601, "no é"));
        assert!(matches!(
            Message::decode(br#"{"jsonrpc":"2\u002e1","method":"a"}"#),
            Err(DecodeError::WrongJsonRpcVersion { found }) if found == r#""2\u002e1""#
        ));
        assert!(matches!(
            Message::decode(br#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#),
            Err(DecodeError::InvalidId { found }) if found == "1.5"
        ));
    }

    #[test]
    fn batches_decode_element_by_element() {
        let frame =
            Frame::decode(br#"[{"jsonrpc":"2.0","method":"a"}, {"jsonrpc":"1.0","method":"b"}]"#)
                .unwrap();
        let Frame::Batch(items) = frame else { panic!() };
        assert!(matches!(items[0], Ok(Message::Notification(_))));
        assert!(matches!(
            items[1],
            Err(DecodeError::WrongJsonRpcVersion { .. })
        ));
        assert!(matches!(
            Frame::decode(b" [ ] "),
            Err(DecodeError::EmptyBatch)
        ));
    }

    #[test]
    fn typed_params_errors_name_the_method_and_field() {
        let Message::Request(r) = Message::decode(
            br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"arguments":{}}}"#,
        )
        .unwrap() else {
            panic!()
        };
        let err = r.params::<crate::CallToolParams>().unwrap_err();
        assert!(err.to_string().contains("`tools/call`"));
        let source = std::error::Error::source(&err).unwrap().to_string();
        assert!(source.contains("missing field `name`"), "{source}");
        assert_eq!(err.jsonrpc_code(), crate::error::code::INVALID_PARAMS);
    }

    #[test]
    fn encoders_write_compact_single_lines() {
        let bytes = encode_request(&RequestId::Number(1), "ping", None::<&()>).unwrap();
        assert_eq!(bytes, br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        let err = encode_error(None, &ErrorObject::new(-32600, "bad\nline")).unwrap();
        assert!(!err.contains(&b'\n'));
        assert_eq!(
            String::from_utf8(err).unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad\nline"}}"#
        );
    }
}

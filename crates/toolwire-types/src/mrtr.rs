//! Results by `resultType`, and the `input_required` result of multi-round-trip requests
//! (MRTR, `2026-07-28`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::common::{JsonObject, ResultType, nullable};
use crate::{DecodeError, Meta};

/// An `input_required` result: the server needs answers before it can finish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// Always [`ResultType::InputRequired`].
    pub result_type: ResultType,
    /// What the server asks, by key; the retry answers under the same keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<BTreeMap<String, InputRequest>>,
    /// Opaque state to echo exactly on the retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// One thing the server asks of the client inside an `input_required` result: a method
/// (`elicitation/create`, `sampling/createMessage`, `roots/list`) and its params. Decode the
/// params with [`crate::ServerRequest::decode_value`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    /// The method.
    pub method: String,
    /// Its params.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub params: Option<Value>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A result that may be complete or may ask for input.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// `resultType` `complete` (or absent, as legacy servers send).
    Complete(T),
    /// `resultType` `input_required`.
    InputRequired(Box<InputRequiredResult>),
}

#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<Cow<'a, str>>,
}

/// Reads the `resultType` of a result without decoding the rest.
fn result_type(method: &str, raw: &RawValue) -> Result<ResultType, DecodeError> {
    let peek: Peek<'_> =
        serde_json::from_str(raw.get()).map_err(|source| DecodeError::InvalidResult {
            method: method.to_owned(),
            source,
        })?;
    match peek.result_type.as_deref() {
        None | Some("complete") => Ok(ResultType::Complete),
        Some("input_required") => Ok(ResultType::InputRequired),
        Some("task") => Ok(ResultType::Task),
        Some(other) => Err(DecodeError::UnknownResultType {
            method: method.to_owned(),
            found: other.to_owned(),
        }),
    }
}

fn parse<T: DeserializeOwned>(method: &str, raw: &RawValue) -> Result<T, DecodeError> {
    serde_json::from_str(raw.get()).map_err(|source| DecodeError::InvalidResult {
        method: method.to_owned(),
        source,
    })
}

/// Decodes the result of a method that may answer `input_required` (`tools/call`,
/// `prompts/get`, `resources/read`).
pub fn decode_outcome<T: DeserializeOwned>(
    method: &str,
    raw: &RawValue,
) -> Result<Outcome<T>, DecodeError> {
    match result_type(method, raw)? {
        ResultType::Complete => parse(method, raw).map(Outcome::Complete),
        ResultType::InputRequired => parse(method, raw).map(Outcome::InputRequired),
        // A task is a `tools/call` answer its caller reads first (`Task`); anywhere else it is
        // an invalid response.
        ResultType::Task => Err(DecodeError::UnexpectedTask {
            method: method.to_owned(),
        }),
    }
}

/// Decodes the result of a method that always completes; `input_required` or an unknown
/// `resultType` is a typed error.
pub fn decode_result<T: DeserializeOwned>(method: &str, raw: &RawValue) -> Result<T, DecodeError> {
    match result_type(method, raw)? {
        ResultType::Complete => parse(method, raw),
        ResultType::InputRequired => Err(DecodeError::UnexpectedInputRequired {
            method: method.to_owned(),
        }),
        ResultType::Task => Err(DecodeError::UnexpectedTask {
            method: method.to_owned(),
        }),
    }
}

/// Params of a method that may answer `input_required` (`tools/call`, `prompts/get`,
/// `resources/read`): the retry carries the answers and the server's `requestState`.
pub trait RetryWithInput {
    /// Sets `inputResponses` and `requestState` (echoed exactly; `None` if the server sent
    /// none) for the retry.
    fn set_input(&mut self, responses: JsonObject, request_state: Option<String>);
}

macro_rules! retry_with_input {
    ($($t:ty),*) => {$(
        impl RetryWithInput for $t {
            fn set_input(&mut self, responses: JsonObject, request_state: Option<String>) {
                self.input_responses = Some(responses);
                self.request_state = request_state;
            }
        }
    )*};
}

retry_with_input!(
    crate::CallToolParams,
    crate::GetPromptParams,
    crate::ReadResourceParams
);

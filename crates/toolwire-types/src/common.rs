//! Shapes shared by many messages: implementation info, icons, annotations, roles, caching
//! metadata, `resultType`.

use std::fmt;

use serde::de::{self, DeserializeOwned};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::Meta;

/// A JSON object: the representation of schemas, free-form data and unknown fields.
pub type JsonObject = serde_json::Map<String, Value>;

/// Deserialises an optional JSON value keeping `null` apart from absent: with
/// `#[serde(default, deserialize_with = "nullable")]` an absent member is `None` and a `null`
/// member is `Some(Value::Null)`, so a round trip does not lose it.
pub(crate) fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Name and version of an MCP implementation (`clientInfo`, `serverInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Icons for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// The implementation's web site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Implementation {
    /// An implementation with a name and a version only.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            title: None,
            description: None,
            icons: None,
            website_url: None,
            extra: JsonObject::new(),
        }
    }
}

/// An icon for a tool, resource, prompt or implementation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// `https:` or `data:` URI of the image.
    pub src: String,
    /// MIME type of the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes such as `48x48` or `any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// `light` or `dark`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The sender or recipient of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user.
    User,
    /// The assistant (the model).
    Assistant,
}

/// Hints about how a client should use or display an object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Who the content is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// Importance from 0.0 (least) to 1.0 (most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    /// ISO 8601 time of the last modification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Who may share a cached result (`2026-07-28`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Any client may share it.
    Public,
    /// Not shared across authorization contexts.
    Private,
}

/// The kind of a result (`2026-07-28`); absent means [`ResultType::Complete`].
///
/// A value this crate does not know fails to decode: the spec says such a result MUST be
/// considered invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResultType {
    /// The request is done.
    #[serde(rename = "complete")]
    Complete,
    /// The server needs input from the client before it can finish (MRTR).
    #[serde(rename = "input_required")]
    InputRequired,
    /// The request goes on as a task (the tasks extension; `tools/call` only).
    #[serde(rename = "task")]
    Task,
}

/// Cache metadata of list and read results (`2026-07-28`).
pub trait Cacheable {
    /// The raw `ttlMs` member.
    fn raw_ttl_ms(&self) -> Option<i64>;

    /// How long the result stays fresh, in milliseconds: an absent or negative `ttlMs` is 0.
    fn ttl_ms(&self) -> u64 {
        self.raw_ttl_ms()
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0)
    }

    /// The raw `cacheScope` member.
    fn raw_cache_scope(&self) -> Option<CacheScope>;

    /// Whether it may be shared across authorization contexts: only when the server said
    /// `public` (a missing scope is private).
    fn is_public(&self) -> bool {
        self.raw_cache_scope() == Some(CacheScope::Public)
    }
}

/// The SEP-2549 hints of any result, read without decoding the rest of it (the response
/// cache keeps answers of many methods by these alone).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CacheHints {
    /// `ttlMs`.
    #[serde(rename = "ttlMs", default)]
    pub ttl_ms: Option<i64>,
    /// `resultType` (an `input_required` round is never kept).
    #[serde(rename = "resultType", default)]
    pub result_type: Option<ResultType>,
    /// `cacheScope`.
    #[serde(rename = "cacheScope", default)]
    pub cache_scope: Option<CacheScope>,
}

impl CacheHints {
    /// The hints of a raw result; `None` if it is not an object with readable hints.
    pub fn of(raw: &serde_json::value::RawValue) -> Option<Self> {
        serde_json::from_str(raw.get()).ok()
    }
}

impl Cacheable for CacheHints {
    fn raw_ttl_ms(&self) -> Option<i64> {
        self.ttl_ms
    }

    fn raw_cache_scope(&self) -> Option<CacheScope> {
        self.cache_scope
    }
}

/// A result with no payload (`ping`, `logging/setLevel`, `resources/subscribe`, …).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyResult {
    /// `resultType` (modern results carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Params with nothing but `_meta` (`ping`, `notifications/initialized`, list-changed, …).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetaOnlyParams {
    /// Metadata (the modern envelope, a subscription id, a progress token).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// One value or an array of them, as sampling content allows (`2025-11-25`).
#[derive(Debug, Clone, PartialEq)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// An array.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// The values as a slice.
    pub fn as_slice(&self) -> &[T] {
        match self {
            Self::One(t) => std::slice::from_ref(t),
            Self::Many(v) => v,
        }
    }
}

impl<T: Serialize> Serialize for OneOrMany<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::One(t) => t.serialize(serializer),
            Self::Many(v) => v.serialize(serializer),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Decided by the JSON type, not by trying both shapes: the error stays the inner one.
        match Value::deserialize(deserializer)? {
            Value::Array(items) => items
                .into_iter()
                .map(|v| serde_json::from_value(v).map_err(de::Error::custom))
                .collect::<Result<_, _>>()
                .map(Self::Many),
            other => serde_json::from_value(other)
                .map(Self::One)
                .map_err(de::Error::custom),
        }
    }
}

/// The severity of a log message (syslog levels, least to most severe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoggingLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Notice.
    Notice,
    /// Warning.
    Warning,
    /// Error.
    Error,
    /// Critical.
    Critical,
    /// Alert.
    Alert,
    /// Emergency.
    Emergency,
}

impl fmt::Display for LoggingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        };
        f.write_str(s)
    }
}

//! [`Rendered`]: a shared value whose JSON is written once and reused by every message that
//! carries it.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A value shared by many messages, serialised once: the first serialisation renders its JSON
/// and every later one copies those bytes.
///
/// The modern era repeats the client's capabilities and info in the `_meta` of every request
/// ([`crate::Meta::client_capabilities`], [`crate::Meta::client_info`]). Serialising them
/// field by field was ~3 k instructions per request, the largest single item of a `tools/call`
/// in the profile; copying the rendered bytes is a `memcpy`.
///
/// Cloning shares the value and its rendering (one `Arc`). The value is immutable once built,
/// so the rendering can never go stale. It serialises through `serde_json`'s [`RawValue`]: with
/// `serde_json` (`to_vec`, `to_writer`, `to_value`, ...) the output is exactly the value's own
/// JSON; other formats are not supported (they would see `RawValue`'s private token). Equality
/// and `Debug` look at the value alone.
pub struct Rendered<T>(Arc<Inner<T>>);

struct Inner<T> {
    value: T,
    json: OnceLock<Box<RawValue>>,
}

impl<T> Rendered<T> {
    /// Wraps `value`; its JSON is rendered on first serialisation.
    pub fn new(value: T) -> Self {
        Self(Arc::new(Inner {
            value,
            json: OnceLock::new(),
        }))
    }

    /// The value.
    pub fn get(&self) -> &T {
        &self.0.value
    }
}

impl<T: Serialize> Rendered<T> {
    /// The value's JSON, rendered now if it was not yet.
    pub fn json(&self) -> Result<&RawValue, serde_json::Error> {
        if let Some(json) = self.0.json.get() {
            return Ok(json);
        }
        let json = serde_json::value::to_raw_value(&self.0.value)?;
        // Two threads may render at once; both renderings are the same bytes, and the loser's
        // is dropped.
        Ok(self.0.json.get_or_init(|| json))
    }
}

impl<T> Clone for Rendered<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> Deref for Rendered<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T> From<T> for Rendered<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<T: PartialEq> PartialEq for Rendered<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value == other.0.value
    }
}

impl<T: fmt::Debug> fmt::Debug for Rendered<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.value.fmt(f)
    }
}

impl<T: Serialize> Serialize for Rendered<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json()
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Rendered<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Self::new)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{ClientCapabilities, Implementation};

    #[test]
    fn serialises_as_the_value_would_every_time() {
        let mut info = Implementation::new("toolwire", "1.0.0");
        info.title = Some("Tool \"wire\"\n".into());
        let rendered = Rendered::new(info.clone());
        let expected = serde_json::to_string(&info).unwrap();
        assert_eq!(serde_json::to_string(&rendered).unwrap(), expected);
        // The second time copies the cached rendering.
        assert_eq!(serde_json::to_string(&rendered.clone()).unwrap(), expected);
        assert_eq!(
            serde_json::to_value(&rendered).unwrap(),
            serde_json::to_value(&info).unwrap()
        );
    }

    #[test]
    fn nests_inside_other_json_and_round_trips() {
        let caps: ClientCapabilities =
            serde_json::from_value(json!({"roots": {"listChanged": true}, "x-vendor": 1})).unwrap();
        let rendered = Rendered::new(caps.clone());
        let text = serde_json::to_string(&json!({"a": [1], "caps": rendered})).unwrap();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["caps"]["roots"]["listChanged"], true);
        assert_eq!(back["caps"]["x-vendor"], 1);
        let decoded: Rendered<ClientCapabilities> =
            serde_json::from_value(back["caps"].clone()).unwrap();
        assert_eq!(decoded, rendered);
        assert_eq!(*decoded, caps);
    }
}

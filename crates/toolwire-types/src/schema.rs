//! A JSON Schema held as its compact JSON text.
//!
//! A tool's schemas are most of what a tool costs to keep: decoded into `serde_json::Value`
//! trees (a map node per object, an allocation per key and per string), the tools of real
//! servers took about 4.1 KB each; with the schemas as text, about 1.1 KB. Nearly everything a
//! client does with a schema reads it rarely (a header plan, and that only when the text
//! names `x-mcp-header`; a validator compiled once per distinct schema; a search index built
//! once per change) or not at all (relaying it to a model or a downstream client, where the
//! text is what is written). So [`Schema`] keeps the text, compacted, behind an `Arc` (a
//! renamed or merged copy of a tool shares it), and decodes on demand.
//!
//! The text is canonical for what it holds: written by `serde_json`'s compact serialiser as
//! the input is read ([`serde_transcode`] drives one from the other: a visitor per value, no
//! tree), so it has no insignificant whitespace and escapes only what JSON requires (`"`, `\`
//! and control characters). Members keep the order the server sent them in. This works
//! behind any deserializer, including the buffered one serde uses for structs with a
//! `#[serde(flatten)]` member, where `serde_json`'s own `RawValue` capture fails.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::common::JsonObject;

/// A JSON Schema (a tool's `inputSchema` or `outputSchema`), kept as its compact JSON text
/// and decoded where it is read ([`Schema::decode`], [`Schema::decode_object`]). Cloning it
/// shares the text.
///
/// Two schemas are equal when their texts are, or else when they decode to equal values (so
/// a schema built in code equals the same schema a server sent with its members in another
/// order).
///
/// ```
/// use serde_json::json;
/// use toolwire_types::Schema;
///
/// let schema: Schema = serde_json::from_str(r#"{ "type": "object",
///     "properties": { "q": { "type": "string" } } }"#).unwrap();
/// assert_eq!(schema.as_json(), r#"{"type":"object","properties":{"q":{"type":"string"}}}"#);
/// assert_eq!(schema.decode_object().unwrap()["properties"]["q"]["type"], "string");
/// assert_eq!(schema, Schema::from(json!({"properties": {"q": {"type": "string"}}, "type": "object"})));
/// ```
#[derive(Clone)]
pub struct Schema(Arc<RawValue>);

impl Schema {
    /// The compact JSON text.
    pub fn as_json(&self) -> &str {
        self.0.get()
    }

    /// Whether it is a JSON object (as an `inputSchema` always is; a boolean is a schema too).
    pub fn is_object(&self) -> bool {
        self.as_json().starts_with('{')
    }

    /// Decodes it into a value tree. Fails only for a schema nested deeper than the decoder's
    /// limit of 128 levels, which only a schema built in code can be.
    pub fn decode(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(self.as_json())
    }

    /// Decodes it into an object; fails when it is not one (see [`Schema::is_object`]) or is
    /// nested deeper than 128 levels.
    pub fn decode_object(&self) -> Result<JsonObject, serde_json::Error> {
        serde_json::from_str(self.as_json())
    }

    /// Whether its text holds the needle as a whole JSON string, a member name or a value: a
    /// check that needs no decoding. Exact, because the text is canonical: such a string is
    /// written with no escape it could hide behind.
    pub fn mentions(&self, needle: &Mention) -> bool {
        let text = self.as_json();
        let len = needle.finder.needle().len();
        if len == 0 {
            return false;
        }
        needle.finder.find_iter(text.as_bytes()).any(|start| {
            let end = start + len;
            // Opened by a quote that is not itself escaped (an even run of `\` before it),
            // and closed right after. The matches do not overlap, which loses none: one that
            // began inside an earlier match would have its opening quote in the needle. (A
            // match of a whole `char` sequence lies on `char` boundaries.)
            text.get(..start)
                .and_then(|before| before.strip_suffix('"'))
                .is_some_and(|before| (before.len() - before.trim_end_matches('\\').len()) % 2 == 0)
                && text.get(end..).is_some_and(|after| after.starts_with('"'))
        })
    }

    /// Parses JSON text (any layout) into a schema.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let schema = Self::deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(schema)
    }

    /// A JSON value (a `Value` or a `Map`) written as text. Both always serialise (their
    /// keys are strings, their floats finite); were that ever to fail, the schema would read
    /// as `null`, which no tool accepts as an input schema.
    fn written<T: Serialize>(value: &T) -> Self {
        match serde_json::value::to_raw_value(value) {
            Ok(raw) => Self(Arc::from(raw)),
            Err(_) => Self(Arc::from(RawValue::NULL.to_owned())),
        }
    }
}

/// A string to look for in schemas' text ([`Schema::mentions`]), its search prepared once:
/// a client checks every tool it caches for the same name, and preparing the search costs
/// about as much as running it over a typical schema.
///
/// The needle is printable text with no `"` or `\`, as a member name or a plain value is;
/// an empty one is found nowhere.
///
/// ```
/// use serde_json::json;
/// use toolwire_types::{Mention, Schema};
///
/// let region = Mention::new("Region");
/// assert!(Schema::from(json!({"x-mcp-header": "Region"})).mentions(&region));
/// assert!(!Schema::from(json!({"d": "the Region to use"})).mentions(&region));
/// ```
pub struct Mention {
    finder: memchr::memmem::Finder<'static>,
}

impl Mention {
    /// Prepares the search for `needle`.
    pub fn new(needle: &str) -> Self {
        Self {
            finder: memchr::memmem::Finder::new(needle.as_bytes()).into_owned(),
        }
    }
}

impl fmt::Debug for Mention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Mention")
            .field(&String::from_utf8_lossy(self.finder.needle()))
            .finish()
    }
}

impl From<Value> for Schema {
    fn from(value: Value) -> Self {
        Self::from(&value)
    }
}

impl From<&Value> for Schema {
    fn from(value: &Value) -> Self {
        Self::written(value)
    }
}

impl From<JsonObject> for Schema {
    fn from(object: JsonObject) -> Self {
        Self::from(&object)
    }
}

impl From<&JsonObject> for Schema {
    fn from(object: &JsonObject) -> Self {
        Self::written(object)
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || self.as_json() == other.as_json()
            || matches!((self.decode(), other.decode()), (Ok(a), Ok(b)) if a == b)
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schema").field(&self.as_json()).finish()
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}

impl Serialize for Schema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // `serde_json` writes the text as it is; other serialisers get the value.
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Written by `serde_json`'s compact serialiser as it is read, and taken as it is
        // written (no second pass to check it).
        serde_json::value::to_raw_value(&serde_transcode::Transcoder::new(deserializer))
            .map(|raw| Self(Arc::from(raw)))
            .map_err(de::Error::custom)
    }
}

/// `inputSchema`: a [`Schema`] that is a JSON object.
pub(crate) fn object<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Schema, D::Error> {
    let schema = Schema::deserialize(deserializer)?;
    if schema.is_object() {
        return Ok(schema);
    }
    let expected = &"a JSON Schema object";
    Err(match schema.decode() {
        Ok(Value::Null) => de::Error::invalid_type(de::Unexpected::Unit, expected),
        Ok(Value::Bool(b)) => de::Error::invalid_type(de::Unexpected::Bool(b), expected),
        Ok(Value::String(s)) => de::Error::invalid_type(de::Unexpected::Str(&s), expected),
        Ok(Value::Array(_)) => de::Error::invalid_type(de::Unexpected::Seq, expected),
        _ => de::Error::invalid_type(de::Unexpected::Other("a number"), expected),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use serde_json::json;

    #[test]
    fn text_from_any_layout_is_compact_and_keeps_the_member_order() {
        let schema =
            Schema::from_json("{ \"b\" : 1 ,\n \"a\" : [ true , null , \"x y\" ] }").unwrap();
        assert_eq!(schema.as_json(), r#"{"b":1,"a":[true,null,"x y"]}"#);
    }

    #[test]
    fn a_schema_in_a_flattened_struct_decodes() {
        #[derive(Deserialize)]
        struct Holder {
            schema: Schema,
            #[serde(flatten)]
            rest: JsonObject,
        }
        let holder: Holder =
            serde_json::from_str(r#"{"other": 1, "schema": {"type": "string", "n": 2.5}}"#)
                .unwrap();
        assert_eq!(holder.schema.as_json(), r#"{"type":"string","n":2.5}"#);
        assert_eq!(holder.rest["other"], 1);
    }

    #[test]
    fn it_serialises_as_its_text_and_as_a_value() {
        #[derive(Serialize)]
        struct Holder {
            s: Schema,
        }
        let schema = Schema::from_json(r#"{"type": "object", "properties": {}}"#).unwrap();
        let holder = Holder { s: schema.clone() };
        assert_eq!(
            serde_json::to_string(&holder).unwrap(),
            r#"{"s":{"type":"object","properties":{}}}"#
        );
        assert_eq!(
            serde_json::to_value(&schema).unwrap(),
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn equality_ignores_member_order_but_not_content() {
        let sent = Schema::from_json(r#"{"type":"object","required":["a"]}"#).unwrap();
        let built = Schema::from(json!({"required": ["a"], "type": "object"}));
        assert_ne!(sent.as_json(), built.as_json());
        assert_eq!(sent, built);
        assert_ne!(
            sent,
            Schema::from(json!({"required": ["b"], "type": "object"}))
        );
    }

    #[test]
    fn mentions_finds_whole_strings_only() {
        let schema = Schema::from(
            json!({"properties": {"r": {"x-mcp-header": "Region", "d": "x-mcp-headers"}}}),
        );
        assert!(schema.mentions(&Mention::new("x-mcp-header")));
        assert!(schema.mentions(&Mention::new("Region")));
        assert!(!schema.mentions(&Mention::new("Regio")));
        let near = Schema::from(json!({"d": "see x-mcp-header", "x-mcp-headerx": 1}));
        assert!(!near.mentions(&Mention::new("x-mcp-header")));
        // Quotes inside a string are not the string's ends.
        let quoted = Schema::from(json!({"d": "a \"x-mcp-header\" b", "e": "\\"}));
        assert!(!quoted.mentions(&Mention::new("x-mcp-header")));
        let escaped_quote = Schema::from(json!({"d": "\\\"x-mcp-header"}));
        assert_eq!(escaped_quote.as_json(), r#"{"d":"\\\"x-mcp-header"}"#);
        assert!(!escaped_quote.mentions(&Mention::new("x-mcp-header")));
        assert!(!quoted.mentions(&Mention::new("")));
        // Found after matches inside longer strings, and not inside them.
        let repeated = Schema::from(json!({"a": "aaaaa", "b": "aa"}));
        assert!(repeated.mentions(&Mention::new("aa")));
        assert!(!Schema::from(json!({"a": "aaaaa"})).mentions(&Mention::new("aa")));
    }

    #[test]
    fn an_escaped_member_name_is_written_plainly() {
        let schema = Schema::from_json(r#"{"x\u002dmcp\u002Dheader":"A"}"#).unwrap();
        assert!(schema.mentions(&Mention::new("x-mcp-header")));
    }

    #[test]
    fn an_input_schema_must_be_an_object() {
        #[derive(Debug, Deserialize)]
        struct Holder {
            #[serde(deserialize_with = "object")]
            #[allow(dead_code, reason = "only decoded")]
            s: Schema,
        }
        let err = serde_json::from_str::<Holder>(r#"{"s": null}"#).unwrap_err();
        assert!(
            err.to_string().contains("expected a JSON Schema object"),
            "{err}"
        );
        assert!(serde_json::from_str::<Holder>(r#"{"s": {}}"#).is_ok());
    }

    #[test]
    fn a_schema_deeper_than_the_decoder_allows_is_kept_and_fails_to_decode() {
        let mut deep = json!({});
        for _ in 0..200 {
            deep = json!({ "items": deep });
        }
        let schema = Schema::from(&deep);
        assert!(schema.as_json().starts_with(r#"{"items":{"items":"#));
        assert!(schema.decode().is_err());
    }

    #[test]
    fn clones_share_the_text() {
        let schema = Schema::from(json!({"type": "object"}));
        let copy = schema.clone();
        assert!(std::ptr::eq(schema.as_json(), copy.as_json()));
    }
}

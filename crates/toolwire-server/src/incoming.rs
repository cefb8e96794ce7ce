//! A message as it is read from its bytes: a JSON value, less the client's capabilities and
//! information that a 2026-07-28 request repeats in its `_meta`. Those are taken out while
//! reading, as text, and decoded once for each distinct declaration (the last few are kept):
//! a client sends the same declaration with every request, and reading it into a value and
//! dropping it again was most of the work of reading a request.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use toolwire_types::{ClientMethod, meta_key};

use crate::core::lock;

/// One message read: its value and what was taken out of its `params._meta`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Incoming {
    /// The message, without `params._meta`'s client capabilities and information.
    pub(crate) value: Value,
    /// `params._meta`'s client capabilities (`io.modelcontextprotocol/clientCapabilities`).
    pub(crate) client: Option<Arc<Value>>,
    /// `params._meta`'s client information (`io.modelcontextprotocol/clientInfo`).
    pub(crate) client_info: Option<Arc<Value>>,
    /// Its `method`, as a request's ([`ClientMethod::Other`] for a response, or a method not
    /// known here): what the server dispatches on.
    pub(crate) method: ClientMethod,
}

impl Incoming {
    /// The message `value` as read, with what was taken out of it.
    fn new(value: Value, client: Option<Arc<Value>>, client_info: Option<Arc<Value>>) -> Self {
        let method = value["method"]
            .as_str()
            .map_or(ClientMethod::Other, ClientMethod::of);
        Self {
            value,
            client,
            client_info,
            method,
        }
    }
}

/// Puts the W3C trace context of a request's `traceparent` (and `tracestate`) headers in its
/// `params._meta`, in place of the body's own: where both say, the header wins (a proxy that
/// continues the trace rewrites headers, never bodies), and a disagreement is no error. A
/// malformed `traceparent` header leaves the body's context as it was; a request without
/// `params` gains none.
pub(crate) fn adopt_trace_headers(headers: &http::HeaderMap, message: &mut Value) {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(parent) = text("traceparent") else {
        return;
    };
    let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
        return;
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    // The body's baggage rides on: W3C baggage is a header of its own, not read here.
    let baggage = meta.get("baggage").and_then(Value::as_str);
    if let Some(trace) = toolwire_types::TraceContext::new(parent, text("tracestate"), baggage) {
        trace.write_into(meta);
    }
}

/// For tests that make their messages as values.
#[cfg(test)]
impl From<Value> for Incoming {
    /// A message given as a value: the two members moved out of it, as reading would.
    fn from(mut value: Value) -> Self {
        let meta = value
            .get_mut("params")
            .and_then(|p| p.get_mut("_meta"))
            .and_then(Value::as_object_mut);
        let (client, client_info) = match meta {
            Some(meta) => (
                meta.remove(meta_key::CLIENT_CAPABILITIES).map(Arc::new),
                meta.remove(meta_key::CLIENT_INFO).map(Arc::new),
            ),
            None => (None, None),
        };
        Self::new(value, client, client_info)
    }
}

/// How many distinct declarations are kept decoded.
const KEPT: usize = 8;

/// The longest declaration kept, in bytes: a client's is a few hundred; a larger one is
/// decoded for its request alone, so no client can make the server hold much of its text.
const KEPT_UP_TO: usize = 4096;

/// Reads messages, keeping the declarations (capabilities, information) last used, by their
/// exact text.
#[derive(Debug, Default)]
pub(crate) struct Reader {
    kept: Mutex<VecDeque<(Box<str>, Arc<Value>)>>,
}

impl Reader {
    /// The value of `raw`: the one kept for the same text, or decoded now and kept.
    fn get(&self, raw: &RawValue) -> Result<Arc<Value>, serde_json::Error> {
        let text = raw.get();
        {
            // Found, it goes last: the ones in use stay, the oldest unused goes first.
            let mut kept = lock(&self.kept);
            if let Some(i) = kept.iter().position(|(t, _)| &**t == text)
                && let Some(entry) = kept.remove(i)
            {
                let value = entry.1.clone();
                kept.push_back(entry);
                return Ok(value);
            }
        }
        let value = Arc::new(serde_json::from_str::<Value>(text)?);
        if text.len() > KEPT_UP_TO {
            return Ok(value);
        }
        let mut kept = lock(&self.kept);
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back((text.into(), value.clone()));
        Ok(value)
    }

    /// Reads one message from `bytes`.
    pub(crate) fn read(&self, bytes: &[u8]) -> Result<Incoming, serde_json::Error> {
        let mut out = Incoming::default();
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = Level {
            depth: Depth::Message,
            reader: self,
            out: &mut out,
        }
        .deserialize(&mut de)?;
        de.end()?;
        Ok(Incoming::new(value, out.client, out.client_info))
    }
}

/// Where a value being read lies: the message, its `params`, their `_meta`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Depth {
    Message,
    Params,
    Meta,
}

/// Reads a value at `depth` into a [`Value`], the members named above taken out.
struct Level<'r> {
    depth: Depth,
    reader: &'r Reader,
    out: &'r mut Incoming,
}

impl<'de> DeserializeSeed<'de> for Level<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Value, M::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let inner = match (self.depth, key.as_str()) {
                (Depth::Message, "params") => Some(Depth::Params),
                (Depth::Params, "_meta") => Some(Depth::Meta),
                _ => None,
            };
            let value = if let Some(depth) = inner {
                map.next_value_seed(Level {
                    depth,
                    reader: self.reader,
                    out: &mut *self.out,
                })?
            } else if self.depth == Depth::Meta
                && (key == meta_key::CLIENT_CAPABILITIES || key == meta_key::CLIENT_INFO)
            {
                let raw: &RawValue = map.next_value()?;
                let value = self.reader.get(raw).map_err(serde::de::Error::custom)?;
                if key == meta_key::CLIENT_CAPABILITIES {
                    self.out.client = Some(value);
                } else {
                    self.out.client_info = Some(value);
                }
                continue;
            } else {
                map.next_value::<Value>()?
            };
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }

    fn visit_seq<S: SeqAccess<'de>>(self, seq: S) -> Result<Value, S::Error> {
        serde::Deserialize::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_traceparent_header_replaces_the_bodys_context_and_a_malformed_one_leaves_it() {
        const HEADER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        const BODY: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let message = || {
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {
                "traceparent": BODY, "tracestate": "body=1", "baggage": "user=alice"}}})
        };
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", HEADER.parse().unwrap());
        let mut adopted = message();
        adopt_trace_headers(&headers, &mut adopted);
        let meta = &adopted["params"]["_meta"];
        assert_eq!(meta["traceparent"], HEADER);
        assert!(
            meta.get("tracestate").is_none(),
            "no stale tracestate: {meta}"
        );
        assert_eq!(meta["baggage"], "user=alice");

        headers.insert("traceparent", "not-a-trace".parse().unwrap());
        let mut kept = message();
        adopt_trace_headers(&headers, &mut kept);
        assert_eq!(kept, message());
    }

    fn modern_call(capabilities: &Value) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "t", "arguments": {"a": [1, 2.5, null, true, "x"]},
            "_meta": {
                meta_key::PROTOCOL_VERSION: "2026-07-28",
                meta_key::CLIENT_CAPABILITIES: capabilities,
                meta_key::CLIENT_INFO: {"name": "c", "version": "1"},
                "progressToken": 7
            }
        }})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_request_reads_as_its_value_less_the_declarations_which_come_apart() {
        let reader = Reader::default();
        let capabilities = json!({"tools": {"wait_for": true}});
        let read = reader.read(&modern_call(&capabilities)).unwrap();
        assert_eq!(
            read.value,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "t", "arguments": {"a": [1, 2.5, null, true, "x"]},
                "_meta": {meta_key::PROTOCOL_VERSION: "2026-07-28", "progressToken": 7}
            }})
        );
        assert_eq!(read.client.as_deref(), Some(&capabilities));
        assert_eq!(
            read.client_info.as_deref(),
            Some(&json!({"name": "c", "version": "1"}))
        );
        // The same as a value given whole.
        let given =
            Incoming::from(serde_json::from_slice::<Value>(&modern_call(&capabilities)).unwrap());
        assert_eq!(given.value, read.value);
        assert_eq!(given.client, read.client);
    }

    #[test]
    fn the_same_declaration_is_decoded_once_and_only_the_last_few_are_kept() {
        let reader = Reader::default();
        let first = reader.read(&modern_call(&json!({}))).unwrap();
        let again = reader.read(&modern_call(&json!({}))).unwrap();
        let first_info = first.clone();
        let (Some(a), Some(b)) = (first.client, again.client) else {
            panic!("no declaration read");
        };
        assert!(Arc::ptr_eq(&a, &b), "decoded twice");
        for n in 0..KEPT {
            reader.read(&modern_call(&json!({"n": n}))).unwrap();
        }
        assert_eq!(lock(&reader.kept).len(), KEPT);
        let after = reader.read(&modern_call(&json!({}))).unwrap();
        assert!(
            !Arc::ptr_eq(&a, after.client.as_ref().unwrap()),
            "kept past its turn"
        );
        // One in use stays: the client information, read with each of them.
        let info = |read: &Incoming| read.client_info.clone().unwrap();
        assert!(
            Arc::ptr_eq(&info(&first_info), &info(&after)),
            "the one in use went"
        );
        // A large one is read, and not kept.
        let large = json!({"x": "y".repeat(KEPT_UP_TO)});
        let read = reader.read(&modern_call(&large)).unwrap();
        assert_eq!(read.client.as_deref(), Some(&large));
        assert!(
            lock(&reader.kept)
                .iter()
                .all(|(text, _)| text.len() <= KEPT_UP_TO)
        );
    }

    #[test]
    fn members_of_the_same_names_elsewhere_stay_where_they_are() {
        let reader = Reader::default();
        let capabilities = meta_key::CLIENT_CAPABILITIES;
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            capabilities: 1,
            "params": {"name": "t", capabilities: 2, "arguments": {"_meta": {capabilities: 3}}}});
        let read = reader.read(message.to_string().as_bytes()).unwrap();
        assert_eq!(read.value, message);
        assert!(read.client.is_none());
    }

    #[test]
    fn what_is_not_one_json_value_is_refused() {
        let reader = Reader::default();
        for bad in [
            &b"{\"id\": 1"[..],
            b"{} {}",
            b"",
            b"{\"params\": {\"_meta\": {\"io.modelcontextprotocol/clientCapabilities\": }}}",
        ] {
            assert!(
                reader.read(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // Other values than an object read as themselves.
        assert_eq!(
            reader.read(b"[1, {\"a\": 2}]").unwrap().value,
            json!([1, {"a": 2}])
        );
        assert_eq!(reader.read(b" 7 ").unwrap().value, json!(7));
    }
}

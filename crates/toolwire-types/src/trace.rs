//! The W3C trace context a request carries in its `_meta` (`traceparent`, `tracestate`,
//! `baggage`), so that a trace follows a call from an agent through gateways to the server
//! that runs it.
//!
//! MCP has no header of its own for it: one HTTP request may carry many MCP messages and stdio
//! has no headers at all, so the OpenTelemetry conventions for MCP put the W3C members in each
//! request's `params._meta`, under the names the W3C headers have.

use crate::common::JsonObject;

/// Longest `tracestate` and `baggage` kept (W3C: 32 list members of at most 256 bytes each for
/// `tracestate`, 8,192 bytes for `baggage`); longer values are dropped, not cut.
const MAX_TRACESTATE: usize = 512 * 32;
const MAX_BAGGAGE: usize = 8192;

/// A W3C trace context as carried in `_meta`: a well-formed `traceparent` and, with it, the
/// `tracestate` and `baggage` that go along.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
    baggage: Option<String>,
}

impl TraceContext {
    /// A context from its members; `None` unless `traceparent` is well formed (version `00`
    /// with its four fields, or a later version whose first four fields are; trace and parent
    /// ids not all zero). A `tracestate` or `baggage` that is too long or not printable ASCII is
    /// left out.
    pub fn new(
        traceparent: &str,
        tracestate: Option<&str>,
        baggage: Option<&str>,
    ) -> Option<TraceContext> {
        if !valid_traceparent(traceparent) {
            return None;
        }
        let keep = |value: Option<&str>, max: usize| {
            value
                .filter(|v| {
                    !v.is_empty() && v.len() <= max && v.bytes().all(|b| (0x20..0x7f).contains(&b))
                })
                .map(str::to_owned)
        };
        Some(TraceContext {
            traceparent: traceparent.to_owned(),
            tracestate: keep(tracestate, MAX_TRACESTATE),
            baggage: keep(baggage, MAX_BAGGAGE),
        })
    }

    /// The context a request's `_meta` carries, if its `traceparent` is a string and well
    /// formed.
    pub fn from_meta(meta: &JsonObject) -> Option<TraceContext> {
        let text = |key: &str| meta.get(key).and_then(serde_json::Value::as_str);
        TraceContext::new(text("traceparent")?, text("tracestate"), text("baggage"))
    }

    /// Writes the context into `meta`, replacing the trace members it had (a member this
    /// context lacks is removed, so a stale `tracestate` never rides with a new parent).
    pub fn write_into(&self, meta: &mut JsonObject) {
        meta.insert("traceparent".into(), self.traceparent.clone().into());
        for (key, value) in [("tracestate", &self.tracestate), ("baggage", &self.baggage)] {
            match value {
                Some(value) => meta.insert(key.into(), value.clone().into()),
                None => meta.remove(key),
            };
        }
    }

    /// `traceparent`: `version-traceid-parentid-flags`.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The trace id (32 lowercase hex digits).
    pub fn trace_id(&self) -> &str {
        self.traceparent.get(3..35).unwrap_or_default()
    }

    /// The id of the span that made the request (16 lowercase hex digits).
    pub fn parent_id(&self) -> &str {
        self.traceparent.get(36..52).unwrap_or_default()
    }

    /// `tracestate`, when there is one.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// `baggage`, when there is one.
    pub fn baggage(&self) -> Option<&str> {
        self.baggage.as_deref()
    }
}

/// W3C Trace Context, level 1, section 3.2: lowercase hex fields of 2, 32, 16 and 2 digits;
/// version `ff` invalid; version `00` has exactly four fields, a later one at least four.
fn valid_traceparent(value: &str) -> bool {
    let mut fields = value.split('-');
    fn hex(field: Option<&str>, len: usize) -> Option<&str> {
        field.filter(|f| {
            f.len() == len
                && f.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
    }
    let (Some(version), Some(trace), Some(parent), Some(flags)) = (
        hex(fields.next(), 2),
        hex(fields.next(), 32),
        hex(fields.next(), 16),
        fields.next(),
    ) else {
        return false;
    };
    let rest = fields.next();
    let flags_ok = if version == "00" {
        rest.is_none() && hex(Some(flags), 2).is_some()
    } else {
        flags.get(..2).is_some_and(|f| hex(Some(f), 2).is_some())
    };
    version != "ff"
        && flags_ok
        && trace.bytes().any(|b| b != b'0')
        && parent.bytes().any(|b| b != b'0')
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_well_formed_traceparent_gives_its_trace_and_parent_ids() {
        let context = TraceContext::new(PARENT, Some("vendor=1"), None).unwrap();
        assert_eq!(context.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.parent_id(), "00f067aa0ba902b7");
        assert_eq!(context.tracestate(), Some("vendor=1"));
    }

    #[test]
    fn malformed_traceparents_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::new(bad, None, None), None, "{bad:?}");
        }
        // A later version may add fields after the four it shares with `00`.
        assert!(
            TraceContext::new(
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more",
                None,
                None
            )
            .is_some()
        );
    }

    #[test]
    fn writing_a_context_replaces_every_trace_member_of_the_meta() {
        let mut meta = JsonObject::new();
        meta.insert("tracestate".into(), "stale=1".into());
        meta.insert("vendor".into(), 7.into());
        TraceContext::new(PARENT, None, Some("user=alice"))
            .unwrap()
            .write_into(&mut meta);
        assert_eq!(meta["traceparent"], PARENT);
        assert!(
            !meta.contains_key("tracestate"),
            "a stale tracestate stayed"
        );
        assert_eq!(meta["baggage"], "user=alice");
        assert_eq!(meta["vendor"], 7);
        assert_eq!(
            TraceContext::from_meta(&meta).unwrap().baggage(),
            Some("user=alice")
        );
    }

    #[test]
    fn a_tracestate_with_control_characters_is_left_out() {
        let context = TraceContext::new(PARENT, Some("a=1\r\nx: y"), Some("ok=1")).unwrap();
        assert_eq!(context.tracestate(), None);
        assert_eq!(context.baggage(), Some("ok=1"));
    }
}

//! Results read as JSON text, without decoding them: what kind of result one is, and the same
//! text with some of its members taken out. A relay passes results on as they came; these
//! are the few things it needs to know of them, each found by reading the object's own
//! members and skipping over their values.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// What a complete `tools/call` result says of itself, read from its own members without
/// decoding the rest ([`complete_call_result`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompleteCall {
    /// It is marked an error (`isError: true`).
    pub is_error: bool,
    /// It says which tools it registers, removes or changes (`registers`, `unregisters`,
    /// `updates`).
    pub names_tools: bool,
    /// It says it is complete (`resultType: "complete"`, 2026-07-28), rather than saying
    /// nothing of its kind.
    pub says_complete: bool,
    /// It carries caching hints (`ttlMs`, `cacheScope`: 2026-07-28).
    pub has_cache_hints: bool,
}

/// What a complete `tools/call` result (a JSON object without `resultType`, or with
/// `complete`) says of itself, read without decoding the rest; `None` for anything else
/// (another kind of result, or not one at all), which the method's decoding reports.
pub fn complete_call_result(raw: &RawValue) -> Option<CompleteCall> {
    #[derive(Deserialize)]
    struct Peek<'a> {
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<Cow<'a, str>>,
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
        #[serde(default)]
        registers: Option<IgnoredAny>,
        #[serde(default)]
        unregisters: Option<IgnoredAny>,
        #[serde(default)]
        updates: Option<IgnoredAny>,
        #[serde(rename = "ttlMs", default)]
        ttl_ms: Option<IgnoredAny>,
        #[serde(rename = "cacheScope", default)]
        cache_scope: Option<IgnoredAny>,
    }
    if !is_object(raw) {
        return None;
    }
    let peek: Peek<'_> = serde_json::from_str(raw.get()).ok()?;
    let says_complete = match peek.result_type.as_deref() {
        None => false,
        Some("complete") => true,
        Some(_) => return None,
    };
    Some(CompleteCall {
        is_error: peek.is_error == Some(true),
        names_tools: peek.registers.is_some()
            || peek.unregisters.is_some()
            || peek.updates.is_some(),
        says_complete,
        has_cache_hints: peek.ttl_ms.is_some() || peek.cache_scope.is_some(),
    })
}

/// Whether a result (a JSON object) says what it is (`resultType`, 2026-07-28).
pub fn names_result_type(raw: &RawValue) -> bool {
    #[derive(Deserialize)]
    struct Peek {
        #[serde(rename = "resultType", default)]
        result_type: Option<IgnoredAny>,
    }
    is_object(raw) && serde_json::from_str::<Peek>(raw.get()).is_ok_and(|p| p.result_type.is_some())
}

/// The JSON object `raw` without the members `drop` picks (by name and value text), the
/// others as they were, in their order; `None` when it picks none (or `raw` is not an
/// object), so the caller keeps `raw` as it is.
pub fn without_members(
    raw: &RawValue,
    drop: impl Fn(&str, &RawValue) -> bool,
) -> Option<Box<RawValue>> {
    /// A member's name as read: borrowed from the text unless it had escapes.
    struct Name<'a>(Cow<'a, str>);
    impl<'de: 'a, 'a> Deserialize<'de> for Name<'a> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Text<'a>(std::marker::PhantomData<&'a ()>);
            impl<'de: 'a, 'a> Visitor<'de> for Text<'a> {
                type Value = Name<'a>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a member's name")
                }
                fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Name<'a>, E> {
                    Ok(Name(Cow::Borrowed(name)))
                }
                fn visit_str<E>(self, name: &str) -> Result<Name<'a>, E> {
                    Ok(Name(Cow::Owned(name.to_owned())))
                }
            }
            d.deserialize_str(Text(std::marker::PhantomData))
        }
    }
    struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);
    impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Each<'a>(std::marker::PhantomData<&'a ()>);
            impl<'de: 'a, 'a> Visitor<'de> for Each<'a> {
                type Value = Members<'a>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Members<'a>, M::Error> {
                    let mut members = Vec::with_capacity(8);
                    while let Some(Name(key)) = map.next_key::<Name<'de>>()? {
                        let value: &'de RawValue = map.next_value()?;
                        members.push((key, value));
                    }
                    Ok(Members(members))
                }
            }
            d.deserialize_map(Each(std::marker::PhantomData))
        }
    }
    if !is_object(raw) {
        return None;
    }
    let Members(mut members) = serde_json::from_str(raw.get()).ok()?;
    let all = members.len();
    members.retain(|(key, value)| !drop(key, value));
    if members.len() == all {
        return None;
    }
    let mut out = String::with_capacity(raw.get().len());
    out.push('{');
    for (key, value) in &members {
        if out.len() > 1 {
            out.push(',');
        }
        match key {
            // Borrowed: its text had no escapes, so it is written back as it was.
            Cow::Borrowed(key) => {
                out.push('"');
                out.push_str(key);
                out.push('"');
            }
            // Read unescaped: written again as JSON.
            Cow::Owned(key) => out.push_str(&serde_json::to_string(key).ok()?),
        }
        out.push(':');
        out.push_str(value.get());
    }
    out.push('}');
    RawValue::from_string(out).ok()
}

fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).unwrap()
    }

    #[test]
    fn a_complete_result_says_what_it_is_and_nothing_else_is_complete() {
        let text = |t: &str| RawValue::from_string(t.to_owned()).unwrap();
        let facts = |is_error, names_tools, says_complete, has_cache_hints| {
            Some(CompleteCall {
                is_error,
                names_tools,
                says_complete,
                has_cache_hints,
            })
        };
        // Members of its content are not its own.
        assert_eq!(
            complete_call_result(&text(
                r#"{"content":[{"isError":true,"registers":[],"ttlMs":1}]}"#
            )),
            facts(false, false, false, false)
        );
        assert_eq!(
            complete_call_result(&text(r#"{"resultType":"complete","isError":true}"#)),
            facts(true, false, true, false)
        );
        assert_eq!(
            complete_call_result(&text(
                r#"{"content":[],"updates":["a"],"cacheScope":"public"}"#
            )),
            facts(false, true, false, true)
        );
        assert_eq!(
            complete_call_result(&text(r#"{"resultType":"input_required"}"#)),
            None
        );
        assert_eq!(complete_call_result(&text(r#"{"isError":"yes"}"#)), None);
        // An array would decode into a struct: it is not a result.
        assert_eq!(complete_call_result(&text("[null, true]")), None);
        assert_eq!(complete_call_result(&text("7")), None);
    }

    #[test]
    fn a_result_type_is_found_only_among_the_objects_own_members() {
        assert!(names_result_type(&raw(&json!({"resultType": "complete"}))));
        assert!(!names_result_type(&raw(
            &json!({"content": [{"type": "text", "text": "resultType"}], "x": {"resultType": 1}})
        )));
        assert!(!names_result_type(&raw(&json!(["resultType"]))));
    }

    #[test]
    fn members_taken_out_leave_the_others_as_they_were_in_order() {
        let text = RawValue::from_string(
            r#"{"content":[{"type":"text","text":"a \"q\" \u00e9"}],"resultType":"complete","ttlMs":5,"k\"ey":{"resultType":"complete"}}"#
                .to_owned(),
        )
        .unwrap();
        let out = without_members(&text, |key, value| {
            (key == "resultType" && value.get() == "\"complete\"") || key == "ttlMs"
        })
        .unwrap();
        assert_eq!(
            out.get(),
            r#"{"content":[{"type":"text","text":"a \"q\" \u00e9"}],"k\"ey":{"resultType":"complete"}}"#
        );
        // Nothing picked: the caller keeps what it has.
        assert!(without_members(&text, |key, _| key == "absent").is_none());
        assert!(without_members(&raw(&json!([1])), |_, _| true).is_none());
    }
}

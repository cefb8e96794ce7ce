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
    /// Its `content` may name resources (a block has a `uri`: a `resource_link` or an
    /// embedded resource); a text that merely says `"uri"` counts too.
    pub names_resources: bool,
    /// Its `_meta` names the server that made it
    /// ([`SERVER_INFO`](crate::meta_key::SERVER_INFO)).
    pub names_server: bool,
    /// Where the members only 2026-07-28 has lie in the text read, for
    /// [`without_modern_members`].
    modern: ModernMembers,
}

/// Where the members `resultType`, `ttlMs` and `cacheScope` lie in a result's text: each from
/// the end of the member before it (or the object's `{`) to the end of its value, so the text
/// without them is what lies between, less a comma left first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct ModernMembers {
    /// The text's length, to know the spans belong to the text given.
    len: usize,
    spans: [Option<(usize, usize)>; 3],
}

/// Calls `each` with every member of the JSON object `text` (its name, borrowed unless it
/// had escapes, and its value as text), in order; `None` if `text` is not one object, or
/// when `each` says stop (`Err`).
fn each_member<'a>(
    text: &'a str,
    each: impl FnMut(Cow<'a, str>, &'a RawValue) -> Result<(), ()>,
) -> Option<()> {
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
    struct Each<F>(F);
    impl<'de, F: FnMut(Cow<'de, str>, &'de RawValue) -> Result<(), ()>> Visitor<'de> for Each<F> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<M: MapAccess<'de>>(mut self, mut map: M) -> Result<(), M::Error> {
            while let Some(Name(key)) = map.next_key::<Name<'de>>()? {
                let value: &'de RawValue = map.next_value()?;
                (self.0)(key, value).map_err(|()| serde::de::Error::custom("stopped"))?;
            }
            Ok(())
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde::Deserializer::deserialize_map(&mut de, Each(each)).ok()?;
    de.end().ok()
}

/// The server-information key of `_meta` as it is written as a member's name.
const SERVER_INFO_MEMBER: &str = "\"io.modelcontextprotocol/serverInfo\"";

/// Where `part` (borrowed from `whole`) begins in it.
fn offset(whole: &str, part: &str) -> usize {
    (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize)
}

/// What a complete `tools/call` result (a JSON object without `resultType`, or with
/// `complete`) says of itself, read once, without decoding the rest; `None` for anything
/// else (another kind of result, or not one at all, or one naming a member of its own twice),
/// which the method's decoding reports.
pub fn complete_call_result(raw: &RawValue) -> Option<CompleteCall> {
    if !is_object(raw) {
        return None;
    }
    let text = raw.get();
    let mut facts = CompleteCall {
        is_error: false,
        names_tools: false,
        says_complete: false,
        has_cache_hints: false,
        names_resources: false,
        names_server: false,
        modern: ModernMembers {
            len: text.len(),
            spans: [None; 3],
        },
    };
    let mut seen = [false; 7];
    // The end of the member before, or the object's `{`.
    let mut before = text.find('{')? + 1;
    each_member(text, |key, value| {
        let known = match &*key {
            "resultType" => 0,
            "ttlMs" => 1,
            "cacheScope" => 2,
            "isError" => 3,
            "registers" => 4,
            "unregisters" => 5,
            "updates" => 6,
            _ => usize::MAX,
        };
        let end = offset(text, value.get()) + value.get().len();
        match &*key {
            "content" => facts.names_resources |= value.get().contains("\"uri\""),
            "_meta" => {
                facts.names_server |= value.get().contains(SERVER_INFO_MEMBER);
            }
            _ => {}
        }
        if known != usize::MAX {
            if std::mem::replace(&mut seen[known], true) {
                return Err(());
            }
            // A member that is `null` says nothing, as if it were absent.
            let null = value.get() == "null";
            match known {
                // Read as text where it is written the usual way, decoded where it is not.
                0 => match value.get() {
                    "\"complete\"" => facts.says_complete = true,
                    "null" => {}
                    other => {
                        let kind: Option<Cow<'_, str>> =
                            serde_json::from_str(other).map_err(|_| ())?;
                        match kind.as_deref() {
                            None => {}
                            Some("complete") => facts.says_complete = true,
                            Some(_) => return Err(()),
                        }
                    }
                },
                1 | 2 => facts.has_cache_hints = !null,
                3 => {
                    facts.is_error = match value.get() {
                        "true" => true,
                        "false" | "null" => false,
                        _ => return Err(()),
                    };
                }
                _ => facts.names_tools |= !null,
            }
            // `resultType` goes only when it says `complete`; the hints whatever they say.
            if (known != 0 || facts.says_complete)
                && let Some(span) = facts.modern.spans.get_mut(known)
            {
                *span = Some((before, end));
            }
        }
        before = end;
        Ok(())
    })?;
    Some(facts)
}

/// The result `raw` without the members only 2026-07-28 has (`resultType`, `ttlMs`,
/// `cacheScope`), the rest of its text as it was, cut where `facts` (read from this same text
/// by [`complete_call_result`]) found them; `None` when it has none of them. Facts read from
/// another text are not used: the members are then found by reading `raw` again.
pub fn without_modern_members(raw: &RawValue, facts: &CompleteCall) -> Option<Box<RawValue>> {
    let text = raw.get();
    let mut spans = facts.modern.spans;
    spans.sort_unstable();
    let spans = spans.iter().flatten();
    let fits = facts.modern.len == text.len()
        && spans.clone().all(|&(from, to)| {
            from <= to && text.is_char_boundary(from) && text.is_char_boundary(to)
        });
    if !fits {
        return without_members(raw, |key, value| match key {
            "resultType" => value.get() == "\"complete\"",
            "ttlMs" | "cacheScope" => true,
            _ => false,
        });
    }
    // None of them: nothing is made.
    spans.clone().next()?;
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(from, to) in spans {
        out.push_str(text.get(at..from)?);
        at = to;
    }
    out.push_str(text.get(at..)?);
    // The first member taken out leaves the comma of the one after it first: it goes.
    let open = out.find('{')? + 1;
    let rest = out.get(open..)?.trim_start();
    if let Some(after) = rest.strip_prefix(',') {
        out = format!("{}{}", out.get(..open)?, after);
    }
    RawValue::from_string(out).ok()
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

/// Whether a result (a JSON object) says it is of kind `kind` (its own `resultType` member,
/// 2026-07-28: `"task"`, `"complete"`, …), read without decoding the rest.
pub fn says_result_type(raw: &RawValue, kind: &str) -> bool {
    #[derive(Deserialize)]
    struct Peek<'a> {
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<Cow<'a, str>>,
    }
    is_object(raw)
        && serde_json::from_str::<Peek<'_>>(raw.get())
            .is_ok_and(|p| p.result_type.as_deref() == Some(kind))
}

/// The JSON object `raw` without the members `drop` picks (by name and value text), the
/// others as they were, in their order; `None` when it picks none (or `raw` is not an
/// object), so the caller keeps `raw` as it is.
pub fn without_members(
    raw: &RawValue,
    drop: impl Fn(&str, &RawValue) -> bool,
) -> Option<Box<RawValue>> {
    if !is_object(raw) {
        return None;
    }
    let mut members = Vec::with_capacity(8);
    let mut dropped = false;
    each_member(raw.get(), |key, value| {
        if drop(&key, value) {
            dropped = true;
        } else {
            members.push((key, value));
        }
        Ok(())
    })?;
    if !dropped {
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
    fn a_result_says_whether_its_content_may_name_resources_and_its_meta_its_server() {
        let facts = |t: &str| complete_call_result(&RawValue::from_string(t.to_owned()).unwrap());
        let plain = facts(r#"{"content":[{"type":"text","text":"a \"uri\" in words"}]}"#);
        assert!(plain.is_some_and(|f| !f.names_server));
        let linked = facts(
            r#"{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}],"_meta":{"x":1}}"#,
        );
        assert!(linked.is_some_and(|f| f.names_resources && !f.names_server));
        let signed =
            facts(r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"py"}}}"#);
        assert!(signed.is_some_and(|f| f.names_server && !f.names_resources));
        // Only the result's own members: a `uri` in structured content does not count.
        let structured = facts(r#"{"content":[],"structuredContent":{"uri":"x"}}"#);
        assert!(structured.is_some_and(|f| !f.names_resources));
    }

    #[test]
    fn a_complete_result_says_what_it_is_and_nothing_else_is_complete() {
        let text = |t: &str| RawValue::from_string(t.to_owned()).unwrap();
        let facts = |is_error, names_tools, says_complete, has_cache_hints| {
            Some((is_error, names_tools, says_complete, has_cache_hints))
        };
        let complete_call_result = |raw: &RawValue| {
            complete_call_result(raw).map(|f| {
                (
                    f.is_error,
                    f.names_tools,
                    f.says_complete,
                    f.has_cache_hints,
                )
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
        // Written with an escape, still complete.
        assert_eq!(
            complete_call_result(&text(r#"{"resultType":"compl\u0065te"}"#)),
            facts(false, false, true, false)
        );
        // Said twice: not a result this reading vouches for.
        assert_eq!(
            complete_call_result(&text(r#"{"isError":false,"isError":true}"#)),
            None
        );
        // `null` says nothing.
        assert_eq!(
            complete_call_result(&text(
                r#"{"isError":null,"resultType":null,"updates":null,"ttlMs":null}"#
            )),
            facts(false, false, false, false)
        );
        // An array would decode into a struct: it is not a result.
        assert_eq!(complete_call_result(&text("[null, true]")), None);
        assert_eq!(complete_call_result(&text("7")), None);
    }

    #[test]
    fn the_modern_members_are_cut_where_the_one_read_found_them_wherever_they_stand() {
        let cut = |t: &str| {
            let raw = RawValue::from_string(t.to_owned()).unwrap();
            let facts = complete_call_result(&raw).unwrap();
            without_modern_members(&raw, &facts).map(|out| out.get().to_owned())
        };
        // First, middle, last, all of them; spaces and escapes elsewhere left as they were.
        assert_eq!(
            cut(r#"{"resultType":"complete","content":[],"isError":false}"#).as_deref(),
            Some(r#"{"content":[],"isError":false}"#)
        );
        assert_eq!(
            cut(r#"{ "content" : [ "a\"ttlMs\"" ] , "ttlMs" : 5 , "k\u0065y" : 1 }"#).as_deref(),
            Some(r#"{ "content" : [ "a\"ttlMs\"" ] , "k\u0065y" : 1 }"#)
        );
        assert_eq!(
            cut(r#"{"content":[],"cacheScope":"private"}"#).as_deref(),
            Some(r#"{"content":[]}"#)
        );
        assert_eq!(
            cut(r#" {"ttlMs":0, "resultType":"complete" ,"cacheScope":"public","content":[]}"#)
                .as_deref(),
            Some(r#"{"content":[]}"#)
        );
        assert_eq!(
            cut(r#"{"resultType":"complete","ttlMs":0}"#).as_deref(),
            Some("{}")
        );
        // Members of the content are not the result's own; nothing to cut, nothing made.
        assert_eq!(
            cut(r#"{"content":[{"ttlMs":1,"resultType":"complete"}]}"#),
            None
        );
        // Facts of another text are not trusted: the members are found by reading again.
        let read =
            RawValue::from_string(r#"{"resultType":"complete","content":[]}"#.to_owned()).unwrap();
        let other = RawValue::from_string(r#"{"content":[1,2,3],"ttlMs":10}"#.to_owned()).unwrap();
        let facts = complete_call_result(&read).unwrap();
        assert_eq!(
            without_modern_members(&other, &facts).unwrap().get(),
            r#"{"content":[1,2,3]}"#
        );
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
    fn a_result_says_its_kind_only_in_its_own_result_type_member() {
        assert!(says_result_type(
            &raw(&json!({"resultType": "task", "task": {}})),
            "task"
        ));
        let escaped = RawValue::from_string(r#"{"resultType":"ta\u0073k"}"#.to_owned()).unwrap();
        assert!(
            says_result_type(&escaped, "task"),
            "an escaped name is read as written"
        );
        assert!(!says_result_type(
            &raw(&json!({"resultType": "complete"})),
            "task"
        ));
        assert!(!says_result_type(
            &raw(
                &json!({"content": [{"type": "text", "text": "task"}], "x": {"resultType": "task"}})
            ),
            "task"
        ));
        assert!(!says_result_type(&raw(&json!({"resultType": 1})), "task"));
        assert!(!says_result_type(
            &raw(&json!(["resultType", "task"])),
            "task"
        ));
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

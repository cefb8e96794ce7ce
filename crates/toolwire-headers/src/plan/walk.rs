//! The schema walk that finds a tool's `x-mcp-header` annotations: each property's pointer,
//! its path of `properties` keys, the JSON type it declares, and every rule it breaks.

use super::*;

/// One step of a JSON pointer.
#[derive(Clone, Copy)]
pub(super) enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

pub(super) struct Found<'a> {
    pub(super) pointer: String,
    pub(super) annotation: &'a str,
    pub(super) path: Vec<&'a str>,
    pub(super) kind: ParamKind,
}

/// The schema walk. It keeps the current position as stacks (pointer segments, the chain of
/// `properties` keys, the first other keyword on the way) and builds strings only for
/// annotated properties and problems.
#[derive(Default)]
pub(super) struct Walker<'a> {
    pub(super) pointer: Vec<Seg<'a>>,
    pub(super) props: Vec<&'a str>,
    /// The first keyword other than `properties` on the path from the root, if any.
    pub(super) via: Option<&'a str>,
    pub(super) found: Vec<Found<'a>>,
    pub(super) problems: Vec<HeaderProblem>,
}

pub(super) fn escape_into(out: &mut String, seg: &str) {
    for c in seg.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn primitive(t: &str) -> Result<ParamKind, HeaderRule> {
    match t {
        "string" => Ok(ParamKind::String),
        "integer" => Ok(ParamKind::Integer),
        "boolean" => Ok(ParamKind::Boolean),
        other => Err(HeaderRule::TypeNotAllowed {
            found: other.to_owned(),
        }),
    }
}

/// The kind of a union of type names: exactly one allowed primitive besides `null`.
fn union_kind<'a>(types: impl Iterator<Item = &'a str>) -> Result<ParamKind, HeaderRule> {
    let non_null: Vec<&str> = types.filter(|t| *t != "null").collect();
    match non_null.as_slice() {
        [] => Err(HeaderRule::TypeNotAllowed {
            found: "null".into(),
        }),
        [one] => primitive(one),
        many => Err(HeaderRule::AmbiguousUnion {
            types: many.iter().map(|t| t.to_string()).collect(),
        }),
    }
}

/// The declared kind of an annotated property.
///
/// Decisions where the spec is silent (`docs/protocol-decisions.md`): a string `type` must be
/// one of the three primitives; a `type` array may add `"null"` to exactly one primitive
/// (`["string","null"]`); with no `type`, an `anyOf`/`oneOf` whose branches each declare one
/// string `type` is read the same way (pydantic's `Optional[str]`); anything else is invalid.
fn declared_kind(schema: &JsonObject) -> Result<ParamKind, HeaderRule> {
    match schema.get("type") {
        Some(Value::String(t)) => primitive(t),
        Some(Value::Array(items)) => {
            let names: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            let names = names.ok_or(HeaderRule::TypeMissing)?;
            union_kind(names.into_iter())
        }
        Some(other) => Err(HeaderRule::TypeNotAllowed {
            found: other.to_string(),
        }),
        None => {
            let branches = schema.get("anyOf").or_else(|| schema.get("oneOf"));
            let Some(Value::Array(branches)) = branches else {
                return Err(HeaderRule::TypeMissing);
            };
            let names: Option<Vec<&str>> = branches
                .iter()
                .map(|b| b.get("type").and_then(Value::as_str))
                .collect();
            union_kind(names.ok_or(HeaderRule::TypeMissing)?.into_iter())
        }
    }
}

pub(super) fn check_annotation(value: &Value) -> Result<&str, HeaderRule> {
    let Value::String(s) = value else {
        return Err(HeaderRule::NotAString {
            found: value.to_string(),
        });
    };
    if s.is_empty() {
        return Err(HeaderRule::Empty);
    }
    if let Some(bad) = s.chars().find(|c| !is_tchar(*c)) {
        return Err(HeaderRule::NotAToken {
            value: s.clone(),
            bad,
        });
    }
    Ok(s)
}

impl<'a> Walker<'a> {
    fn pointer_string(&self) -> String {
        let mut out = String::new();
        for seg in &self.pointer {
            out.push('/');
            match seg {
                Seg::Key(k) => escape_into(&mut out, k),
                Seg::Index(i) => out.push_str(&i.to_string()),
            }
        }
        out
    }

    fn problem(&mut self, rule: HeaderRule) {
        let pointer = self.pointer_string();
        self.problems.push(HeaderProblem { pointer, rule });
    }

    fn visit(&mut self, schema: &'a Value, depth: usize) {
        // Boolean schemas (`true`/`false`) hold no annotations.
        if let Value::Object(obj) = schema {
            self.visit_object(obj, depth);
        }
    }

    /// Visits `sub` under `segs`, through `keyword` when it is not `properties`.
    fn descend(
        &mut self,
        segs: &[Seg<'a>],
        keyword: Option<&'a str>,
        sub: &'a Value,
        depth: usize,
    ) {
        self.pointer.extend_from_slice(segs);
        let entered_via = keyword.is_some() && self.via.is_none();
        if entered_via {
            self.via = keyword;
        }
        self.visit(sub, depth + 1);
        if entered_via {
            self.via = None;
        }
        self.pointer.truncate(self.pointer.len() - segs.len());
    }

    pub(super) fn visit_object(&mut self, obj: &'a JsonObject, depth: usize) {
        if depth > MAX_SCHEMA_DEPTH {
            self.problem(HeaderRule::TooDeep);
            return;
        }
        if let Some(annotation) = obj.get(ANNOTATION) {
            self.annotated(obj, annotation);
        }
        // One pass over the members; most schema objects have a handful.
        for (key, value) in obj {
            if key == "properties" {
                let Value::Object(props) = value else {
                    continue;
                };
                for (name, sub) in props {
                    let in_chain = self.via.is_none();
                    if in_chain {
                        self.props.push(name);
                    }
                    self.descend(&[Seg::Key(key), Seg::Key(name)], None, sub, depth);
                    if in_chain {
                        self.props.pop();
                    }
                }
                continue;
            }
            match (holds(key), value) {
                (Holds::One, sub @ Value::Object(_)) => {
                    self.descend(&[Seg::Key(key)], Some(key), sub, depth)
                }
                (Holds::One | Holds::Array, Value::Array(subs)) => {
                    for (i, sub) in subs.iter().enumerate() {
                        self.descend(&[Seg::Key(key), Seg::Index(i)], Some(key), sub, depth);
                    }
                }
                (Holds::Map, Value::Object(subs)) => {
                    for (name, sub) in subs {
                        self.descend(&[Seg::Key(key), Seg::Key(name)], Some(key), sub, depth);
                    }
                }
                _ => {}
            }
        }
    }

    fn annotated(&mut self, obj: &'a JsonObject, annotation: &'a Value) {
        if let Some(keyword) = self.via {
            self.problem(HeaderRule::Unreachable {
                keyword: keyword.to_owned(),
            });
            return;
        }
        if self.props.is_empty() {
            self.problem(HeaderRule::OnRoot);
            return;
        }
        match (check_annotation(annotation), declared_kind(obj)) {
            (Ok(annotation), Ok(kind)) => {
                let pointer = self.pointer_string();
                let path = self.props.clone();
                self.found.push(Found {
                    pointer,
                    annotation,
                    path,
                    kind,
                });
            }
            (annotation, kind) => {
                for rule in annotation.err().into_iter().chain(kind.err()) {
                    self.problem(rule);
                }
            }
        }
    }

    /// Case-insensitive uniqueness across the whole schema.
    pub(super) fn check_duplicates(&mut self) {
        for (i, later) in self.found.iter().enumerate() {
            if let Some(first) = self.found[..i]
                .iter()
                .find(|f| f.annotation.eq_ignore_ascii_case(later.annotation))
            {
                self.problems.push(HeaderProblem {
                    pointer: later.pointer.clone(),
                    rule: HeaderRule::Duplicate {
                        value: later.annotation.to_owned(),
                        first: first.pointer.clone(),
                    },
                });
            }
        }
    }
}

/// The problem of an annotation `http` refuses as a header name, which the token rule should
/// already have caught.
pub(super) fn not_a_header_name(pointer: String, annotation: &str) -> HeaderProblem {
    let bad = annotation.chars().find(|c| !is_tchar(*c)).unwrap_or(' ');
    HeaderProblem {
        pointer,
        rule: HeaderRule::NotAToken {
            value: annotation.to_owned(),
            bad,
        },
    }
}

/// The header of an annotation that passed the token rule, so its name always converts; `None`
/// (reported as not a token) cannot happen.
pub(super) fn param(
    annotation: &str,
    path: Box<[Box<str>]>,
    kind: ParamKind,
) -> Option<ParamHeader> {
    let name: Arc<str> = format!("{PARAM_PREFIX}{annotation}").into();
    Some(ParamHeader {
        header: HeaderName::shared(name)?,
        path,
        kind,
    })
}

//! `x-mcp-header` validation into a [`HeaderPlan`], and `Mcp-Param-*` values from arguments.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, LazyLock};

use serde_json::{Number, Value};
use toolwire_types::{JsonObject, Mention, Schema, Tool};

use crate::standard::{MCP_NAME, method_header};
use crate::value::{Header, HeaderName, HeaderValue, encode_value};

mod walk;

use walk::{Found, Walker, check_annotation, escape_into, not_a_header_name, param};

/// The prefix of argument headers.
pub const PARAM_PREFIX: &str = "Mcp-Param-";

/// The annotation keyword in a property schema.
pub const ANNOTATION: &str = "x-mcp-header";

/// [`ANNOTATION`]'s search in a schema's text, prepared once for every tool a client caches.
static ANNOTATION_MENTION: LazyLock<Mention> = LazyLock::new(|| Mention::new(ANNOTATION));

/// The largest integer magnitude a header may carry: 2^53 − 1.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// How deep the validator walks a schema before giving up with [`HeaderRule::TooDeep`].
pub const MAX_SCHEMA_DEPTH: usize = 128;

/// How a schema keyword holds subschemas, for the walk.
enum Holds {
    /// Not a subschema keyword (or `properties`, handled apart).
    Nothing,
    /// One subschema (`items` may also be an array, in older drafts).
    One,
    /// An array of subschemas.
    Array,
    /// A map of subschemas.
    Map,
}

/// Every JSON Schema keyword (2020-12 and draft-07) that holds subschemas other than
/// `properties`; an annotation under any of them is unreachable.
fn holds(keyword: &str) -> Holds {
    match keyword {
        "items"
        | "additionalItems"
        | "additionalProperties"
        | "unevaluatedProperties"
        | "unevaluatedItems"
        | "propertyNames"
        | "contains"
        | "not"
        | "if"
        | "then"
        | "else" => Holds::One,
        "allOf" | "anyOf" | "oneOf" | "prefixItems" => Holds::Array,
        "patternProperties" | "dependentSchemas" | "$defs" | "definitions" | "dependencies" => {
            Holds::Map
        }
        _ => Holds::Nothing,
    }
}

/// The primitive type of an annotated argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `"type": "string"`.
    String,
    /// `"type": "integer"`: canonical decimal within ±(2^53 − 1).
    Integer,
    /// `"type": "boolean"`: `true` / `false`.
    Boolean,
    /// Any of the three, decided by the value (a per-call header map has no schema).
    Any,
}

impl fmt::Display for ParamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Any => "string, integer or boolean",
        })
    }
}

/// One argument mirrored into a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    header: HeaderName,
    path: Box<[Box<str>]>,
    kind: ParamKind,
}

impl ParamHeader {
    /// The full header name, `Mcp-Param-{annotation}`.
    pub fn header_name(&self) -> &str {
        self.header.as_str()
    }

    /// The annotation (`{Name}` of `Mcp-Param-{Name}`).
    pub fn annotation(&self) -> &str {
        &self.header.as_str()[PARAM_PREFIX.len()..]
    }

    /// The chain of `properties` keys from the arguments object to the value.
    pub fn path(&self) -> &[Box<str>] {
        &self.path
    }

    /// The argument's declared type.
    pub fn kind(&self) -> ParamKind {
        self.kind
    }

    /// The value at this parameter's path in `arguments`; `None` when absent or `null`.
    pub fn lookup<'a>(&self, arguments: Option<&'a JsonObject>) -> Option<&'a Value> {
        let (last, parents) = self.path.split_last()?;
        let mut object = arguments?;
        for key in parents {
            object = object.get(&**key)?.as_object()?;
        }
        object.get(&**last).filter(|v| !v.is_null())
    }
}

/// The headers a tool's calls carry: validated once from the input schema, applied to the
/// arguments of every call. Cheap to clone (shared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderPlan(Arc<PlanInner>);

#[derive(Debug, PartialEq, Eq)]
struct PlanInner {
    tool: Box<str>,
    /// The `Mcp-Name` value of the tool, encoded once.
    name: HeaderValue,
    params: Box<[ParamHeader]>,
}

/// Why one `x-mcp-header` annotation is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderRule {
    /// The annotation is not a string.
    NotAString {
        /// The value as JSON.
        found: String,
    },
    /// The annotation is the empty string.
    Empty,
    /// The annotation is not an RFC 9110 token (space, `:`, non-ASCII, control characters).
    NotAToken {
        /// The annotation.
        value: String,
        /// The first character that is not a `tchar`.
        bad: char,
    },
    /// Two annotations of one schema are equal ignoring ASCII case.
    Duplicate {
        /// The annotation.
        value: String,
        /// Where the first one is.
        first: String,
    },
    /// The property's type is not `string`, `integer` or `boolean`.
    TypeNotAllowed {
        /// The declared type.
        found: String,
    },
    /// The property declares no type (and no `anyOf`/`oneOf` of one primitive plus `null`).
    TypeMissing,
    /// The property's type union has more than one non-null type.
    AmbiguousUnion {
        /// The non-null types.
        types: Vec<String>,
    },
    /// The annotation is not reachable through `properties` alone.
    Unreachable {
        /// The first keyword on the path that is not `properties`.
        keyword: String,
    },
    /// The annotation is on the root schema (the path is empty).
    OnRoot,
    /// The schema nests deeper than [`MAX_SCHEMA_DEPTH`].
    TooDeep,
    /// A per-call header map names no argument.
    EmptyArgumentName,
}

impl fmt::Display for HeaderRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAString { found } => write!(f, "x-mcp-header must be a string, found {found}"),
            Self::Empty => f.write_str("x-mcp-header must not be empty"),
            Self::NotAToken { value, bad } => {
                write!(
                    f,
                    "x-mcp-header {value:?} is not an HTTP token (character {bad:?})"
                )
            }
            Self::Duplicate { value, first } => write!(
                f,
                "x-mcp-header {value:?} repeats the one at {first} (names are case-insensitive)"
            ),
            Self::TypeNotAllowed { found } => write!(
                f,
                "x-mcp-header is only allowed on string, integer or boolean properties, not {found}"
            ),
            Self::TypeMissing => f.write_str("x-mcp-header property declares no type"),
            Self::AmbiguousUnion { types } => {
                write!(
                    f,
                    "x-mcp-header property has a union of several types {types:?}"
                )
            }
            Self::Unreachable { keyword } => write!(
                f,
                "x-mcp-header must be reachable through `properties` only, but this one is under `{keyword}`"
            ),
            Self::OnRoot => f.write_str("x-mcp-header is not allowed on the root schema"),
            Self::TooDeep => write!(f, "schema nests deeper than {MAX_SCHEMA_DEPTH} levels"),
            Self::EmptyArgumentName => f.write_str("a header map entry names no argument"),
        }
    }
}

/// One problem: where (a JSON pointer into the input schema) and which rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderProblem {
    /// JSON pointer of the annotated property (`/properties/region`).
    pub pointer: String,
    /// The rule it breaks.
    pub rule: HeaderRule,
}

impl fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "at {at}: {}", self.rule)
    }
}

/// A tool whose `x-mcp-header` annotations break the rules; over Streamable HTTP such a tool
/// MUST be excluded from the tool list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}` has invalid x-mcp-header annotations: {}{}", problems[0], more(problems.len()))]
pub struct InvalidToolHeaders {
    /// The tool's name.
    pub tool: String,
    /// Every problem found (at least one).
    pub problems: Vec<HeaderProblem>,
}

fn more(n: usize) -> String {
    if n > 1 {
        format!(" (and {} more)", n - 1)
    } else {
        String::new()
    }
}

/// Why an argument value cannot become a header. The call should fail rather than send a
/// header the server will find wrong, or omit one the server requires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// The value's JSON type does not match the declared type.
    #[error("argument for {header} must be a {expected}, found {found}")]
    TypeMismatch {
        /// The header.
        header: String,
        /// The declared type.
        expected: ParamKind,
        /// The JSON type found.
        found: &'static str,
    },
    /// An integer argument has a fractional part.
    #[error("argument for {header} must be an integer, found {value}")]
    NotAnInteger {
        /// The header.
        header: String,
        /// The value as JSON.
        value: String,
    },
    /// An integer argument lies outside ±(2^53 − 1).
    #[error("argument for {header} is outside ±(2^53 − 1): {value}")]
    OutOfRange {
        /// The header.
        header: String,
        /// The value as JSON.
        value: String,
    },
}

impl HeaderPlan {
    /// Validates the `x-mcp-header` annotations of a tool's input schema (SEP-2243 §Schema
    /// Extension) and returns the plan, or every problem found.
    pub fn from_input_schema(
        tool: &str,
        input_schema: &JsonObject,
    ) -> Result<Self, InvalidToolHeaders> {
        let mut walker = Walker::default();
        walker.visit_object(input_schema, 0);
        walker.check_duplicates();
        let Walker {
            found,
            mut problems,
            ..
        } = walker;
        let mut params = Vec::with_capacity(found.len());
        if problems.is_empty() {
            for f in found {
                let path = f.path.into_iter().map(Box::from).collect();
                match param(f.annotation, path, f.kind) {
                    Some(p) => params.push(p),
                    None => problems.push(not_a_header_name(f.pointer, f.annotation)),
                }
            }
        }
        if !problems.is_empty() {
            return Err(InvalidToolHeaders {
                tool: tool.to_owned(),
                problems,
            });
        }
        Ok(Self::new(tool, params.into()))
    }

    /// [`HeaderPlan::for_schema`] for a tool definition.
    pub fn for_tool(tool: &Tool) -> Result<Self, InvalidToolHeaders> {
        Self::for_schema(&tool.name, &tool.input_schema)
    }

    /// [`HeaderPlan::from_input_schema`] for a schema kept as text. One whose text names no
    /// `x-mcp-header` has nothing to find and is not decoded (most tools: the check is a
    /// substring search); its depth is then no concern either, as there is no annotation to
    /// look for. (A schema decoded from a peer's message nests at most 128 levels anyway.)
    pub fn for_schema(tool: &str, schema: &Schema) -> Result<Self, InvalidToolHeaders> {
        if !schema.mentions(&ANNOTATION_MENTION) {
            return Ok(Self::new(tool, Vec::new().into()));
        }
        match schema.decode_object() {
            Ok(object) => Self::from_input_schema(tool, &object),
            // Nested past what the decoder takes, which is past `MAX_SCHEMA_DEPTH` as well.
            Err(_) => Err(InvalidToolHeaders {
                tool: tool.to_owned(),
                problems: vec![HeaderProblem {
                    pointer: String::new(),
                    rule: HeaderRule::TooDeep,
                }],
            }),
        }
    }

    /// A plan from a per-call map of top-level argument name → header annotation (the
    /// stateless alternative to a tool definition), validated by the same token and
    /// uniqueness rules. Types are taken from the values at call time.
    pub fn from_param_map<I, K, V>(tool: &str, map: I) -> Result<Self, InvalidToolHeaders>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let entries: Vec<(K, V)> = map.into_iter().collect();
        let mut walker = Walker::default();
        let mut params = Vec::with_capacity(entries.len());
        for (arg, annotation) in &entries {
            let (arg, annotation) = (arg.as_ref(), annotation.as_ref());
            let mut pointer = String::from("/properties/");
            escape_into(&mut pointer, arg);
            if arg.is_empty() {
                walker.problems.push(HeaderProblem {
                    pointer,
                    rule: HeaderRule::EmptyArgumentName,
                });
                continue;
            }
            let value = Value::String(annotation.to_owned());
            match check_annotation(&value) {
                Ok(_) => match param(annotation, Box::new([Box::from(arg)]), ParamKind::Any) {
                    Some(p) => {
                        params.push(p);
                        walker.found.push(Found {
                            pointer,
                            annotation,
                            path: vec![arg],
                            kind: ParamKind::Any,
                        });
                    }
                    None => walker.problems.push(not_a_header_name(pointer, annotation)),
                },
                Err(rule) => walker.problems.push(HeaderProblem { pointer, rule }),
            }
        }
        walker.check_duplicates();
        if walker.problems.is_empty() {
            Ok(Self::new(tool, params.into()))
        } else {
            Err(InvalidToolHeaders {
                tool: tool.to_owned(),
                problems: walker.problems,
            })
        }
    }

    /// A plan for a tool that mirrors no argument (only `Mcp-Method` and `Mcp-Name`).
    pub fn without_params(tool: &str) -> Self {
        Self::new(tool, Box::new([]))
    }

    fn new(tool: &str, params: Box<[ParamHeader]>) -> Self {
        Self(Arc::new(PlanInner {
            tool: tool.into(),
            name: encode_value(tool),
            params,
        }))
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        &self.0.tool
    }

    /// The annotated parameters, in the order of the schema's keys.
    pub fn params(&self) -> &[ParamHeader] {
        &self.0.params
    }

    /// Whether the tool mirrors no argument.
    pub fn is_empty(&self) -> bool {
        self.0.params.is_empty()
    }

    /// Every SEP-2243 header of a `tools/call` of this tool: `Mcp-Method`, `Mcp-Name`, and the
    /// `Mcp-Param-*` of these arguments.
    pub fn call_headers(
        &self,
        arguments: Option<&JsonObject>,
    ) -> Result<Vec<Header>, ArgumentError> {
        let mut out = Vec::with_capacity(2 + self.0.params.len());
        out.push(method_header("tools/call"));
        out.push(Header {
            name: MCP_NAME,
            value: self.0.name.clone(),
        });
        self.write_param_headers(arguments, &mut out)?;
        Ok(out)
    }

    /// The `Mcp-Param-*` headers for these arguments: one per annotated argument that is
    /// present and not `null`.
    pub fn param_headers(
        &self,
        arguments: Option<&JsonObject>,
    ) -> Result<Vec<Header>, ArgumentError> {
        let mut out = Vec::with_capacity(self.0.params.len());
        self.write_param_headers(arguments, &mut out)?;
        Ok(out)
    }

    /// Appends the `Mcp-Param-*` headers for these arguments to `out`. On error `out` is left
    /// as it was.
    pub fn write_param_headers(
        &self,
        arguments: Option<&JsonObject>,
        out: &mut Vec<Header>,
    ) -> Result<(), ArgumentError> {
        let start = out.len();
        for p in self.0.params.iter() {
            let Some(value) = p.lookup(arguments) else {
                continue;
            };
            match header_value(p.kind, p.header_name(), value) {
                Ok(value) => out.push(Header {
                    name: p.header.clone(),
                    value,
                }),
                Err(e) => {
                    out.truncate(start);
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// An integer in canonical decimal: `42.0` is `42`; fractions and magnitudes beyond 2^53 − 1
/// are errors.
fn canonical_integer(header: &str, n: &Number) -> Result<i64, ArgumentError> {
    let out_of_range = || ArgumentError::OutOfRange {
        header: header.to_owned(),
        value: n.to_string(),
    };
    if let Some(i) = n.as_i64() {
        return if i.unsigned_abs() <= MAX_SAFE_INTEGER {
            Ok(i)
        } else {
            Err(out_of_range())
        };
    }
    if n.is_u64() {
        return Err(out_of_range());
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if !f.is_finite() || f.fract() != 0.0 {
        return Err(ArgumentError::NotAnInteger {
            header: header.to_owned(),
            value: n.to_string(),
        });
    }
    if f.abs() > MAX_SAFE_INTEGER as f64 {
        return Err(out_of_range());
    }
    // In range and integral, so the conversion is exact.
    Ok(f as i64)
}

/// The string form of an argument value for a header, before Base64 wrapping.
pub(crate) fn header_text<'v>(
    kind: ParamKind,
    header: &str,
    value: &'v Value,
) -> Result<Cow<'v, str>, ArgumentError> {
    match (kind, value) {
        (ParamKind::String | ParamKind::Any, Value::String(s)) => Ok(Cow::Borrowed(s)),
        (ParamKind::Boolean | ParamKind::Any, Value::Bool(b)) => {
            Ok(Cow::Borrowed(if *b { "true" } else { "false" }))
        }
        (ParamKind::Integer | ParamKind::Any, Value::Number(n)) => {
            canonical_integer(header, n).map(|i| Cow::Owned(i.to_string()))
        }
        _ => Err(ArgumentError::TypeMismatch {
            header: header.to_owned(),
            expected: kind,
            found: json_type(value),
        }),
    }
}

/// The header value of an argument: one allocation at most (none for booleans).
fn header_value(
    kind: ParamKind,
    header: &str,
    value: &Value,
) -> Result<HeaderValue, ArgumentError> {
    Ok(match (kind, value) {
        (ParamKind::Boolean | ParamKind::Any, Value::Bool(b)) => {
            HeaderValue::from_static(if *b { "true" } else { "false" })
        }
        (ParamKind::Integer | ParamKind::Any, Value::Number(n)) => {
            // Decimal integers are always plain ASCII.
            HeaderValue::from_integer(canonical_integer(header, n)?)
        }
        _ => encode_value(&header_text(kind, header, value)?),
    })
}

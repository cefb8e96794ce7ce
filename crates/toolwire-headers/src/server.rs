//! The server and gateway side: does a request's headers match its body? (SEP-2243 §Server
//! Validation.)

use std::borrow::Cow;
use std::fmt;

use serde_json::{Value, json};
use toolwire_types::{ErrorObject, JsonObject, error::code, meta_key};

use crate::plan::{HeaderPlan, ParamKind, header_text};
use crate::standard::name_source;
use crate::value::{ValueDecodeError, decode_value_text};

/// The request headers a server received, looked up case-insensitively. A header sent twice
/// is a mismatch when it is one the check reads.
#[derive(Debug, Clone, Default)]
pub struct ReceivedHeaders<'a> {
    entries: Vec<(&'a str, &'a [u8])>,
}

impl<'a> ReceivedHeaders<'a> {
    /// Collects `(name, value)` pairs as an HTTP library yields them.
    pub fn new(headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        Self {
            entries: headers.into_iter().collect(),
        }
    }

    fn get(&self, name: &str) -> Result<Option<&'a [u8]>, Mismatch> {
        let mut found = self
            .entries
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name));
        match (found.next(), found.next()) {
            (None, _) => Ok(None),
            (Some((_, v)), None) => Ok(Some(v)),
            (Some(_), Some(_)) => Err(Mismatch::new(name, MismatchKind::Repeated)),
        }
    }
}

/// What is wrong with a header.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MismatchKind {
    /// The header is required and absent.
    Missing,
    /// The header's (decoded) value differs from the body's.
    Differs {
        /// What the header said, decoded.
        header: String,
        /// What the body says, as text.
        body: String,
    },
    /// The header's value could not be decoded.
    Undecodable(ValueDecodeError),
    /// The header was sent more than once.
    Repeated,
    /// `MCP-Protocol-Version` was sent but the body's `_meta` has no protocol version.
    BodyHasNoVersion,
}

/// A header that does not match the body: answer HTTP 400 with JSON-RPC `-32020`
/// ([`Mismatch::to_error`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{header} header {kind}")]
pub struct Mismatch {
    /// The header, as the spec names it.
    pub header: String,
    /// What is wrong.
    pub kind: MismatchKind,
    /// The body member it mirrors (`method`, `name`, the argument path), for the message.
    pub body_member: Option<String>,
}

impl fmt::Display for MismatchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => f.write_str("is missing"),
            Self::Differs { header, body } => {
                write!(f, "value {header:?} does not match the body value {body:?}")
            }
            Self::Undecodable(e) => write!(f, "cannot be decoded: {e}"),
            Self::Repeated => f.write_str("is sent more than once"),
            Self::BodyHasNoVersion => {
                f.write_str("is present but the body's _meta carries no protocol version")
            }
        }
    }
}

impl Mismatch {
    /// The HTTP status to answer with.
    pub const HTTP_STATUS: u16 = 400;

    fn new(header: &str, kind: MismatchKind) -> Self {
        Self {
            header: header.to_owned(),
            kind,
            body_member: None,
        }
    }

    fn member(mut self, member: impl Into<String>) -> Self {
        self.body_member = Some(member.into());
        self
    }

    /// The JSON-RPC error: `-32020 HeaderMismatch`, the message saying which header and why,
    /// `data` naming them for programs.
    pub fn to_error(&self) -> ErrorObject {
        let message = match &self.body_member {
            Some(member) => format!("Header mismatch: {self} (body member `{member}`)"),
            None => format!("Header mismatch: {self}"),
        };
        ErrorObject {
            code: code::HEADER_MISMATCH,
            message,
            data: Some(json!({ "header": self.header, "bodyMember": self.body_member })),
        }
    }
}

fn decoded<'a>(
    headers: &ReceivedHeaders<'a>,
    name: &str,
) -> Result<Option<Cow<'a, str>>, Mismatch> {
    match headers.get(name)? {
        None => Ok(None),
        Some(raw) => decode_value_text(raw)
            .map(Some)
            .map_err(|e| Mismatch::new(name, MismatchKind::Undecodable(e))),
    }
}

/// `name` equals `body` when present; when `required`, it must be.
fn check_equal(
    headers: &ReceivedHeaders<'_>,
    name: &str,
    member: &str,
    body: &str,
    required: bool,
) -> Result<(), Mismatch> {
    match decoded(headers, name)? {
        None if !required => Ok(()),
        None => Err(Mismatch::new(name, MismatchKind::Missing).member(member)),
        Some(h) if h == body => Ok(()),
        Some(h) => Err(Mismatch::new(
            name,
            MismatchKind::Differs {
                header: h.into_owned(),
                body: body.to_owned(),
            },
        )
        .member(member)),
    }
}

/// Whether a header's text matches a body value of the declared kind. Integers compare
/// numerically (`42` matches `42.0` either way round).
fn value_matches(kind: ParamKind, header: &str, body: &Value) -> bool {
    match body {
        Value::Number(n) => {
            let parsed: Option<f64> = header.trim().parse().ok();
            matches!((parsed, n.as_f64()), (Some(h), Some(b)) if h == b)
        }
        _ => header_text(kind, "", body).is_ok_and(|text| text == header),
    }
}

fn body_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

/// Checks a modern (`2026-07-28`) request's headers against its body:
///
/// 1. `MCP-Protocol-Version` equals `params._meta["io.modelcontextprotocol/protocolVersion"]`;
/// 2. `Mcp-Method` equals `method` (case-sensitive);
/// 3. `Mcp-Name` equals `params.name` / `params.uri` / `params.taskId` where the method has one;
/// 4. for `tools/call` with the tool's `plan`: each annotated argument that is present and not
///    `null` has its `Mcp-Param-*` header with a matching value (Base64 wrapper decoded;
///    integers compared numerically). A header whose argument is absent is not an error: the
///    spec says the server "MUST NOT expect" one, and nothing contradicts it.
///
/// Call it only for requests the server treats as modern (the era comes from the
/// `MCP-Protocol-Version` header); legacy requests carry none of these.
pub fn check_request(
    headers: &ReceivedHeaders<'_>,
    method: &str,
    params: Option<&JsonObject>,
    plan: Option<&HeaderPlan>,
) -> Result<(), Mismatch> {
    let version_header = "MCP-Protocol-Version";
    let body_version = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(meta_key::PROTOCOL_VERSION))
        .and_then(Value::as_str);
    match (decoded(headers, version_header)?, body_version) {
        (None, _) => return Err(Mismatch::new(version_header, MismatchKind::Missing)),
        (Some(_), None) => {
            return Err(Mismatch::new(
                version_header,
                MismatchKind::BodyHasNoVersion,
            ));
        }
        (Some(h), Some(b)) if h != b => {
            return Err(Mismatch::new(
                version_header,
                MismatchKind::Differs {
                    header: h.into_owned(),
                    body: b.to_owned(),
                },
            )
            .member(format!("_meta.{}", meta_key::PROTOCOL_VERSION)));
        }
        _ => {}
    }

    check_routing(headers, method, params, plan, true)
}

/// [`check_request`] for a server that repairs one client quirk: an `MCP-Protocol-Version`
/// header naming another version this crate knows than the body's `_meta`, on a request that
/// is otherwise right (some clients send the version they first negotiated on every request).
/// The body wins: `Ok(Some(mismatch))` is the disagreement that was overlooked; every other
/// mismatch (routing headers, an unknown or absent version) is still an error.
pub fn check_request_repairing_version(
    headers: &ReceivedHeaders<'_>,
    method: &str,
    params: Option<&JsonObject>,
    plan: Option<&HeaderPlan>,
) -> Result<Option<Mismatch>, Mismatch> {
    match check_request(headers, method, params, plan) {
        Ok(()) => Ok(None),
        Err(mismatch) if mismatch.is_known_version_disagreement() => {
            check_routing(headers, method, params, plan, true).map(|()| Some(mismatch))
        }
        Err(mismatch) => Err(mismatch),
    }
}

impl Mismatch {
    /// `MCP-Protocol-Version` names a version this crate knows, and the body another.
    fn is_known_version_disagreement(&self) -> bool {
        self.header == "MCP-Protocol-Version"
            && matches!(&self.kind, MismatchKind::Differs { header, .. }
                if toolwire_types::ProtocolVersion::new(header.as_str()).is_ok_and(|v| v.is_supported()))
    }
}

/// Checks the routing headers a request that is not modern carries against its body, requiring
/// none: `Mcp-Method`, `Mcp-Name` and each `Mcp-Param-*` of the tool's `plan` must, when
/// present, say what the body says (some clients send them in every era: the C# SDK adds
/// `Mcp-Method` and `Mcp-Name` to every POST), so a balancer routing on them is never told
/// one thing while the server does another.
pub fn check_present(
    headers: &ReceivedHeaders<'_>,
    method: &str,
    params: Option<&JsonObject>,
    plan: Option<&HeaderPlan>,
) -> Result<(), Mismatch> {
    check_routing(headers, method, params, plan, false)
}

/// `Mcp-Method`, `Mcp-Name` and the plan's `Mcp-Param-*` against the body; when `required`,
/// each must be present where the body has its value.
fn check_routing(
    headers: &ReceivedHeaders<'_>,
    method: &str,
    params: Option<&JsonObject>,
    plan: Option<&HeaderPlan>,
    required: bool,
) -> Result<(), Mismatch> {
    check_equal(headers, "Mcp-Method", "method", method, required)?;

    if let Some(member) = name_source(method) {
        let body = params
            .and_then(|p| p.get(member))
            .map(body_text)
            .unwrap_or_default();
        check_equal(headers, "Mcp-Name", member, &body, required)?;
    }

    let Some(plan) = plan.filter(|_| method == "tools/call") else {
        return Ok(());
    };
    let arguments = params
        .and_then(|p| p.get("arguments"))
        .and_then(Value::as_object);
    for p in plan.params() {
        let name = p.header_name();
        let member = || format!("arguments.{}", p.path().join("."));
        let header = decoded(headers, name)?;
        match (p.lookup(arguments), header) {
            (None, _) => {}
            (Some(_), None) if !required => {}
            (Some(_), None) => {
                return Err(Mismatch::new(name, MismatchKind::Missing).member(member()));
            }
            (Some(body), Some(h)) if value_matches(p.kind(), &h, body) => {}
            (Some(body), Some(h)) => {
                return Err(Mismatch::new(
                    name,
                    MismatchKind::Differs {
                        header: h.into_owned(),
                        body: body_text(body).into_owned(),
                    },
                )
                .member(member()));
            }
        }
    }
    Ok(())
}

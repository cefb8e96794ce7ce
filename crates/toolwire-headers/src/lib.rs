//! SEP-2243 ("HTTP Standardization") header rules for MCP's Streamable HTTP transport, for
//! clients and for the servers and gateways that check them.
//!
//! - [`standard_headers`]: `Mcp-Method` and `Mcp-Name` for a request ([`name_source`] says
//!   which params member `Mcp-Name` mirrors).
//! - [`HeaderPlan`]: a tool's `x-mcp-header` annotations, validated once
//!   ([`HeaderPlan::from_input_schema`]) into the list of arguments to mirror; applied to every
//!   call's arguments ([`HeaderPlan::param_headers`]). A tool that breaks a rule gets an
//!   [`InvalidToolHeaders`] that names the tool, the property (a JSON pointer) and the rule.
//!   [`HeaderPlan::from_param_map`] builds a plan for one call from an argument → header map.
//! - [`encode_value`] / [`decode_value`]: plain values, or the `=?base64?…?=` wrapper for
//!   anything that is not safe as plain ASCII. A [`HeaderValue`] can hold only printable ASCII,
//!   so CR and LF never reach a header.
//! - [`check_request`]: the server-side check that headers match the body, answering with the
//!   `-32020 HeaderMismatch` error the spec prescribes ([`Mismatch::to_error`]);
//!   [`check_present`] the same for a request of an older era, whose headers are optional but,
//!   when sent, must still agree with the body.
//!
//! Pure: no I/O, no clock, no caching. Names and values are built once in the form they travel
//! in, `http`'s types ([`Header::into_http`]): the session hands them to the transport without
//! a conversion per request. [`HeaderName::as_str`] keeps the name as written for display.
//!
//! Where the spec is silent, the decisions are in `docs/protocol-decisions.md`: a `type` union
//! or `anyOf` may add `null` to exactly one primitive; a missing `type` is invalid; an argument
//! whose value does not fit its declared type is an error at call time rather than a wrong or
//! missing header.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use toolwire_headers::HeaderPlan;
//!
//! let schema = json!({"type": "object", "properties": {
//!     "region": {"type": "string", "x-mcp-header": "Region"},
//!     "query": {"type": "string"}}});
//! let plan = HeaderPlan::from_input_schema("execute_sql", schema.as_object().unwrap())?;
//! let args = json!({"region": "us-west-2", "query": "SELECT 1"});
//! let headers = plan.param_headers(args.as_object()).unwrap();
//! assert_eq!(headers[0].name.as_str(), "Mcp-Param-Region");
//! assert_eq!(headers[0].value.as_str(), "us-west-2");
//! # Ok::<(), toolwire_headers::InvalidToolHeaders>(())
//! ```
//!
//! # Dependencies
//! - `base64`: the standard padded alphabet of the wrapper.
//! - `serde_json`: schemas and arguments are JSON values (read, never derived).
//! - `http`: the header name and value types hyper sends (plain data, no I/O), so a header
//!   is built once in its final form.
//!
//! # Performance
//! Measured with `cargo bench -p toolwire-headers` (criterion), on the project's 2-core
//! machine; see the `headers` bench for the cases. The figures are written in
//! `docs/benchmarks.md`.

mod plan;
mod server;
mod standard;
mod value;

pub use plan::{
    ANNOTATION, ArgumentError, HeaderPlan, HeaderProblem, HeaderRule, InvalidToolHeaders,
    MAX_SAFE_INTEGER, MAX_SCHEMA_DEPTH, PARAM_PREFIX, ParamHeader, ParamKind,
};
pub use server::{
    Mismatch, MismatchKind, ReceivedHeaders, check_present, check_request,
    check_request_repairing_version,
};
pub use standard::{
    AUTHORIZATION, MCP_METHOD, MCP_NAME, PROTOCOL_VERSION, TRACEPARENT, TRACESTATE,
    authorization_header, method_header, name_header, name_source, protocol_version_header,
    standard_headers, trace_headers,
};
pub use value::{
    BASE64_PREFIX, BASE64_SUFFIX, Header, HeaderName, HeaderValue, ValueDecodeError, decode_value,
    encode_value, needs_base64,
};

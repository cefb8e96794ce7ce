//! The `tools/call` path: headers from the cached tool's plan (or a per-call definition or
//! map), the shared `_meta` envelope, the retry class, progress tokens, and the call as asked
//! ([`CallRequest`]), kept to reissue it after a header mismatch or on the next connection.

use std::sync::Arc;
use web_time::Instant;

use toolwire_headers::{ArgumentError, Header, HeaderPlan, standard_headers};
use toolwire_types::methods::method;
use toolwire_types::{
    CallToolRequestParams, ClientCapabilities, JsonObject, Meta, MetaOnlyParams, ProtocolVersion,
    Rendered, RequestMethod, Tool, encode_request,
};

use super::{PendingKind, Sent, Session};
use crate::{CallOptions, InputResponses, OpId, RequestError, SettleMode};

/// A `tools/call` as the caller asked it: what it takes to send it, and to send it again (once
/// after a header mismatch, or on the next connection when [`Session::interrupt`] says so).
/// The session keeps it while the call is pending; nothing is copied to keep it.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The tool's name.
    pub name: String,
    /// The arguments, shared with the caller, which may need them for an `input_required`
    /// round.
    pub arguments: Option<Arc<JsonObject>>,
    /// How to call it.
    pub options: CallOptions,
    /// The MRTR answers and `requestState` of a round after the first.
    pub input: Option<InputResponses>,
}

impl CallRequest {
    /// A first-round call of `name`.
    pub fn new(
        name: impl Into<String>,
        arguments: Option<Arc<JsonObject>>,
        options: CallOptions,
    ) -> Self {
        Self {
            name: name.into(),
            arguments,
            options,
            input: None,
        }
    }
}

/// The SEP-2243 headers of a `tools/call` of `name` at a version and over a transport that
/// send them: `Mcp-Method`, `Mcp-Name` and the `Mcp-Param-*` of `plan` for `arguments`, or the
/// first two alone without a plan (a tool the client does not know). Fails on an argument that
/// does not fit its annotation. The one place the rule lives: the session's calls and
/// `toolwire::Client::call_headers` both use it.
pub fn tool_call_headers(
    name: &str,
    plan: Option<&HeaderPlan>,
    arguments: Option<&JsonObject>,
) -> Result<Vec<Header>, ArgumentError> {
    match plan {
        Some(plan) => plan.call_headers(arguments),
        None => Ok(standard_headers("tools/call", Some(name))),
    }
}

/// Every header a `tools/call` of `name` with `arguments` carries at `version` over a
/// transport that does (`carries_headers`) or does not carry headers: `MCP-Protocol-Version`
/// where the version sends it, then from `2026-07-28` the SEP-2243 ones
/// ([`tool_call_headers`]); none over a transport without headers. The rule the session's own
/// calls follow, for showing a call's headers before it is made.
pub fn call_headers_at(
    version: &ProtocolVersion,
    carries_headers: bool,
    name: &str,
    plan: Option<&HeaderPlan>,
    arguments: Option<&JsonObject>,
) -> Result<Vec<Header>, ArgumentError> {
    let mut headers = Vec::new();
    if sends_version_header(carries_headers, version) {
        headers.push(toolwire_headers::protocol_version_header(version));
    }
    if sends_sep2243_headers(carries_headers, version) {
        headers.extend(tool_call_headers(name, plan, arguments)?);
    }
    Ok(headers)
}

/// Whether requests at `version` carry the SEP-2243 headers: from `2026-07-28`, and only over
/// a transport that has headers (stdio "MAY ignore `x-mcp-header` annotations entirely";
/// building headers nobody sends would only cost time).
pub(super) fn sends_sep2243_headers(carries_headers: bool, version: &ProtocolVersion) -> bool {
    carries_headers && version.uses_sep2243_headers()
}

/// Whether messages at `version` carry `MCP-Protocol-Version`: where the version sends it and
/// the transport carries headers.
pub(super) fn sends_version_header(carries_headers: bool, version: &ProtocolVersion) -> bool {
    carries_headers && version.sends_version_header()
}

impl Session {
    /// The envelope of a modern `tools/call` at `version` as one shared `_meta`, built on first
    /// use (and again only if the version changes).
    pub(super) fn call_meta(&mut self, version: &ProtocolVersion) -> Rendered<Meta> {
        if let Some((built_for, meta)) = &self.call_meta
            && built_for == version
        {
            return meta.clone();
        }
        let mut params = MetaOnlyParams::default();
        self.modern_envelope(version, &mut params);
        let meta = Rendered::new(params.meta.unwrap_or_default());
        self.call_meta = Some((version.clone(), meta.clone()));
        meta
    }

    /// The envelope of a modern `tools/call` at `version` declaring `capabilities` instead of
    /// the session's: the last one built is kept, and used again while calls declare the
    /// same capabilities (the same shared value, or an equal one).
    fn declared_meta(
        &mut self,
        version: &ProtocolVersion,
        capabilities: &Rendered<ClientCapabilities>,
    ) -> Rendered<Meta> {
        if let Some((built_for, declared, meta)) = &self.declared_meta
            && built_for == version
            && declared == capabilities
        {
            return meta.clone();
        }
        let mut own = self.call_meta(version).get().clone();
        own.client_capabilities = Some(capabilities.clone());
        let meta = Rendered::new(own);
        self.declared_meta = Some((version.clone(), capabilities.clone(), meta.clone()));
        meta
    }

    /// Calls a tool. Its headers come from `options.tool` or `options.header_map` when given,
    /// else from the cached tool's plan; the result arrives as [`Event::Completed`](crate::Event::Completed).
    ///
    /// A call answered with a header mismatch (`-32020`, or `-32001` before the rename) is
    /// reissued once, with a new id and headers from a fresh `tools/list` (unless its headers
    /// came from a per-call definition or map, which a re-list cannot change). A result that
    /// announces tool changes waits for them under the settle barrier ([`SettleMode`]).
    pub fn call_tool(
        &mut self,
        name: &str,
        arguments: Option<JsonObject>,
        options: CallOptions,
        now: Instant,
    ) -> Result<OpId, RequestError> {
        self.call_tool_shared(name, arguments.map(Arc::new), options, now)
    }

    /// [`Session::call_tool`] with arguments the caller keeps too: they are serialised from the
    /// shared map and kept for a reissue without a copy, so a caller that may send them again
    /// (an `input_required` round) holds one map, whatever its size.
    pub fn call_tool_shared(
        &mut self,
        name: &str,
        arguments: Option<Arc<JsonObject>>,
        options: CallOptions,
        now: Instant,
    ) -> Result<OpId, RequestError> {
        self.call(Box::new(CallRequest::new(name, arguments, options)), now)
    }

    /// Sends a call as asked ([`CallRequest`]): a first round, a later MRTR round (with its
    /// `input`), or one [`Session::interrupt`] handed back to be sent on a new connection.
    pub fn call(&mut self, call: Box<CallRequest>, now: Instant) -> Result<OpId, RequestError> {
        if !self.is_ready() {
            let patience = call.options.timeout.unwrap_or(self.config.request_timeout);
            return self.hold(super::Ask::Call(call), patience, now);
        }
        let op = self.allocate_op();
        self.issue_call(op, call, true, now)?;
        Ok(op)
    }

    /// [`Session::call_tool_shared`] for the next round of a call the server answered
    /// `input_required`: the same arguments, with the answers to its input requests and its
    /// `requestState` (a new request with a new id, as MRTR asks).
    pub fn call_tool_with_input(
        &mut self,
        name: &str,
        arguments: Option<Arc<JsonObject>>,
        options: CallOptions,
        input: InputResponses,
        now: Instant,
    ) -> Result<OpId, RequestError> {
        let mut call = CallRequest::new(name, arguments, options);
        call.input = Some(input);
        self.call(Box::new(call), now)
    }

    /// The one funnel of every `tools/call` and its reissue (`may_reissue`: once more after a
    /// header mismatch).
    pub(super) fn issue_call(
        &mut self,
        op: OpId,
        call: Box<CallRequest>,
        may_reissue: bool,
        now: Instant,
    ) -> Result<(), RequestError> {
        let CallRequest {
            name,
            arguments,
            options,
            input,
        } = &*call;
        let name = name.as_str();
        let version = self.version_for(method::CallTool::CAPABILITY)?;
        let snapshot = self.cache.load();
        let cached = snapshot.get(name);
        let plan = match (&options.tool, &options.header_map) {
            (Some(tool), _) => Some(
                HeaderPlan::for_schema(name, &tool.input_schema)
                    .map_err(RequestError::InvalidTool)?,
            ),
            (None, Some(map)) => Some(
                HeaderPlan::from_param_map(name, map.iter().map(|(a, h)| (a, h)))
                    .map_err(RequestError::InvalidTool)?,
            ),
            (None, None) => cached.map(|t| t.plan().clone()),
        };
        // Over a transport without headers (stdio) the annotations are ignored, as the spec
        // allows: no header is built, so no argument is refused for the header it would make.
        let headers = if self.sends_sep2243_headers(&version) {
            if plan.is_none() {
                tracing::warn!(
                    tool = name,
                    "tools/call of `{name}` goes without Mcp-Param-* headers: the tool is not in the \
                     tool cache. Call list_tools() first, add it with add_known_tools(), or pass its \
                     definition in CallOptions"
                );
            }
            tool_call_headers(name, plan.as_ref(), arguments.as_deref())
                .map_err(RequestError::Argument)?
        } else {
            Vec::new()
        };
        let mut headers = headers;
        if let Some(authorization) = &options.authorization {
            if !self.carries_headers {
                return Err(RequestError::CallCredentials);
            }
            headers.push(authorization.clone());
        }
        let definition = options.tool.as_deref().or(cached.map(|t| &**t.tool()));
        let retry_safe = options
            .retry_safe
            .unwrap_or_else(|| definition.is_some_and(Tool::is_safe_to_retry));
        drop(snapshot);
        let id = self.allocate_id();
        // The request's own id is its progress token: unique among active requests.
        let token = options.progress.then(|| id.clone());
        // The caller's own members: never one the session owns.
        let own = options.meta.as_ref().filter(|m| !m.is_empty());
        if let Some(key) = own.and_then(|m| {
            m.keys().find(|k| {
                toolwire_types::is_reserved_key(k) || *k == toolwire_types::meta_key::PROGRESS_TOKEN
            })
        }) {
            return Err(RequestError::ReservedMeta(key.clone()));
        }
        // Cloned only when set: a trace context is per caller, never shared.
        let trace = self.trace.clone();
        let meta = match (&token, own, &trace, version.is_modern()) {
            // Only capabilities of its own: the envelope with them, kept for the next call
            // that declares the same.
            (None, None, None, true) if options.log_level.is_none() => {
                match &options.capabilities {
                    Some(capabilities) => Some(self.declared_meta(&version, capabilities)),
                    None => Some(self.call_meta(&version)),
                }
            }
            (None, None, None, true) => Some(self.call_meta(&version)),
            (None, None, None, false) => None,
            // A token, a trace context or members of its own make this call's `_meta` its
            // own: the envelope (shared members) and them, its own members last.
            (token, own, trace, modern) => {
                let mut meta = if modern {
                    self.call_meta(&version).get().clone()
                } else {
                    Meta::default()
                };
                meta.progress_token = token.clone();
                if let Some(trace) = trace {
                    trace.write_into(&mut meta.extra);
                }
                if let Some(own) = own {
                    meta.extra
                        .extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                Some(Rendered::new(meta))
            }
        };
        // Capabilities or a log level of the call's own replace the session's in its
        // envelope (capabilities alone are in it already, above).
        let own_envelope = options.log_level.is_some()
            || (options.capabilities.is_some()
                && (token.is_some() || own.is_some() || trace.is_some()));
        let meta = match meta {
            Some(meta) if own_envelope && version.is_modern() => {
                let mut envelope = meta.get().clone();
                if let Some(capabilities) = &options.capabilities {
                    envelope.client_capabilities = Some(capabilities.clone());
                }
                if let Some(level) = options.log_level {
                    envelope.log_level = Some(level);
                }
                Some(Rendered::new(envelope))
            }
            meta => meta,
        };
        let params = CallToolRequestParams {
            name,
            arguments: arguments.as_deref(),
            input_responses: input.as_ref().map(|i| &i.responses),
            request_state: input.as_ref().and_then(|i| i.request_state.as_deref()),
            meta,
        };
        let body =
            encode_request(&id, "tools/call", Some(&params)).map_err(RequestError::Encode)?;
        let timeout = options.timeout.unwrap_or(self.config.request_timeout);
        let settle = options
            .settle
            .unwrap_or(self.config.settle != SettleMode::Off);
        // A re-list cannot change headers that came with the call.
        let reissue = may_reissue && options.tool.is_none() && options.header_map.is_none();
        // The call's own context where it gave one, else the session's: sent as headers too.
        let sent_trace = if self.carries_headers {
            own.and_then(toolwire_types::TraceContext::from_meta)
                .or_else(|| trace.clone())
        } else {
            None
        };
        let sent = Sent {
            method: "tools/call",
            headers,
            retry_safe,
            // Kept, not copied: the caller's box moves in.
            kind: PendingKind::ToolCall {
                op,
                call,
                reissue,
                settle,
            },
            timeout,
            progress_token: token,
            trace: sent_trace,
        };
        self.push_request(&version, id, body, sent, now);
        Ok(())
    }
}

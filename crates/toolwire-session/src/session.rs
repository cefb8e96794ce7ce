//! The session state machine: [`Session`], its inputs (`handle_*`), outputs (`poll_*`), the
//! pending table and the request funnel. Each sub-machine lives in a module of its own:
//! negotiation, the `tools/call` path, the `tools/list` walk and its refreshes, the settle
//! barrier, the listen stream, the legacy upkeep (log level, keep-alive), server requests,
//! and the routing of what arrives (`inbound.rs`).

mod ask;
mod call;
mod freshness;
mod held;
mod inbound;
mod interrupt;
#[cfg(test)]
mod legacy_peer;
mod listen;
mod negotiation;
mod pending;
mod refresh;
mod responses;
mod server_requests;
mod settle;
mod subscriptions;
mod succession;
mod tool_list;
mod upkeep;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use web_time::Instant;

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;
use toolwire_cache::{Listing, ToolCache};
use toolwire_headers::{
    Header, method_header, name_header, protocol_version_header, standard_headers,
};
use toolwire_types::{
    Capability, ClientCapabilities, EncodeError, ErrorObject, Frame, HasMeta, Implementation,
    JsonObject, Message, Meta, ProtocolVersion, Rendered, RequestId, RequestMethod, TraceContext,
    encode_notification, encode_request, encode_result,
};
use toolwire_wire::{MessageKind, Outbound, RequestFailure, RetryClass, SessionStep};

pub use call::{CallRequest, call_headers_at, tool_call_headers};
pub use held::Again;
pub use interrupt::Interrupted;
pub use succession::Succession;

use self::freshness::{ToolsFreshness, WalkClock};
use self::held::{Ask, Held};
use self::listen::Listen;
use self::negotiation::Negotiation;
use self::pending::{Pending, PendingTable};
use self::refresh::Refresh;
use self::responses::ResponseCache;
use self::settle::SettleBarrier;
use self::upkeep::Upkeep;
use crate::{
    Event, Negotiated, OpId, ProtocolMode, RequestError, SessionConfig, SessionError, SettleMode,
};

enum PendingKind {
    Probe,
    /// A `server/discover` that got no answer within the probe timeout, so `initialize` went
    /// out after it. A slow server still answers it first (a stdio server reads its input in
    /// order): a modern answer that arrives while `initialize` waits settles the era.
    LateProbe {
        version: ProtocolVersion,
    },
    Initialize,
    /// A caller's request, and how to ask it again on the next connection.
    Request {
        op: OpId,
        again: Again,
    },
    /// A request whose answer the response cache may keep.
    Cached {
        op: OpId,
        cache: Box<responses::Pending>,
        again: Again,
    },
    /// A `tools/call` as asked, kept to reissue it once after a header mismatch (`reissue`)
    /// or on the next connection ([`Session::interrupt`]).
    ToolCall {
        op: OpId,
        call: Box<CallRequest>,
        reissue: bool,
        settle: bool,
    },
    /// The `subscriptions/listen` stream (never times out).
    Listen,
    /// A legacy `resources/subscribe` or `resources/unsubscribe`: the caller's (`op`), or
    /// one sent again to a new session (none).
    Subscription {
        op: Option<OpId>,
        uri: String,
        subscribe: bool,
    },
    ListPage {
        op: OpId,
        listing: Listing,
        pages: usize,
        cursors: HashSet<String>,
        clock: WalkClock,
    },
    /// A legacy `logging/setLevel`: the caller's (`op`), or one sent to a new session.
    LogLevel {
        op: Option<OpId>,
        level: toolwire_types::LoggingLevel,
    },
    /// The keep-alive `ping` (nobody's operation).
    KeepAlive,
}

/// A request on its way into the pending table: what goes with its bytes.
struct Sent {
    method: &'static str,
    /// The SEP-2243 headers (the version header is added when queued).
    headers: Vec<Header>,
    retry_safe: bool,
    kind: PendingKind,
    timeout: Duration,
    progress_token: Option<RequestId>,
    /// The trace context its `_meta` carries, to send as headers too: None where the
    /// transport has no headers.
    trace: Option<TraceContext>,
}

/// The maps every request goes through (ids in flight, progress tokens): `foldhash` with a
/// random seed per map. SipHash, the std default, was ~1 k instructions per call; the keys are
/// ids this session chose, so flooding a bucket is not open to the peer.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A message as the transport takes it: the bytes moved (not copied) and each header moved out
/// of the form `toolwire-headers` built it in.
fn outbound(body: Vec<u8>, headers: Vec<Header>, retry: RetryClass, kind: MessageKind) -> Outbound {
    Outbound {
        body: Bytes::from(body),
        headers: headers.into_iter().map(Header::into_http).collect(),
        retry,
        kind,
        session: SessionStep::Within,
    }
}

/// The client side of one MCP connection, without I/O. See the crate docs.
pub struct Session {
    config: SessionConfig,
    /// The capabilities and info every 2026-07-28 request carries in `_meta`, shared rather
    /// than copied per request and serialised once.
    envelope: (Rendered<ClientCapabilities>, Rendered<Implementation>),
    /// The whole `_meta` of a modern `tools/call` without a progress token, for the version
    /// it was built for: the same on every call, so its bytes are written once.
    call_meta: Option<(ProtocolVersion, Rendered<Meta>)>,
    /// The same with the capabilities a call declared of its own, for the last ones
    /// declared: a gateway passes on what its callers declared, mostly the same few.
    declared_meta: Option<(
        ProtocolVersion,
        Rendered<ClientCapabilities>,
        Rendered<Meta>,
    )>,
    /// The W3C trace context the requests queued from now on carry
    /// ([`Session::set_trace_context`]).
    trace: Option<TraceContext>,
    cache: Arc<ToolCache>,
    carries_headers: bool,
    /// Where negotiation is.
    negotiation: Negotiation,
    next_id: i64,
    next_op: u64,
    /// The requests in flight.
    pending: PendingTable,
    /// While inbound bytes are handled: the operation whose response stream carried them.
    arrived_on: Option<OpId>,
    transmits: VecDeque<Outbound>,
    events: VecDeque<Event>,
    /// Refreshes started, and finished; whether the last one succeeded.
    /// The session's own tool-list refreshes.
    refresh: Refresh,
    /// Results held until their announced changes are listed, calls waiting for a re-list.
    barrier: SettleBarrier,
    listen: Listen,
    /// Whether the last `tools/list` is still fresh (its pages' `ttlMs`).
    tools_fresh: ToolsFreshness,
    /// The other answers kept while fresh.
    responses: ResponseCache,
    /// The log level and keep-alive of the legacy era.
    upkeep: Upkeep,
    /// The server's requests handed to the caller and not answered yet.
    serving: HashSet<RequestId>,
    /// Requests that found the legacy session gone (never read by the server).
    gone: Vec<RequestId>,
    /// A tool listing succeeded on this session or one before it ([`Session::successor`]).
    listed: bool,
    /// A successor's: list the tools again once ready (the server may have changed them
    /// while the connection was down).
    relist: bool,
    /// What was asked before the session was ready (or after it was spent).
    held: Held,
    /// [`Event::Ready`] was said (and negotiation has not restarted since).
    ready: bool,
    /// Its connection died ([`Session::interrupt`]): nothing more goes out; what is asked is
    /// held for the session after it.
    spent: bool,
    /// Since when deadlines wait ([`Session::pause`]), while they do.
    paused_since: Option<Instant>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("version", &self.version())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session over a transport that does (`carries_headers`) or does not carry HTTP headers,
    /// reading and filling `cache`. Over one that does not, every [`Outbound`] has no headers
    /// and `x-mcp-header` annotations play no part in a call.
    pub fn new(mut config: SessionConfig, cache: Arc<ToolCache>, carries_headers: bool) -> Self {
        if config.settle != SettleMode::Off && config.capabilities.tools.is_none() {
            // The proposal's capability: tell the server that announcing changes is worth it.
            config.capabilities.tools = Some(toolwire_types::ClientToolsCapability {
                wait_for: Some(true),
                wait_for_timeout: Some(
                    u64::try_from(config.settle_timeout.as_millis()).unwrap_or(u64::MAX),
                ),
                extra: JsonObject::new(),
            });
        }
        Self {
            envelope: (
                Rendered::new(config.capabilities.clone()),
                Rendered::new(config.client_info.clone()),
            ),
            call_meta: None,
            declared_meta: None,
            trace: None,
            config,
            cache,
            carries_headers,
            negotiation: Negotiation::default(),
            next_id: 0,
            next_op: 0,
            pending: PendingTable::default(),
            arrived_on: None,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            refresh: Refresh::default(),
            barrier: SettleBarrier::default(),
            listen: Listen::default(),
            tools_fresh: ToolsFreshness::default(),
            responses: ResponseCache::default(),
            upkeep: Upkeep::default(),
            serving: HashSet::new(),
            gone: Vec::new(),
            listed: false,
            relist: false,
            held: Held::default(),
            ready: false,
            spent: false,
            paused_since: None,
        }
    }

    /// The tool cache.
    pub fn cache(&self) -> &Arc<ToolCache> {
        &self.cache
    }

    /// The negotiated version, once ready.
    pub fn version(&self) -> Option<&ProtocolVersion> {
        self.negotiation.negotiated().map(|n| &n.version)
    }

    /// Whether the `server/discover` probe is in flight (a transport that dies now is probably
    /// a legacy server that exits on anything before `initialize`).
    pub fn is_probing(&self) -> bool {
        self.negotiation.is_probing()
    }

    /// What negotiation settled on, once ready.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiation.negotiated()
    }

    /// Starts negotiation (once; later calls do nothing).
    pub fn start(&mut self, now: Instant) {
        if !self.negotiation.is_created() {
            return;
        }
        match self.config.mode.clone() {
            ProtocolMode::Pinned(v) if !v.is_modern() => self.send_initialize(v, now),
            ProtocolMode::Pinned(v) => self.send_probe(v, false, now),
            ProtocolMode::Auto => match self.config.prior.clone() {
                Some(prior) if prior.version.is_supported() => self.adopt(prior, now),
                _ => self.send_probe(ProtocolVersion::LATEST, false, now),
            },
        }
    }

    /// [`Session::start`] with `trace` as the context its requests carry (and what the session
    /// sends on its own until another is set); once started, this does nothing, the context in
    /// force included.
    pub fn start_traced(&mut self, trace: Option<TraceContext>, now: Instant) {
        if self.negotiation.is_created() {
            self.trace = trace;
            self.start(now);
        }
    }

    /// The next message to send, exactly as the transport takes it.
    pub fn poll_transmit(&mut self) -> Option<Outbound> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Session::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.paused_since.is_some() {
            return None;
        }
        let asked = self.held.next_deadline();
        if self.spent {
            return asked;
        }
        let requests = self.pending.next_deadline();
        let held = self.barrier.next_deadline();
        requests
            .into_iter()
            .chain(asked)
            .chain(held)
            .chain(self.listen.reopen_at)
            .chain(self.listen.next_deadline())
            .chain(self.keep_alive_at())
            .min()
    }

    /// The id of the request in flight for `op`, if one is.
    pub fn request_of(&self, op: OpId) -> Option<RequestId> {
        self.pending.request_of(op)
    }

    /// Stops (`paused`) or restarts every deadline: time the transport spends on something
    /// the requests cannot go on without, such as a person logging in in a browser after a
    /// `401`, does not count against them (a login that takes minutes still ends in the era
    /// the probe would have found, and the calls waiting on it still run). While paused no
    /// deadline is due; when the pause ends, each moves by the time it took.
    pub fn pause(&mut self, paused: bool, now: Instant) {
        match (paused, self.paused_since) {
            (true, None) => {
                tracing::debug!("deadlines wait");
                self.paused_since = Some(now);
            }
            (false, Some(since)) => {
                let by = now.saturating_duration_since(since);
                tracing::debug!(?by, "deadlines move by the time the pause took");
                self.paused_since = None;
                self.pending.postpone(by);
                self.postpone_held(by);
            }
            _ => {}
        }
    }

    /// Expires every request whose deadline is at or before `now`, releases results the
    /// settle barrier held that long, reopens a dropped listen stream when its backoff is
    /// over, and sends the keep-alive `ping` when it is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.paused_since.is_some() {
            return;
        }
        self.expire_held(now);
        if self.spent {
            return;
        }
        for (id, p) in self.pending.expired(now) {
            self.expire(&id, p, now);
        }
        let late = self.barrier.expired(now);
        for h in late {
            tracing::warn!(
                op = h.op.0,
                "the tool list may be stale: the changes this tool call announced did not show \
                 up within the settle timeout; handing the result over anyway"
            );
            self.events.push_back(Event::Completed {
                op: h.op,
                result: Ok(toolwire_types::flag_meta(h.result, crate::TOOLS_STALE_META)),
            });
        }
        self.expire_waiting(now);
        if self.listen.reopen_at.is_some_and(|at| at <= now) {
            self.listen.reopen_at = None;
            self.send_listen(now);
        }
        self.keep_alive(now);
    }

    fn fail(&mut self, error: SessionError) {
        self.negotiation.failed();
        self.events.push_back(Event::Failed(error));
        self.fail_held();
    }

    fn allocate_id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId::Number(self.next_id)
    }

    fn allocate_op(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    /// Puts the modern envelope on `params` when `version` is modern, and the trace context
    /// (both eras) when one is set.
    fn envelope<P: HasMeta>(&self, version: &ProtocolVersion, params: &mut P) {
        self.modern_envelope(version, params);
        self.stamp_trace(params);
    }

    /// Puts the trace context, when one is set, in `params`' `_meta`.
    fn stamp_trace<P: HasMeta>(&self, params: &mut P) {
        if let Some(trace) = &self.trace {
            let meta = params.meta_mut().get_or_insert_with(Meta::default);
            trace.write_into(&mut meta.extra);
        }
    }

    /// The envelope every modern request shares (nothing in the legacy era).
    fn modern_envelope<P: HasMeta>(&self, version: &ProtocolVersion, params: &mut P) {
        if version.is_modern() {
            let meta = params.meta_mut().get_or_insert_with(Meta::default);
            meta.protocol_version = Some(version.clone());
            meta.client_capabilities = Some(self.envelope.0.clone());
            meta.client_info = Some(self.envelope.1.clone());
            meta.log_level = self.config.log_level;
        }
    }

    /// The W3C trace context (`traceparent`, `tracestate`, `baggage` in `_meta`) that every
    /// request queued from now on carries, in both eras, until it is changed: the driver sets
    /// the context of the caller whose request it is about to queue. A call's own `_meta`
    /// members ([`CallOptions::meta`](crate::CallOptions::meta)) override it.
    pub fn set_trace_context(&mut self, trace: Option<TraceContext>) {
        self.trace = trace;
    }

    /// Runs `f` with `trace` as the context the requests it queues carry (an operation's
    /// own, asked earlier), then puts back the one in force.
    pub(super) fn traced<T>(
        &mut self,
        trace: Option<TraceContext>,
        f: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let ambient = std::mem::replace(&mut self.trace, trace);
        let out = f(self);
        self.trace = ambient;
        out
    }

    /// Changes the log level asked of the server from the next request on (the
    /// `2026-07-28` envelope; in the legacy era `logging/setLevel` says it, see
    /// [`SessionConfig::log_level`]).
    pub fn set_log_level(&mut self, level: Option<toolwire_types::LoggingLevel>) {
        self.config.log_level = level;
        // The shared `tools/call` envelopes are built again with it.
        self.call_meta = None;
        self.declared_meta = None;
    }

    /// The client now speaks to the server as another identity (the transport's
    /// `Transport::authorization_context` changed: a new bearer token, another login).
    /// SEP-2549 keeps an answer not marked `cacheScope: public` within the authorization
    /// context that fetched it: those kept answers go, and so does a tool listing's
    /// freshness unless every page was public (the tools themselves stay: headers may come
    /// from a stale schema). Answers to requests asked before now are not kept.
    pub fn authorization_changed(&mut self) {
        self.tools_fresh.identity_changed();
        self.responses.identity_changed();
    }

    /// Encodes and queues a request; `headers` are the SEP-2243 ones (the version header is
    /// added here).
    #[allow(
        clippy::too_many_arguments,
        reason = "one private funnel for every request"
    )]
    fn queue_request<P: Serialize>(
        &mut self,
        version: &ProtocolVersion,
        method: &'static str,
        params: &P,
        headers: Vec<Header>,
        retry_safe: bool,
        kind: PendingKind,
        timeout: Duration,
        now: Instant,
    ) -> Result<RequestId, EncodeError> {
        let id = self.allocate_id();
        let body = encode_request(&id, method, Some(params))?;
        let sent = Sent {
            method,
            headers,
            retry_safe,
            kind,
            timeout,
            progress_token: None,
            trace: if self.carries_headers {
                self.trace.clone()
            } else {
                None
            },
        };
        self.push_request(version, id.clone(), body, sent, now);
        Ok(id)
    }

    /// Queues request `id`, already encoded as `body`, and records what its answer completes.
    fn push_request(
        &mut self,
        version: &ProtocolVersion,
        id: RequestId,
        body: Vec<u8>,
        sent: Sent,
        now: Instant,
    ) {
        let Sent {
            method,
            mut headers,
            retry_safe,
            kind,
            timeout,
            progress_token,
            trace,
        } = sent;
        if self.sends_version_header(version) {
            headers.insert(0, protocol_version_header(version));
        }
        // Beside `_meta`: HTTP proxies and tracing middleware read headers, never a body.
        // (Set only where the transport carries headers.)
        if let Some(trace) = &trace {
            headers.extend(toolwire_headers::trace_headers(trace));
        }
        // Kept for a walk's later pages and for sending it again on another connection
        // (`Sent` has it only over HTTP).
        let trace = trace.or_else(|| self.trace.clone());
        self.upkeep.traffic(now);
        let hard_deadline = crate::later(now, self.config.max_request_time.max(timeout));
        let step = if matches!(kind, PendingKind::Initialize) {
            SessionStep::Opens
        } else {
            SessionStep::Within
        };
        let pending = Pending {
            kind,
            deadline: crate::later(now, timeout),
            timeout,
            hard_deadline,
            progress_token,
            retry_safe,
            trace,
        };
        self.pending.insert(id.clone(), pending);
        let mut out = outbound(
            body,
            headers,
            RetryClass::from_safe(retry_safe),
            MessageKind::Request { id, method },
        );
        out.session = step;
        self.transmits.push_back(out);
    }

    /// The version, once ready, after checking that a legacy server declared `needed` (the
    /// method's [`RequestMethod::CAPABILITY`]). Modern servers are not gated: they answer
    /// `-32601` themselves, and some answer `server/discover` with fewer capabilities than they
    /// serve.
    fn version_for(&self, needed: Option<Capability>) -> Result<ProtocolVersion, RequestError> {
        let negotiated = self.negotiated().ok_or(RequestError::NotReady)?;
        // Extensions are gated in both eras: a server that did not declare one does not speak
        // its methods.
        if let Some(capability) = needed
            && (!negotiated.version.is_modern() || capability.gated_in_both_eras())
            && !capability.declared_by(&negotiated.capabilities)
        {
            return Err(RequestError::NotAdvertised(capability));
        }
        Ok(negotiated.version.clone())
    }

    /// The version to send `M` at, after the checks every request passes (a legacy server
    /// declared its capability; no reserved `_meta` key from the caller).
    fn check_request<M>(&self, params: &mut M::Params) -> Result<ProtocolVersion, RequestError>
    where
        M: RequestMethod,
        M::Params: HasMeta,
    {
        let version = self.version_for(M::CAPABILITY)?;
        if let Some(key) = params
            .meta_mut()
            .as_ref()
            .and_then(Meta::reserved_extra_key)
        {
            return Err(RequestError::ReservedMeta(key.to_owned()));
        }
        Ok(version)
    }

    /// Sends a request whose answer completes `kind`.
    fn request_as<M>(
        &mut self,
        mut params: M::Params,
        now: Instant,
        kind: PendingKind,
    ) -> Result<(), RequestError>
    where
        M: RequestMethod,
        M::Params: HasMeta,
    {
        let version = self.check_request::<M>(&mut params)?;
        let headers = if self.sends_sep2243_headers(&version) {
            let mut headers = Vec::with_capacity(2);
            headers.push(method_header(M::NAME));
            headers.extend(M::mcp_name(&params).map(name_header));
            headers
        } else {
            Vec::new()
        };
        self.envelope(&version, &mut params);
        let timeout = self.config.request_timeout;
        self.queue_request(
            &version,
            M::NAME,
            &params,
            headers,
            M::RETRY_SAFE,
            kind,
            timeout,
            now,
        )
        .map(drop)
        .map_err(RequestError::Encode)
    }

    /// Cancels an operation. Its pending request is forgotten (a late answer is dropped) and
    /// it completes with [`RequestError::Cancelled`]. Where the era and transport call for
    /// it (legacy, or modern over stdio) a `notifications/cancelled` is sent; over modern
    /// HTTP cancelling means closing the request's response stream, so the request's id is
    /// returned for the transport to do that. `None` if the operation is not pending.
    pub fn cancel(&mut self, op: OpId, reason: Option<&str>) -> Option<RequestId> {
        // Not sent yet; or answered already and held by the settle barrier, or waiting for a
        // re-list.
        if self.cancel_held(op) {
            return None;
        }
        if self.barrier.cancel(op) {
            self.events.push_back(Event::Completed {
                op,
                result: Err(RequestError::Cancelled),
            });
            return None;
        }
        let id = self.pending.request_of(op)?;
        let pending = self.pending.remove(&id)?;
        let lists = matches!(pending.kind, PendingKind::ListPage { .. });
        self.fail_op(op, lists, RequestError::Cancelled);
        let version = self.version().cloned()?;
        self.send_cancelled(&version, &id, reason);
        Some(id)
    }

    /// Tells the server that request `id` is cancelled, where the era and transport call for
    /// a notification (legacy, or modern over stdio; over modern HTTP closing the request's
    /// stream says it).
    fn send_cancelled(&mut self, version: &ProtocolVersion, id: &RequestId, reason: Option<&str>) {
        if version.is_modern() && self.carries_headers {
            return;
        }
        let params = toolwire_types::CancelledParams {
            request_id: Some(id.clone()),
            reason: reason.map(str::to_owned),
            meta: None,
            extra: JsonObject::new(),
        };
        match encode_notification("notifications/cancelled", Some(&params)) {
            Ok(body) => {
                let headers = self.version_headers(version);
                self.transmits.push_back(outbound(
                    body,
                    headers,
                    RetryClass::Never,
                    MessageKind::Notification {
                        method: "notifications/cancelled",
                    },
                ));
            }
            Err(e) => tracing::warn!(error = %e, "could not encode notifications/cancelled"),
        }
    }

    /// Whether requests at `version` carry the SEP-2243 headers: from `2026-07-28`, and only
    /// over a transport that has headers (stdio "MAY ignore `x-mcp-header` annotations
    /// entirely"; building headers nobody sends would only cost time).
    fn sends_sep2243_headers(&self, version: &ProtocolVersion) -> bool {
        call::sends_sep2243_headers(self.carries_headers, version)
    }

    /// The standard SEP-2243 headers (`Mcp-Method`) of a request without a name, where they
    /// are sent ([`Self::sends_sep2243_headers`]).
    fn sep2243_headers(&self, version: &ProtocolVersion, method: &str) -> Vec<Header> {
        if self.sends_sep2243_headers(version) {
            standard_headers(method, None)
        } else {
            Vec::new()
        }
    }

    /// Whether messages at `version` carry `MCP-Protocol-Version`: where the version sends it
    /// and the transport carries headers.
    fn sends_version_header(&self, version: &ProtocolVersion) -> bool {
        call::sends_version_header(self.carries_headers, version)
    }

    /// The version header alone, where it is sent ([`Self::sends_version_header`]).
    fn version_headers(&self, version: &ProtocolVersion) -> Vec<Header> {
        if self.sends_version_header(version) {
            vec![protocol_version_header(version)]
        } else {
            Vec::new()
        }
    }

    /// Answers a request from the server (legacy era): `Ok` with its result, or `Err` with a
    /// JSON-RPC error. One handed up as [`Event::ServerRequest`] stops counting against
    /// [`SessionConfig::max_server_requests`]. A spent session (its connection died) sends
    /// nothing.
    pub fn respond<R: Serialize>(
        &mut self,
        id: &RequestId,
        result: Result<&R, ErrorObject>,
    ) -> Result<(), RequestError> {
        self.serving.remove(id);
        if self.spent {
            // The connection the request came on is gone: no one is left to answer.
            return Ok(());
        }
        let body = match result {
            Ok(r) => encode_result(id, r),
            Err(e) => toolwire_types::encode_error(Some(id), &e),
        }
        .map_err(RequestError::Encode)?;
        let headers = self
            .version()
            .map(|v| self.version_headers(v))
            .unwrap_or_default();
        self.transmits.push_back(outbound(
            body,
            headers,
            RetryClass::Never,
            MessageKind::Response,
        ));
        Ok(())
    }
}

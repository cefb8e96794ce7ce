//! The session state machine.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;
use toolwire_cache::{ListOutcome, Listing, ToolCache};
use toolwire_headers::{
    ArgumentError, Header, HeaderPlan, InvalidToolHeaders, method_header, name_header,
    protocol_version_header, standard_headers,
};
use toolwire_types::methods::method;
use toolwire_types::{
    CallToolRequestParams, Capability, ClientCapabilities, DecodeError, DiscoverResult,
    EncodeError, ErrorObject, Frame, HasMeta, Implementation, InitializeParams, InitializeResult,
    JsonObject, ListParams, ListToolsResult, Message, Meta, MetaOnlyParams, Outcome,
    ProtocolVersion, Rendered, RequestId, RequestMethod, ServerCapabilities, Tool,
    encode_notification, encode_request, encode_result,
};
use toolwire_wire::{MessageKind, Outbound, RequestFailure, RetryClass};

/// Which protocol era to speak.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProtocolMode {
    /// Probe with `server/discover` at the newest modern version; fall back to `initialize`.
    #[default]
    Auto,
    /// Speak exactly this version (modern: no fallback; legacy: no probe).
    Pinned(ProtocolVersion),
}

/// How the session behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionConfig {
    /// Sent as `clientInfo`.
    pub client_info: Implementation,
    /// Declared to the server.
    pub capabilities: ClientCapabilities,
    /// Which era to speak.
    pub mode: ProtocolMode,
    /// Default deadline of a request (default 60 s).
    pub request_timeout: Duration,
    /// How long the `server/discover` probe waits before falling back (default 5 s).
    pub probe_timeout: Duration,
    /// The most pages one `tools/list` walk may take (default 1,000).
    pub max_list_pages: usize,
    /// The longest a request may run even while progress keeps resetting its deadline
    /// (default 10 min).
    pub max_request_time: Duration,
    /// The settle barrier for `tools/call` results that announce tool changes (seed 003;
    /// default [`SettleMode::Announced`]).
    pub settle: SettleMode,
    /// How long the settle barrier holds a result at most (default 5 s).
    pub settle_timeout: Duration,
    /// Refetch the tool list when the server says it changed (default on).
    pub auto_refresh: bool,
    /// In the `2026-07-28` era, open a `subscriptions/listen` stream for tool-list changes
    /// when the server declares `tools.listChanged` (default on).
    pub listen: bool,
}

/// What the session does with a `tools/call` result that may change the tool list (seed 003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SettleMode {
    /// Hand every result over at once.
    Off,
    /// Hold a result that announces `registers`, `unregisters` or `updates` until the tool
    /// cache shows every registered tool, none of the unregistered ones and a changed
    /// definition for each updated one, or until the settle timeout (default).
    #[default]
    Announced,
    /// As `Announced`, and also hold a result that announces nothing while a tool-list refresh
    /// is under way, until that refresh ends (for servers that do not announce).
    AnnouncedOrRefresh,
}

impl SessionConfig {
    /// A configuration with this client identity and the defaults.
    pub fn new(client_info: Implementation) -> Self {
        Self {
            client_info,
            capabilities: ClientCapabilities::default(),
            mode: ProtocolMode::Auto,
            request_timeout: Duration::from_secs(60),
            probe_timeout: Duration::from_secs(5),
            max_list_pages: 1000,
            max_request_time: Duration::from_secs(600),
            settle: SettleMode::Announced,
            settle_timeout: Duration::from_secs(5),
            auto_refresh: true,
            listen: true,
        }
    }

    /// Sets the settle barrier's mode and timeout.
    pub fn with_settle(mut self, mode: SettleMode, timeout: Duration) -> Self {
        self.settle = mode;
        self.settle_timeout = timeout;
        self
    }

    /// Turns the automatic tool-list refresh on list changes on or off.
    pub fn with_auto_refresh(mut self, on: bool) -> Self {
        self.auto_refresh = on;
        self
    }

    /// Turns the `2026-07-28` listen subscription on or off.
    pub fn with_listen(mut self, on: bool) -> Self {
        self.listen = on;
        self
    }

    /// Sets the protocol mode.
    pub fn with_mode(mut self, mode: ProtocolMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the declared capabilities.
    pub fn with_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Sets the default request deadline and the probe timeout.
    pub fn with_timeouts(mut self, request: Duration, probe: Duration) -> Self {
        self.request_timeout = request;
        self.probe_timeout = probe;
        self
    }

    /// Sets the page cap of a `tools/list` walk.
    pub fn with_max_list_pages(mut self, pages: usize) -> Self {
        self.max_list_pages = pages;
        self
    }
}

/// What negotiation settled on.
#[derive(Debug, Clone, PartialEq)]
pub struct Negotiated {
    /// The version both sides speak.
    pub version: ProtocolVersion,
    /// The server's implementation info, if it sent one.
    pub server_info: Option<Implementation>,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's instructions for the model.
    pub instructions: Option<String>,
}

/// Identifies one operation the caller started (a request, or a whole `tools/list` walk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(u64);

/// Why negotiation failed; the session cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The server answered with an error that rules out every era this session may use.
    #[error("the server refused {method}: {} ({})", error.message, error.code)]
    Refused {
        /// The negotiation request.
        method: &'static str,
        /// Its error.
        error: ErrorObject,
    },
    /// The server picked a version this client does not speak.
    #[error("the server chose protocol version {version}, which this client does not speak")]
    UnsupportedVersion {
        /// What it chose.
        version: ProtocolVersion,
    },
    /// The negotiation request got no answer from the transport (a connection that failed,
    /// an HTTP status that decides nothing about the era, such as 401 or 503).
    #[error("{method} got no answer")]
    Unreachable {
        /// The negotiation request.
        method: &'static str,
        /// What the transport reported (the HTTP status, if any, is in it).
        #[source]
        failure: RequestFailure,
    },
    /// The negotiation request got no answer in time.
    #[error("no answer to {method} in time")]
    Timeout {
        /// The negotiation request.
        method: &'static str,
    },
    /// The server's answer could not be decoded.
    #[error("the server's answer to {method} is malformed")]
    Malformed {
        /// The negotiation request.
        method: &'static str,
        /// What is wrong.
        #[source]
        cause: DecodeError,
    },
    /// The negotiation request could not be encoded (the configured client info or
    /// capabilities do not serialise).
    #[error("{method} could not be encoded")]
    Encode {
        /// The negotiation request.
        method: &'static str,
        /// Why.
        #[source]
        cause: EncodeError,
    },
}

/// Why one operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered {}: {}", error.code, error.message)]
    Server {
        /// The error as received.
        error: ErrorObject,
    },
    /// No answer before the deadline (raised here, not by the server).
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// Negotiation has not finished (or failed); wait for [`Event::Ready`].
    #[error("the session is not ready")]
    NotReady,
    /// The answer could not be decoded.
    #[error("the server's answer could not be decoded")]
    Decode(#[source] DecodeError),
    /// The request could not be encoded.
    #[error("the request could not be encoded")]
    Encode(#[source] EncodeError),
    /// The per-call tool definition or header map breaks the `x-mcp-header` rules.
    #[error("the tool definition given for this call is invalid")]
    InvalidTool(#[source] InvalidToolHeaders),
    /// An argument cannot become its `Mcp-Param-*` header.
    #[error("an argument cannot be sent as its header")]
    Argument(#[source] ArgumentError),
    /// A `tools/list` walk exceeded the page cap.
    #[error("tools/list went on for more than {0} pages")]
    TooManyPages(usize),
    /// A `tools/list` walk got a cursor it had already followed.
    #[error("tools/list repeated the cursor {0:?}")]
    RepeatedCursor(String),
    /// The caller cancelled the operation.
    #[error("cancelled")]
    Cancelled,
    /// The transport could not deliver the request or its answer (see
    /// [`Session::handle_undelivered`]).
    #[error(transparent)]
    Undelivered(RequestFailure),
    /// The server did not declare the capability this request needs (legacy era: both sides
    /// may use only what was negotiated).
    #[error("the server did not declare the `{0}` capability")]
    NotAdvertised(Capability),
}

/// Something the caller should know.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// Negotiation finished; requests may be sent.
    Ready(Box<Negotiated>),
    /// Negotiation failed; the session cannot be used.
    Failed(SessionError),
    /// A request finished: its raw result (decode it with the method's
    /// [`RequestMethod::decode_result`]) or why it failed.
    Completed {
        /// The operation.
        op: OpId,
        /// The raw result or the error.
        result: Result<Box<RawValue>, RequestError>,
    },
    /// A `tools/list` walk finished and its listing is in the cache (or why not).
    ToolsListed {
        /// The operation.
        op: OpId,
        /// What the cache did with the listing.
        result: Result<ListOutcome, RequestError>,
    },
    /// A progress notification for an operation that asked for progress.
    Progress {
        /// The operation.
        op: OpId,
        /// The notification's params.
        params: toolwire_types::ProgressParams,
    },
    /// A notification from the server that the session does not handle itself (a
    /// `tools/list_changed` is handled, marking the cache stale, and passed up too).
    Notification(toolwire_types::Notification),
    /// A request from the server that the session does not answer itself.
    ServerRequest(toolwire_types::Request),
    /// Bytes from the server that are not JSON-RPC.
    Malformed(DecodeError),
    /// The session refetched the tool list by itself (after a list change, for the settle
    /// barrier, or to recover from a header mismatch), and what the cache did with it.
    ToolsRefreshed(Result<ListOutcome, RequestError>),
    /// The settle barrier gave up waiting for operation `op`: its result follows as
    /// [`Event::Completed`], although the tool list may not show the announced changes yet.
    SettleTimedOut {
        /// The operation.
        op: OpId,
    },
}

/// The answers of an MRTR round: a `tools/call` answered `input_required` is sent again with
/// them ([`Session::call_tool_with_input`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputResponses {
    /// The answers to the server's `inputRequests`, by key.
    pub responses: JsonObject,
    /// The server's `requestState`, echoed exactly (`None` if it sent none).
    pub request_state: Option<String>,
}

/// Per-call choices for [`Session::call_tool`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// The deadline for this call (default: the session's).
    pub timeout: Option<Duration>,
    /// A tool definition for this call only: its `x-mcp-header` annotations decide the
    /// headers, and the cache is neither read nor changed (seed 000's stateless variant).
    pub tool: Option<Tool>,
    /// Argument → header annotation for this call only (when no definition is at hand).
    pub header_map: Option<Vec<(String, String)>>,
    /// Allow the transport to resend the call (default: only for tools annotated
    /// `readOnlyHint` or `idempotentHint`).
    pub retry_safe: Option<bool>,
    /// Ask the server for progress notifications ([`Event::Progress`]); each one also resets
    /// the call's deadline, up to [`SessionConfig::max_request_time`].
    pub progress: bool,
    /// Whether the settle barrier applies to this call (default: as the session is set up).
    pub settle: Option<bool>,
}

impl CallOptions {
    /// Sets the deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Supplies the tool definition for this call.
    pub fn with_tool(mut self, tool: Tool) -> Self {
        self.tool = Some(tool);
        self
    }

    /// Supplies an argument → header annotation map for this call.
    pub fn with_header_map(mut self, map: impl IntoIterator<Item = (String, String)>) -> Self {
        self.header_map = Some(map.into_iter().collect());
        self
    }

    /// Allows or forbids resending.
    pub fn with_retry_safe(mut self, safe: bool) -> Self {
        self.retry_safe = Some(safe);
        self
    }

    /// Turns the settle barrier on or off for this call.
    pub fn with_settle(mut self, settle: bool) -> Self {
        self.settle = Some(settle);
        self
    }

    /// Asks for progress notifications.
    pub fn with_progress(mut self) -> Self {
        self.progress = true;
        self
    }
}

enum Phase {
    Created,
    Probing {
        version: ProtocolVersion,
        retried: bool,
    },
    Initializing,
    Ready(Box<Negotiated>),
    Failed,
}

enum PendingKind {
    Probe,
    Initialize,
    Request {
        op: OpId,
    },
    /// A `tools/call`, with what it takes to reissue it once after a header mismatch.
    ToolCall {
        op: OpId,
        retry: Option<Box<CallRetry>>,
        settle: bool,
    },
    /// The `subscriptions/listen` stream (never times out).
    Listen,
    ListPage {
        op: OpId,
        listing: Listing,
        pages: usize,
        cursors: HashSet<String>,
    },
}

struct Pending {
    kind: PendingKind,
    deadline: Instant,
    timeout: Duration,
    /// Progress may push `deadline` forward, never past this.
    hard_deadline: Instant,
    /// The progress token the request carries, if it asked for progress.
    progress_token: Option<RequestId>,
}

impl Pending {
    /// The caller's operation this request belongs to.
    fn op(&self) -> Option<OpId> {
        match &self.kind {
            PendingKind::Request { op }
            | PendingKind::ToolCall { op, .. }
            | PendingKind::ListPage { op, .. } => Some(*op),
            PendingKind::Probe | PendingKind::Initialize | PendingKind::Listen => None,
        }
    }
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
}

/// A `tools/call` as sent, kept to reissue it after a header mismatch.
struct CallRetry {
    name: String,
    /// Shared with the caller, which may need them for an `input_required` round.
    arguments: Option<Arc<JsonObject>>,
    options: CallOptions,
    /// The MRTR answers and `requestState` the call carried.
    input: Option<InputResponses>,
}

/// A result the settle barrier holds.
struct Held {
    op: OpId,
    result: Box<RawValue>,
    expect: Expect,
    deadline: Instant,
}

/// What releases a held result.
enum Expect {
    /// The announced changes, with the definition hashes of the updated tools before.
    Changes {
        registers: Vec<String>,
        unregisters: Vec<String>,
        updates: Vec<(String, Option<u64>)>,
    },
    /// The end of refresh number `seq`.
    Refresh { seq: u64 },
}

/// A call answered with a header mismatch, waiting for refresh number `seq` to reissue it.
struct Relist {
    op: OpId,
    retry: Box<CallRetry>,
    error: ErrorObject,
    seq: u64,
}

/// The `subscriptions/listen` stream.
#[derive(Default)]
struct Listen {
    id: Option<RequestId>,
    failures: u32,
    reopen_at: Option<Instant>,
    disabled: bool,
}

/// The tool-change fields of a `CallToolResult` (the proposal in seed 003).
#[derive(serde::Deserialize, Default)]
struct Announced {
    #[serde(default)]
    registers: Option<Vec<String>>,
    #[serde(default)]
    unregisters: Option<Vec<String>>,
    #[serde(default)]
    updates: Option<Vec<String>>,
}

/// The maps every request goes through (ids in flight, progress tokens): `foldhash` with a
/// random seed per map. SipHash, the std default, was ~1 k instructions per call; the keys are
/// ids this session chose, so flooding a bucket is not open to the peer.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

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

/// Decodes one `tools/list` page. A page the strict decoder refuses is decoded again tool by
/// tool, so that one malformed definition is rejected alone (and warned about at commit) rather
/// than hiding every other tool of the server; a page whose own shape is wrong fails with the
/// strict decoder's error.
fn decode_tool_page(
    raw: &RawValue,
) -> Result<(ListToolsResult, Vec<toolwire_types::MalformedTool>), RequestError> {
    match method::ListTools::decode_result(raw) {
        Ok(Outcome::Complete(page)) => Ok((page, Vec::new())),
        // decode_result only yields Complete for tools/list; kept total anyway.
        Ok(Outcome::InputRequired(_)) => {
            Err(RequestError::Decode(DecodeError::UnexpectedInputRequired {
                method: "tools/list".into(),
            }))
        }
        Err(strict) => {
            ListToolsResult::decode_lenient(raw).map_err(|_| RequestError::Decode(strict))
        }
    }
}

/// A message as the transport takes it: the bytes moved (not copied) and each header moved out
/// of the form `toolwire-headers` built it in.
fn outbound(body: Vec<u8>, headers: Vec<Header>, retry: RetryClass, kind: MessageKind) -> Outbound {
    Outbound {
        body: Bytes::from(body),
        headers: headers.into_iter().map(Header::into_http).collect(),
        retry,
        kind,
    }
}

/// How long the listen stream's request may stay open: for all practical purposes forever.
const LISTEN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// The client side of one MCP connection, without I/O. See the crate docs.
pub struct Session {
    config: SessionConfig,
    /// The capabilities and info every 2026-07-28 request carries in `_meta`, shared rather
    /// than copied per request and serialised once.
    envelope: (Rendered<ClientCapabilities>, Rendered<Implementation>),
    /// The whole `_meta` of a modern `tools/call` without a progress token, for the version
    /// it was built for: the same on every call, so its bytes are written once.
    call_meta: Option<(ProtocolVersion, Rendered<Meta>)>,
    cache: Arc<ToolCache>,
    carries_headers: bool,
    phase: Phase,
    next_id: i64,
    next_op: u64,
    pending: FastMap<RequestId, Pending>,
    /// Progress token → the request it belongs to.
    progress: FastMap<RequestId, RequestId>,
    transmits: VecDeque<Outbound>,
    events: VecDeque<Event>,
    /// The refresh walk under way, if any.
    refresh: Option<OpId>,
    /// Another refresh is wanted after it (a burst of list changes becomes one more walk).
    refresh_again: bool,
    /// Refreshes started, and finished; whether the last one succeeded.
    refresh_started: u64,
    refresh_finished: u64,
    refresh_ok: bool,
    held: Vec<Held>,
    relists: Vec<Relist>,
    listen: Listen,
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
            config,
            cache,
            carries_headers,
            phase: Phase::Created,
            next_id: 0,
            next_op: 0,
            pending: FastMap::default(),
            progress: FastMap::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            refresh: None,
            refresh_again: false,
            refresh_started: 0,
            refresh_finished: 0,
            refresh_ok: false,
            held: Vec::new(),
            relists: Vec::new(),
            listen: Listen::default(),
        }
    }

    /// The tool cache.
    pub fn cache(&self) -> &Arc<ToolCache> {
        &self.cache
    }

    /// The negotiated version, once ready.
    pub fn version(&self) -> Option<&ProtocolVersion> {
        match &self.phase {
            Phase::Ready(n) => Some(&n.version),
            _ => None,
        }
    }

    /// Whether the `server/discover` probe is in flight (a transport that dies now is probably
    /// a legacy server that exits on anything before `initialize`).
    pub fn is_probing(&self) -> bool {
        matches!(self.phase, Phase::Probing { .. })
    }

    /// What negotiation settled on, once ready.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        match &self.phase {
            Phase::Ready(n) => Some(n),
            _ => None,
        }
    }

    /// Starts negotiation (once; later calls do nothing).
    pub fn start(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Created) {
            return;
        }
        match self.config.mode.clone() {
            ProtocolMode::Pinned(v) if !v.is_modern() => self.send_initialize(v, now),
            ProtocolMode::Pinned(v) => self.send_probe(v, false, now),
            ProtocolMode::Auto => self.send_probe(ProtocolVersion::LATEST, false, now),
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
        let requests = self.pending.values().map(|p| p.deadline);
        let held = self.held.iter().map(|h| h.deadline);
        requests.chain(held).chain(self.listen.reopen_at).min()
    }

    /// Expires every request whose deadline is at or before `now`, releases results the
    /// settle barrier held that long, and reopens a dropped listen stream when its backoff
    /// is over.
    pub fn handle_timeout(&mut self, now: Instant) {
        let expired: Vec<RequestId> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(p) = self.pending.remove(&id) {
                self.forget(&p);
                self.expire(p, now);
            }
        }
        let (late, held): (Vec<Held>, Vec<Held>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.deadline <= now);
        self.held = held;
        for h in late {
            tracing::warn!(
                op = h.op.0,
                "the tool list may be stale: the changes this tool call announced did not show \
                 up within the settle timeout; handing the result over anyway"
            );
            self.events.push_back(Event::SettleTimedOut { op: h.op });
            self.events.push_back(Event::Completed {
                op: h.op,
                result: Ok(h.result),
            });
        }
        if self.listen.reopen_at.is_some_and(|at| at <= now) {
            self.listen.reopen_at = None;
            self.send_listen(now);
        }
    }

    fn expire(&mut self, p: Pending, now: Instant) {
        match p.kind {
            PendingKind::Probe if self.config.mode == ProtocolMode::Auto => {
                tracing::debug!("no answer to server/discover; falling back to initialize");
                self.send_initialize(ProtocolVersion::LATEST_LEGACY, now);
            }
            PendingKind::Probe => self.fail(SessionError::Timeout {
                method: "server/discover",
            }),
            PendingKind::Initialize => self.fail(SessionError::Timeout {
                method: "initialize",
            }),
            PendingKind::Request { op } | PendingKind::ToolCall { op, .. } => {
                self.events.push_back(Event::Completed {
                    op,
                    result: Err(RequestError::Timeout(p.timeout)),
                })
            }
            PendingKind::Listen => self.listen_dropped(now),
            PendingKind::ListPage { op, .. } => {
                self.finish_listing(op, Err(RequestError::Timeout(p.timeout)), now)
            }
        }
    }

    fn fail(&mut self, error: SessionError) {
        self.phase = Phase::Failed;
        self.events.push_back(Event::Failed(error));
    }

    fn allocate_id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId::Number(self.next_id)
    }

    fn allocate_op(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    /// Puts the modern envelope on `params` when `version` is modern.
    fn envelope<P: HasMeta>(&self, version: &ProtocolVersion, params: &mut P) {
        if version.is_modern() {
            let meta = params.meta_mut().get_or_insert_with(Meta::default);
            meta.protocol_version = Some(version.clone());
            meta.client_capabilities = Some(self.envelope.0.clone());
            meta.client_info = Some(self.envelope.1.clone());
        }
    }

    /// The envelope of a modern `tools/call` at `version` as one shared `_meta`, built on first
    /// use (and again only if the version changes).
    fn call_meta(&mut self, version: &ProtocolVersion) -> Rendered<Meta> {
        if let Some((built_for, meta)) = &self.call_meta
            && built_for == version
        {
            return meta.clone();
        }
        let mut params = MetaOnlyParams::default();
        self.envelope(version, &mut params);
        let meta = Rendered::new(params.meta.unwrap_or_default());
        self.call_meta = Some((version.clone(), meta.clone()));
        meta
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
        } = sent;
        if self.sends_version_header(version) {
            headers.insert(0, protocol_version_header(version));
        }
        let hard_deadline = now + self.config.max_request_time.max(timeout);
        if let Some(token) = &progress_token {
            self.progress.insert(token.clone(), id.clone());
        }
        let pending = Pending {
            kind,
            deadline: now + timeout,
            timeout,
            hard_deadline,
            progress_token,
        };
        self.pending.insert(id.clone(), pending);
        self.transmits.push_back(outbound(
            body,
            headers,
            RetryClass::from_safe(retry_safe),
            MessageKind::Request { id, method },
        ));
    }

    fn send_probe(&mut self, version: ProtocolVersion, retried: bool, now: Instant) {
        let mut params = MetaOnlyParams::default();
        self.envelope(&version, &mut params);
        let headers =
            self.sep2243_headers(&version, <method::Discover as toolwire_types::Method>::NAME);
        let timeout = self.config.probe_timeout;
        match self.queue_request(
            &version,
            "server/discover",
            &params,
            headers,
            true,
            PendingKind::Probe,
            timeout,
            now,
        ) {
            Ok(_) => self.phase = Phase::Probing { version, retried },
            Err(cause) => self.fail(SessionError::Encode {
                method: "server/discover",
                cause,
            }),
        }
    }

    fn send_initialize(&mut self, version: ProtocolVersion, now: Instant) {
        let params = InitializeParams {
            protocol_version: version.clone(),
            capabilities: self.config.capabilities.clone(),
            client_info: self.config.client_info.clone(),
            meta: None,
            extra: JsonObject::new(),
        };
        let timeout = self.config.request_timeout;
        // The version header goes only on requests *after* initialize.
        let queued = self.queue_request(
            &ProtocolVersion::V2024_11_05,
            "initialize",
            &params,
            Vec::new(),
            false,
            PendingKind::Initialize,
            timeout,
            now,
        );
        match queued {
            Ok(_) => self.phase = Phase::Initializing,
            Err(cause) => self.fail(SessionError::Encode {
                method: "initialize",
                cause,
            }),
        }
    }

    /// The version, once ready, after checking that a legacy server declared `needed` (the
    /// method's [`RequestMethod::CAPABILITY`]). Modern servers are not gated: they answer
    /// `-32601` themselves, and some answer `server/discover` with fewer capabilities than they
    /// serve.
    fn version_for(&self, needed: Option<Capability>) -> Result<ProtocolVersion, RequestError> {
        let negotiated = self.negotiated().ok_or(RequestError::NotReady)?;
        if !negotiated.version.is_modern()
            && let Some(capability) = needed
            && !capability.declared_by(&negotiated.capabilities)
        {
            return Err(RequestError::NotAdvertised(capability));
        }
        Ok(negotiated.version.clone())
    }

    /// Sends any request by its method marker; the result arrives as [`Event::Completed`]. The
    /// method says which capability a legacy server must have declared, whether a transport
    /// may resend it, and which member `Mcp-Name` mirrors.
    pub fn request<M>(&mut self, mut params: M::Params, now: Instant) -> Result<OpId, RequestError>
    where
        M: RequestMethod,
        M::Params: HasMeta,
    {
        let version = self.version_for(M::CAPABILITY)?;
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
        self.queue_operation(
            &version,
            M::NAME,
            &params,
            headers,
            M::RETRY_SAFE,
            timeout,
            now,
        )
    }

    /// Queues a request that completes one operation ([`Event::Completed`]).
    #[allow(clippy::too_many_arguments, reason = "forwards to queue_request")]
    fn queue_operation<P: Serialize>(
        &mut self,
        version: &ProtocolVersion,
        method: &'static str,
        params: &P,
        headers: Vec<Header>,
        retry_safe: bool,
        timeout: Duration,
        now: Instant,
    ) -> Result<OpId, RequestError> {
        let op = self.allocate_op();
        let kind = PendingKind::Request { op };
        self.queue_request(
            version, method, params, headers, retry_safe, kind, timeout, now,
        )
        .map_err(RequestError::Encode)?;
        Ok(op)
    }

    /// Forgets a finished request's progress token.
    fn forget(&mut self, pending: &Pending) {
        if let Some(token) = &pending.progress_token {
            self.progress.remove(token);
        }
    }

    /// Cancels an operation. Its pending request is forgotten (a late answer is dropped) and
    /// it completes with [`RequestError::Cancelled`]. Where the era and transport call for
    /// it (legacy, or modern over stdio) a `notifications/cancelled` is sent; over modern
    /// HTTP cancelling means closing the request's response stream, so the request's id is
    /// returned for the transport to do that. `None` if the operation is not pending.
    pub fn cancel(&mut self, op: OpId, reason: Option<&str>) -> Option<RequestId> {
        // Answered already and held by the settle barrier, or waiting for a re-list.
        let before = self.held.len() + self.relists.len();
        self.held.retain(|h| h.op != op);
        self.relists.retain(|r| r.op != op);
        if self.held.len() + self.relists.len() < before {
            self.events.push_back(Event::Completed {
                op,
                result: Err(RequestError::Cancelled),
            });
            return None;
        }
        let id = self
            .pending
            .iter()
            .find(|(_, p)| p.op() == Some(op))
            .map(|(id, _)| id.clone())?;
        let pending = self.pending.remove(&id)?;
        self.forget(&pending);
        let event = match pending.kind {
            PendingKind::ListPage { .. } => Event::ToolsListed {
                op,
                result: Err(RequestError::Cancelled),
            },
            _ => Event::Completed {
                op,
                result: Err(RequestError::Cancelled),
            },
        };
        self.events.push_back(event);
        let version = self.version().cloned()?;
        if !version.is_modern() || !self.carries_headers {
            let params = toolwire_types::CancelledParams {
                request_id: Some(id.clone()),
                reason: reason.map(str::to_owned),
                meta: None,
                extra: JsonObject::new(),
            };
            match encode_notification("notifications/cancelled", Some(&params)) {
                Ok(body) => {
                    let headers = self.version_headers(&version);
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
        Some(id)
    }

    /// Whether requests at `version` carry the SEP-2243 headers: from `2026-07-28`, and only
    /// over a transport that has headers (stdio "MAY ignore `x-mcp-header` annotations
    /// entirely"; building headers nobody sends would only cost time).
    fn sends_sep2243_headers(&self, version: &ProtocolVersion) -> bool {
        self.carries_headers && version.uses_sep2243_headers()
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
        self.carries_headers && version.sends_version_header()
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
    /// JSON-RPC error.
    pub fn respond<R: Serialize>(
        &mut self,
        id: &RequestId,
        result: Result<&R, ErrorObject>,
    ) -> Result<(), RequestError> {
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

    /// Walks every page of `tools/list` and commits the listing to the cache in one swap; the
    /// result arrives as [`Event::ToolsListed`].
    pub fn list_tools(&mut self, now: Instant) -> Result<OpId, RequestError> {
        let op = self.allocate_op();
        let listing = self.cache.begin_listing();
        self.send_list_page(op, listing, None, 1, HashSet::new(), now)?;
        Ok(op)
    }

    fn send_list_page(
        &mut self,
        op: OpId,
        listing: Listing,
        cursor: Option<String>,
        pages: usize,
        cursors: HashSet<String>,
        now: Instant,
    ) -> Result<(), RequestError> {
        let version = self.version_for(method::ListTools::CAPABILITY)?;
        let mut params = ListParams {
            cursor,
            meta: None,
            extra: JsonObject::new(),
        };
        self.envelope(&version, &mut params);
        let headers = self.sep2243_headers(&version, "tools/list");
        let kind = PendingKind::ListPage {
            op,
            listing,
            pages,
            cursors,
        };
        let timeout = self.config.request_timeout;
        self.queue_request(
            &version,
            "tools/list",
            &params,
            headers,
            true,
            kind,
            timeout,
            now,
        )
        .map_err(RequestError::Encode)?;
        Ok(())
    }

    /// Calls a tool. Its headers come from `options.tool` or `options.header_map` when given,
    /// else from the cached tool's plan; the result arrives as [`Event::Completed`].
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
        let op = self.allocate_op();
        self.issue_call(op, name, arguments, options, None, true, now)?;
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
        let op = self.allocate_op();
        self.issue_call(op, name, arguments, options, Some(input), true, now)?;
        Ok(op)
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the one funnel of every tools/call and its reissue"
    )]
    fn issue_call(
        &mut self,
        op: OpId,
        name: &str,
        arguments: Option<Arc<JsonObject>>,
        options: CallOptions,
        input: Option<InputResponses>,
        may_retry: bool,
        now: Instant,
    ) -> Result<(), RequestError> {
        let version = self.version_for(method::CallTool::CAPABILITY)?;
        let snapshot = self.cache.load();
        let cached = snapshot.get(name);
        let plan = match (&options.tool, &options.header_map) {
            (Some(tool), _) => Some(
                HeaderPlan::from_input_schema(name, &tool.input_schema)
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
        let definition = options.tool.as_ref().or(cached.map(|t| &**t.tool()));
        let retry_safe = options
            .retry_safe
            .unwrap_or_else(|| definition.is_some_and(Tool::is_safe_to_retry));
        drop(snapshot);
        let id = self.allocate_id();
        // The request's own id is its progress token: unique among active requests.
        let token = options.progress.then(|| id.clone());
        let meta = match (&token, version.is_modern()) {
            (None, true) => Some(self.call_meta(&version)),
            (None, false) => None,
            // A token makes this call's `_meta` its own: the envelope (shared members) and it.
            (Some(token), modern) => {
                let mut meta = if modern {
                    self.call_meta(&version).get().clone()
                } else {
                    Meta::default()
                };
                meta.progress_token = Some(token.clone());
                Some(Rendered::new(meta))
            }
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
        let reissuable = may_retry && options.tool.is_none() && options.header_map.is_none();
        // Kept, not copied: the arguments are shared, the options were going to be dropped
        // after encoding.
        let retry = reissuable.then(|| {
            Box::new(CallRetry {
                name: name.to_owned(),
                arguments,
                options,
                input,
            })
        });
        let sent = Sent {
            method: "tools/call",
            headers,
            retry_safe,
            kind: PendingKind::ToolCall { op, retry, settle },
            timeout,
            progress_token: token,
        };
        self.push_request(&version, id, body, sent, now);
        Ok(())
    }

    /// A call was answered with a header mismatch: re-list, then reissue it once.
    fn relist_and_retry(
        &mut self,
        op: OpId,
        retry: Box<CallRetry>,
        error: ErrorObject,
        now: Instant,
    ) {
        tracing::warn!(
            tool = %retry.name,
            code = error.code,
            "the server says the Mcp-Param-* headers do not match the arguments; re-listing the \
             tools and retrying once"
        );
        match self.request_refresh(now) {
            Some(seq) => self.relists.push(Relist {
                op,
                retry,
                error,
                seq,
            }),
            None => self.events.push_back(Event::Completed {
                op,
                result: Err(RequestError::Server { error }),
            }),
        }
    }

    /// Asks for a refresh walk; returns the number of the refresh whose end shows a list
    /// fetched after now (`None` if none can be sent).
    fn request_refresh(&mut self, now: Instant) -> Option<u64> {
        if self.refresh.is_some() {
            self.refresh_again = true;
            return Some(self.refresh_started + 1);
        }
        match self.start_refresh(now) {
            Ok(()) => Some(self.refresh_started),
            Err(e) => {
                tracing::warn!(error = %e, "could not refresh the tool list");
                None
            }
        }
    }

    fn start_refresh(&mut self, now: Instant) -> Result<(), RequestError> {
        let op = self.allocate_op();
        let listing = self.cache.begin_listing();
        self.send_list_page(op, listing, None, 1, HashSet::new(), now)?;
        self.refresh = Some(op);
        self.refresh_started += 1;
        Ok(())
    }

    /// A `tools/list` walk ended: the caller's ([`Event::ToolsListed`]) or the session's own
    /// refresh ([`Event::ToolsRefreshed`], then the next one if list changes came meanwhile).
    /// Either way held results and re-list waiters are looked at again.
    fn finish_listing(
        &mut self,
        op: OpId,
        result: Result<ListOutcome, RequestError>,
        now: Instant,
    ) {
        if self.refresh == Some(op) {
            self.refresh = None;
            self.refresh_finished = self.refresh_started;
            self.refresh_ok = result.is_ok();
            if let Err(e) = &result {
                tracing::warn!(error = %e, "refreshing the tool list failed");
            }
            self.events.push_back(Event::ToolsRefreshed(result));
            if std::mem::take(&mut self.refresh_again)
                && let Err(e) = self.start_refresh(now)
            {
                tracing::warn!(error = %e, "could not refresh the tool list");
            }
        } else {
            self.events.push_back(Event::ToolsListed { op, result });
        }
        self.recheck(now);
    }

    /// Releases held results whose changes the cache now shows, and reissues calls whose
    /// re-list is done.
    fn recheck(&mut self, now: Instant) {
        let snapshot = self.cache.snapshot();
        let finished = self.refresh_finished;
        let (ready, held): (Vec<Held>, Vec<Held>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| match &h.expect {
                Expect::Refresh { seq } => finished >= *seq,
                Expect::Changes {
                    registers,
                    unregisters,
                    updates,
                } => {
                    registers.iter().all(|n| snapshot.contains(n))
                        && !unregisters.iter().any(|n| snapshot.contains(n))
                        && updates.iter().all(|(n, before)| {
                            snapshot
                                .get(n)
                                .is_some_and(|t| Some(t.definition_hash()) != *before)
                        })
                }
            });
        self.held = held;
        for h in ready {
            tracing::debug!(
                op = h.op.0,
                "the announced tool changes are in; releasing the result"
            );
            self.events.push_back(Event::Completed {
                op: h.op,
                result: Ok(h.result),
            });
        }
        let (due, waiting): (Vec<Relist>, Vec<Relist>) = std::mem::take(&mut self.relists)
            .into_iter()
            .partition(|r| finished >= r.seq);
        self.relists = waiting;
        for r in due {
            if !self.refresh_ok {
                self.events.push_back(Event::Completed {
                    op: r.op,
                    result: Err(RequestError::Server { error: r.error }),
                });
                continue;
            }
            let CallRetry {
                name,
                arguments,
                options,
                input,
            } = *r.retry;
            tracing::info!(tool = %name, "retrying the call with headers from the fresh tool list");
            if let Err(e) = self.issue_call(r.op, &name, arguments, options, input, false, now) {
                self.events.push_back(Event::Completed {
                    op: r.op,
                    result: Err(e),
                });
            }
        }
    }

    /// The settle barrier (seed 003): hands `raw` over now, or holds it until the changes it
    /// announces are in the cache.
    fn settle(&mut self, op: OpId, raw: Box<RawValue>, now: Instant) {
        // Most results announce nothing: look before parsing (the members' names are
        // distinctive; a false positive only costs the parse).
        let text = raw.get();
        let may_announce = ["\"registers\"", "\"unregisters\"", "\"updates\""]
            .iter()
            .any(|key| text.contains(key));
        let announced: Announced = if may_announce {
            serde_json::from_str(text).unwrap_or_default()
        } else {
            Announced::default()
        };
        let registers = announced.registers.unwrap_or_default();
        let unregisters = announced.unregisters.unwrap_or_default();
        let updates = announced.updates.unwrap_or_default();
        let expect = if registers.is_empty() && unregisters.is_empty() && updates.is_empty() {
            if self.config.settle == SettleMode::AnnouncedOrRefresh && self.refresh.is_some() {
                Expect::Refresh {
                    seq: self.refresh_started + u64::from(self.refresh_again),
                }
            } else {
                return self.events.push_back(Event::Completed {
                    op,
                    result: Ok(raw),
                });
            }
        } else {
            let snapshot = self.cache.snapshot();
            let updates = updates
                .into_iter()
                .map(|n| {
                    let before = snapshot.get(&n).map(|t| t.definition_hash());
                    (n, before)
                })
                .collect();
            Expect::Changes {
                registers,
                unregisters,
                updates,
            }
        };
        let announces = matches!(expect, Expect::Changes { .. });
        self.held.push(Held {
            op,
            result: raw,
            expect,
            deadline: now + self.config.settle_timeout,
        });
        // Perhaps the cache shows them already (the list change came first).
        self.recheck(now);
        let still_held = self.held.iter().any(|h| h.op == op);
        if still_held && announces && !self.server_announces_list_changes() {
            // No list change will come: fetch the list now.
            self.request_refresh(now);
        }
    }

    /// Whether the server will tell us when its tool list changes.
    fn server_announces_list_changes(&self) -> bool {
        let declared = self
            .negotiated()
            .and_then(|n| n.capabilities.tools.as_ref())
            .and_then(|t| t.list_changed)
            .unwrap_or(false);
        let modern = self.version().is_some_and(ProtocolVersion::is_modern);
        // In the modern era list changes come only on the listen stream.
        declared && (!modern || (self.listen.id.is_some() && !self.listen.disabled))
    }

    /// A list change arrived: the cache is stale; refresh it (bursts coalesce into one more
    /// walk) when auto-refresh is on or a result is waiting for it.
    fn list_changed(&mut self, now: Instant) {
        self.cache.mark_stale();
        if self.negotiated().is_some() && (self.config.auto_refresh || !self.held.is_empty()) {
            self.request_refresh(now);
        }
    }

    /// Opens the `subscriptions/listen` stream (modern era, when the server declares
    /// `tools.listChanged`).
    fn send_listen(&mut self, now: Instant) {
        let Some(version) = self.version().cloned() else {
            return;
        };
        if self.listen.disabled || self.listen.id.is_some() {
            return;
        }
        let mut params = toolwire_types::ListenParams {
            notifications: toolwire_types::SubscriptionFilter {
                tools_list_changed: Some(true),
                ..Default::default()
            },
            meta: None,
            extra: JsonObject::new(),
        };
        self.envelope(&version, &mut params);
        let headers = self.sep2243_headers(&version, "subscriptions/listen");
        match self.queue_request(
            &version,
            "subscriptions/listen",
            &params,
            headers,
            true,
            PendingKind::Listen,
            LISTEN_LIFETIME,
            now,
        ) {
            Ok(id) => self.listen.id = Some(id),
            Err(e) => tracing::warn!(error = %e, "could not open the listen stream"),
        }
    }

    /// The listen stream ended: reopen it after a backoff (1 s, doubling, at most 30 s).
    fn listen_dropped(&mut self, now: Instant) {
        self.listen.id = None;
        if self.listen.disabled {
            return;
        }
        let exponent = self.listen.failures.min(5);
        self.listen.failures += 1;
        let delay = Duration::from_secs(1 << exponent).min(Duration::from_secs(30));
        tracing::debug!(?delay, "the listen stream ended; reopening it later");
        self.listen.reopen_at = Some(now + delay);
    }

    /// Feeds bytes received from the transport (one message or a batch).
    pub fn handle_inbound(&mut self, bytes: &[u8], now: Instant) {
        match Frame::decode(bytes) {
            Ok(Frame::Single(message)) => self.handle_message(message, now),
            Ok(Frame::Batch(items)) => {
                for item in items {
                    match item {
                        Ok(message) => self.handle_message(message, now),
                        Err(e) => self.events.push_back(Event::Malformed(e)),
                    }
                }
            }
            Err(e) => self.events.push_back(Event::Malformed(e)),
        }
    }

    /// Tells the session that the request `id` got no JSON-RPC answer through the transport.
    ///
    /// An HTTP error body that holds a JSON-RPC error (with this id or none) is that request's
    /// answer. Otherwise, during the `server/discover` probe in [`ProtocolMode::Auto`], a 400,
    /// 404 or 405 marks a legacy server and the session falls back to `initialize`; any other
    /// failure of a negotiation request fails negotiation (401, 403, 5xx and broken connections
    /// say nothing about the era). A failed operation completes with
    /// [`RequestError::Undelivered`]. An unknown id is ignored.
    pub fn handle_undelivered(&mut self, failure: RequestFailure, now: Instant) {
        let id = &failure.id;
        let Some(pending) = self.pending.remove(id) else {
            tracing::debug!(%id, "transport failure for no pending request; ignored");
            return;
        };
        self.forget(&pending);
        if let Ok(Message::Response(response)) = Message::decode(&failure.body)
            && response.id.as_ref().is_none_or(|r| r == id)
            && let Err(error) = response.payload
        {
            return self.complete(pending, Err(error), now);
        }
        let status = failure.status;
        match pending.kind {
            PendingKind::Probe
                if self.config.mode == ProtocolMode::Auto
                    && matches!(status, Some(400 | 404 | 405)) =>
            {
                tracing::debug!(
                    status,
                    "server/discover refused over HTTP; falling back to initialize"
                );
                self.phase = Phase::Created;
                self.send_initialize(ProtocolVersion::LATEST_LEGACY, now);
            }
            PendingKind::Probe | PendingKind::Initialize => {
                let method = if matches!(pending.kind, PendingKind::Probe) {
                    "server/discover"
                } else {
                    "initialize"
                };
                self.fail(SessionError::Unreachable { method, failure });
            }
            PendingKind::Request { op } | PendingKind::ToolCall { op, .. } => {
                self.events.push_back(Event::Completed {
                    op,
                    result: Err(RequestError::Undelivered(failure)),
                })
            }
            PendingKind::Listen => self.listen_dropped(now),
            PendingKind::ListPage { op, .. } => {
                self.finish_listing(op, Err(RequestError::Undelivered(failure)), now)
            }
        }
    }

    fn handle_message(&mut self, message: Message, now: Instant) {
        match message {
            Message::Response(response) => {
                let Some(id) = response.id else {
                    tracing::debug!(error = ?response.payload.err(), "error response without an id");
                    return;
                };
                match self.pending.remove(&id) {
                    Some(pending) => {
                        self.forget(&pending);
                        self.complete(pending, response.payload, now);
                    }
                    None => {
                        tracing::debug!(%id, "response to no pending request (late or unknown); dropped")
                    }
                }
            }
            Message::Request(request) if request.method == "ping" => {
                let empty = toolwire_types::EmptyResult::default();
                if let Err(e) = self.respond(&request.id, Ok(&empty)) {
                    tracing::warn!(error = %e, "could not answer ping");
                }
            }
            Message::Request(request) => {
                let caps = &self.config.capabilities;
                let undeclared = match request.method.as_str() {
                    "sampling/createMessage" if caps.sampling.is_none() => Some("sampling"),
                    "elicitation/create" if caps.elicitation.is_none() => Some("elicitation"),
                    "roots/list" if caps.roots.is_none() => Some("roots"),
                    _ => None,
                };
                match undeclared {
                    Some(capability) => {
                        let error = ErrorObject::new(
                            toolwire_types::error::code::METHOD_NOT_FOUND,
                            format!(
                                "Method not found: this client did not declare the `{capability}` capability"
                            ),
                        );
                        if let Err(e) = self.respond(&request.id, Err::<&(), _>(error)) {
                            tracing::warn!(error = %e, "could not answer {}", request.method);
                        }
                    }
                    None => self.events.push_back(Event::ServerRequest(request)),
                }
            }
            Message::Notification(notification)
                if notification.method == "notifications/progress" =>
            {
                self.progress_notified(notification, now);
            }
            Message::Notification(notification) => {
                match notification.method.as_str() {
                    "notifications/tools/list_changed" => {
                        if self.foreign_subscription(&notification) {
                            tracing::debug!("list change for another subscription; ignored");
                            return;
                        }
                        self.list_changed(now);
                    }
                    "notifications/subscriptions/acknowledged" => {
                        self.acknowledged(&notification, now)
                    }
                    _ => {}
                }
                self.events.push_back(Event::Notification(notification));
            }
        }
    }

    /// Whether a notification names a subscription that is not this session's listen stream
    /// (stdio carries every stream on one pipe).
    fn foreign_subscription(&self, notification: &toolwire_types::Notification) -> bool {
        #[derive(serde::Deserialize)]
        struct WithMeta {
            #[serde(rename = "_meta", default)]
            meta: Option<Meta>,
        }
        let subscription = notification
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str::<WithMeta>(p.get()).ok())
            .and_then(|p| p.meta)
            .and_then(|m| m.subscription_id);
        match (subscription, &self.listen.id) {
            (Some(theirs), Some(ours)) => theirs != *ours,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The listen stream is up: check what the server agreed to send; after a reconnect,
    /// refresh (changes may have been missed while it was down).
    fn acknowledged(&mut self, notification: &toolwire_types::Notification, now: Instant) {
        if self.foreign_subscription(notification) {
            return;
        }
        let params: Result<toolwire_types::SubscriptionsAcknowledgedParams, _> =
            notification.params();
        match params {
            Ok(p) if p.notifications.tools_list_changed != Some(true) => tracing::warn!(
                "the server did not agree to send tool-list changes on the listen stream; \
                 the tool list will refresh only on request"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "malformed subscription acknowledgement"),
        }
        if std::mem::take(&mut self.listen.failures) > 0 {
            self.list_changed(now);
        }
    }

    /// Routes a progress notification to its operation and pushes the deadline forward.
    fn progress_notified(&mut self, notification: toolwire_types::Notification, now: Instant) {
        let params: toolwire_types::ProgressParams = match notification.params() {
            Ok(p) => p,
            Err(e) => return self.events.push_back(Event::Malformed(e)),
        };
        let pending = self
            .progress
            .get(&params.progress_token)
            .and_then(|id| self.pending.get_mut(id));
        match pending {
            Some(pending) => {
                pending.deadline = (now + pending.timeout).min(pending.hard_deadline);
                if let Some(op) = pending.op() {
                    self.events.push_back(Event::Progress { op, params });
                }
            }
            None => self.events.push_back(Event::Notification(notification)),
        }
    }

    fn complete(
        &mut self,
        pending: Pending,
        payload: Result<Box<RawValue>, ErrorObject>,
        now: Instant,
    ) {
        match pending.kind {
            PendingKind::Probe => self.probe_answered(payload, now),
            PendingKind::Initialize => self.initialize_answered(payload),
            PendingKind::Request { op } => self.events.push_back(Event::Completed {
                op,
                result: payload.map_err(|error| RequestError::Server { error }),
            }),
            PendingKind::ToolCall { op, retry, settle } => match payload {
                Err(error)
                    if matches!(
                        error.code,
                        toolwire_types::error::code::HEADER_MISMATCH
                            | toolwire_types::error::code::HEADER_MISMATCH_PRE_RENAME
                    ) && retry.is_some() =>
                {
                    if let Some(retry) = retry {
                        self.relist_and_retry(op, retry, error, now);
                    }
                }
                Err(error) => self.events.push_back(Event::Completed {
                    op,
                    result: Err(RequestError::Server { error }),
                }),
                Ok(raw) if settle => self.settle(op, raw, now),
                Ok(raw) => self.events.push_back(Event::Completed {
                    op,
                    result: Ok(raw),
                }),
            },
            PendingKind::Listen => {
                match &payload {
                    Err(e) if e.code == toolwire_types::error::code::METHOD_NOT_FOUND => {
                        tracing::debug!("the server has no subscriptions/listen; not reopening");
                        self.listen.disabled = true;
                    }
                    Err(e) => tracing::debug!(code = e.code, "the listen stream was refused"),
                    Ok(_) => tracing::debug!("the server ended the listen stream"),
                }
                self.listen_dropped(now);
            }
            PendingKind::ListPage {
                op,
                mut listing,
                pages,
                mut cursors,
            } => {
                let page = payload
                    .map_err(|error| RequestError::Server { error })
                    .and_then(|raw| decode_tool_page(&raw));
                let (page, malformed) = match page {
                    Ok(decoded) => decoded,
                    Err(e) => {
                        self.finish_listing(op, Err(e), now);
                        return;
                    }
                };
                if malformed.is_empty() {
                    listing.add_page(page.tools);
                } else {
                    listing.add_lenient_page(page.tools, malformed);
                }
                let Some(cursor) = page.next_cursor else {
                    let outcome = self.cache.commit_listing(listing);
                    for rejected in &outcome.rejected {
                        tracing::warn!(tool = %rejected.name, "tool excluded from the tool list: {}", rejected.reason);
                    }
                    self.finish_listing(op, Ok(outcome), now);
                    return;
                };
                let error = if !cursors.insert(cursor.clone()) {
                    Some(RequestError::RepeatedCursor(cursor.clone()))
                } else if pages >= self.config.max_list_pages {
                    Some(RequestError::TooManyPages(self.config.max_list_pages))
                } else {
                    None
                };
                let sent = match error {
                    Some(e) => Err(e),
                    None => self.send_list_page(op, listing, Some(cursor), pages + 1, cursors, now),
                };
                if let Err(e) = sent {
                    self.finish_listing(op, Err(e), now);
                }
            }
        }
    }

    fn probe_answered(&mut self, payload: Result<Box<RawValue>, ErrorObject>, now: Instant) {
        let Phase::Probing { version, retried } =
            std::mem::replace(&mut self.phase, Phase::Created)
        else {
            return;
        };
        let auto = self.config.mode == ProtocolMode::Auto;
        match payload {
            Ok(raw) => match method::Discover::decode_result(&raw) {
                Ok(Outcome::Complete(result)) => self.ready_modern(version, result, now),
                Ok(Outcome::InputRequired(_)) => self.fail(SessionError::Malformed {
                    method: "server/discover",
                    cause: DecodeError::UnexpectedInputRequired {
                        method: "server/discover".into(),
                    },
                }),
                Err(cause) => self.fail(SessionError::Malformed {
                    method: "server/discover",
                    cause,
                }),
            },
            Err(error)
                if error.code == toolwire_types::error::code::UNSUPPORTED_PROTOCOL_VERSION =>
            {
                let supported: Vec<ProtocolVersion> = error
                    .unsupported_version()
                    .map(|d| {
                        d.supported
                            .into_iter()
                            .filter_map(|v| ProtocolVersion::new(v).ok())
                            .collect()
                    })
                    .unwrap_or_default();
                let modern = supported
                    .iter()
                    .filter(|v| v.is_supported() && v.is_modern())
                    .max()
                    .cloned();
                let legacy = supported
                    .iter()
                    .filter(|v| v.is_supported() && !v.is_modern())
                    .max()
                    .cloned();
                match (modern, legacy) {
                    // Once, even with the version just refused: the server listed it.
                    (Some(v), _) if !retried => self.send_probe(v, true, now),
                    (_, Some(v)) if auto => self.send_initialize(v, now),
                    _ => self.fail(SessionError::Refused {
                        method: "server/discover",
                        error,
                    }),
                }
            }
            Err(error) if error.is_modern_era_evidence() || !auto => {
                // A modern server that refuses us: falling back would not help.
                self.fail(SessionError::Refused {
                    method: "server/discover",
                    error,
                })
            }
            Err(error) => {
                tracing::debug!(
                    code = error.code,
                    "server/discover refused; falling back to initialize"
                );
                self.send_initialize(ProtocolVersion::LATEST_LEGACY, now);
            }
        }
    }

    fn ready_modern(&mut self, version: ProtocolVersion, result: DiscoverResult, now: Instant) {
        let server_info = result.server_info().cloned();
        let negotiated = Negotiated {
            version,
            server_info,
            capabilities: result.capabilities,
            instructions: result.instructions,
        };
        let listens = self.config.listen
            && negotiated
                .capabilities
                .tools
                .as_ref()
                .and_then(|t| t.list_changed)
                == Some(true);
        self.phase = Phase::Ready(Box::new(negotiated.clone()));
        self.events.push_back(Event::Ready(Box::new(negotiated)));
        if listens {
            self.send_listen(now);
        }
    }

    fn initialize_answered(&mut self, payload: Result<Box<RawValue>, ErrorObject>) {
        let result: InitializeResult = match payload {
            Err(error) => {
                return self.fail(SessionError::Refused {
                    method: "initialize",
                    error,
                });
            }
            Ok(raw) => match method::Initialize::decode_result(&raw) {
                Ok(Outcome::Complete(r)) => r,
                Ok(Outcome::InputRequired(_)) => {
                    return self.fail(SessionError::Malformed {
                        method: "initialize",
                        cause: DecodeError::UnexpectedInputRequired {
                            method: "initialize".into(),
                        },
                    });
                }
                Err(cause) => {
                    return self.fail(SessionError::Malformed {
                        method: "initialize",
                        cause,
                    });
                }
            },
        };
        let version = result.protocol_version.clone();
        if !version.is_supported() || version.is_modern() {
            return self.fail(SessionError::UnsupportedVersion { version });
        }
        // Through the one predicate: over a transport without headers, none.
        let headers = self.version_headers(&version);
        match encode_notification("notifications/initialized", None::<&()>) {
            Ok(body) => self.transmits.push_back(outbound(
                body,
                headers,
                RetryClass::Never,
                MessageKind::Notification {
                    method: "notifications/initialized",
                },
            )),
            Err(cause) => {
                return self.fail(SessionError::Encode {
                    method: "notifications/initialized",
                    cause,
                });
            }
        }
        let negotiated = Negotiated {
            version,
            server_info: Some(result.server_info),
            capabilities: result.capabilities,
            instructions: result.instructions,
        };
        self.phase = Phase::Ready(Box::new(negotiated.clone()));
        self.events.push_back(Event::Ready(Box::new(negotiated)));
    }
}

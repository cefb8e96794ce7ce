//! How a session behaves ([`SessionConfig`], [`ProtocolMode`], [`SettleMode`]) and the
//! per-call choices of a `tools/call` ([`CallOptions`], [`InputResponses`]).

use std::collections::BTreeSet;
use std::time::Duration;

use toolwire_types::{ClientCapabilities, Implementation, JsonObject, ProtocolVersion, Tool};

use crate::Negotiated;

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
    /// The settle barrier for `tools/call` results that announce tool changes (default
    /// [`SettleMode::Announced`]).
    pub settle: SettleMode,
    /// How long the settle barrier holds a result at most (default 5 s).
    pub settle_timeout: Duration,
    /// Refetch the tool list when the server says it changed (default on).
    pub auto_refresh: bool,
    /// In the `2026-07-28` era, open a `subscriptions/listen` stream for the list changes
    /// the server declares (`tools`, `prompts`, `resources` `listChanged`; default on). A
    /// resource subscription opens one whatever this says.
    pub listen: bool,
    /// The resources subscribed to ([`Session::subscribe_resource`](crate::Session::subscribe_resource)
    /// keeps it; a session made with it after a reconnect subscribes to them again).
    pub resource_subscriptions: BTreeSet<String>,
    /// The least severe log message wanted from the server: in the `2026-07-28` era it rides
    /// on every request's `_meta` (`io.modelcontextprotocol/logLevel`; without it the server
    /// sends none); in the legacy era the session sends `logging/setLevel` to each new
    /// session before reporting it ready, and again on [`Session::change_log_level`](crate::Session::change_log_level) (default: none).
    pub log_level: Option<toolwire_types::LoggingLevel>,
    /// What an earlier negotiation with this server settled on ([`Negotiated`] is serde), for
    /// [`ProtocolMode::Auto`]: a `2026-07-28` verdict is adopted at once (no `server/discover`
    /// round trip; probed again if the server refuses the version), a legacy one sends
    /// `initialize` at its version without probing (probed if that is refused). Ignored for
    /// a version this client does not speak, and in a pinned mode (default: none).
    pub prior: Option<Negotiated>,
    /// Keep the answers whose results carry SEP-2549 caching hints (the prompt, resource,
    /// template and skill lists, `resources/read`, `skills/get`) while they are fresh, for
    /// [`Session::request_cached`](crate::Session::request_cached) (default on; a server that
    /// sends no `ttlMs` has nothing kept).
    pub response_cache: bool,
    /// When asking again for a kept answer (or the tool listing) in [`CacheMode::Use`] gets
    /// no answer at all (the transport failed, or the deadline passed), return what was kept,
    /// stale, with a warning, rather than the failure; an answer the server gave, an error
    /// included, always counts (default off: the spec allows it, callers must want it).
    pub serve_stale_on_error: bool,
    /// Legacy era: send `ping` when the connection has been quiet this long (default: off).
    /// The session sends it from [`Session::handle_timeout`](crate::Session::handle_timeout)
    /// (it is in [`Session::poll_timeout`](crate::Session::poll_timeout)); an unanswered one
    /// is logged, not fatal.
    pub keep_alive: Option<Duration>,
    /// How many server requests (sampling, elicitation, roots) the caller works on at once
    /// (default 64): past that many unanswered [`Event::ServerRequest`](crate::Event::ServerRequest)s
    /// the session refuses the next one itself (`-32603`), and with 0 (a caller without a
    /// handler) it refuses every one (`-32601`).
    pub max_server_requests: usize,
}

/// How a list request uses what was received before (SEP-2549 caching).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CacheMode {
    /// Answer from the last result while it is fresh (its `ttlMs` not passed, nothing
    /// invalidated it); fetch otherwise (default).
    #[default]
    Use,
    /// Fetch, and keep what comes back for later.
    Refresh,
    /// Fetch, and leave what was kept alone.
    Bypass,
}

/// What the session does with a `tools/call` result that may change the tool list.
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
            resource_subscriptions: BTreeSet::new(),
            log_level: None,
            prior: None,
            response_cache: true,
            serve_stale_on_error: false,
            keep_alive: None,
            max_server_requests: 64,
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

    /// Sets what an earlier negotiation settled on (see [`SessionConfig::prior`]).
    pub fn with_prior(mut self, prior: Option<Negotiated>) -> Self {
        self.prior = prior;
        self
    }

    /// Turns the response cache on or off (see [`SessionConfig::response_cache`]).
    pub fn with_response_cache(mut self, on: bool) -> Self {
        self.response_cache = on;
        self
    }

    /// Serves kept answers past their freshness when asking again fails (see
    /// [`SessionConfig::serve_stale_on_error`]).
    pub fn with_serve_stale_on_error(mut self, on: bool) -> Self {
        self.serve_stale_on_error = on;
        self
    }

    /// Sets the keep-alive interval (see [`SessionConfig::keep_alive`]).
    pub fn with_keep_alive(mut self, interval: Option<Duration>) -> Self {
        self.keep_alive = interval;
        self
    }

    /// Sets the log level asked of the server.
    pub fn with_log_level(mut self, level: Option<toolwire_types::LoggingLevel>) -> Self {
        self.log_level = level;
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

/// The answers of an MRTR round: a `tools/call` answered `input_required` is sent again with
/// them ([`Session::call_tool_with_input`](crate::Session::call_tool_with_input)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputResponses {
    /// The answers to the server's `inputRequests`, by key.
    pub responses: JsonObject,
    /// The server's `requestState`, echoed exactly (`None` if it sent none).
    pub request_state: Option<String>,
}

/// Per-call choices for [`Session::call_tool`](crate::Session::call_tool).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// The deadline for this call (default: the session's).
    pub timeout: Option<Duration>,
    /// A tool definition for this call only: its `x-mcp-header` annotations decide the
    /// headers, and the cache is neither read nor changed (for callers that keep no cache).
    /// Boxed: the options travel by value into every future of a call, and the common call
    /// sets none.
    pub tool: Option<Box<Tool>>,
    /// Argument → header annotation for this call only (when no definition is at hand).
    pub header_map: Option<Vec<(String, String)>>,
    /// Allow the transport to resend the call (default: only for tools annotated
    /// `readOnlyHint` or `idempotentHint`).
    pub retry_safe: Option<bool>,
    /// Ask the server for progress notifications ([`Event::Progress`](crate::Event::Progress)); each one also resets
    /// the call's deadline, up to [`SessionConfig::max_request_time`].
    pub progress: bool,
    /// Whether the settle barrier applies to this call (default: as the session is set up).
    pub settle: Option<bool>,
    /// `_meta` members of this call's own (W3C `traceparent`/`tracestate`, vendor keys),
    /// merged with the ones the session sets; a reserved key is refused
    /// ([`RequestError::ReservedMeta`](crate::RequestError::ReservedMeta)).
    pub meta: Option<toolwire_types::JsonObject>,
    /// 2026-07-28: the client capabilities this call declares in its `_meta`, instead of the
    /// session's (a gateway declares what the client it calls for declared). Ignored in the
    /// legacy era, whose capabilities belong to the session. Shared and rendered once
    /// ([`Rendered`](toolwire_types::Rendered)): a caller that declares the same capabilities
    /// on many calls passes clones of one value, and their JSON is written once.
    pub capabilities: Option<toolwire_types::Rendered<ClientCapabilities>>,
    /// 2026-07-28: the log level this call asks for in its `_meta`, instead of the session's
    /// (a gateway asks for what its caller asked). Ignored in the legacy era, whose level is
    /// the session's (`logging/setLevel`).
    pub log_level: Option<toolwire_types::LoggingLevel>,
    /// Credentials for this call only, instead of the transport's
    /// ([`toolwire_headers::authorization_header`]: a gateway calling on its caller's behalf).
    /// Only a transport that carries headers can send them
    /// ([`RequestError::CallCredentials`](crate::RequestError::CallCredentials) otherwise); a
    /// refusal of them is reported, never answered with the transport's own login.
    pub authorization: Option<toolwire_headers::Header>,
    /// The caller answers the server's requests about this call itself (legacy era:
    /// elicitation, sampling, roots): those that come on its response stream, and, over a
    /// transport that cannot say which call a request is about, any while it is the only
    /// such call in flight. [`Event::ServerRequest`](crate::Event::ServerRequest) names it
    /// for them; the rest name none (the client's own handler answers). `toolwire::Client`
    /// sets it from the call's hooks (`CallHooks::on_server_request`).
    pub answers_requests: bool,
}

impl CallOptions {
    /// Sends this call with `header` (an `Authorization` header) instead of the transport's
    /// own credentials.
    pub fn with_authorization(mut self, header: toolwire_headers::Header) -> Self {
        self.authorization = Some(header);
        self
    }

    /// Declares `capabilities` for this call only (2026-07-28): a `ClientCapabilities`, or a
    /// clone of a [`Rendered`](toolwire_types::Rendered) one shared by many calls.
    pub fn with_capabilities(
        mut self,
        capabilities: impl Into<toolwire_types::Rendered<ClientCapabilities>>,
    ) -> Self {
        self.capabilities = Some(capabilities.into());
        self
    }

    /// Asks for log messages at `level` and above for this call only (2026-07-28).
    pub fn with_log_level(mut self, level: toolwire_types::LoggingLevel) -> Self {
        self.log_level = Some(level);
        self
    }

    /// Sets the deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Supplies the tool definition for this call.
    pub fn with_tool(mut self, tool: Tool) -> Self {
        self.tool = Some(Box::new(tool));
        self
    }

    /// Supplies an argument → header annotation map for this call.
    pub fn with_header_map(mut self, map: impl IntoIterator<Item = (String, String)>) -> Self {
        self.header_map = Some(map.into_iter().collect());
        self
    }

    /// Adds a `_meta` member to this call (say `traceparent`).
    pub fn with_meta(
        mut self,
        key: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.meta
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
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

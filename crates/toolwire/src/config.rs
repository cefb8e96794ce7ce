//! How a client is set up: [`ClientBuilder`], the one way to configure and connect.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolwire_cache::CacheConfig;
use toolwire_http::HttpTransportBuilder;
use toolwire_session::{Negotiated, ProtocolMode, SessionConfig, SettleMode};
use toolwire_stdio::StdioConfig;
use toolwire_transport::{BoxFuture, Transport, TransportError};
use toolwire_types::{ClientCapabilities, ErrorObject, Implementation, ServerRequest};

use crate::reconnect::ReconnectPolicy;
use crate::{Client, Error};

/// Answers requests from the server (`elicitation/create`, `sampling/createMessage`,
/// `roots/list`): the decoded request in, the result (any JSON value) or a JSON-RPC error out.
pub type ServerRequestHandler =
    Arc<dyn Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>> + Send + Sync>;

/// A per-call progress callback.
pub type ProgressCallback = Arc<dyn Fn(&toolwire_types::ProgressParams) + Send + Sync>;

/// What one call hands back to its caller while it runs: its progress, and the requests the
/// server makes about it (elicitation, sampling, roots: those that came on the call's own
/// response stream, the input requests of its MRTR rounds, and, over a transport that cannot
/// say which call a request is about, any while this is the only call in flight that has a
/// handler). The rest go to the client's handler ([`ClientBuilder::handler`]), whose
/// declared capabilities apply to both: an undeclared request is refused before either sees
/// it.
#[derive(Clone, Default)]
pub struct CallHooks {
    pub(crate) progress: Option<ProgressCallback>,
    pub(crate) requests: Option<ServerRequestHandler>,
    pub(crate) log: Option<LogCallback>,
}

/// A per-call callback for the log messages (`notifications/message`) a server sends about
/// the call.
pub type LogCallback = Arc<dyn Fn(&toolwire_types::Notification) + Send + Sync>;

impl CallHooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the server for progress and hands each notification to `on_progress` (each one
    /// also pushes the call's deadline forward).
    #[must_use]
    pub fn on_progress(
        mut self,
        on_progress: impl Fn(&toolwire_types::ProgressParams) + Send + Sync + 'static,
    ) -> Self {
        self.progress = Some(Arc::new(on_progress));
        self
    }

    /// Hands the log messages that come on this call's response stream (a 2026-07-28 server
    /// logs there at the level the call asked for, `CallOptions::with_log_level`) to `on_log`
    /// rather than to [`crate::Client::notifications`].
    #[must_use]
    pub fn on_log(
        mut self,
        on_log: impl Fn(&toolwire_types::Notification) + Send + Sync + 'static,
    ) -> Self {
        self.log = Some(Arc::new(on_log));
        self
    }

    /// Answers the server's requests about this call with `handler` rather than the client's.
    #[must_use]
    pub fn on_server_request(
        mut self,
        handler: impl Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.requests = Some(Arc::new(handler));
        self
    }
}

impl std::fmt::Debug for CallHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallHooks")
            .field("progress", &self.progress.is_some())
            .field("requests", &self.requests.is_some())
            .field("log", &self.log.is_some())
            .finish()
    }
}

/// Makes a fresh transport for each connection (used to reconnect after
/// [`Client::disconnect`]).
pub type Connector = Arc<dyn Fn() -> Result<Arc<dyn Transport>, TransportError> + Send + Sync>;

/// What a [`ClientBuilder`] collected: the builder's output, kept by the client.
#[derive(Clone)]
pub(crate) struct ClientConfig {
    /// The protocol session's settings (client info, capabilities, mode, timeouts).
    pub(crate) session: SessionConfig,
    /// The tool cache's settings.
    pub(crate) cache: CacheConfig,
    /// Answers the server's requests; without one they are refused with `-32601`.
    pub(crate) handler: Option<ServerRequestHandler>,
    /// Check `structuredContent` against the tool's `outputSchema`.
    pub(crate) validate_structured_output: bool,
    /// Reconnect after the connection dies.
    pub(crate) reconnect: Option<ReconnectPolicy>,
    /// How many notifications a subscriber may fall behind before it loses the oldest.
    pub(crate) notification_buffer: usize,
    /// OAuth for the HTTP transports `connect_http` and `connect_sse` build.
    #[cfg(feature = "oauth")]
    pub(crate) oauth: Option<toolwire_auth::OAuthConfig>,
    /// Declare the tasks extension and follow the tasks `tools/call` is answered with.
    pub(crate) tasks: bool,
    /// Declare the MCP Apps extension (`io.modelcontextprotocol/ui`).
    pub(crate) apps: bool,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("session", &self.session)
            .field("cache", &self.cache)
            .field("handler", &self.handler.as_ref().map(|_| "Fn"))
            .field(
                "validate_structured_output",
                &self.validate_structured_output,
            )
            .field("reconnect", &self.reconnect)
            .field("notification_buffer", &self.notification_buffer)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Client`], with every setting a client has, then connects it:
///
/// ```no_run
/// # async fn demo() -> Result<(), toolwire::Error> {
/// use std::time::Duration;
/// use toolwire::{Client, HttpTransport, ProtocolMode};
///
/// let client = Client::builder("my-agent", "1.0")
///     .title("My Agent")
///     .mode(ProtocolMode::Auto)
///     .timeouts(Duration::from_secs(30), Duration::from_secs(5))
///     .connect_http(HttpTransport::builder("https://example.com/mcp"))?;
/// # Ok(()) }
/// ```
///
/// Connecting needs a tokio runtime ([`UsageError::NoRuntime`](crate::UsageError::NoRuntime) otherwise); the blocking client
/// takes the same builder ([`crate::blocking::Client::connect_stdio`]).
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    pub(crate) config: ClientConfig,
}

impl ClientBuilder {
    pub(crate) fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            config: ClientConfig {
                session: SessionConfig::new(Implementation::new(name, version)),
                cache: CacheConfig::default(),
                handler: None,
                validate_structured_output: true,
                reconnect: None,
                notification_buffer: 256,
                #[cfg(feature = "oauth")]
                oauth: None,
                tasks: true,
                apps: false,
            },
        }
    }

    /// The human-readable name in `clientInfo`.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.config.session.client_info.title = Some(title.into());
        self
    }

    /// Which protocol era to speak (default: probe `server/discover`, then fall back to
    /// `initialize`).
    pub fn mode(mut self, mode: ProtocolMode) -> Self {
        self.config.session.mode = mode;
        self
    }

    /// What an earlier connection to this server negotiated ([`Client::ready`]'s answer,
    /// which serde saves and loads): with the default mode a `2026-07-28` verdict is used at
    /// once, with no `server/discover` round trip, and a legacy one sends `initialize` at its
    /// version without probing first (a stdio server that ignores the probe costs its whole
    /// timeout). If the server refuses the version, the client probes again; the request that
    /// found out fails with the server's refusal.
    ///
    /// [`Client::ready`]: crate::Client::ready
    pub fn prior(mut self, negotiated: Negotiated) -> Self {
        self.config.session = self.config.session.with_prior(Some(negotiated));
        self
    }

    /// Whether answers that carry SEP-2549 caching hints (the prompt, resource, template and
    /// skill lists, `resources/read`, `skills/get`) are kept while fresh and served without a
    /// round trip (default on, as the spec allows; a server that sends no `ttlMs` has nothing
    /// kept). An answer not marked `cacheScope: public` belongs to the identity that fetched
    /// it: when the transport presents another (`StaticAuthorization::set_bearer`, an OAuth
    /// authorization that is not a step-up), it is asked again.
    pub fn response_cache(mut self, on: bool) -> Self {
        self.config.session = self.config.session.with_response_cache(on);
        self
    }

    /// When asking the server again for a kept answer (a list, a read, the tool listing) gets
    /// no answer at all (the connection failed, the deadline passed), return the kept one,
    /// stale, with a warning, instead of the failure (default off). Answers the server gave,
    /// errors included, always count.
    pub fn serve_stale_on_error(mut self, on: bool) -> Self {
        self.config.session = self.config.session.with_serve_stale_on_error(on);
        self
    }

    /// Whether to declare the tasks extension (`io.modelcontextprotocol/tasks`, default on):
    /// a server may then answer a `tools/call` with a task, which [`Client::call_tool`]
    /// follows to its final result (polling `tasks/get`, answering its input requests through
    /// the handler, cancelling it at the call's deadline, by default the
    /// [`ClientBuilder::max_request_time`], or when the caller stops waiting). Off, a task
    /// answer is an invalid response.
    pub fn tasks(mut self, on: bool) -> Self {
        self.config.tasks = on;
        self
    }

    /// Whether to declare MCP Apps (`io.modelcontextprotocol/ui` with
    /// `text/html;profile=mcp-app`; default off): for an application that renders views,
    /// since servers then offer the tools that come with one ([`Client::app`] reads a tool's
    /// view).
    pub fn apps(mut self, on: bool) -> Self {
        self.config.apps = on;
        self
    }

    /// The default request deadline (60 s) and the `server/discover` probe timeout (5 s).
    pub fn timeouts(mut self, request: Duration, probe: Duration) -> Self {
        self.config.session = self.config.session.with_timeouts(request, probe);
        self
    }

    /// The longest a request may run even while progress keeps resetting its deadline
    /// (default 10 min).
    pub fn max_request_time(mut self, limit: Duration) -> Self {
        self.config.session.max_request_time = limit;
        self
    }

    /// The most pages one `tools/list` walk may take (default 1,000).
    pub fn max_list_pages(mut self, pages: usize) -> Self {
        self.config.session = self.config.session.with_max_list_pages(pages);
        self
    }

    /// Declares client capabilities (a handler declares its own with [`Self::handler`]).
    pub fn capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.config.session.capabilities = capabilities;
        self
    }

    /// Answers the server's requests and `input_required` rounds; declares `capabilities`
    /// (requests for undeclared ones are refused before they reach the handler). Without a
    /// handler every server request is refused with `-32601`.
    pub fn handler(
        mut self,
        capabilities: ClientCapabilities,
        handler: impl Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.config.session = self.config.session.with_capabilities(capabilities);
        self.config.handler = Some(Arc::new(handler));
        self
    }

    /// The tool cache's settings.
    pub fn cache(mut self, cache: CacheConfig) -> Self {
        self.config.cache = cache;
        self
    }

    /// The settle barrier for results that announce tool changes (default: announced
    /// changes, 5 s).
    pub fn settle(mut self, mode: SettleMode, timeout: Duration) -> Self {
        self.config.session = self.config.session.with_settle(mode, timeout);
        self
    }

    /// Whether to refetch the tool list when the server says it changed (default on).
    pub fn auto_refresh(mut self, on: bool) -> Self {
        self.config.session = self.config.session.with_auto_refresh(on);
        self
    }

    /// Whether to open the `2026-07-28` `subscriptions/listen` stream for tool-list changes
    /// when the server declares `tools.listChanged` (default on).
    pub fn listen(mut self, on: bool) -> Self {
        self.config.session = self.config.session.with_listen(on);
        self
    }

    /// Whether to check `structuredContent` against `outputSchema` (default on; skipped for
    /// `isError` results and results without structured content).
    pub fn validate_structured_output(mut self, validate: bool) -> Self {
        self.config.validate_structured_output = validate;
        self
    }

    /// Reconnects when the connection dies (off by default): a new child process or HTTP
    /// transport from the connector, after `policy`'s backoff. Needs a connector
    /// ([`Self::connect_stdio`], [`Self::connect_http`], [`Self::connect_with`]); a transport
    /// given once ([`Self::connect`]) cannot be made again.
    pub fn reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.config.reconnect = Some(policy);
        self
    }

    /// Turns OAuth 2.1 on for [`Self::connect_http`] and [`Self::connect_sse`]: stored tokens
    /// are sent and refreshed, and a 401 or 403 runs the flow `config` describes (its store,
    /// its handler), once for every request refused with the same credentials. A failure is
    /// [`Error::Authorization`]. A transport that has credentials of its own
    /// ([`HttpTransportBuilder::has_credentials`]: a bearer token, an authorizer) keeps them.
    /// To log in before the first request, or to share one [`toolwire_auth::OAuth`] among
    /// transports, give it to [`HttpTransportBuilder::authorizer`] yourself.
    #[cfg(feature = "oauth")]
    pub fn oauth(mut self, config: toolwire_auth::OAuthConfig) -> Self {
        self.config.oauth = Some(config);
        self
    }

    /// Sends `ping` when a legacy-era connection has been quiet for `interval` (off by
    /// default), so that proxies and NATs that cut idle connections keep it; an unanswered
    /// ping is logged, not fatal (a server busy with long calls may answer late). The
    /// `2026-07-28` era has no `ping`: there, the listen stream a server with `listChanged`
    /// keeps open carries the server's own keep-alives, and a cut HTTP connection is simply
    /// opened again by the next request.
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.config.session.keep_alive = Some(interval);
        self
    }

    /// The least severe log message wanted from the server (default: none asked). In the
    /// `2026-07-28` era it rides on every request (`io.modelcontextprotocol/logLevel`; the
    /// server sends log messages only for requests that carry it); in the legacy era
    /// `logging/setLevel` is sent after each negotiation when the server declares `logging`.
    /// The messages arrive on [`Client::notifications`].
    pub fn log_level(mut self, level: toolwire_types::LoggingLevel) -> Self {
        self.config.session = self.config.session.with_log_level(Some(level));
        self
    }

    /// How many notifications a subscriber of [`Client::notifications`] may fall behind
    /// before it loses the oldest (default 256; rounded up to a power of two). The connection
    /// never waits for a subscriber.
    pub fn notification_buffer(mut self, notifications: usize) -> Self {
        self.config.notification_buffer = notifications.max(1);
        self
    }

    /// Connects over any transport. Nothing is sent until the first use; then one negotiation
    /// serves every caller. Without a connector the client cannot reconnect after
    /// [`Client::disconnect`].
    pub fn connect(self, transport: impl Transport) -> Result<Client, Error> {
        Client::new(self.config, Some(Arc::new(transport)), None)
    }

    /// Connects lazily through `connector`, which is called again to reconnect after
    /// [`Client::disconnect`].
    pub fn connect_with(self, connector: Connector) -> Result<Client, Error> {
        Client::new(self.config, None, Some(connector))
    }

    /// Starts the server as a child process now (so a bad command fails here) and connects
    /// over stdio; after [`Client::disconnect`] the next call starts a new one.
    pub fn connect_stdio(self, stdio: StdioConfig) -> Result<Client, Error> {
        let first = toolwire_stdio::StdioTransport::spawn(stdio.clone())
            .map_err(|e| Error::Connection(crate::ConnectionError::Transport(Arc::new(e))))?;
        // Every later child is started in the span the first was (a host's names the server),
        // so its stderr lines say whose they are.
        let span = tracing::Span::current();
        let connector: Connector = Arc::new(move || {
            let _inside = span.enter();
            toolwire_stdio::StdioTransport::spawn(stdio.clone())
                .map(|t| Arc::new(t) as Arc<dyn Transport>)
        });
        Client::new(self.config, Some(Arc::new(first)), Some(connector))
    }

    /// Connects over the 2024-11-05 HTTP+SSE transport ([`toolwire_http::SseTransport`]):
    /// `http`'s URL is the server's SSE endpoint; every setting of the builder applies. The
    /// era is legacy (`initialize`): in `Auto` mode the newest legacy version is offered and
    /// the server's answer taken. After [`Client::disconnect`] (or with a reconnect policy,
    /// after the stream ends) a new stream is opened.
    pub fn connect_sse(mut self, http: HttpTransportBuilder) -> Result<Client, Error> {
        if self.config.session.mode == ProtocolMode::Auto {
            self.config.session.mode =
                ProtocolMode::Pinned(toolwire_types::ProtocolVersion::LATEST_LEGACY);
        }
        self.connect_built(http, HttpTransportBuilder::build_sse)
    }

    /// Connects over Streamable HTTP, falling back to the 2024-11-05 HTTP+SSE transport when
    /// the server refuses the `initialize` POST (400/404/405) and a GET of the same URL opens
    /// an SSE stream with an `endpoint` event, as the spec asks of clients
    /// ([`toolwire_http::HttpOrSseTransport`]). The URL, headers and TLS settings are checked now: a
    /// refused one is the error here; no request is sent until the first use); after
    /// [`Client::disconnect`] the next call builds a new transport from the same settings. To
    /// change the bearer token later, build the [`crate::HttpTransport`] yourself, keep a
    /// clone, and use [`ClientBuilder::connect`].
    pub fn connect_http(self, http: HttpTransportBuilder) -> Result<Client, Error> {
        self.connect_built(http, HttpTransportBuilder::build_with_sse_fallback)
    }

    /// Builds the first transport from `http` now (its refusal is the error here) and the
    /// others, one per connection, with the same `build`.
    #[cfg_attr(
        not(feature = "oauth"),
        allow(unused_mut, reason = "only OAuth takes from the configuration")
    )]
    fn connect_built<T: Transport>(
        mut self,
        http: HttpTransportBuilder,
        build: fn(HttpTransportBuilder) -> Result<T, toolwire_http::HttpError>,
    ) -> Result<Client, Error> {
        let setup = |e: toolwire_http::HttpError| TransportError::Setup(Box::new(e));
        #[cfg(feature = "oauth")]
        let mut http = http;
        // A transport given credentials of its own keeps them: those were chosen for it.
        #[cfg(feature = "oauth")]
        if let Some(oauth) = self.config.oauth.take()
            && !http.has_credentials()
        {
            // One authorizer for every connection: tokens outlive a reconnect.
            let authorizer = toolwire_auth::OAuth::new(http.url(), oauth);
            http = http.authorizer(Arc::new(authorizer));
        }
        let first = build(http.clone()).map_err(|e| {
            Error::Connection(crate::ConnectionError::Transport(Arc::new(setup(e))))
        })?;
        let connector: Connector = Arc::new(move || {
            build(http.clone())
                .map(|t| Arc::new(t) as Arc<dyn Transport>)
                .map_err(setup)
        });
        Client::new(self.config, Some(Arc::new(first)), Some(connector))
    }
}

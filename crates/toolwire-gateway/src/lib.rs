//! Many MCP servers served as one: Toolwire's gateway.
//!
//! A [`Gateway`] serves the merged tools of a [`Host`] (the servers of an `mcpServers` file,
//! any transport, either era) as one MCP server, to a client of either era, over Streamable
//! HTTP or stdio (the protocol is `toolwire-server`'s, the same as the reference server's):
//!
//! - **Names**: each tool is listed as the host names it, `server__tool` (also with one server),
//!   or provider-safe (`^[A-Za-z0-9_-]{1,64}$`, [`toolwire_host::Naming::ProviderSafe`]); a call
//!   is routed to its server under the server's own name.
//! - **Eras**: the downstream era is the client's, the upstream era each server's; the
//!   gateway's client negotiates its own with each upstream, so a legacy client reaches a
//!   2026-07-28-only server and the other way round for `tools/list` and `tools/call`.
//! - **SEP-2243**: the merged listing keeps every `x-mcp-header` annotation, so a client of the
//!   gateway sends `Mcp-Param-*` headers and a balancer in front of a gateway fleet can route
//!   on them; inbound headers are checked against the body (400 with `-32020` on a mismatch);
//!   each upstream gets the headers its own definition yields (`Mcp-Name` without the prefix).
//! - **Partial availability**: a server that fails takes only its own tools out of the
//!   listing; the others are served. A change of any server's tools reaches downstream clients
//!   as one `notifications/tools/list_changed` per burst ([`COALESCE`]).
//! - **Operations** (over HTTP): `/healthz` (up), `/readyz` (every enabled upstream tried;
//!   each one's state as JSON; 503 until then), `/metrics` (Prometheus: calls by upstream,
//!   tool and outcome, their latency, each upstream's state).
//! - **Pagination**: `tools/list` pages of [`GatewayBuilder::page_size`] tools, in name order.
//! - **Progressive discovery** (opt-in, [`GatewayBuilder::progressive`]): above a number of
//!   tools or an estimate of their tokens, `tools/list` lists `search_tools`, `describe_tool`
//!   and `call_tool` in place of every tool; the tools stay callable by name.
//! - **Resources, prompts, completions**: every upstream's, merged; a resource's URI carries
//!   its server's name in front of its authority (`toolwire://readme` of `docs` is
//!   `toolwire://docs__readme`; the scheme is kept, so a tool's `ui://` view stays one), a
//!   prompt is named as tools are; reads, `prompts/get` and `completion/complete` are routed
//!   back.
//! - **Resource subscriptions**: a client's `resources/subscribe` (legacy) or listen stream
//!   (2026-07-28) subscribes the upstream once, however many clients ask; its updates reach
//!   the sessions and streams that subscribed, under the gateway's URI (a listen stream only
//!   for resources its caller may see).
//! - **Logging** (legacy clients): an upstream's messages about a call go on that call's
//!   stream; `logging/setLevel` is a session's own level, and asks the upstreams its caller may
//!   see for the most verbose level any session set; their messages outside a call reach a
//!   session from the level it set, only from upstreams its caller may see, with the logger
//!   named after the server.
//! - **Isolation**: nothing one caller does reaches another (module `sessions`, the server's
//!   `asks`): questions are answered only from the session they were sent to, tasks and parked
//!   calls are their caller's alone, and upstreams called with their callers' credentials are
//!   sent `tools/call` only.
//! - **Progress and cancellation**: a call's progress reaches the client under its own token;
//!   a call the client cancels (`notifications/cancelled` over stdio or in its legacy session)
//!   is cancelled upstream.
//! - **Callers** ([`Access`], [`GatewayBuilder::access`]; over HTTP): an OAuth 2.1 resource
//!   server (protected resource metadata, 401/403 challenges, JWT access tokens checked
//!   against each issuer's rotating keys, DPoP-bound tokens with their proofs, opaque tokens
//!   introspected), API keys kept
//!   as hashes, and a policy of who sees and calls which servers, tools and prompts (what a
//!   caller may not see is absent and refused as unknown); upstreams called with the caller's
//!   token (only where the token names them), a token exchanged for it (RFC 8693), or each
//!   user's own login to the upstream (a URL elicitation to the gateway's `/oauth/connect`
//!   page, then `/oauth/callback`), per entry. One audit line per call under
//!   `toolwire_gateway::audit`: caller, upstream, tool, outcome, duration.
//! - **Traces**: each request is a server span (the OpenTelemetry conventions for MCP), the
//!   child of the W3C context its `_meta` carried; the calls upstream are client spans inside
//!   it whose own context goes upstream in `_meta`, so one trace runs from the agent to the
//!   upstream (the `otel` feature and an OpenTelemetry layer). Without them, a call's
//!   `traceparent`, `tracestate` and `baggage` go upstream as they came.
//! - **The upstream's requests** (elicitation, sampling, roots) reach the client whose call
//!   they are about: on the call's stream for a legacy client, as `input_required` for a
//!   2026-07-28 one ([`PARKED_FOR`]); build the host's client with [`upstream_client`] so
//!   upstreams may ask.
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolwire::Client;
//! use toolwire_gateway::Gateway;
//! use toolwire_host::{Host, ServersConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ServersConfig::load("mcp.json")?;
//! let upstream = toolwire_gateway::upstream_client(Client::builder("my-gateway", "1.0"));
//! let host = Host::builder(upstream).start(&config)?;
//! let gateway = Gateway::builder(host).build();
//! let server = gateway
//!     .serve_http("127.0.0.1:8808".parse()?, toolwire_server::Options::default())
//!     .await?;
//! println!("serving {}", server.url());
//! server.wait().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Dependencies
//! `toolwire-host` (the upstreams: one client per entry, the merged snapshot),
//! `toolwire-server` (the protocol downstream), `toolwire` (the client's types and errors),
//! `toolwire-headers` (the header plans of the merged tools), `tokio` (the change coalescer),
//! `serde_json` (messages relayed as JSON, unknown members kept), `futures-util` (listings
//! fetched from every upstream at once), `futures-channel` (the channel for an upstream's
//! questions during a call: one is made per call and rarely used, and it allocates per
//! message where tokio's allocates a block of 32 slots when made; already under hyper),
//! `percent-encoding` (a server's name inside a URI; already under `url`), `tracing`,
//! `prometheus-client` (the Prometheus project's own client for `/metrics`: the text format
//! and histograms, not hand-written), `globset` (the policy's globs compiled to one matcher
//! per rule; BurntSushi's, over `regex-automata` already in the tree), `serde` (the file's
//! `gateway` section, unknown members refused: a typo in an access rule must not pass
//! silently), `http` (the request head a caller is authenticated from), `thiserror`. Token
//! checks are `toolwire::auth::verify`'s (ring, already the client's).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use toolwire_types::methods::method as mcp;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use toolwire::{Error, ErrorChain, InputError, Tool};
use toolwire_headers::HeaderPlan;
use toolwire_host::{Host, HostError};
use toolwire_server::{
    Answer, Change, Era, HttpServer, Notifier, Options, Reply, Request, RpcError, ServerInfo,
    Service,
};

use toolwire_types::ClientMethod;
use toolwire_types::error::code;

use crate::metrics::Metrics;
use crate::surface::Listing;

mod access;
mod calls;
mod coalesce;
mod declared;
mod discovery;
mod metrics;
mod ops;
mod relay;
mod sessions;
mod subscriptions;
mod surface;
mod tasks;
mod traffic;
mod uris;

/// Locks `m`, whatever a panicking holder left: every table the gateway keeps stays usable.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The default number of tools per `tools/list` page.
pub const DEFAULT_PAGE_SIZE: usize = 500;

/// How long the first listing or call waits by default for the upstreams to start.
pub const DEFAULT_STARTUP_WAIT: Duration = Duration::from_secs(30);

/// How often `toolwire gateway` asks a remote upstream nothing called whether it still
/// answers ([`toolwire_host::HostBuilder::health_check`]): one that died while idle shows as
/// failed on `/readyz` within about this, and comes back through [`RESTART_FAILED`].
pub const HEALTH_CHECK: Duration = Duration::from_secs(15);

/// How a failed upstream is started again ([`toolwire_host::HostBuilder::restart_failed`],
/// which `toolwire gateway` sets): after 1 s, doubling up to a minute, with jitter so that
/// replicas do not retry in step, for as long as the entry is in the file.
pub const RESTART_FAILED: toolwire::Backoff = toolwire::Backoff {
    min: Duration::from_secs(1),
    max: Duration::from_secs(60),
    attempts: None,
    jitter: true,
};

pub use access::{
    Access, AccessConfig, AccessError, ApiKeyConfig, CallerMatchConfig, ExchangeConfig,
    INTROSPECTION_BURST, INTROSPECTION_RATE, INTROSPECTION_RECHECK, IntrospectionConfig,
    LOGIN_WAIT, LimitsConfig, PerUserConfig, PinTools, REFUSAL_KEPT, RuleConfig, SIGN_OUT,
    TOKEN_RECHECK, UpstreamConfig, UpstreamCredentials, VAULT_KEY_ENV, VaultConfig,
};
pub use coalesce::{COALESCE, COALESCE_MAX};
pub use discovery::{CALL_TOOL, DESCRIBE_TOOL, Progressive, SEARCH_TOOLS};
pub use ops::{ReloadError, required_present};
pub use relay::{
    MAX_PARKED_PER_CALLER, PARKED_FOR, UPSTREAM_META, unrelated, upstream_capabilities,
    upstream_client,
};
pub use traffic::{ToolTrafficConfig, Traffic, TrafficConfig, TrafficError};

/// Settings of a [`Gateway`].
#[derive(Debug)]
pub struct GatewayBuilder {
    host: Host,
    page_size: usize,
    startup_wait: Duration,
    progressive: Progressive,
    access: Option<Access>,
    audit_arguments: bool,
    keys: Option<toolwire_server::SessionKeys>,
    traffic: Traffic,
    required: Option<Vec<String>>,
}

impl GatewayBuilder {
    /// The entries readiness waits for ([`Gateway::readiness`]): `/readyz` is 200 only while
    /// each is ready or stopped while idle. Without it (the default), once every enabled
    /// entry was tried.
    #[must_use]
    pub fn required(mut self, entries: Vec<String>) -> Self {
        self.required = Some(entries);
        self
    }

    /// Caps, queues and circuit breakers per upstream ([`Traffic`]; none by default).
    #[must_use]
    pub fn traffic(mut self, traffic: Traffic) -> Self {
        self.traffic = traffic;
        self
    }

    /// The keys the gateway seals the ids it hands a caller with (tasks), so that every
    /// replica given the same keys resolves them: the same keys as the server's
    /// [`Options::session_keys`]. Without them, keys are made at random for this process (its
    /// ids then resolve only here).
    #[must_use]
    pub fn keys(mut self, keys: toolwire_server::SessionKeys) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Who may call the gateway and what each caller sees ([`Access`]): without it, every
    /// caller is served everything (fit for stdio and loopback).
    #[must_use]
    pub fn access(mut self, access: Access) -> Self {
        self.access = Some(access);
        self
    }

    /// Lists the three discovery tools in place of every tool once the catalog is larger
    /// than `when` says (default: never; see [`Progressive`]).
    #[must_use]
    pub fn progressive(mut self, when: Progressive) -> Self {
        self.progressive = when;
        self
    }

    /// Puts each call's arguments in its audit line (`toolwire_gateway::audit`; off by
    /// default: arguments may hold what the audit log must not).
    #[must_use]
    pub fn audit_arguments(mut self, on: bool) -> Self {
        self.audit_arguments = on;
        self
    }

    /// Tools per `tools/list` page (default [`DEFAULT_PAGE_SIZE`]; 0 is taken as 1).
    #[must_use]
    pub fn page_size(mut self, tools: usize) -> Self {
        self.page_size = tools.max(1);
        self
    }

    /// How long the first `tools/list` or `tools/call` waits for upstreams still starting
    /// (default [`DEFAULT_STARTUP_WAIT`]): a client that connects as the gateway starts sees
    /// every server that comes up in that time, not an empty list. Later requests never wait.
    #[must_use]
    pub fn startup_wait(mut self, limit: Duration) -> Self {
        self.startup_wait = limit;
        self
    }

    /// The gateway; it follows the host's changes from now on. Must be called inside a tokio
    /// runtime.
    pub fn build(self) -> Arc<Gateway> {
        let changes = broadcast::channel(64).0;
        let mut traffic = self.traffic;
        traffic.tell_changes(changes.clone());
        // Where each upstream called with its callers' credentials is now: their tokens are
        // for that address, and go nowhere else.
        let pinned = self
            .access
            .iter()
            .flat_map(Access::caller_credential_servers)
            .map(|server| (server.to_owned(), self.host.url(server)))
            .collect();
        let gateway = Arc::new(Gateway {
            pinned,
            host: self.host,
            page_size: self.page_size,
            startup_wait: self.startup_wait,
            progressive: self.progressive,
            access: self.access,
            audit_arguments: self.audit_arguments,
            keys: self
                .keys
                .or_else(|| toolwire_server::SessionKeys::random().ok()),
            sizes: discovery::Sizes::default(),
            started: tokio::sync::OnceCell::new(),
            changes: changes.clone(),
            metrics: Metrics::new(),
            plans: std::sync::Mutex::new((0, HashMap::new())),
            subscriptions: subscriptions::Subscriptions::default(),
            sessions: Arc::default(),
            parked: relay::Parked::default(),
            declarations: declared::Declarations::default(),
            draining: std::sync::atomic::AtomicBool::new(false),
            traffic,
            required: self.required,
        });
        tokio::spawn(coalesce::coalesce(gateway.host.subscribe(), changes));
        gateway
    }
}

/// Many servers as one MCP server ([`Gateway::builder`]).
#[derive(Debug)]
pub struct Gateway {
    host: Host,
    page_size: usize,
    startup_wait: Duration,
    progressive: Progressive,
    /// Who may call, and what each caller sees.
    access: Option<Access>,
    /// The audit line of each call carries its arguments.
    audit_arguments: bool,
    /// What task ids are sealed with (None only if the system's random source failed: tasks
    /// are then not handed out).
    keys: Option<toolwire_server::SessionKeys>,
    /// The catalog's size, for `progressive`.
    sizes: discovery::Sizes,
    /// Set once the upstreams have started (or the wait ran out).
    started: tokio::sync::OnceCell<()>,
    changes: broadcast::Sender<Change>,
    metrics: Metrics,
    /// Resource subscriptions held upstream for the gateway's clients.
    subscriptions: subscriptions::Subscriptions,
    /// What each legacy session of each caller asked to hear.
    sessions: Arc<sessions::Sessions>,
    /// Header plans of the listed tools, by gateway name, for the snapshot generation held.
    plans: std::sync::Mutex<(u64, HashMap<String, Option<HeaderPlan>>)>,
    /// Calls of 2026-07-28 clients answered `input_required`, waiting for their retries.
    parked: relay::Parked<calls::Called>,
    /// What callers declared, decoded once for the calls that pass it on.
    declarations: declared::Declarations,
    /// The URL of each upstream called with its callers' credentials, when the gateway
    /// started (the address their tokens are for).
    pinned: HashMap<String, Option<String>>,
    /// Set when the gateway stops taking calls ([`Gateway::drain`]).
    draining: std::sync::atomic::AtomicBool,
    /// Caps, queues and breakers per upstream.
    traffic: Traffic,
    /// The entries readiness waits for, if named.
    required: Option<Vec<String>>,
}

impl Gateway {
    /// A gateway over the servers of `host`.
    pub fn builder(host: Host) -> GatewayBuilder {
        GatewayBuilder {
            host,
            page_size: DEFAULT_PAGE_SIZE,
            startup_wait: DEFAULT_STARTUP_WAIT,
            progressive: Progressive::default(),
            access: None,
            audit_arguments: false,
            keys: None,
            traffic: Traffic::default(),
            required: None,
        }
    }

    /// The upstreams.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Serves over Streamable HTTP on `addr` (the endpoint is `options.path`, `/mcp` by
    /// default) inside the current tokio runtime.
    pub async fn serve_http(
        self: &Arc<Self>,
        addr: SocketAddr,
        options: Options,
    ) -> std::io::Result<HttpServer> {
        toolwire_server::serve_http(addr, options, self.clone()).await
    }

    /// Serves on stdin/stdout until stdin ends.
    pub async fn serve_stdio(self: &Arc<Self>, options: Options) -> std::io::Result<()> {
        toolwire_server::serve_stdio(options, self.clone()).await
    }

    /// [`Self::serve_stdio`] until stdin ends or `stop` resolves: on `stop` no further
    /// request is read, and the calls in flight complete, their answers written, before this
    /// returns ([`toolwire_server::serve_stdio_until`]).
    pub async fn serve_stdio_until(
        self: &Arc<Self>,
        options: Options,
        stop: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        toolwire_server::serve_stdio_until(options, self.clone(), stop).await
    }

    /// One page of the merged listing, after `cursor` (an offset into the tools in name
    /// order, as this gateway wrote it).
    fn list(&self, params: &Value, view: &access::View<'_>) -> Answer {
        let offset = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(cursor) => cursor
                .as_str()
                .and_then(|c| c.parse::<usize>().ok())
                .ok_or_else(|| {
                    RpcError::new(code::INVALID_PARAMS, format!("Invalid cursor: {cursor}"))
                })?,
        };
        let merged = self.host.load();
        let mut names = merged.names();
        if !view.is_everything() {
            names.retain(|name| {
                merged
                    .get(name)
                    .is_some_and(|t| self.tool_allowed(view, name, t))
            });
        }
        // An upstream whose breaker is open, where its settings say so (`hideWhileOpen`).
        if self.traffic.hides_any() {
            names.retain(|name| {
                merged
                    .get(name)
                    .is_none_or(|t| !self.traffic.hidden(&t.server))
            });
        }
        let page: Vec<Value> = names
            .iter()
            .skip(offset)
            .take(self.page_size)
            .filter_map(|name| self.listed(name, merged.get(name)?))
            .collect();
        let mut result = json!({ "tools": page });
        let next = offset.saturating_add(self.page_size);
        if next < names.len() {
            result["nextCursor"] = json!(next.to_string());
        } else if let Some(sign_out) = self.access.as_ref().and_then(Access::sign_out_tool)
            && let Some(tools) = result["tools"].as_array_mut()
        {
            // The gateway's own tool, after every upstream's.
            tools.push(sign_out);
        }
        Ok(result)
    }

    /// A tool's definition as this gateway lists it: under its name here, its MCP Apps view
    /// (read through the gateway) renamed to match.
    fn listed(&self, name: &str, entry: &toolwire_host::HostTool) -> Option<Value> {
        let mut tool = serde_json::to_value(&*entry.tool).ok()?;
        tool["name"] = json!(name);
        if tool["_meta"]["ui"]["resourceUri"].is_string() {
            let separator = self.host.separator();
            surface::rename_uri(
                &mut tool["_meta"]["ui"],
                "resourceUri",
                &entry.server,
                separator,
            );
        }
        Some(tool)
    }
}

/// What a downstream client hears when a request could not be routed or failed upstream: the
/// upstream's own JSON-RPC error as it sent it, an unknown tool as `-32602`, anything else as
/// `-32603` with the reason on one line.
pub(crate) fn upstream_error(e: &HostError) -> RpcError {
    match e {
        HostError::UnknownTool(name, _) => {
            RpcError::new(code::INVALID_PARAMS, format!("Unknown tool: {name}"))
        }
        HostError::Call { server, error } => relayed(server, error),
        HostError::Quarantined { .. } => RpcError::new(code::INVALID_PARAMS, e.to_string()),
        // The upstream's state word only: its reason (a child's stderr) is the operator's,
        // on `/readyz` and in the log.
        HostError::NotRunning { server, state } => {
            let word = state.split(':').next().unwrap_or(state);
            RpcError::new(
                code::INTERNAL_ERROR,
                format!("upstream `{server}` is unavailable ({word}); try again later"),
            )
        }
        other => RpcError::new(code::INTERNAL_ERROR, ErrorChain(other).to_string()),
    }
}

/// `server`'s failure of a request, as the downstream client hears it: its JSON-RPC error as
/// it sent it (a `-32042` URL elicitation the gateway's client decoded goes back as the
/// original error), anything else `-32603` naming the server.
pub(crate) fn relayed(server: &str, error: &Error) -> RpcError {
    match error {
        Error::Server(object)
        | Error::Input(InputError::UrlElicitationRequired { error: object, .. }) => {
            let error = RpcError::new(object.code, object.message.clone());
            match &object.data {
                Some(data) => error.with_data(data.clone()),
                None => error,
            }
        }
        other => RpcError::new(
            code::INTERNAL_ERROR,
            format!("server `{server}`: {}", ErrorChain(other)),
        ),
    }
}

/// A relayed result as a client of `era` expects it: the fields only 2026-07-28 results carry
/// (`resultType`, `ttlMs`, `cacheScope`) dropped for a legacy client; for a modern one the
/// upstream's own caching fields are kept (the protocol layer fills in what is missing).
impl Gateway {
    /// A `tools/call`: of the gateway's own tools, or routed upstream. Its result as the era
    /// of the client has it: the upstream's text passed on as it came, but for the members
    /// [`for_era`] takes out.
    async fn call_or_own(
        &self,
        request: Request<'_>,
        notifier: &Notifier,
        view: &access::View<'_>,
    ) -> Result<Reply, RpcError> {
        let era = request.era;
        let answer = match request.params["name"].as_str() {
            // The gateway's own tool: a caller ends its login to a per-user upstream.
            Some(SIGN_OUT) => {
                let signed_out = match &self.access {
                    Some(access) => {
                        access
                            .sign_out(request.caller, &request.params["arguments"])
                            .await
                    }
                    None => None,
                };
                match signed_out {
                    Some(answer) => answer.map(Reply::Json),
                    None => self.call(request, notifier).await,
                }
            }
            _ => match self.discovery_call(request, notifier, view).await {
                Some(answer) => answer,
                None => self.call(request, notifier).await,
            },
        }?;
        Ok(match answer {
            Reply::Json(result) => Reply::Json(for_era(result, era)),
            // Made as the era has it already ([`text_for_era`]).
            text @ (Reply::Text(_) | Reply::Typed(_)) => text,
        })
    }
}

/// [`for_era`] for a result passed on as text: the same members taken out, the rest of the
/// text as it came (read only as far as its own members, never into their values). For a
/// 2026-07-28 client, a result that says it is complete is typed so: the server need not read
/// it again to know.
pub(crate) fn text_for_era(result: toolwire::RawResult, era: Era) -> Reply {
    let facts = result.facts();
    let text = result.into_json();
    // A 2026-07-28 result keeps them: the `resultType` taken out would be put back as it was.
    if era == Era::Modern {
        return if facts.says_complete {
            Reply::Typed(text)
        } else {
            Reply::Text(text)
        };
    }
    // A result that has none of them is read no further; else cut where the one read of the
    // result found them.
    if !(facts.says_complete || facts.has_cache_hints) {
        return Reply::Text(text);
    }
    Reply::Text(toolwire_types::without_modern_members(&text, &facts).unwrap_or(text))
}

fn for_era(mut result: Value, era: Era) -> Value {
    if let Some(object) = result.as_object_mut() {
        // The gateway's own `input_required` (a call waiting for the client's input) stays.
        if object.get("resultType").is_some_and(|t| t == "complete") {
            object.remove("resultType");
        }
        if era == Era::Legacy {
            object.remove("ttlMs");
            object.remove("cacheScope");
        }
    }
    result
}

impl Service for Gateway {
    fn info(&self) -> ServerInfo {
        ServerInfo::new(
            "toolwire-gateway",
            env!("CARGO_PKG_VERSION"),
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true},
                "prompts": {}, "completions": {}, "logging": {},
                "extensions": {toolwire_types::TASKS_EXTENSION: {}}}),
        )
    }

    async fn handle(&self, request: Request<'_>, notifier: &Notifier) -> Result<Reply, RpcError> {
        self.started
            .get_or_init(|| self.host.settled(self.startup_wait))
            .await;
        let view = self.view(request.caller);
        self.admit(&request, &view)?;
        let session = request
            .session
            .map(|s| sessions::SessionKey::new(access::principal(request.caller), s));
        let answer = match request.method {
            // A call's result may be the upstream's text, passed on as it came.
            ClientMethod::CallTool => {
                let _counted = self.metrics.calling();
                return self.call_or_own(request, notifier, &view).await;
            }
            ClientMethod::ListTools if self.progressive_now() => Ok(self.discovery_listing()),
            ClientMethod::ListTools => self.list(request.params, &view),
            ClientMethod::ListResources => self.merged(Listing::Resources).await,
            ClientMethod::ListResourceTemplates => self.merged(Listing::ResourceTemplates).await,
            ClientMethod::ReadResource => {
                self.read(request.params_as::<mcp::ReadResource>()?).await
            }
            ClientMethod::Subscribe if request.era == Era::Legacy => {
                let uri = request.params_as::<mcp::Subscribe>()?.uri;
                self.session_subscribe(&uri, true, session.as_ref()).await
            }
            ClientMethod::Unsubscribe if request.era == Era::Legacy => {
                let uri = request.params_as::<mcp::Unsubscribe>()?.uri;
                self.session_subscribe(&uri, false, session.as_ref()).await
            }
            ClientMethod::Subscribe | ClientMethod::Unsubscribe => {
                Err(subscriptions::not_in_this_era(request.method_name))
            }
            ClientMethod::SetLevel if request.era == Era::Legacy => {
                self.set_level(request.params, &view, session.as_ref())
                    .await
            }
            ClientMethod::ListPrompts => self.merged(Listing::Prompts).await,
            ClientMethod::GetPrompt => self.prompt(request.params).await,
            ClientMethod::Complete => self.complete(request.params_as::<mcp::Complete>()?).await,
            ClientMethod::GetTask | ClientMethod::UpdateTask | ClientMethod::CancelTask => {
                self.task_request(request).await
            }
            _ => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("Method not found: {}", request.method_name),
            )),
        };
        answer.map(|result| {
            Reply::Json(for_era(
                self.only_allowed(&view, request.method, result),
                request.era,
            ))
        })
    }

    /// The plan of the tool as listed here (its gateway name), built once per snapshot.
    fn header_plan(&self, name: &str) -> Option<HeaderPlan> {
        let merged = self.host.load();
        let mut plans = lock(&self.plans);
        if plans.0 != merged.generation() {
            *plans = (merged.generation(), HashMap::new());
        }
        // Looked up before the entry API, which would copy the name on every call.
        if let Some(plan) = plans.1.get(name) {
            return plan.clone();
        }
        plans
            .1
            .entry(name.to_owned())
            .or_insert_with(|| {
                let mut tool: Tool = (*merged.get(name)?.tool).clone();
                tool.name = name.to_owned();
                HeaderPlan::for_tool(&tool).ok()
            })
            .clone()
    }

    fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    fn watch<'a>(
        &'a self,
        resources: &'a std::collections::BTreeSet<String>,
        on: bool,
        caller: Option<&'a toolwire_server::Caller>,
    ) -> impl std::future::Future<Output = std::collections::BTreeSet<String>> + Send + 'a {
        self.watch_all(resources, on, caller)
    }

    fn session_ended(&self, session: &str) {
        self.session_gone(session);
    }

    fn received(&self, method: ClientMethod) {
        self.metrics.request(method);
    }

    fn legacy_sessions(&self, open: usize) {
        self.metrics.legacy_sessions(open);
    }

    fn repaired(&self, repair: toolwire_server::Repair) {
        self.metrics.repaired(repair.as_str());
    }

    /// Tool-list changes to every session; to each session only what is its own: updates of
    /// the resources it subscribed to, log lines of upstreams its caller may see from the level
    /// it asked for, completions of the URL elicitations its calls were asked.
    fn legacy_notification(
        &self,
        change: &Change,
        listener: &toolwire_server::Listener<'_>,
    ) -> Option<Value> {
        use sessions::Heard;
        let key =
            || sessions::SessionKey::new(access::principal(listener.caller), listener.session);
        let hears = match change {
            Change::Resource(uri) => self.sessions.hears(&key(), &Heard::Resource(uri)),
            Change::Sourced { source, change } => match &**change {
                Change::Log(message) => {
                    let view = self.view(listener.caller);
                    self.server_allowed(&view, source, true)
                        && self
                            .sessions
                            .hears(&key(), &Heard::Log(sessions::level_of(&message["params"])))
                }
                Change::ElicitationComplete(id) => self
                    .sessions
                    .hears(&key(), &Heard::ElicitationComplete { server: source, id }),
                _ => false,
            },
            // The gateway makes none of these unattributed.
            Change::Log(_) | Change::ElicitationComplete(_) => false,
            _ => true,
        };
        if !hears {
            return None;
        }
        toolwire_server::legacy_notification(change)
    }
}

//! [`Host`]: one [`Client`] per server of a configuration, and one merged tool snapshot.
//!
//! Servers start concurrently, each negotiating its own era; one that fails to start or dies
//! leaves the others running. Each server's tools, filtered, enter one immutable snapshot
//! behind `arc-swap` as `{server}{separator}{tool}` (or the provider-safe form of that,
//! [`Naming`]), rebuilt and swapped whole whenever any server's tool cache changes; reading it
//! takes no lock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{broadcast, watch};
use toolwire::auth::{AuthError, OAuthConfig};
use toolwire::{
    Backoff, Client, ClientBuilder, ConnectionState, Error, ProtocolVersion, ReconnectPolicy, Tool,
};

use crate::names::{NameCollision, Naming};

mod calls;
mod idle;
mod lifecycle;
mod merge;
mod reload;
use crate::pins::{PinFile, Verdict};
use crate::{ConnectError, ServerConfig, ServersConfig};

pub use reload::Reloaded;

/// The default separator between a server's name and its tool's: `github__create_issue`.
pub const DEFAULT_SEPARATOR: &str = "__";

/// How long a server a reload removed or replaced keeps its connection for the calls still
/// in flight on it (new calls no longer reach it): after this its client closes, and a call
/// still running fails.
pub const RETIRE_GRACE: Duration = Duration::from_secs(30);

/// Where one server is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerState {
    /// `disabled` in the configuration: never started.
    Disabled,
    /// Starting: connecting, negotiating, listing its tools.
    Starting,
    /// Running.
    Ready {
        /// The protocol version it negotiated.
        version: ProtocolVersion,
        /// How many of its tools are in the merged snapshot (after the filters).
        tools: usize,
    },
    /// Its connection died and the reconnect policy is bringing it back (attempt `attempt`);
    /// its tools stay in the merged snapshot and calls to them wait for the new connection.
    Reconnecting {
        /// 1 for the first attempt after the death.
        attempt: u32,
    },
    /// It could not start, or its connection ended for good (no reconnect policy, or the
    /// attempts ran out); its tools left the snapshot; the other servers are unaffected.
    Failed {
        /// Why, as one line.
        reason: String,
    },
    /// A stdio server stopped because nobody used it ([`HostBuilder::stop_idle`]): its child
    /// ended, its tools stay in the snapshot, and the next call starts it again.
    Idle {
        /// How many of its tools are in the merged snapshot.
        tools: usize,
    },
    /// Like `Failed`, for one reason a person can fix: the server wants an OAuth login and
    /// none could run here (the OAuth handler cannot interact, or there is none). Log in (the
    /// CLI's `toolwire --config FILE --server NAME login`) and start the host again.
    NeedsLogin {
        /// The authorization error, as one line.
        reason: String,
    },
}

/// One tool of the merged snapshot.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostTool {
    /// The server it belongs to.
    pub server: Arc<str>,
    /// Its definition, with the server's own name for it.
    pub tool: Arc<Tool>,
}

/// Every server's tools at one moment, by the name the host gives them ([`Naming`]). Never
/// changes once built.
#[derive(Debug, Default)]
pub struct HostTools {
    generation: u64,
    tools: HashMap<Arc<str>, HostTool>,
    collisions: Vec<NameCollision>,
}

impl HostTools {
    /// Counts the swaps; the first snapshot is generation 0.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The tool with this name (`server__tool`, or its provider-safe form).
    pub fn get(&self, qualified: &str) -> Option<&HostTool> {
        self.tools.get(qualified)
    }

    /// The tools left out because another has their name (only possible with
    /// [`Naming::ProviderSafe`]; see [`crate::names`]), as of each server's last merge.
    pub fn collisions(&self) -> &[NameCollision] {
        &self.collisions
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The qualified names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.tools.keys().map(|k| &**k).collect();
        names.sort_unstable();
        names
    }

    /// Every tool, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &HostTool)> {
        self.tools.iter().map(|(k, v)| (&**k, v))
    }
}

/// One tool [`Host::search_tools`] found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostMatch {
    /// Its name in the merged snapshot (what [`Host::call_tool`] takes).
    pub name: Arc<str>,
    /// Its BM25 score: higher is more relevant; only comparable within one search.
    pub score: f32,
    /// Its server and definition.
    pub tool: HostTool,
}

/// A borrowed view of the merged snapshot ([`Host::load`]).
pub struct HostToolsRef(arc_swap::Guard<Arc<HostTools>>);

impl std::ops::Deref for HostToolsRef {
    type Target = HostTools;

    fn deref(&self) -> &HostTools {
        &self.0
    }
}

impl std::fmt::Debug for HostToolsRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self.0, f)
    }
}

/// One change of the merged snapshot: which server's tools changed, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostChange {
    /// The generation now current.
    pub generation: u64,
    /// The server whose tools changed.
    pub server: Arc<str>,
    /// Qualified names that appeared.
    pub added: Vec<Arc<str>>,
    /// Qualified names that went away.
    pub removed: Vec<Arc<str>>,
    /// Qualified names whose definition changed.
    pub changed: Vec<Arc<str>>,
}

/// Why a host could not be built or could not route a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// A server's name contains the separator, so qualified names could collide.
    #[error("server name `{server}` contains the separator {separator:?}")]
    NameHasSeparator {
        /// The server.
        server: String,
        /// The separator.
        separator: String,
    },
    /// Two entries' `aliases` give two tools the same name.
    #[error(
        "tool `{tool}` of server `{server}` and tool `{other_tool}` of server `{other_server}` are both aliased `{alias}`; give one of them another alias"
    )]
    AliasTaken {
        /// The name both would have.
        alias: String,
        /// The first entry (in the file's order) with the alias.
        server: String,
        /// Its tool.
        tool: String,
        /// The other entry.
        other_server: String,
        /// Its tool.
        other_tool: String,
    },
    /// No server has this name.
    #[error("no server is named `{0}`")]
    UnknownServer(String),
    /// The merged snapshot has no tool of this name (unknown, or filtered out).
    #[error(
        "no tool `{0}` (expected `server{1}tool`, one that the server lists and its filters let through)"
    )]
    UnknownTool(String, String),
    /// The server is disabled, starting or failed.
    #[error("server `{server}` is not running ({state})")]
    NotRunning {
        /// The server.
        server: String,
        /// Its state, as one line.
        state: String,
    },
    /// The tool's definition changed since it was pinned ([`HostBuilder::pin_tools`]): it is
    /// quarantined until the change is approved.
    #[error(
        "tool `{tool}` of server `{server}` changed its definition ({members}) since it was pinned; it is quarantined until the change is approved (`toolwire pins approve {server} {tool}`)"
    )]
    Quarantined {
        /// The server.
        server: String,
        /// The server's own name for the tool.
        tool: String,
        /// The members of the definition that changed, comma-separated.
        members: String,
    },
    /// The entry could not be connected (a legacy SSE server).
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The server answered the call with an error, or the call failed on the way.
    #[error("server `{server}`")]
    Call {
        /// The server.
        server: String,
        /// What went wrong.
        #[source]
        error: Error,
    },
}

/// Settings of a [`Host`].
#[derive(Debug, Clone)]
pub struct HostBuilder {
    client: ClientBuilder,
    separator: String,
    naming: Naming,
    reconnect: Option<ReconnectPolicy>,
    restart: Option<Backoff>,
    oauth: Option<OAuthConfig>,
    idle: Option<Duration>,
    health: Option<Duration>,
    pins: Option<Arc<PinFile>>,
}

impl HostBuilder {
    /// Pins each tool's definition in `file` the first time it is seen; a later definition
    /// that differs (its description included) is quarantined: left out of the snapshot, and
    /// a call to it refused with [`HostError::Quarantined`], until approved in the file
    /// ([`PinFile::approve`]) and [`Host::repin`] is called. Off by default. A pin file that
    /// cannot be read or written holds every tool of the server being merged back.
    pub fn pin_tools(mut self, file: PinFile) -> Self {
        self.pins = Some(Arc::new(file));
        self
    }

    /// Stops a stdio server's child once nothing has used the server for `limit` (no call
    /// routed to it, its client not handed out) and no call to it is in flight: its tools stay
    /// in the snapshot, its state is [`ServerState::Idle`], and the next use starts it again (a
    /// new child and handshake; its tools listed anew). Off by default; remote servers are never
    /// stopped.
    pub fn stop_idle(mut self, limit: Duration) -> Self {
        self.idle = Some(limit);
        self
    }

    /// Checks each remote (HTTP) server that nothing used for `interval` with a `ping`
    /// (off by default). Over HTTP nothing else notices a server that died while idle: no
    /// connection is held open to break. Any answer counts as alive, an error answer too (a
    /// server that has no `ping` answers `-32601`); no answer within `interval` or a
    /// connection refused makes the server [`ServerState::Failed`] with that reason, its
    /// tools out, and [`HostBuilder::restart_failed`] brings it back once it answers again.
    pub fn health_check(mut self, interval: Duration) -> Self {
        self.health = Some(interval);
        self
    }

    /// How servers whose connection dies are brought back (default:
    /// [`ReconnectPolicy::default`]); `None` leaves them failed.
    pub fn reconnect(mut self, policy: Option<ReconnectPolicy>) -> Self {
        self.reconnect = policy;
        self
    }

    /// Starts a server that failed again after each delay of `backoff` (`attempts: None`:
    /// for as long as it is in the configuration), whatever failed: its start, its handshake
    /// or, after its reconnects ran out, its connection. Meanwhile its state stays
    /// [`ServerState::Failed`] with the last reason, and its tools stay out. A server that
    /// reached ready starts the delays over. Off by default (a one-shot command reports the
    /// failure instead); a long-running gateway turns it on. A server that needs a login is
    /// not started again: a person has to give it.
    pub fn restart_failed(mut self, backoff: Option<Backoff>) -> Self {
        self.restart = backoff;
        self
    }

    /// OAuth for the remote entries that carry no `Authorization` header: `base` (its store,
    /// its handler) with each entry's `oauth` settings on top ([`ServerConfig::oauth_config`]).
    /// One store serves every server: credentials are kept per server and issuer. A server
    /// that needs a login the handler cannot give ends [`ServerState::NeedsLogin`].
    pub fn oauth(mut self, base: OAuthConfig) -> Self {
        self.oauth = Some(base);
        self
    }

    /// The separator between a server's name and its tool's (default `__`).
    pub fn separator(mut self, separator: impl Into<String>) -> Self {
        self.separator = separator.into();
        self
    }

    /// How tools are named in the merged snapshot (default [`Naming::Qualified`]);
    /// [`Naming::ProviderSafe`] for names any LLM provider accepts.
    pub fn naming(mut self, naming: Naming) -> Self {
        self.naming = naming;
        self
    }

    /// What [`Self::start`] would refuse in `config`, without starting anything: a server
    /// whose name contains the separator, two enabled entries' aliases that name two tools
    /// alike ([`HostError::AliasTaken`]).
    pub fn check(&self, config: &ServersConfig) -> Result<(), HostError> {
        check(config, &self.separator)
    }

    /// Starts every enabled server of `config` concurrently and returns at once; each
    /// server's state says how it goes ([`Host::state`], [`Host::watch`]). Must be called
    /// inside a tokio runtime.
    pub fn start(self, config: &ServersConfig) -> Result<Host, HostError> {
        self.check(config)?;
        let servers: Vec<Arc<Server>> = config.servers.iter().map(Server::new).collect();
        let client = match self.reconnect {
            Some(policy) => self.client.reconnect(policy),
            None => self.client,
        };
        let inner = Arc::new(Inner {
            servers: ArcSwap::from_pointee(servers),
            start: Start {
                client,
                restart: self.restart,
                oauth: self.oauth,
                idle: self.idle,
                health: self.health,
            },
            separator: self.separator,
            naming: self.naming,
            merged: ArcSwap::from_pointee(HostTools::default()),
            changes: broadcast::channel(256).0,
            merging: Mutex::new(()),
            closing: watch::channel(false).0,
            search: toolwire::search::IndexCache::default(),
            pins: self.pins,
            quarantined: Mutex::default(),
        });
        for server in inner.servers.load().iter() {
            inner.launch(server);
        }
        Ok(Host { inner })
    }
}

/// Many servers as one: their tools merged under qualified names, each call routed to its
/// server. Cheap to clone; [`Host::shutdown`] ends every server.
#[derive(Debug, Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The servers of the configuration now (a reload swaps in a new list).
    servers: ArcSwap<Vec<Arc<Server>>>,
    /// What a server is started with: the client's settings, and OAuth's.
    start: Start,
    separator: String,
    naming: Naming,
    merged: ArcSwap<HostTools>,
    changes: broadcast::Sender<HostChange>,
    /// One merge at a time, so none is lost (readers never take it).
    merging: Mutex<()>,
    /// Set by `shutdown`: the tasks following the servers end.
    closing: watch::Sender<bool>,
    /// The search index of the current merged snapshot ([`Host::search_tools`]).
    search: toolwire::search::IndexCache<Arc<str>>,
    /// Where tool definitions are pinned, when they are ([`HostBuilder::pin_tools`]).
    pins: Option<Arc<PinFile>>,
    /// The tools whose definitions changed since pinned, by the name the host gives them.
    quarantined: Mutex<BTreeMap<Arc<str>, Quarantined>>,
}

/// A tool held out of the snapshot because its definition changed since it was pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quarantined {
    /// The server.
    pub server: Arc<str>,
    /// The server's own name for the tool.
    pub tool: String,
    /// The members of its definition that changed (`description`, `inputSchema`, …).
    pub members: Vec<String>,
}

#[derive(Debug)]
struct Server {
    name: Arc<str>,
    config: ServerConfig,
    state: watch::Sender<ServerState>,
    client: Mutex<Option<Client>>,
    /// Its tools as they are in the merged snapshot, by the name the host gives them.
    tools: Mutex<Vec<(Arc<str>, HostTool)>>,
    /// Its tools its last merge left out, each for a name another tool has.
    collisions: Mutex<Vec<NameCollision>>,
    /// Set when a reload removed or replaced it: it stops, and its tools leave for good.
    retired: watch::Sender<bool>,
    /// When it was last used (a call routed to it, its client handed out).
    used: Mutex<std::time::Instant>,
    /// Calls routed to it now (a retired server's client closes once they are done).
    busy: watch::Sender<usize>,
    /// Stopped while idle: its child is gone, its tools stay, its cache is not merged.
    parked: std::sync::atomic::AtomicBool,
    /// Being started again after it was stopped while idle.
    waking: std::sync::atomic::AtomicBool,
}

/// What starting a server takes.
#[derive(Debug, Clone)]
struct Start {
    client: ClientBuilder,
    /// [`HostBuilder::restart_failed`].
    restart: Option<Backoff>,
    oauth: Option<OAuthConfig>,
    /// [`HostBuilder::stop_idle`].
    idle: Option<Duration>,
    /// [`HostBuilder::health_check`].
    health: Option<Duration>,
}

impl Server {
    fn new(config: &ServerConfig) -> Arc<Self> {
        let initial = if config.disabled {
            ServerState::Disabled
        } else {
            ServerState::Starting
        };
        Arc::new(Self {
            name: config.name.as_str().into(),
            config: config.clone(),
            state: watch::channel(initial).0,
            client: Mutex::new(None),
            tools: Mutex::new(Vec::new()),
            collisions: Mutex::new(Vec::new()),
            retired: watch::channel(false).0,
            used: Mutex::new(std::time::Instant::now()),
            busy: watch::channel(0).0,
            parked: std::sync::atomic::AtomicBool::new(false),
            waking: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Host {
    /// A host whose servers introduce themselves with `client`'s settings (client info,
    /// timeouts, handler, …); each entry's `timeout` replaces the request timeout.
    pub fn builder(client: ClientBuilder) -> HostBuilder {
        HostBuilder {
            client,
            separator: DEFAULT_SEPARATOR.to_owned(),
            naming: Naming::default(),
            reconnect: Some(ReconnectPolicy::default()),
            restart: None,
            oauth: None,
            idle: None,
            health: None,
            pins: None,
        }
    }

    /// Every server's tools now, owned (lock-free).
    pub fn tools(&self) -> Arc<HostTools> {
        self.inner.merged.load_full()
    }

    /// Every server's tools now, borrowed: no lock, and no reference count shared with other
    /// readers (the fast path for lookups; hold it briefly).
    pub fn load(&self) -> HostToolsRef {
        HostToolsRef(self.inner.merged.load())
    }

    /// Every change of the merged snapshot from now on, with its diff.
    pub fn subscribe(&self) -> broadcast::Receiver<HostChange> {
        self.inner.changes.subscribe()
    }

    /// The separator between a server's name and its tool's (`__` by default).
    pub fn separator(&self) -> &str {
        &self.inner.separator
    }

    /// The name `server`'s prompt (or any other named thing but a tool) `name` has under the
    /// host's [`Naming`] and separator.
    pub fn name_of(&self, server: &str, name: &str) -> String {
        self.inner.naming.name(server, &self.inner.separator, name)
    }

    /// The name `server`'s tool `tool` has in the merged snapshot: its entry's alias, else as
    /// [`Self::name_of`]; whether or not the tool exists.
    pub fn tool_name(&self, server: &str, tool: &str) -> String {
        match self.inner.server(server) {
            Some(s) => self.inner.tool_name(&s.config, tool),
            None => self.name_of(server, tool),
        }
    }

    /// The names of the servers, sorted.
    pub fn servers(&self) -> Vec<Arc<str>> {
        self.inner
            .servers
            .load()
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    /// A server's state now.
    pub fn state(&self, server: &str) -> Option<ServerState> {
        self.inner.server(server).map(|s| s.state.borrow().clone())
    }

    /// A server's state, as it changes.
    pub fn watch(&self, server: &str) -> Option<watch::Receiver<ServerState>> {
        self.inner.server(server).map(|s| s.state.subscribe())
    }

    /// Waits until no server is `Starting` any more, or `limit` passes.
    pub async fn settled(&self, limit: Duration) {
        let servers = self.inner.servers.load_full();
        let wait = async {
            for server in servers.iter() {
                let mut rx = server.state.subscribe();
                let _ = rx.wait_for(|s| !matches!(s, ServerState::Starting)).await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }

    /// The URL of the remote entry `server` runs from now (as the last reload left it); None
    /// for a stdio entry or a server the host does not run.
    pub fn url(&self, server: &str) -> Option<String> {
        self.inner
            .server(server)
            .and_then(|s| s.config.url().map(str::to_owned))
    }

    /// The client of a running server, for anything the host does not wrap.
    pub fn client(&self, server: &str) -> Result<Client, HostError> {
        let s = self.inner.named(server)?;
        self.inner.touch(&s);
        running(&s)
    }

    /// Ends every server: their sessions close and their child processes stop.
    pub async fn shutdown(&self) {
        self.inner.closing.send_replace(true);
        for server in self.inner.servers.load().iter() {
            let client = lock(&server.client).take();
            if let Some(client) = client {
                client.close().await;
            }
        }
    }
}

/// "1 tool", "2 tools".
fn tool_count(n: usize) -> String {
    format!("{n} tool{}", if n == 1 { "" } else { "s" })
}

fn describe(state: &ServerState) -> String {
    match state {
        ServerState::Disabled => "disabled".into(),
        ServerState::Starting => "starting".into(),
        ServerState::Ready { version, tools } => {
            format!("ready, {version}, {}", tool_count(*tools))
        }
        ServerState::Reconnecting { attempt } => format!("reconnecting (attempt {attempt})"),
        ServerState::Failed { reason } => format!("failed: {reason}"),
        ServerState::NeedsLogin { reason } => format!("needs a login: {reason}"),
        ServerState::Idle { tools } => format!("stopped while idle, {}", tool_count(*tools)),
    }
}

impl Inner {
    /// The name `config`'s tool `tool` gets: its alias, else the naming's.
    fn tool_name(&self, config: &ServerConfig, tool: &str) -> String {
        match config.aliases.get(tool) {
            Some(alias) => alias.clone(),
            None => self.naming.name(&config.name, &self.separator, tool),
        }
    }
}

impl Inner {
    /// The server named `name`, or [`HostError::UnknownServer`].
    fn named(&self, name: &str) -> Result<Arc<Server>, HostError> {
        self.server(name)
            .ok_or_else(|| HostError::UnknownServer(name.to_owned()))
    }

    fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.servers
            .load()
            .iter()
            .find(|s| &*s.name == name)
            .cloned()
    }
}

/// `server`'s client, or why it has none ([`HostError::NotRunning`]).
fn running(server: &Server) -> Result<Client, HostError> {
    let client = lock(&server.client).clone();
    client.ok_or_else(|| HostError::NotRunning {
        server: server.name.to_string(),
        state: describe(&server.state.borrow()),
    })
}

/// What [`HostBuilder::start`] and [`Host::reload`] refuse in `config`: a server whose name
/// contains the separator.
fn check(config: &ServersConfig, separator: &str) -> Result<(), HostError> {
    if let Some(server) = config.servers.iter().find(|s| s.name.contains(separator)) {
        return Err(HostError::NameHasSeparator {
            server: server.name.clone(),
            separator: separator.to_owned(),
        });
    }
    let mut taken: HashMap<&str, (&str, &str)> = HashMap::new();
    for server in config.servers.iter().filter(|s| !s.disabled) {
        for (tool, alias) in &server.aliases {
            if let Some((other_server, other_tool)) = taken.insert(alias, (&server.name, tool)) {
                return Err(HostError::AliasTaken {
                    alias: alias.clone(),
                    server: other_server.to_owned(),
                    tool: other_tool.to_owned(),
                    other_server: server.name.clone(),
                    other_tool: tool.clone(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_state_counts_one_tool_in_the_singular_and_others_in_the_plural() {
        let ready = |tools| ServerState::Ready {
            version: ProtocolVersion::V2025_11_25,
            tools,
        };
        assert_eq!(describe(&ready(1)), "ready, 2025-11-25, 1 tool");
        assert_eq!(describe(&ready(0)), "ready, 2025-11-25, 0 tools");
        assert_eq!(
            describe(&ServerState::Idle { tools: 14 }),
            "stopped while idle, 14 tools"
        );
    }
}

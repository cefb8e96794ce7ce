//! The `gateway` section of an `mcpServers` file, as read: who may call (issuers, API keys,
//! introspection), the policy, each upstream's credentials, the vault, and the limits.
//! Unknown members are refused: a typo in an access rule must not pass silently.

use serde::Deserialize;
use serde_json::Value;
use toolwire::auth::Secret;

use super::{AccessError, RuleConfig, UpstreamConfig, vault};

/// An API key of the config: its name and the SHA-256 of the key, in hex (the key itself is
/// never written down: `printf %s "$KEY" | sha256sum`).
// tidy: not an MCP shape
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Its name, which is who the caller is.
    pub name: String,
    /// 64 hexadecimal digits.
    pub sha256: String,
}

/// Opaque tokens, checked at their authorization server's introspection endpoint (RFC 7662).
// tidy: not an MCP shape
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// The issuer whose tokens these are.
    pub issuer: String,
    /// Its introspection endpoint.
    pub endpoint: String,
    /// The client the gateway introspects as.
    pub client_id: String,
    /// The environment variable holding that client's secret (a file never holds the secret
    /// itself).
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The secret itself, for a program that has it at hand (never read from a file).
    #[serde(skip)]
    pub client_secret: Option<toolwire::auth::Secret>,
    /// Introspections of new tokens at once, at most (default [`crate::INTROSPECTION_BURST`]).
    #[serde(default)]
    pub burst: Option<f64>,
    /// Introspections of new tokens per second after a burst (default
    /// [`crate::INTROSPECTION_RATE`]).
    #[serde(default)]
    pub per_second: Option<f64>,
}

/// The `gateway` section of the mcpServers file: who may call, and what.
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessConfig {
    /// The gateway's MCP endpoint as its callers reach it (`https://gw.example/mcp`): the
    /// resource of its metadata, the audience tokens must name, the URL DPoP proofs are for.
    /// Defaults to the address it serves.
    #[serde(default)]
    pub resource: Option<String>,
    /// The issuers whose tokens are accepted (their keys found through their metadata).
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// The `aud` tokens must name, when it is not the resource.
    #[serde(default)]
    pub audience: Option<String>,
    /// Scopes every request needs (403 `insufficient_scope` without them).
    #[serde(default)]
    pub scopes_required: Vec<String>,
    /// API keys accepted as bearer tokens.
    #[serde(default)]
    pub api_keys: Vec<ApiKeyConfig>,
    /// Opaque (non-JWT) tokens, introspected.
    #[serde(default)]
    pub introspection: Option<IntrospectionConfig>,
    /// Who may see and call what; absent, every authenticated caller may do everything.
    #[serde(default)]
    pub policy: Option<Vec<RuleConfig>>,
    /// Whose credentials each upstream is called with, by entry name (absent: the entry's
    /// own).
    #[serde(default)]
    pub upstreams: std::collections::BTreeMap<String, UpstreamConfig>,
    /// Where callers' tokens for per-user upstreams are kept, sealed: a directory (`"vault":
    /// "/dir"` or `{"dir": …}`) or a Redis server every replica reaches (`{"redis": …}`), with
    /// the key in an environment variable; absent, in memory (lost on restart).
    #[serde(default, deserialize_with = "vault::deserialize")]
    pub vault: Option<vault::VaultConfig>,
    /// What one caller may hold or grow, where the defaults ([`toolwire_server::Limits`]) do
    /// not fit.
    #[serde(default)]
    pub limits: Option<LimitsConfig>,
    /// Overlook the client quirks real clients have (`"eraRepair": true`, also
    /// `--era-repair`; [`toolwire_server::Options::era_repair`]). Strict by default.
    #[serde(default)]
    pub era_repair: bool,
    /// Caps, queues and circuit breakers per upstream, by entry name (`"*"`: every entry);
    /// see [`crate::Traffic`].
    #[serde(default)]
    pub traffic: std::collections::BTreeMap<String, crate::TrafficConfig>,
    /// Pin each upstream tool's definition the first time it is seen, and quarantine a
    /// changed one until approved (`toolwire pins`): `true` for the default pin file, or the
    /// file's path (relative to the configuration file's folder). Off by default.
    #[serde(default)]
    pub pin_tools: Option<PinTools>,
    /// The entries this replica cannot serve without: `/readyz` answers 200 only while each
    /// is ready (or stopped while idle), and 503 naming those that are not. Absent, `/readyz`
    /// answers 200 once every enabled entry was tried, whatever became of it.
    #[serde(default)]
    pub required: Option<Vec<String>>,
}

/// The `pinTools` member: on with the default pin file, or the pin file.
// tidy: not an MCP shape
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum PinTools {
    /// `true` (the default file) or `false` (off).
    On(bool),
    /// The pin file.
    File(std::path::PathBuf),
}

/// The `limits` member of the `gateway` section: each one given replaces the default of
/// [`toolwire_server::Limits`].
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsConfig {
    /// Seconds a client may take to send a request's head.
    #[serde(default)]
    pub header_timeout_secs: Option<u64>,
    /// Seconds a request's body may take to arrive.
    #[serde(default)]
    pub body_timeout_secs: Option<u64>,
    /// Seconds a connection with nothing in flight stays open.
    #[serde(default)]
    pub idle_timeout_secs: Option<u64>,
    /// Connections served at once.
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Seconds an unused legacy session lives.
    #[serde(default)]
    pub session_idle_secs: Option<u64>,
    /// Live legacy sessions per caller.
    #[serde(default)]
    pub sessions_per_caller: Option<usize>,
    /// GET streams open at once per legacy session.
    #[serde(default)]
    pub get_streams_per_session: Option<usize>,
    /// `subscriptions/listen` streams open at once per caller.
    #[serde(default)]
    pub listens_per_caller: Option<usize>,
    /// Live legacy sessions in all.
    #[serde(default)]
    pub max_sessions: Option<usize>,
    /// Bytes of events a legacy session keeps for resumption.
    #[serde(default)]
    pub event_bytes_per_session: Option<usize>,
    /// Bytes of events all sessions keep for resumption.
    #[serde(default)]
    pub event_bytes_total: Option<usize>,
    /// The largest capabilities declaration kept, in bytes.
    #[serde(default)]
    pub max_declaration_bytes: Option<usize>,
    /// Requests in flight at once over stdio.
    #[serde(default)]
    pub stdio_in_flight: Option<usize>,
    /// Seconds between comments on a quiet SSE stream.
    #[serde(default)]
    pub sse_keep_alive_secs: Option<u64>,
}

impl LimitsConfig {
    /// `limits` with every bound this one gives.
    pub fn apply(&self, limits: &mut toolwire_server::Limits) {
        let secs = std::time::Duration::from_secs;
        if let Some(v) = self.header_timeout_secs {
            limits.header_timeout = secs(v);
        }
        if let Some(v) = self.body_timeout_secs {
            limits.body_timeout = secs(v);
        }
        if let Some(v) = self.idle_timeout_secs {
            limits.idle_timeout = secs(v);
        }
        if let Some(v) = self.max_connections {
            limits.max_connections = v;
        }
        if let Some(v) = self.session_idle_secs {
            limits.session_idle = secs(v);
        }
        if let Some(v) = self.sessions_per_caller {
            limits.sessions_per_caller = v;
        }
        if let Some(v) = self.get_streams_per_session {
            limits.get_streams_per_session = v;
        }
        if let Some(v) = self.listens_per_caller {
            limits.listens_per_caller = v;
        }
        if let Some(v) = self.max_sessions {
            limits.max_sessions = v;
        }
        if let Some(v) = self.event_bytes_per_session {
            limits.events_per_session = v;
        }
        if let Some(v) = self.event_bytes_total {
            limits.events_total = v;
        }
        if let Some(v) = self.max_declaration_bytes {
            limits.max_declaration = v;
        }
        if let Some(v) = self.stdio_in_flight {
            limits.stdio_in_flight = v;
        }
        if let Some(v) = self.sse_keep_alive_secs {
            limits.sse_keep_alive = secs(v.max(1));
        }
    }
}

impl AccessConfig {
    /// The settings of an mcpServers file's `gateway` member.
    pub fn from_json(section: &Value) -> Result<Self, AccessError> {
        serde_json::from_value(section.clone())
            .map_err(|e| AccessError::Config(format!("the \"gateway\" section: {e}")))
    }

    /// Whether callers must authenticate (issuers or keys are configured).
    pub fn authenticates(&self) -> bool {
        !self.authorization_servers.is_empty()
            || !self.api_keys.is_empty()
            || self.introspection.is_some()
    }
}

/// The HTTP client for `url`, the gateway's own requests there (`what` names it in errors).
pub(super) fn executor(url: &str, what: &str) -> Result<toolwire::HttpExecutor, AccessError> {
    Ok(toolwire::HttpTransport::builder(url)
        .build()
        .map_err(|e| AccessError::Config(format!("{what}: {e}")))?
        .executor())
}

/// A client secret given to a program (`given`), else read from the environment variable
/// `env` names; None when neither is set. A variable named but unset is an error naming it
/// (never a value).
pub(super) fn client_secret(
    given: Option<&Secret>,
    env: Option<&str>,
    what: &str,
) -> Result<Option<Secret>, AccessError> {
    match (given, env) {
        (Some(secret), _) => Ok(Some(secret.clone())),
        (None, Some(var)) => std::env::var(var)
            .map(|v| Some(Secret::new(v)))
            .map_err(|_| {
                AccessError::Config(format!(
                    "{what}: the environment variable {var} (the client secret) is not set"
                ))
            }),
        (None, None) => Ok(None),
    }
}

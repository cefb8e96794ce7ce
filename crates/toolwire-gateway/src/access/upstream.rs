//! With whose credentials each upstream is called: the entry's own (the default), the
//! caller's token passed on (only to an upstream the token names as its audience), or a token
//! exchanged for the caller's at the authorization server (RFC 8693), kept per caller and
//! upstream until it nears its expiry.
//!
//! Only `tools/call` goes with the caller's credentials; the upstream's listings, and the
//! connection itself, stay the entry's.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Deserialize;
use toolwire::auth::verify::names_audience;
use toolwire::auth::{Secret, TokenExchange};
use toolwire_headers::Header;
use toolwire_server::{Caller, RpcError};
use toolwire_types::error::code;

use super::{AccessError, client_secret, executor, unix_now};
use crate::lock;

/// How one upstream is called, in the `gateway.upstreams` map of the file.
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Whose credentials.
    #[serde(default)]
    pub credentials: UpstreamCredentials,
    /// The upstream's URL as its tokens name it (its audience). Defaults to the entry's URL.
    #[serde(default)]
    pub resource: Option<String>,
    /// With `passthrough`: when the upstream refuses the caller's token (401, or 403 asking
    /// for more scope), the caller gets the upstream's status and `WWW-Authenticate` as they
    /// came, so its OAuth client can get a token the upstream takes (for a gateway in front of
    /// this one server).
    #[serde(default)]
    pub relay_challenge: bool,
}

/// Whose credentials an upstream's calls carry.
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum UpstreamCredentials {
    /// The entry's own (its headers, or the gateway's stored login).
    #[default]
    Own,
    /// The caller's access token, as it came: only when the token names this upstream among
    /// its audiences (checked on every call; the MCP spec forbids passing a token on to a
    /// server it was not issued for).
    Passthrough,
    /// A token for this upstream, exchanged for the caller's at an authorization server.
    Exchange(ExchangeConfig),
    /// A token each caller gets by signing in to the upstream's authorization server through
    /// the gateway (asked for with a URL elicitation, `-32042`).
    PerUser(super::login::PerUserConfig),
}

/// Token exchange settings.
// tidy: not an MCP shape
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExchangeConfig {
    /// The authorization server's token endpoint.
    pub token_endpoint: String,
    /// The client the gateway exchanges as.
    pub client_id: String,
    /// The environment variable holding its secret (a file never holds the secret itself).
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The secret itself, for a program that has it at hand (never read from a file).
    #[serde(skip)]
    pub client_secret: Option<Secret>,
    /// `audience`, when the authorization server names the upstream otherwise than by its URL.
    #[serde(default)]
    pub audience: Option<String>,
    /// The scope to ask for.
    #[serde(default)]
    pub scope: Option<String>,
}

/// An exchanged token, until when it is used.
struct Exchanged {
    token: Secret,
    until: u64,
}

enum Mode {
    Passthrough,
    PerUser {
        config: super::login::PerUserConfig,
        http: Box<toolwire::HttpExecutor>,
    },
    Exchange {
        client: Box<TokenExchange>,
        audience: Option<String>,
        scope: Option<String>,
        /// (SHA-256 of the token presented, upstream) → the token exchanged for it.
        tokens: Mutex<HashMap<([u8; 32], String), Exchanged>>,
    },
}

/// How one upstream is called, ready.
pub(crate) struct Upstream {
    resource: String,
    mode: Mode,
    /// Its refusals of a caller's token go to the caller as they came.
    relay_challenge: bool,
}

/// The most exchanged tokens kept.
const MAX_EXCHANGED: usize = 10_000;

/// An exchanged token is replaced this long before it expires (seconds).
const EARLY: u64 = 30;

fn failed(server: &str, why: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        code::INTERNAL_ERROR,
        format!("server `{server}`: no credentials for this caller: {why}"),
    )
}

impl Upstream {
    /// `config` for the upstream `server`, whose URL is `resource`; None for the entry's own
    /// credentials.
    pub(crate) fn new(server: &str, config: &UpstreamConfig) -> Result<Option<Self>, AccessError> {
        let needs_url = || {
            AccessError::Config(format!(
                "upstream {server}: credentials per caller need its URL (an HTTP entry, or \"resource\")"
            ))
        };
        if config.relay_challenge && !matches!(config.credentials, UpstreamCredentials::Passthrough)
        {
            return Err(AccessError::Config(format!(
                "upstream {server}: relayChallenge needs \"credentials\": \"passthrough\" (the caller's own token is what the upstream refused)"
            )));
        }
        let mode = match &config.credentials {
            UpstreamCredentials::Own => return Ok(None),
            UpstreamCredentials::Passthrough => Mode::Passthrough,
            UpstreamCredentials::PerUser(p) => {
                let url = config.resource.clone().ok_or_else(needs_url)?;
                let what = format!("upstream {server}");
                let mut p = p.clone();
                p.client_secret = client_secret(
                    p.client_secret.as_ref(),
                    p.client_secret_env.as_deref(),
                    &what,
                )?;
                let http = executor(&url, &what)?;
                Mode::PerUser {
                    config: p,
                    http: Box::new(http),
                }
            }
            UpstreamCredentials::Exchange(x) => {
                let what = format!("upstream {server}");
                let secret = client_secret(
                    x.client_secret.as_ref(),
                    x.client_secret_env.as_deref(),
                    &what,
                )?
                .ok_or_else(|| {
                    AccessError::Config(format!("{what}: token exchange needs clientSecretEnv"))
                })?;
                let http = executor(&x.token_endpoint, &what)?;
                Mode::Exchange {
                    client: Box::new(TokenExchange::new(
                        &x.token_endpoint,
                        &x.client_id,
                        secret,
                        http,
                    )),
                    audience: x.audience.clone(),
                    scope: x.scope.clone(),
                    tokens: Mutex::new(HashMap::new()),
                }
            }
        };
        let resource = config.resource.clone().ok_or_else(needs_url)?;
        Ok(Some(Self {
            resource,
            mode,
            relay_challenge: config.relay_challenge,
        }))
    }

    /// Whether its refusals of a caller's token go to the caller as they came.
    pub(crate) fn relays_challenge(&self) -> bool {
        self.relay_challenge
    }

    /// Whether callers sign in to it through the gateway.
    pub(crate) fn per_user(&self) -> bool {
        matches!(self.mode, Mode::PerUser { .. })
    }

    /// Ends `principal`'s login to `server` (a per-user upstream): its refresh token revoked
    /// where the authorization server can, its tokens gone from the vault. How many logins
    /// there were (0 or 1); `None` for an upstream whose callers do not sign in.
    pub(crate) async fn sign_out(
        &self,
        server: &str,
        principal: &str,
        logins: &super::login::Logins,
    ) -> Option<Result<usize, RpcError>> {
        let Mode::PerUser { config, http } = &self.mode else {
            return None;
        };
        Some(
            logins
                .sign_out(server, &self.resource, config, principal, http)
                .await,
        )
    }

    /// The `Authorization` header of a call of `caller` to `server`.
    pub(crate) async fn authorization(
        &self,
        server: &str,
        caller: Option<&Caller>,
        logins: Option<&super::login::Logins>,
        announce: &tokio::sync::broadcast::Sender<toolwire_server::Change>,
    ) -> Result<Header, RpcError> {
        let token = match &self.mode {
            Mode::PerUser { config, http } => {
                let (Some(caller), Some(logins)) = (caller, logins) else {
                    return Err(failed(
                        server,
                        "its callers sign in, and this one is not known",
                    ));
                };
                return logins
                    .authorization(
                        server,
                        &self.resource,
                        config,
                        &caller.principal,
                        http,
                        announce,
                    )
                    .await;
            }
            Mode::Passthrough => {
                let (caller, credential) = presented(server, caller)?;
                if !names_audience(&caller.claims, &self.resource) {
                    tracing::info!(target: "toolwire_gateway::audit", caller = %caller.principal, upstream = server, "refused: the caller's token is not for this upstream");
                    return Err(failed(
                        server,
                        format!(
                            "the caller's token is not issued for {}, so it is not passed on",
                            self.resource
                        ),
                    ));
                }
                Secret::new(credential.expose())
            }
            Mode::Exchange {
                client,
                audience,
                scope,
                tokens,
            } => {
                let (caller, credential) = presented(server, caller)?;
                // Kept per token presented, not per caller: a narrower token of the same user
                // gets its own exchange, never the broader one's.
                let key = (super::sha256(credential.expose()), server.to_owned());
                let now = unix_now();
                let held = lock(tokens)
                    .get(&key)
                    .filter(|t| t.until > now)
                    .map(|t| t.token.clone());
                if let Some(token) = held {
                    token
                } else {
                    let got = client
                        .exchange(
                            credential.expose(),
                            &self.resource,
                            audience.as_deref(),
                            scope.as_deref(),
                        )
                        .await
                        .map_err(|e| failed(server, toolwire::ErrorChain(&e)))?;
                    // Never kept past the token it was exchanged for.
                    let subject_expiry = caller
                        .claims
                        .get("exp")
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(u64::MAX);
                    let until = got
                        .expires_at
                        .map_or(now + 300, |at| at.saturating_sub(EARLY))
                        .min(subject_expiry);
                    let mut held = lock(tokens);
                    if held.len() >= MAX_EXCHANGED {
                        held.retain(|_, t| t.until > now);
                        if held.len() >= MAX_EXCHANGED {
                            held.clear();
                        }
                    }
                    held.insert(
                        key,
                        Exchanged {
                            token: got.access_token.clone(),
                            until,
                        },
                    );
                    got.access_token
                }
            }
        };
        toolwire_headers::authorization_header(&format!("Bearer {}", token.expose()))
            .ok_or_else(|| failed(server, "the token cannot travel in a header"))
    }
}

/// The caller and the access token it presented, for an upstream called with it.
fn presented<'c>(
    server: &str,
    caller: Option<&'c Caller>,
) -> Result<(&'c Caller, &'c toolwire_server::Credential), RpcError> {
    caller
        .and_then(|c| c.credential.as_ref().map(|t| (c, t)))
        .ok_or_else(|| {
            failed(
                server,
                "it calls with its callers' tokens, and this caller presented none (an API key is not passed on)",
            )
        })
}

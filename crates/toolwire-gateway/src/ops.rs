//! The gateway's HTTP edge ([`Edge`]): who is calling ([`crate::Access`]), and the pages
//! beside its MCP endpoint: the resource metadata and sign-in pages of its access control,
//! `/healthz` (the process serves), `/readyz` (not draining, and every enabled upstream tried,
//! or each required one serving; each one's state as JSON, and those it waits for; 503
//! otherwise) and `/metrics` (Prometheus), from each upstream's state.

use serde_json::{Value, json};
use std::sync::Arc;
use toolwire_host::ServerState;
use toolwire_types::ClientMethod;

use toolwire_server::{Edge, Page};

use crate::Gateway;

/// Why [`Gateway::reload`] left the running configuration in place.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// A required entry has no entry in the new configuration.
    #[error(
        "the new configuration has no entry `{0}`, which readiness requires: this replica would never be ready again (the \"gateway\" section's required list changes on restart)"
    )]
    RequiredMissing(String),
    /// A required entry is disabled in the new configuration.
    #[error(
        "the new configuration disables `{0}`, which readiness requires: this replica would never be ready again (the \"gateway\" section's required list changes on restart)"
    )]
    RequiredDisabled(String),
    /// The host refused it.
    #[error(transparent)]
    Host(#[from] toolwire_host::HostError),
}

/// Whether `config` has an enabled entry for each of `required`: a gateway whose readiness
/// requires an entry that is missing or disabled would never be ready. The first one that is
/// not, as the [`ReloadError`] it makes.
pub fn required_present(
    required: &[String],
    config: &toolwire_host::ServersConfig,
) -> Result<(), ReloadError> {
    for name in required {
        match config.get(name) {
            None => return Err(ReloadError::RequiredMissing(name.clone())),
            Some(entry) if entry.disabled => {
                return Err(ReloadError::RequiredDisabled(name.clone()));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

impl Gateway {
    /// Says from now on that this replica is going away: `/readyz` answers 503 with
    /// `"draining": true` (a balancer stops sending it new callers) and `/metrics` shows
    /// `toolwire_gateway_draining 1`. The HTTP server's own drain
    /// ([`toolwire_server::HttpServer::drain`]) refuses new requests and waits for the calls
    /// in flight.
    pub fn drain(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.metrics.draining();
    }

    /// Whether [`Gateway::drain`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Applies `config` to the host ([`toolwire_host::Host::reload`]); once applied, it is
    /// counted in `/metrics` (`reloads_total{outcome="applied"}`, and
    /// `reloaded_entries_total{outcome}` for the entries it added, removed and changed). A
    /// refusal is not counted here: a caller that tries the same file again and again says
    /// when a refusal is new with [`Gateway::reload_refused`].
    ///
    /// A configuration without an enabled entry for each [`crate::GatewayBuilder::required`]
    /// one is refused: readiness would wait for it for ever, and every balancer would take this
    /// replica out of service.
    pub fn reload(
        &self,
        config: &toolwire_host::ServersConfig,
    ) -> Result<toolwire_host::Reloaded, ReloadError> {
        required_present(self.required.as_deref().unwrap_or_default(), config)?;
        let done = self.host.reload(config)?;
        self.metrics.reload(Some(&done));
        Ok(done)
    }

    /// A new configuration was refused (it does not load, or the host refused it) and the
    /// running one stays: counted as `reloads_total{outcome="refused"}`.
    pub fn reload_refused(&self) {
        self.metrics.reload(None);
    }

    /// Whether this replica is ready, and each upstream's state as JSON. Ready when it is not
    /// draining and, with [`crate::GatewayBuilder::required`] entries, each of them is ready
    /// or stopped while idle; without, every enabled upstream has been tried (none is still
    /// starting).
    pub fn readiness(&self) -> (bool, Value) {
        let (ready, servers, _) = self.readiness_and_waits();
        (ready, servers)
    }

    /// [`Gateway::readiness`], with the upstreams it waits for, from one look at the states.
    fn readiness_and_waits(&self) -> (bool, Value, Vec<String>) {
        let states = self.states();
        let waiting = self.waiting_for(&states);
        let ready = !self.is_draining() && waiting.is_empty();
        let servers = states
            .into_iter()
            .map(|(server, _, described)| (server, described))
            .collect();
        (ready, Value::Object(servers), waiting)
    }

    /// The upstreams readiness waits for now: the required entries that are not serving, or
    /// (none required) those still starting.
    fn waiting_for(&self, states: &[(String, &'static str, Value)]) -> Vec<String> {
        match &self.required {
            Some(required) => required
                .iter()
                .filter(|name| {
                    !states
                        .iter()
                        .any(|(s, word, _)| s == *name && matches!(*word, "ready" | "idle"))
                })
                .cloned()
                .collect(),
            None => states
                .iter()
                .filter(|(_, word, _)| *word == "starting")
                .map(|(server, _, _)| server.clone())
                .collect(),
        }
    }

    /// Each upstream's name, state in one word, and state as JSON.
    pub(crate) fn states(&self) -> Vec<(String, &'static str, Value)> {
        self.host
            .servers()
            .into_iter()
            .map(|server| {
                let (word, described) = match self.host.state(&server) {
                    Some(ServerState::Ready { version, tools }) => (
                        "ready",
                        json!({"version": version.as_str(), "tools": tools}),
                    ),
                    Some(ServerState::Starting) | None => ("starting", json!({})),
                    Some(ServerState::Reconnecting { attempt }) => {
                        ("reconnecting", json!({"attempt": attempt}))
                    }
                    Some(ServerState::Disabled) => ("disabled", json!({})),
                    Some(ServerState::Idle { tools }) => ("idle", json!({"tools": tools})),
                    Some(ServerState::Failed { reason }) => ("failed", json!({"reason": reason})),
                    Some(ServerState::NeedsLogin { reason }) => {
                        ("needs-login", json!({"reason": reason}))
                    }
                    Some(_) => ("unknown", json!({})),
                };
                let mut described = described;
                described["state"] = json!(word);
                (server.to_string(), word, described)
            })
            .collect()
    }

    /// The operational page at `path`, if it is one.
    pub(crate) fn operational_page(&self, path: &str) -> Option<Page> {
        match path {
            // The process is up and serving.
            "/healthz" => Some(Page::new(200, "text/plain", "ok\n")),
            // Every enabled upstream has been tried, and how each is.
            "/readyz" => {
                let (ready, servers, waiting) = self.readiness_and_waits();
                let status = if ready { 200 } else { 503 };
                // Tools left out because another has their name, each naming both and the
                // remedy.
                let collisions: Vec<String> = self
                    .host
                    .load()
                    .collisions()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                let body = json!({"ready": ready, "draining": self.is_draining(),
                    "waitingFor": waiting, "required": self.required,
                    "servers": servers, "collisions": collisions})
                .to_string();
                Some(Page::new(status, "application/json", body))
            }
            "/metrics" => {
                let states: Vec<(String, &'static str)> = self
                    .states()
                    .into_iter()
                    .map(|(server, word, _)| (server, word))
                    .collect();
                self.metrics.traffic(&self.traffic.states());
                let held: Vec<Arc<str>> = self
                    .host
                    .quarantined()
                    .into_iter()
                    .map(|(_, held)| held.server)
                    .collect();
                self.metrics.quarantine(&held);
                Some(Page::new(
                    200,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    self.metrics.render(&states),
                ))
            }
            _ => None,
        }
    }
}

impl Edge for Gateway {
    async fn authenticate(
        &self,
        request: &http::request::Parts,
    ) -> Result<Option<Arc<toolwire_server::Caller>>, toolwire_server::Denial> {
        match &self.access {
            Some(access) => access.authenticate(request).await,
            None => Ok(None),
        }
    }

    /// A call may be refused with an HTTP status when an upstream relays its challenges, or
    /// when a rate limit may answer it 429.
    fn may_challenge(&self, method: ClientMethod, _: Option<&toolwire_server::Caller>) -> bool {
        method == ClientMethod::CallTool
            && (self.access.as_ref().is_some_and(|a| a.relays_challenges())
                || self.traffic.limits_rates())
    }

    async fn page(
        &self,
        path: &str,
        query: Option<&str>,
        headers: &http::HeaderMap,
    ) -> Option<Page> {
        if let Some(access) = &self.access
            && let Some(page) = access.page(path, query, headers).await
        {
            return Some(page);
        }
        self.operational_page(path)
    }
}

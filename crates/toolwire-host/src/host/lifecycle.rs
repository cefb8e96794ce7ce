//! A server's life in the host: started on a task of its own, its connection followed into
//! its [`ServerState`], its tools merged while it runs, and (with
//! [`HostBuilder::restart_failed`]) started again after it failed, for as long as it is in the
//! configuration. Each change of state is logged once, under the server's name.

use tracing::Instrument as _;

use super::*;

impl Inner {
    /// Starts `server` on a task of its own, unless it is disabled.
    pub(super) fn launch(self: &Arc<Self>, server: &Arc<Server>) {
        if server.config.disabled {
            return;
        }
        let oauth = self
            .start
            .oauth
            .as_ref()
            .and_then(|base| server.config.oauth_config(base.clone()));
        let client = match oauth {
            Some(oauth) => self.start.client.clone().oauth(oauth),
            None => self.start.client.clone(),
        };
        let span = tracing::info_span!("server", name = %server.name);
        tokio::spawn(
            narrate(server.state.subscribe(), server.retired.subscribe()).instrument(span.clone()),
        );
        let (inner, server) = (self.clone(), server.clone());
        let restart = self.start.restart;
        let life = async move {
            let mut retired = server.retired.subscribe();
            let mut closing = inner.closing.subscribe();
            let mut delays = restart.map(|b| b.delays());
            loop {
                let was_ready = tokio::select! {
                    ready = inner.run(&server, client.clone()) => ready,
                    _ = retired.wait_for(|r| *r) => break,
                };
                // Only a failure starts again: a login is a person's to give, and the rest
                // (shut down, retired) are ends.
                if !matches!(*server.state.borrow(), ServerState::Failed { .. }) {
                    break;
                }
                if was_ready {
                    delays = restart.map(|b| b.delays());
                }
                let Some(delays) = delays.as_mut() else { break };
                let Some(delay) = delays.next() else { break };
                tracing::debug!(
                    attempt = delays.attempt(),
                    ?delay,
                    "starting it again after a delay"
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    _ = retired.wait_for(|r| *r) => break,
                    _ = closing.wait_for(|c| *c) => break,
                }
            }
            // Retired while it ran: whatever client it made goes with it, once the calls
            // routed to it before are done (or after RETIRE_GRACE).
            if *server.retired.borrow() {
                let mut busy = server.busy.subscribe();
                let idle = busy.wait_for(|n| *n == 0);
                if tokio::time::timeout(super::RETIRE_GRACE, idle)
                    .await
                    .is_err()
                {
                    tracing::warn!(
                        calls = *server.busy.borrow(),
                        "retired with calls still in flight after {} s: closing",
                        super::RETIRE_GRACE.as_secs()
                    );
                }
                let client = lock(&server.client).take();
                if let Some(client) = client {
                    client.close().await;
                }
            }
        };
        tokio::spawn(life.instrument(span));
    }

    /// Starts one server and follows its tool cache until it ends; whether it got ready.
    async fn run(self: &Arc<Self>, server: &Arc<Server>, client: ClientBuilder) -> bool {
        let client = match server.config.connect(client) {
            Ok(client) => client,
            // The state is the server's already: its name is not repeated.
            Err(ConnectError::Client { source, .. }) => {
                fail(server, toolwire::ErrorChain(&source).to_string());
                return false;
            }
            Err(e) => {
                fail(server, toolwire::ErrorChain(&e).to_string());
                return false;
            }
        };
        let mut changes = client.subscribe_tools();
        let mut connection = client.watch_connection();
        *lock(&server.client) = Some(client.clone());
        let negotiated = match client.ready().await {
            Ok(n) => n,
            Err(e) => {
                self.stop(server, &e);
                return false;
            }
        };
        if let Err(e) = client.list_tools().await {
            self.stop(server, &e);
            return false;
        }
        let count = self.merge(server, &client);
        server.state.send_replace(ServerState::Ready {
            version: negotiated.version.clone(),
            tools: count,
        });
        let mut closing = self.closing.subscribe();
        // A death between the listing and here is followed now, the rest as it comes.
        let now = connection.borrow_and_update().clone();
        if !now.is_ready() && !self.follow(server, &client, now) {
            return true;
        }
        let idle = self.start.idle.filter(|_| server.may_idle());
        // Checked four times per limit: a server stops at most a quarter late.
        let mut idle_check = tokio::time::interval(idle.map_or(Duration::MAX / 2, |l| {
            (l / 4).max(Duration::from_millis(10))
        }));
        let health = self.start.health.filter(|_| !server.may_idle());
        let mut health_check = tokio::time::interval(
            health
                .unwrap_or(Duration::MAX / 2)
                .max(Duration::from_millis(10)),
        );
        health_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        health_check.reset();
        loop {
            let mut checking = false;
            let change = tokio::select! {
                change = changes.recv() => Some(change),
                _ = idle_check.tick(), if idle.is_some() => None,
                _ = health_check.tick(), if health.is_some() => {
                    checking = true;
                    None
                }
                Ok(()) = connection.changed() => {
                    let state = connection.borrow_and_update().clone();
                    if !self.follow(server, &client, state) {
                        return true;
                    }
                    continue;
                }
                _ = closing.wait_for(|closed| *closed) => return true,
            };
            let Some(change) = change else {
                if checking {
                    if let Some(interval) = health
                        && let Err(e) = alive(server, &client, interval).await
                    {
                        tracing::warn!(error = %toolwire::ErrorChain(&e), "no answer to the health check: marked failed");
                        self.stop(server, &e);
                        return true;
                    }
                } else if let Some(limit) = idle {
                    self.stop_if_idle(server, &client, limit).await;
                }
                continue;
            };
            // A server that failed keeps its tools out, whatever its cache does later.
            let failed = matches!(
                *server.state.borrow(),
                ServerState::Failed { .. } | ServerState::NeedsLogin { .. }
            );
            if failed || matches!(change, Err(broadcast::error::RecvError::Closed)) {
                return true;
            }
            // Stopped while idle, its cache is empty and its tools stay as they were.
            if server.parked.load(std::sync::atomic::Ordering::SeqCst) {
                continue;
            }
            // A change, or changes missed (`Lagged`): either way the cache is read anew.
            let count = self.merge(server, &client);
            server.state.send_modify(|state| {
                if let ServerState::Ready { tools, .. } = state {
                    *tools = count;
                }
            });
        }
    }

    /// The server could not go on: its tools leave the snapshot, and its state says why.
    pub(super) fn stop(&self, server: &Server, error: &Error) {
        lock(&server.client).take();
        self.replace_and_settle(server, Vec::new());
        let reason = toolwire::ErrorChain(error).to_string();
        match error {
            Error::Authorization(e) if matches!(**e, AuthError::LoginRequired { .. }) => {
                server
                    .state
                    .send_replace(ServerState::NeedsLogin { reason });
            }
            _ => fail(server, reason),
        }
    }

    /// Follows the server's connection into its state: reconnecting keeps its tools, a new
    /// connection counts them again, a connection that ended for good takes them out. `false`
    /// once the server is done.
    pub(super) fn follow(&self, server: &Server, client: &Client, state: ConnectionState) -> bool {
        match state {
            ConnectionState::Reconnecting { attempt } => {
                server
                    .state
                    .send_replace(ServerState::Reconnecting { attempt });
            }
            // Started again after it was stopped while idle: `wake` lists and merges.
            ConnectionState::Ready(_)
                if server.parked.load(std::sync::atomic::Ordering::SeqCst) => {}
            ConnectionState::Ready(_) => {
                let count = self.merge(server, client);
                if let Some(version) = client.protocol_version() {
                    server.state.send_replace(ServerState::Ready {
                        version,
                        tools: count,
                    });
                }
            }
            ConnectionState::Failed { reason } => {
                self.stop(server, &reason);
                return false;
            }
            // `Closed` comes from the host's own shutdown; the rest are steps on the way.
            _ => {}
        }
        true
    }
}

/// Logs each change of `states` once (the enclosing span names the server), until the server
/// is retired: a long-running host's log says what each server did and why.
async fn narrate(mut states: watch::Receiver<ServerState>, mut retired: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            changed = states.changed() => if changed.is_err() { return },
            _ = retired.wait_for(|r| *r) => return,
        }
        match &*states.borrow_and_update() {
            ServerState::Ready { version, tools } => {
                tracing::info!(%version, tools, "ready");
            }
            ServerState::Failed { reason } => tracing::warn!(reason, "failed"),
            ServerState::NeedsLogin { reason } => tracing::warn!(reason, "needs a login"),
            ServerState::Reconnecting { attempt } => {
                tracing::warn!(attempt, "its connection ended; reconnecting");
            }
            ServerState::Idle { tools } => tracing::info!(tools, "stopped while idle"),
            ServerState::Starting => tracing::info!("starting"),
            ServerState::Disabled => {}
        }
    }
}

/// `server` failed for `reason`: its state says why (logged by [`narrate`]).
fn fail(server: &Server, reason: String) {
    server.state.send_replace(ServerState::Failed { reason });
}

/// Whether `server` answers, asked with a `ping` when nothing used it for `interval` (used
/// since, or busy: it is not asked). Any answer is alive, an error answer too; no answer
/// within `interval`, or no connection, is not.
async fn alive(server: &Server, client: &Client, interval: Duration) -> Result<(), Error> {
    let quiet = lock(&server.used).elapsed() >= interval;
    let busy = *server.busy.borrow() > 0;
    let ready = matches!(*server.state.borrow(), ServerState::Ready { .. });
    if !quiet || busy || !ready {
        return Ok(());
    }
    match tokio::time::timeout(interval, client.ping()).await {
        Err(_) => Err(Error::Timeout(interval)),
        Ok(Err(e @ (Error::Timeout(_) | Error::Connection(_)))) => Err(e),
        Ok(_) => Ok(()),
    }
}

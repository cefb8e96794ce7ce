//! Stopping a stdio server while nobody uses it ([`HostBuilder::stop_idle`]): its child ends,
//! its tools stay listed, and the next use starts it again (a new child, a new handshake, its
//! tools listed anew).

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::*;

/// A call routed through the host: while one is in flight its server is not stopped.
pub(super) struct InUse(Arc<Server>);

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.busy.send_modify(|n| *n = n.saturating_sub(1));
        *lock(&self.0.used) = Instant::now();
    }
}

impl Server {
    /// Whether this server's child may be stopped while idle.
    pub(super) fn may_idle(&self) -> bool {
        matches!(self.config.transport, crate::ServerTransport::Stdio { .. })
    }
}

impl Inner {
    /// `server` is being used now (its client handed out); a server stopped while idle starts
    /// again.
    pub(super) fn touch(self: &Arc<Self>, server: &Arc<Server>) {
        *lock(&server.used) = Instant::now();
        if server.parked.load(Ordering::SeqCst) && !server.waking.swap(true, Ordering::SeqCst) {
            let (inner, server) = (self.clone(), server.clone());
            tokio::spawn(async move { inner.wake(&server).await });
        }
    }

    /// [`Inner::touch`] for a call, which holds the server busy until it ends.
    pub(super) fn hold(self: &Arc<Self>, server: &Arc<Server>) -> InUse {
        server.busy.send_modify(|n| *n += 1);
        self.touch(server);
        InUse(server.clone())
    }

    /// Stops `server`'s child if nothing used it for `limit` and no call is in flight: its
    /// client disconnects (the next request connects again), its tools stay in the snapshot.
    pub(super) async fn stop_if_idle(&self, server: &Server, client: &Client, limit: Duration) {
        let idle = lock(&server.used).elapsed() >= limit;
        let ready = matches!(*server.state.borrow(), ServerState::Ready { .. });
        if !idle || !ready || *server.busy.borrow() > 0 {
            return;
        }
        server.parked.store(true, Ordering::SeqCst);
        let tools = lock(&server.tools).len();
        server.state.send_replace(ServerState::Idle { tools });
        client.disconnect().await;
    }

    /// Starts a server stopped while idle again: its client connects, its tools are listed
    /// anew and merged (they stayed listed meanwhile, so nothing flaps).
    async fn wake(&self, server: &Server) {
        let client = lock(&server.client).clone();
        let Some(client) = client else {
            return;
        };
        let listed = client.list_tools().await;
        server.parked.store(false, Ordering::SeqCst);
        server.waking.store(false, Ordering::SeqCst);
        if let Err(e) = listed {
            return self.stop(server, &e);
        }
        let count = self.merge(server, &client);
        if let Some(version) = client.protocol_version() {
            server.state.send_replace(ServerState::Ready {
                version,
                tools: count,
            });
        }
    }
}

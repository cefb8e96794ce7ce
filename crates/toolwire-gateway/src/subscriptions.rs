//! What the gateway's clients asked to hear of, held upstream: resource subscriptions counted
//! per resource (the upstream is subscribed while any session or listen stream is, once), and
//! the log level (the most verbose any session asked for, of the upstreams that session's
//! caller may see); each upstream's `notifications/resources/updated` forwarded under the
//! gateway's URI, and its log messages under a logger named after it, as changes attributed to
//! their upstream: which session hears each is [`crate::sessions`]'s decision.

use crate::lock;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use toolwire_types::Method as _;
use toolwire_types::methods::method as mcp;

use serde_json::{Value, json};
use toolwire::{Client, LoggingLevel};
use toolwire_server::{Answer, Change, RpcError};
use toolwire_types::{ServerNotice, error::code};

use crate::sessions::SessionKey;
use crate::{Gateway, uris};

/// The most resources one listen stream may ask updates of; the rest are not watched (and not
/// acknowledged).
pub(crate) const MAX_LISTEN_RESOURCES: usize = 256;

/// Who is subscribed to what.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    /// Clients subscribed, by the resource's gateway URI.
    counts: Mutex<HashMap<String, usize>>,
    /// The servers whose updates are forwarded already (until their client goes: a reload
    /// that restarts a server gives it a new one).
    forwarding: Arc<Mutex<HashSet<Arc<str>>>>,
}

impl Subscriptions {
    /// One subscriber fewer for each of `uris`: those now wanted by nobody.
    fn release(&self, uris: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut counts = lock(&self.counts);
        let mut last = Vec::new();
        for uri in uris {
            match counts.get_mut(&uri) {
                Some(count) if *count > 1 => *count -= 1,
                Some(_) => {
                    counts.remove(&uri);
                    last.push(uri);
                }
                None => {}
            }
        }
        last
    }
}

impl Gateway {
    /// A legacy session (`session`) subscribes to (`on`) or unsubscribes from the resource
    /// `uri` (a gateway URI), for its own updates only.
    pub(crate) async fn session_subscribe(
        &self,
        uri: &str,
        on: bool,
        session: Option<&SessionKey>,
    ) -> Answer {
        // Checked before anything is counted: a URI no server gave is an error, and so is one
        // of a server called with its callers' credentials.
        let (server, _, _) = self.resource_route(uri)?;
        self.own_credentials_only(&server, mcp::Subscribe::NAME)?;
        if let Some(key) = session
            && !self.sessions.subscribe(key, uri, on)
        {
            // Subscribed already, or not subscribed: nothing changes upstream.
            return Ok(json!({}));
        }
        let answer = self.subscribe(uri, on).await;
        if on
            && answer.is_err()
            && let Some(key) = session
        {
            self.sessions.subscribe(key, uri, false);
        }
        answer
    }

    /// The legacy session `session` ended: its subscriptions end with it, upstream too where
    /// it was the last.
    pub(crate) fn session_gone(&self, session: &str) {
        let Some((_, resources)) = self.sessions.ended(session) else {
            return;
        };
        let last = self.subscriptions.release(resources);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for uri in last {
            if let Ok((server, client, original)) = self.resource_route(&uri) {
                runtime.spawn(async move {
                    if let Err(error) = client.unsubscribe_resource(&original).await {
                        tracing::debug!(%server, error = %toolwire::ErrorChain(&error), "an upstream refused an unsubscription");
                    }
                });
            }
        }
    }

    /// One subscriber subscribes to (`on`) or unsubscribes from the resource `uri` (a gateway
    /// URI): the first subscription and the last unsubscription reach its server.
    pub(crate) async fn subscribe(&self, uri: &str, on: bool) -> Answer {
        let (server, client, original) = self.resource_route(uri)?;
        let first_or_last = {
            let mut counts = lock(&self.subscriptions.counts);
            if on {
                let count = counts.entry(uri.to_owned()).or_insert(0);
                *count += 1;
                *count == 1
            } else {
                match counts.get_mut(uri) {
                    Some(count) if *count > 1 => {
                        *count -= 1;
                        false
                    }
                    Some(_) => {
                        counts.remove(uri);
                        true
                    }
                    // Not subscribed: nothing to end.
                    None => false,
                }
            }
        };
        if on {
            self.forward(&server, &client);
        }
        if first_or_last {
            let done = if on {
                client.subscribe_resource(&original).await
            } else {
                client.unsubscribe_resource(&original).await
            };
            if let Err(error) = done {
                if on {
                    // Not held upstream: the count goes back.
                    let mut counts = lock(&self.subscriptions.counts);
                    if let Some(count) = counts.get_mut(uri) {
                        *count -= 1;
                        if *count == 0 {
                            counts.remove(uri);
                        }
                    }
                }
                return Err(crate::relayed(&server, &error));
            }
        }
        Ok(json!({}))
    }

    /// A listen stream's resources, each subscribed (`on`) as [`Gateway::subscribe`] does, as
    /// far as `caller` may see them (at most [`MAX_LISTEN_RESOURCES`]); a URI no server gave,
    /// or of a server hidden from the caller, is left out (logged). Resolves with the
    /// resources watched; on the way out, `resources` are those it resolved with.
    pub(crate) async fn watch_all(
        &self,
        resources: &BTreeSet<String>,
        on: bool,
        caller: Option<&toolwire_server::Caller>,
    ) -> BTreeSet<String> {
        let mut watched = BTreeSet::new();
        if !on {
            for uri in resources {
                let _ = self.subscribe(uri, false).await;
            }
            return watched;
        }
        let view = self.view(caller);
        for uri in resources {
            if watched.len() >= MAX_LISTEN_RESOURCES {
                tracing::info!(
                    asked = resources.len(),
                    "a listen stream asked for more resources than are watched"
                );
                break;
            }
            let as_caller = self
                .resource_route(uri)
                .is_ok_and(|(server, _, _)| self.own_credentials_only(&server, "listen").is_err());
            if as_caller {
                tracing::info!(%uri, "a listen stream's resource is of a server called with its callers' credentials: not watched");
                continue;
            }
            if !self.uri_allowed(&view, uri) {
                tracing::info!(target: "toolwire_gateway::audit", caller = crate::access::principal(caller), what = "resource", name = %uri, "refused by policy");
                continue;
            }
            match self.subscribe(uri, true).await {
                Ok(_) => {
                    watched.insert(uri.clone());
                }
                Err(RpcError { message, .. }) => {
                    tracing::info!(%uri, %message, "a listen stream's resource is not watched upstream");
                }
            }
        }
        watched
    }

    /// A legacy session's `logging/setLevel`: that session hears log lines from this level up
    /// of the upstreams its caller may see; those upstreams are asked for the most verbose
    /// level any session asked for, and their messages forwarded. Refused to a caller that
    /// may see no upstream.
    pub(crate) async fn set_level(
        &self,
        params: &Value,
        view: &crate::access::View<'_>,
        session: Option<&SessionKey>,
    ) -> Answer {
        let level: LoggingLevel =
            serde_json::from_value(params["level"].clone()).map_err(|_| {
                RpcError::new(
                    code::INVALID_PARAMS,
                    format!("bad level {}", params["level"]),
                )
            })?;
        let visible: Vec<Arc<str>> = self
            .host
            .servers()
            .into_iter()
            .filter(|server| self.server_allowed(view, server, true))
            .collect();
        if visible.is_empty() {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "{}: this caller may see no server whose log lines it could hear",
                    mcp::SetLevel::NAME
                ),
            ));
        }
        let Some(session) = session else {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "{} needs a session: its level is the session's own",
                    mcp::SetLevel::NAME
                ),
            ));
        };
        self.sessions.set_level(session, level);
        let upstream_level = self.sessions.most_verbose().unwrap_or(level);
        for server in visible {
            let Ok(client) = self.host.client(&server) else {
                continue;
            };
            if client
                .server_capabilities()
                .is_none_or(|c| c.logging.is_none())
            {
                continue;
            }
            self.forward(&server, &client);
            if let Err(error) = client.set_log_level(upstream_level).await {
                tracing::info!(%server, error = %toolwire::ErrorChain(&error), "an upstream refused the log level");
            }
        }
        Ok(json!({}))
    }

    /// Forwards what `server` says of its resources, its log messages and the URL
    /// elicitations it saw completed as changes, once per server.
    pub(crate) fn forward(&self, server: &Arc<str>, client: &Client) {
        if !lock(&self.subscriptions.forwarding).insert(server.clone()) {
            return;
        }
        let mut notices = client.notifications();
        let (server, changes) = (server.clone(), self.changes.clone());
        let forwarding = self.subscriptions.forwarding.clone();
        let separator = self.host.separator().to_owned();
        tokio::spawn(async move {
            while let Some(notice) = notices.recv().await {
                let params = notice
                    .params
                    .as_deref()
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .unwrap_or_default();
                let change = match ServerNotice::of(&notice.method) {
                    ServerNotice::ResourceUpdated => params["uri"]
                        .as_str()
                        .and_then(|u| uris::outward(&server, &separator, u))
                        .map(Change::Resource),
                    ServerNotice::LoggingMessage => Some(Change::Sourced {
                        source: server.to_string(),
                        change: Box::new(Change::Log(log_message(&server, params))),
                    }),
                    // Ids are the upstream's, unique to the elicitation it asked for: it goes
                    // to the session whose call was asked it.
                    ServerNotice::ElicitationComplete => {
                        params["elicitationId"].as_str().map(|id| Change::Sourced {
                            source: server.to_string(),
                            change: Box::new(Change::ElicitationComplete(id.to_owned())),
                        })
                    }
                    _ => None,
                };
                if let Some(change) = change {
                    let _ = changes.send(change);
                }
            }
            // The client is gone: a new one of this server is forwarded when it is used.
            lock(&forwarding).remove(&server);
        });
    }
}

/// `server`'s log message as the gateway's clients hear it: its logger named after the server
/// (`server` or `server/logger`), the rest as sent.
pub(crate) fn log_message(server: &str, mut params: Value) -> Value {
    let logger = match params["logger"].as_str() {
        Some(logger) => format!("{server}/{logger}"),
        None => server.to_owned(),
    };
    params["logger"] = json!(logger);
    json!({"jsonrpc": "2.0", "method": mcp::LoggingMessage::NAME, "params": params})
}

/// An unknown method's error, for requests in the era that has none of them.
pub(crate) fn not_in_this_era(method: &str) -> RpcError {
    RpcError::new(
        code::METHOD_NOT_FOUND,
        format!("Method not found: {method} (2026-07-28 subscribes on subscriptions/listen)"),
    )
}

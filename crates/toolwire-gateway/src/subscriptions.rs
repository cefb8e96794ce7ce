//! What the gateway's clients asked to hear of, held upstream: resource subscriptions counted
//! per resource (the upstream is subscribed while any client is, once), and the log level;
//! each upstream's `notifications/resources/updated` forwarded under the gateway's URI, and
//! its log messages under a logger named after it.

use crate::lock;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolwire::{Client, LoggingLevel};
use toolwire_server::{Answer, Change, RpcError};
use toolwire_types::error::code;

use crate::{Gateway, uris};

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
    /// Whether any client is subscribed to the resource with this gateway URI.
    pub(crate) fn wanted(&self, uri: &str) -> bool {
        lock(&self.counts).contains_key(uri)
    }
}

impl Gateway {
    /// One client subscribes to (`on`) or unsubscribes from the resource `uri` (a gateway
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

    /// A listen stream's resources, each subscribed (or not) as [`Gateway::subscribe`] does; a
    /// URI no server gave is left out (logged).
    pub(crate) async fn watch_all(&self, resources: &BTreeSet<String>, on: bool) {
        for uri in resources {
            if let Err(RpcError { message, .. }) = self.subscribe(uri, on).await {
                tracing::info!(%uri, %message, "a listen stream's resource is not watched upstream");
            }
        }
    }

    /// A legacy client's `logging/setLevel`: the level every running upstream that logs is
    /// asked for (one level for the gateway, the last one set), and their messages forwarded.
    pub(crate) async fn set_level(&self, params: &Value) -> Answer {
        let level: LoggingLevel =
            serde_json::from_value(params["level"].clone()).map_err(|_| {
                RpcError::new(
                    code::INVALID_PARAMS,
                    format!("bad level {}", params["level"]),
                )
            })?;
        for server in self.host.servers() {
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
            if let Err(error) = client.set_log_level(level).await {
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
                let change = match notice.method.as_str() {
                    "notifications/resources/updated" => params["uri"]
                        .as_str()
                        .and_then(|u| uris::outward(&server, &separator, u))
                        .map(Change::Resource),
                    "notifications/message" => Some(Change::Log(log_message(&server, params))),
                    // Ids are the upstream's, unique to the elicitation it asked for.
                    "notifications/elicitation/complete" => params["elicitationId"]
                        .as_str()
                        .map(|id| Change::ElicitationComplete(id.to_owned())),
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
    json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
}

/// An unknown method's error, for requests in the era that has none of them.
pub(crate) fn not_in_this_era(method: &str) -> RpcError {
    RpcError::new(
        code::METHOD_NOT_FOUND,
        format!("Method not found: {method} (2026-07-28 subscribes on subscriptions/listen)"),
    )
}

//! Resource subscriptions of the gateway's clients, held upstream: counted per resource (the
//! upstream is subscribed while any client is, once), and each upstream's
//! `notifications/resources/updated` forwarded under the gateway's URI.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};
use toolwire::Client;
use toolwire_server::{Answer, Change, RpcError};
use toolwire_types::error::code;

use crate::{Gateway, uris};

/// Who is subscribed to what.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    /// Clients subscribed, by the resource's gateway URI.
    counts: Mutex<HashMap<String, usize>>,
    /// The servers whose updates are forwarded already.
    forwarding: Mutex<HashSet<Arc<str>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
            self.forward_updates(&server, &client);
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

    /// Forwards `server`'s resource updates as changes of the gateway's URIs, once per server.
    fn forward_updates(&self, server: &Arc<str>, client: &Client) {
        if !lock(&self.subscriptions.forwarding).insert(server.clone()) {
            return;
        }
        let mut notices = client.notifications();
        let (server, changes) = (server.clone(), self.changes.clone());
        let separator = self.host.separator().to_owned();
        tokio::spawn(async move {
            while let Some(notice) = notices.recv().await {
                if notice.method != "notifications/resources/updated" {
                    continue;
                }
                let uri = notice
                    .params
                    .as_deref()
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .and_then(|p| p["uri"].as_str().map(str::to_owned));
                if let Some(outward) = uri.and_then(|u| uris::outward(&server, &separator, &u)) {
                    let _ = changes.send(Change::Resource(outward));
                }
            }
        });
    }
}

/// An unknown method's error, for subscription requests in the era that has none.
pub(crate) fn not_in_this_era(method: &str) -> RpcError {
    RpcError::new(
        code::METHOD_NOT_FOUND,
        format!("Method not found: {method} (2026-07-28 subscribes on subscriptions/listen)"),
    )
}

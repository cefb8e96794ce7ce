//! Resource subscriptions, in both eras: the set of subscribed URIs
//! ([`SessionConfig::resource_subscriptions`](crate::SessionConfig::resource_subscriptions),
//! carried to the session after a reconnect). Legacy: `resources/subscribe` and
//! `resources/unsubscribe`, each subscription sent again to a new session. Modern: the set
//! is the `resourceSubscriptions` of the listen stream (`listen.rs`), which is replaced when
//! it changes.

use web_time::Instant;

use serde_json::value::RawValue;
use toolwire_types::{Capability, JsonObject, ResourceUriParams, methods::method};

use super::listen::Change;
use super::{PendingKind, Session};
use crate::{Event, OpId, RequestError};

impl Session {
    /// The resources subscribed to, in order.
    pub fn resource_subscriptions(&self) -> impl Iterator<Item = &str> {
        self.config
            .resource_subscriptions
            .iter()
            .map(String::as_str)
    }

    /// Subscribes to updates of resource `uri` (`notifications/resources/updated`, passed up
    /// as [`Event::Notification`]). Legacy: `resources/subscribe`, refused locally if the
    /// server did not declare `resources.subscribe`. Modern: the listen stream is replaced by
    /// one that also names `uri`; the operation completes when the server acknowledges it,
    /// with [`RequestError::NotAcknowledged`] if the acknowledgement leaves `uri` out. A
    /// subscription that fails is forgotten; one that holds is made again on the session
    /// after a reconnect (given the same configuration).
    pub fn subscribe_resource(&mut self, uri: &str, now: Instant) -> Result<OpId, RequestError> {
        self.change_subscription(uri, true, now)
    }

    /// Ends a subscription (legacy: `resources/unsubscribe`; modern: a listen stream without
    /// `uri`). The URI is forgotten at once, whatever the server answers.
    pub fn unsubscribe_resource(&mut self, uri: &str, now: Instant) -> Result<OpId, RequestError> {
        self.change_subscription(uri, false, now)
    }

    fn change_subscription(
        &mut self,
        uri: &str,
        subscribe: bool,
        now: Instant,
    ) -> Result<OpId, RequestError> {
        if !self.is_ready() {
            let again = super::Again::new(subscription_again(uri.to_owned(), subscribe));
            return self.hold(super::Ask::Request(again), self.config.request_timeout, now);
        }
        let op = self.allocate_op();
        self.change_subscription_as(op, uri, subscribe, now)?;
        Ok(op)
    }

    /// [`Session::subscribe_resource`] or [`Session::unsubscribe_resource`] as operation `op`.
    pub(super) fn change_subscription_as(
        &mut self,
        op: OpId,
        uri: &str,
        subscribe: bool,
        now: Instant,
    ) -> Result<(), RequestError> {
        let version = self.version_for(Some(Capability::ResourceSubscribe))?;
        if version.is_modern() && self.listen.disabled {
            return Err(RequestError::NotAdvertised(Capability::ResourceSubscribe));
        }
        if subscribe {
            self.config.resource_subscriptions.insert(uri.to_owned());
        } else {
            self.config.resource_subscriptions.remove(uri);
        }
        if version.is_modern() {
            let change = if subscribe {
                Change::Subscribe(uri.to_owned())
            } else {
                Change::Unsubscribe
            };
            self.relisten(op, change, now);
            return Ok(());
        }
        self.send_subscription(uri, subscribe, Some(op), now)
            .inspect_err(|_| {
                if subscribe {
                    self.config.resource_subscriptions.remove(uri);
                }
            })
    }

    /// Legacy: sends `resources/subscribe` or `resources/unsubscribe` for `uri`.
    fn send_subscription(
        &mut self,
        uri: &str,
        subscribe: bool,
        op: Option<OpId>,
        now: Instant,
    ) -> Result<(), RequestError> {
        let version = self.version().cloned().ok_or(RequestError::NotReady)?;
        let mut params = ResourceUriParams {
            uri: uri.to_owned(),
            meta: None,
            extra: JsonObject::new(),
        };
        self.stamp_trace(&mut params);
        let name = if subscribe {
            <method::Subscribe as toolwire_types::Method>::NAME
        } else {
            <method::Unsubscribe as toolwire_types::Method>::NAME
        };
        let kind = PendingKind::Subscription {
            op,
            uri: uri.to_owned(),
            subscribe,
        };
        let timeout = self.config.request_timeout;
        self.queue_request(
            &version,
            name,
            &params,
            Vec::new(),
            false,
            kind,
            timeout,
            now,
        )
        .map(drop)
        .map_err(RequestError::Encode)
    }

    /// Legacy, after `initialize`: subscribes this new session to every resource the caller
    /// subscribed to before (the server forgot them with the old session).
    pub(super) fn resubscribe(&mut self, now: Instant) {
        if self.config.resource_subscriptions.is_empty() {
            return;
        }
        if self
            .version_for(Some(Capability::ResourceSubscribe))
            .is_err()
        {
            tracing::warn!(
                "the server no longer declares resources.subscribe; its resource subscriptions \
                 are dropped"
            );
            self.config.resource_subscriptions.clear();
            return;
        }
        let uris: Vec<String> = self.config.resource_subscriptions.iter().cloned().collect();
        for uri in uris {
            if let Err(e) = self.send_subscription(&uri, true, None, now) {
                tracing::warn!(error = %e, "could not subscribe again to a resource");
                self.config.resource_subscriptions.remove(&uri);
            }
        }
    }

    /// Legacy: the answer to a `resources/subscribe` or `resources/unsubscribe`. A failed
    /// subscription is forgotten.
    pub(super) fn subscription_answered(
        &mut self,
        op: Option<OpId>,
        uri: String,
        subscribe: bool,
        result: Result<Box<RawValue>, RequestError>,
    ) {
        if subscribe && let Err(e) = &result {
            self.config.resource_subscriptions.remove(&uri);
            if op.is_none() {
                tracing::warn!(error = %e, "a resource subscription was refused by the new session; dropped");
            }
        }
        if let Some(op) = op {
            self.events.push_back(Event::Completed { op, result });
        }
    }
}

/// How a subscription change is asked again (once ready, or on the next connection).
pub(super) fn subscription_again(
    uri: String,
    subscribe: bool,
) -> impl FnOnce(&mut Session, OpId, Instant) -> Result<(), RequestError> + Send + 'static {
    move |s, op, now| s.change_subscription_as(op, &uri, subscribe, now)
}

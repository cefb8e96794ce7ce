//! The `2026-07-28` `subscriptions/listen` stream: opened when the server declares
//! `tools.listChanged`, its acknowledgement checked, notifications of other subscriptions told
//! apart, reopened with backoff when it drops.

use std::time::{Duration, Instant};

use toolwire_types::{JsonObject, Meta, RequestId};

use super::{PendingKind, Session};

/// The `subscriptions/listen` stream.
#[derive(Default)]
pub(super) struct Listen {
    /// The request that carries the stream, while it is open.
    pub(super) id: Option<RequestId>,
    /// Drops in a row (the backoff grows with them; an acknowledgement resets them).
    failures: u32,
    /// When to reopen it after a drop.
    pub(super) reopen_at: Option<Instant>,
    /// The server has no `subscriptions/listen`: never reopened.
    pub(super) disabled: bool,
}

impl Listen {
    /// Whether list changes can arrive on it now.
    pub(super) fn is_open(&self) -> bool {
        self.id.is_some() && !self.disabled
    }
}

/// How long the listen stream's request may stay open: for all practical purposes forever.
const LISTEN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

impl Session {
    /// Opens the `subscriptions/listen` stream (modern era, when the server declares
    /// `tools.listChanged`).
    pub(super) fn send_listen(&mut self, now: Instant) {
        let Some(version) = self.version().cloned() else {
            return;
        };
        if self.listen.disabled || self.listen.id.is_some() {
            return;
        }
        let mut params = toolwire_types::ListenParams {
            notifications: toolwire_types::SubscriptionFilter {
                tools_list_changed: Some(true),
                ..Default::default()
            },
            meta: None,
            extra: JsonObject::new(),
        };
        self.envelope(&version, &mut params);
        let headers = self.sep2243_headers(&version, "subscriptions/listen");
        match self.queue_request(
            &version,
            "subscriptions/listen",
            &params,
            headers,
            true,
            PendingKind::Listen,
            LISTEN_LIFETIME,
            now,
        ) {
            Ok(id) => self.listen.id = Some(id),
            Err(e) => tracing::warn!(error = %e, "could not open the listen stream"),
        }
    }

    /// The listen stream ended: reopen it after a backoff (1 s, doubling, at most 30 s).
    pub(super) fn listen_dropped(&mut self, now: Instant) {
        self.listen.id = None;
        if self.listen.disabled {
            return;
        }
        let exponent = self.listen.failures.min(5);
        self.listen.failures += 1;
        let delay = Duration::from_secs(1 << exponent).min(Duration::from_secs(30));
        tracing::debug!(?delay, "the listen stream ended; reopening it later");
        self.listen.reopen_at = Some(now + delay);
    }

    /// Whether a notification names a subscription that is not this session's listen stream
    /// (stdio carries every stream on one pipe).
    pub(super) fn foreign_subscription(&self, notification: &toolwire_types::Notification) -> bool {
        #[derive(serde::Deserialize)]
        struct WithMeta {
            #[serde(rename = "_meta", default)]
            meta: Option<Meta>,
        }
        let subscription = notification
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str::<WithMeta>(p.get()).ok())
            .and_then(|p| p.meta)
            .and_then(|m| m.subscription_id);
        match (subscription, &self.listen.id) {
            (Some(theirs), Some(ours)) => theirs != *ours,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The listen stream is up: check what the server agreed to send; after a reconnect,
    /// refresh (changes may have been missed while it was down).
    pub(super) fn acknowledged(
        &mut self,
        notification: &toolwire_types::Notification,
        now: Instant,
    ) {
        if self.foreign_subscription(notification) {
            return;
        }
        let params: Result<toolwire_types::SubscriptionsAcknowledgedParams, _> =
            notification.params();
        match params {
            Ok(p) if p.notifications.tools_list_changed != Some(true) => tracing::warn!(
                "the server did not agree to send tool-list changes on the listen stream; \
                 the tool list will refresh only on request"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "malformed subscription acknowledgement"),
        }
        if std::mem::take(&mut self.listen.failures) > 0 {
            self.list_changed(now);
        }
    }
}

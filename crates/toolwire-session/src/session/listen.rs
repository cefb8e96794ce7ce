//! The `2026-07-28` `subscriptions/listen` stream: opened for the list changes the server
//! declares and the resources the caller subscribed to, its acknowledgement checked,
//! notifications of other subscriptions told apart, replaced (new one first, old one closed
//! once the new one is acknowledged) when the subscriptions change, reopened with backoff
//! when it drops.

use std::time::Duration;

use web_time::Instant;

use serde_json::value::RawValue;
use toolwire_types::{ErrorObject, JsonObject, RequestId, SubscriptionFilter};
use toolwire_wire::{Backoff, Delays};

use super::{PendingKind, Session};
use crate::{Event, OpId, RequestError};

/// A change of the resource subscriptions waiting for the stream that carries it to be
/// acknowledged.
pub(super) enum Change {
    /// The caller subscribed to this URI.
    Subscribe(String),
    /// The caller unsubscribed from this URI.
    Unsubscribe,
}

/// How a dropped listen stream is reopened: 1 s, doubling, at most 30 s, without jitter (one
/// stream per session; the delays stay exact on a fake clock).
const LISTEN_BACKOFF: Backoff = Backoff {
    min: Duration::from_secs(1),
    max: Duration::from_secs(30),
    attempts: None,
    jitter: false,
};

/// The `subscriptions/listen` stream: which request carries it (and the one it replaces),
/// whether it was acknowledged, the changes waiting for that, and its reopening after drops.
#[derive(Default)]
pub(super) struct Listen {
    /// The request that carries the stream, while it is open.
    pub(super) id: Option<RequestId>,
    /// The current stream was acknowledged.
    acknowledged: bool,
    /// Whether the current stream asked for tool-list changes.
    tools: bool,
    /// The stream being replaced: kept open until its successor is acknowledged, so that no
    /// notification falls between the two.
    previous: Option<RequestId>,
    /// Subscription changes the current (or next) stream's acknowledgement answers, each
    /// with its deadline.
    waiting: Vec<(OpId, Change, Instant)>,
    /// The delays since the last acknowledgement ([`LISTEN_BACKOFF`]), once the stream
    /// dropped; an acknowledgement ends them.
    drops: Option<Delays>,
    /// When to reopen it after a drop.
    pub(super) reopen_at: Option<Instant>,
    /// The server has no `subscriptions/listen`: never reopened.
    pub(super) disabled: bool,
}

impl Listen {
    /// The subscription changes waiting for an acknowledgement, taken (their stream died).
    pub(super) fn take_waiting(&mut self) -> impl Iterator<Item = OpId> {
        std::mem::take(&mut self.waiting).into_iter().map(|w| w.0)
    }

    /// When the first waiting subscription change times out.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.waiting.iter().map(|w| w.2).min()
    }

    /// Whether tool-list changes can arrive on it now.
    pub(super) fn is_open(&self) -> bool {
        self.id.is_some() && self.tools && !self.disabled
    }

    /// Whether `id` is one of this session's listen streams (the current or the one being
    /// replaced).
    fn is_ours(&self, id: &RequestId) -> bool {
        self.id.as_ref() == Some(id) || self.previous.as_ref() == Some(id)
    }

    /// Stream `id` ended at `now` (`unknown`: refused because the server has no
    /// `subscriptions/listen`). The stream being replaced is just forgotten; the current one
    /// is reopened after the backoff, or never once the server said it has none.
    fn dropped(&mut self, id: &RequestId, unknown: bool, now: Instant) -> Dropped {
        if self.previous.as_ref() == Some(id) {
            self.previous = None;
            return Dropped::Replaced;
        }
        if self.id.as_ref() != Some(id) {
            return Dropped::NotOurs;
        }
        self.id = None;
        if unknown {
            self.disabled = true;
        }
        if self.disabled {
            return Dropped::Disabled;
        }
        let delay = self
            .drops
            .get_or_insert_with(|| LISTEN_BACKOFF.delays())
            .next()
            .unwrap_or(LISTEN_BACKOFF.max);
        let at = crate::later(now, delay);
        self.reopen_at = Some(at);
        Dropped::Reopen(at)
    }

    /// The current stream was acknowledged; whether it follows drops (changes may have been
    /// missed while it was down). The backoff starts again from its first delay.
    fn up(&mut self) -> bool {
        self.acknowledged = true;
        self.drops.take().is_some()
    }

    /// Stream `id` was asked for (`tools`: with tool-list changes); not acknowledged yet.
    fn opened(&mut self, id: RequestId, tools: bool) {
        self.id = Some(id);
        self.acknowledged = false;
        self.tools = tools;
    }

    /// The subscriptions changed and a stream with the new filter is about to be asked for.
    /// The current stream, if acknowledged and none is being replaced yet, becomes the one
    /// being replaced (it stays open until its successor is acknowledged, so no notification
    /// falls between the two); otherwise nothing relies on it and it is returned, to be closed
    /// now. A reopen waiting out its backoff is dropped: the new stream is asked for at once.
    fn replace(&mut self) -> Option<RequestId> {
        self.reopen_at = None;
        let current = self.id.take()?;
        if self.acknowledged && self.previous.is_none() {
            self.previous = Some(current);
            None
        } else {
            Some(current)
        }
    }

    /// Whether an acknowledgement naming `subscription` (or none) is the current stream's: the
    /// one of the stream being replaced, or of someone else's, changes nothing.
    fn acknowledges(&self, subscription: Option<&RequestId>) -> bool {
        self.id.is_some() && subscription.is_none_or(|s| self.id.as_ref() == Some(s))
    }

    /// Removes and returns the subscription changes whose deadline is `now` or past.
    fn expire(&mut self, now: Instant) -> Vec<OpId> {
        let (late, waiting) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|w| w.2 <= now);
        self.waiting = waiting;
        late.into_iter().map(|(op, _, _)| op).collect()
    }

    /// Answers every waiting subscription change: `refused` fails them all; else a
    /// subscription the acknowledgement (`acknowledged`, the URIs it names) does not list
    /// fails with [`RequestError::NotAcknowledged`]. Each failed subscription's URI comes back
    /// too, to be dropped from the set.
    fn settle(
        &mut self,
        refused: Option<&ErrorObject>,
        acknowledged: Option<&[String]>,
    ) -> Vec<Settled> {
        std::mem::take(&mut self.waiting)
            .into_iter()
            .map(|(op, change, _)| match (change, refused) {
                (Change::Subscribe(uri), Some(error)) => Settled {
                    op,
                    result: Err(RequestError::Server {
                        error: error.clone(),
                    }),
                    dropped: Some(uri),
                },
                (Change::Subscribe(uri), None)
                    if acknowledged.is_some_and(|a| !a.contains(&uri)) =>
                {
                    Settled {
                        op,
                        result: Err(RequestError::NotAcknowledged { uri: uri.clone() }),
                        dropped: Some(uri),
                    }
                }
                (Change::Subscribe(_) | Change::Unsubscribe, _) => Settled {
                    op,
                    result: Ok(empty()),
                    dropped: None,
                },
            })
            .collect()
    }
}

/// A subscription change answered ([`Listen::settle`]).
struct Settled {
    op: OpId,
    result: Result<Box<RawValue>, RequestError>,
    /// A subscription that did not take: its URI leaves the set.
    dropped: Option<String>,
}

/// What a stream's end means ([`Listen::dropped`]).
#[derive(Debug, PartialEq, Eq)]
enum Dropped {
    /// It was the stream being replaced: forgotten.
    Replaced,
    /// Not a stream of this session's.
    NotOurs,
    /// The server has no `subscriptions/listen`: never reopened.
    Disabled,
    /// Reopened at this time.
    Reopen(Instant),
}

/// How long the listen stream's request may stay open: for all practical purposes forever.
const LISTEN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// An empty JSON object: the result of a subscription change (or of a level change a lost
/// session hands on).
pub(super) fn empty() -> Box<RawValue> {
    serde_json::value::to_raw_value(&serde_json::Map::new())
        .unwrap_or_else(|_| RawValue::NULL.to_owned())
}

impl Session {
    /// Whether what the server announces can reach this session now. Legacy: once
    /// negotiated (notifications come on the connection itself; over Streamable HTTP the
    /// transport holds the GET stream). `2026-07-28`: once the `subscriptions/listen` stream
    /// is acknowledged, or at once when there is nothing to listen for or the server has no
    /// such stream (nothing more will come).
    pub fn is_listening(&self) -> bool {
        let Some(negotiated) = self.negotiated() else {
            return false;
        };
        if !negotiated.version.is_modern() || self.listen.disabled {
            return true;
        }
        match self.listen.id {
            Some(_) => self.listen.acknowledged,
            None => self.listen_filter().is_none(),
        }
    }

    /// What a listen stream would ask for now: the list changes the server declares (when
    /// [`SessionConfig::listen`](crate::SessionConfig::listen) is on) and the subscribed
    /// resources. `None`: nothing to listen for.
    fn listen_filter(&self) -> Option<SubscriptionFilter> {
        let caps = &self.negotiated()?.capabilities;
        let on = self.config.listen;
        let tools = on && caps.tools.as_ref().and_then(|t| t.list_changed) == Some(true);
        let prompts = on && caps.prompts.as_ref().and_then(|p| p.list_changed) == Some(true);
        let resources = on && caps.resources.as_ref().and_then(|r| r.list_changed) == Some(true);
        let subscribed = &self.config.resource_subscriptions;
        if !(tools || prompts || resources || !subscribed.is_empty()) {
            return None;
        }
        Some(SubscriptionFilter {
            tools_list_changed: tools.then_some(true),
            prompts_list_changed: prompts.then_some(true),
            resources_list_changed: resources.then_some(true),
            resource_subscriptions: (!subscribed.is_empty())
                .then(|| subscribed.iter().cloned().collect()),
            extra: JsonObject::new(),
        })
    }

    /// Opens the `subscriptions/listen` stream (modern era) if there is anything to listen
    /// for and none is open.
    pub(super) fn send_listen(&mut self, now: Instant) {
        let Some(version) = self.version().cloned() else {
            return;
        };
        if self.listen.disabled || self.listen.id.is_some() {
            return;
        }
        let Some(filter) = self.listen_filter() else {
            // Nothing to listen for (every subscription was dropped): nothing to wait for.
            self.answer_waiting(None);
            self.close_previous();
            return;
        };
        let tools = filter.tools_list_changed == Some(true);
        let mut params = toolwire_types::ListenParams {
            notifications: filter,
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
            Ok(id) => self.listen.opened(id, tools),
            Err(e) => tracing::warn!(error = %e, "could not open the listen stream"),
        }
    }

    /// The subscriptions changed: open a stream with the new filter; the old one stays open
    /// until the new one is acknowledged (one not yet acknowledged is closed at once:
    /// nothing relies on it). `op` completes with that acknowledgement.
    pub(super) fn relisten(&mut self, op: OpId, change: Change, now: Instant) {
        let deadline = crate::later(now, self.config.request_timeout);
        self.listen.waiting.push((op, change, deadline));
        if self.listen.disabled {
            let error = ErrorObject::new(
                toolwire_types::error::code::METHOD_NOT_FOUND,
                "the server has no subscriptions/listen",
            );
            return self.answer_waiting(Some(&error));
        }
        if let Some(unneeded) = self.listen.replace() {
            self.close_stream(unneeded);
        }
        self.send_listen(now);
    }

    /// Stops waiting for listen stream `id`: its pending entry is dropped and the driver told
    /// to close it ([`Event::CloseStream`]); over stdio (and legacy) the server learns it
    /// from `notifications/cancelled`.
    fn close_stream(&mut self, id: RequestId) {
        if self.pending.remove(&id).is_none() {
            return;
        }
        if let Some(version) = self.version().cloned() {
            self.send_cancelled(&version, &id, Some("subscriptions changed"));
        }
        self.events.push_back(Event::CloseStream(id));
    }

    /// Closes the stream a newer one replaced.
    fn close_previous(&mut self) {
        if let Some(previous) = self.listen.previous.take() {
            self.close_stream(previous);
        }
    }

    /// Answers every waiting subscription change: `refused` fails them all (and drops the URIs
    /// they subscribed to); else a subscription the acknowledgement (`acknowledged`, the URIs
    /// it names) does not list fails with [`RequestError::NotAcknowledged`] and is dropped.
    fn answer_waiting(&mut self, refused: Option<&ErrorObject>) {
        self.answer_waiting_with(refused, None);
    }

    fn answer_waiting_with(
        &mut self,
        refused: Option<&ErrorObject>,
        acknowledged: Option<&[String]>,
    ) {
        for settled in self.listen.settle(refused, acknowledged) {
            if let Some(uri) = settled.dropped {
                self.config.resource_subscriptions.remove(&uri);
            }
            self.events.push_back(Event::Completed {
                op: settled.op,
                result: settled.result,
            });
        }
    }

    /// Fails the subscription changes whose acknowledgement did not come in time (a
    /// subscription stays in the set: the stream that asks for it may still be acknowledged).
    pub(super) fn expire_waiting(&mut self, now: Instant) {
        let timeout = self.config.request_timeout;
        for op in self.listen.expire(now) {
            self.events.push_back(Event::Completed {
                op,
                result: Err(RequestError::Timeout(timeout)),
            });
        }
    }

    /// A listen stream ended (answered, refused, timed out or dropped by the transport). The
    /// stream being replaced is just forgotten; the current one is reopened after a backoff
    /// (1 s, doubling, at most 30 s), or never if the server has no `subscriptions/listen`
    /// (`refused` with `-32601`). A refusal fails the subscription changes it carried.
    pub(super) fn listen_dropped(
        &mut self,
        id: &RequestId,
        refused: Option<&ErrorObject>,
        now: Instant,
    ) {
        let unknown =
            refused.is_some_and(|e| e.code == toolwire_types::error::code::METHOD_NOT_FOUND);
        let dropped = self.listen.dropped(id, unknown, now);
        if matches!(dropped, Dropped::Replaced | Dropped::NotOurs) {
            return;
        }
        if let Some(error) = refused {
            self.answer_waiting(Some(error));
        }
        match dropped {
            Dropped::Disabled => {
                tracing::debug!("the server has no subscriptions/listen; not reopening");
                self.close_previous();
            }
            Dropped::Reopen(at) => {
                tracing::debug!(in_ = ?at.saturating_duration_since(now), "the listen stream ended; reopening it later");
            }
            Dropped::Replaced | Dropped::NotOurs => {}
        }
    }

    /// Whether a notification names a subscription that is not one of this session's listen
    /// streams (stdio carries every stream on one pipe).
    pub(super) fn foreign_subscription(&self, notification: &toolwire_types::Notification) -> bool {
        match notification.subscription_id() {
            Some(theirs) => !self.listen.is_ours(&theirs),
            None => false,
        }
    }

    /// A listen stream is up: check what the server agreed to send, answer the subscription
    /// changes waiting for it and close the stream it replaces; after a reconnect, refresh
    /// (changes may have been missed while it was down).
    pub(super) fn acknowledged(
        &mut self,
        notification: &toolwire_types::Notification,
        now: Instant,
    ) {
        if !self
            .listen
            .acknowledges(notification.subscription_id().as_ref())
        {
            return;
        }
        let after_drops = self.listen.up();
        let params: Result<toolwire_types::SubscriptionsAcknowledgedParams, _> =
            notification.params();
        let agreed = match params {
            Ok(p) => p.notifications,
            Err(e) => {
                tracing::warn!(error = %e, "malformed subscription acknowledgement");
                SubscriptionFilter::default()
            }
        };
        if self.listen.tools && agreed.tools_list_changed != Some(true) {
            tracing::warn!(
                "the server did not agree to send tool-list changes on the listen stream; \
                 the tool list will refresh only on request"
            );
        }
        let resources = agreed.resource_subscriptions.unwrap_or_default();
        self.answer_waiting_with(None, Some(&resources));
        self.close_previous();
        if after_drops {
            self.list_changed(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(listen: &mut Listen, id: i64) -> RequestId {
        let id = RequestId::Number(id);
        listen.id = Some(id.clone());
        id
    }

    #[test]
    fn drops_reopen_after_a_doubling_delay_that_an_acknowledgement_resets() {
        let t0 = Instant::now();
        let mut listen = Listen::default();
        let secs = |d: Dropped| match d {
            Dropped::Reopen(at) => at.duration_since(t0).as_secs(),
            other => panic!("reopened, not {other:?}"),
        };
        let mut delays = Vec::new();
        for n in 1..=7 {
            let id = open(&mut listen, n);
            delays.push(secs(listen.dropped(&id, false, t0)));
        }
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(listen.reopen_at, Some(t0 + Duration::from_secs(30)));
        open(&mut listen, 8);
        assert!(
            listen.up(),
            "it follows drops: changes may have been missed"
        );
        assert!(!listen.up(), "only once");
        let id = open(&mut listen, 9);
        assert_eq!(
            secs(listen.dropped(&id, false, t0)),
            1,
            "the backoff starts again"
        );
    }

    #[test]
    fn a_replaced_stream_stays_open_only_when_acknowledged_and_alone() {
        let mut listen = Listen::default();
        assert_eq!(listen.replace(), None, "nothing open, nothing to close");
        // Not acknowledged yet: nothing relies on it, so it closes at once.
        listen.opened(RequestId::Number(1), true);
        assert_eq!(listen.replace(), Some(RequestId::Number(1)));
        // Acknowledged: kept as the one being replaced until its successor is acknowledged.
        listen.opened(RequestId::Number(2), true);
        listen.up();
        listen.reopen_at = Some(Instant::now());
        assert_eq!(listen.replace(), None);
        assert_eq!(listen.previous, Some(RequestId::Number(2)));
        assert_eq!(
            listen.reopen_at, None,
            "the new stream is asked for at once"
        );
        // A second change before that: the unacknowledged middle one closes.
        listen.opened(RequestId::Number(3), true);
        listen.up();
        assert_eq!(listen.replace(), Some(RequestId::Number(3)));
        assert_eq!(listen.previous, Some(RequestId::Number(2)));
    }

    #[test]
    fn only_the_current_streams_acknowledgement_counts() {
        let mut listen = Listen::default();
        assert!(!listen.acknowledges(None), "no stream open");
        listen.opened(RequestId::Number(2), false);
        listen.previous = Some(RequestId::Number(1));
        assert!(listen.acknowledges(None));
        assert!(listen.acknowledges(Some(&RequestId::Number(2))));
        assert!(!listen.acknowledges(Some(&RequestId::Number(1))));
        assert!(!listen.acknowledges(Some(&RequestId::Number(7))));
    }

    #[test]
    fn waiting_changes_expire_at_their_deadline_and_settle_by_the_acknowledgement() {
        let t0 = Instant::now();
        let mut listen = Listen::default();
        let op = OpId::for_test;
        let sub = |uri: &str| Change::Subscribe(uri.to_owned());
        listen
            .waiting
            .push((op(1), sub("a"), t0 + Duration::from_secs(1)));
        listen
            .waiting
            .push((op(2), sub("b"), t0 + Duration::from_secs(5)));
        listen
            .waiting
            .push((op(3), Change::Unsubscribe, t0 + Duration::from_secs(9)));
        listen
            .waiting
            .push((op(4), sub("c"), t0 + Duration::from_secs(9)));
        assert_eq!(listen.expire(t0), vec![]);
        assert_eq!(
            listen.expire(t0 + Duration::from_secs(5)),
            vec![op(1), op(2)]
        );
        assert_eq!(listen.next_deadline(), Some(t0 + Duration::from_secs(9)));
        // Acknowledged without `c`: that subscription fails and leaves the set.
        let settled = listen.settle(None, Some(&["x".to_owned()]));
        assert!(listen.waiting.is_empty());
        let summary: Vec<(OpId, bool, Option<String>)> = settled
            .into_iter()
            .map(|s| (s.op, s.result.is_ok(), s.dropped))
            .collect();
        assert_eq!(
            summary,
            vec![(op(3), true, None), (op(4), false, Some("c".to_owned()))]
        );
        // Refused: every subscription fails with the server's error.
        listen.waiting.push((op(5), sub("d"), t0));
        let error = ErrorObject::new(-32000, "no");
        let settled = listen.settle(Some(&error), None);
        assert!(matches!(
            &settled[..],
            [Settled { result: Err(RequestError::Server { error: e }), dropped: Some(uri), .. }]
                if e.message == "no" && uri == "d"
        ));
    }

    #[test]
    fn a_replaced_or_foreign_stream_changes_nothing_and_an_unknown_method_disables_it() {
        let t0 = Instant::now();
        let mut listen = Listen::default();
        let old = open(&mut listen, 1);
        listen.previous = Some(old.clone());
        let current = open(&mut listen, 2);
        assert_eq!(listen.dropped(&old, false, t0), Dropped::Replaced);
        assert_eq!(listen.previous, None);
        assert_eq!(
            listen.dropped(&RequestId::Number(99), false, t0),
            Dropped::NotOurs
        );
        assert_eq!(listen.id.as_ref(), Some(&current));
        assert_eq!(listen.dropped(&current, true, t0), Dropped::Disabled);
        assert!(listen.disabled && listen.reopen_at.is_none());
        let again = open(&mut listen, 3);
        assert_eq!(
            listen.dropped(&again, false, t0),
            Dropped::Disabled,
            "never reopened"
        );
    }
}

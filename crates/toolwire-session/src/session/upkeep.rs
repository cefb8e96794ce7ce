//! What the session keeps up by itself in the legacy era, where the server keeps state for
//! the connection: the log level the caller asked for (`logging/setLevel`, sent to every
//! new session before it reports ready, and again whenever it changes), and the keep-alive
//! `ping` after a quiet spell ([`SessionConfig::keep_alive`](crate::SessionConfig::keep_alive)).
//! In the `2026-07-28` era neither exists: the level rides on every request's `_meta`, and
//! there is no `ping`.

use web_time::Instant;

use serde_json::value::RawValue;
use toolwire_types::{JsonObject, LoggingLevel, MetaOnlyParams, SetLevelParams, methods::method};

use super::{PendingKind, Session};
use crate::{Event, Negotiated, OpId, RequestError};

/// The session's own upkeep state.
#[derive(Debug, Default)]
pub(super) struct Upkeep {
    /// When a request last went out or anything came in.
    last_traffic: Option<Instant>,
    /// A keep-alive `ping` is in flight.
    pinging: bool,
    /// Negotiation finished, and its [`Event::Ready`] waits for the log level to be in force
    /// (so that the first call is already logged at the level asked).
    held: Option<Box<Negotiated>>,
    /// The level this server last accepted.
    in_force: Option<LoggingLevel>,
}

impl Upkeep {
    /// Something went out or came in at `now`.
    pub(super) fn traffic(&mut self, now: Instant) {
        self.last_traffic = Some(now);
    }
}

impl Session {
    /// Legacy negotiation finished: ready now, or once the `logging/setLevel` for the level
    /// the caller asked (a server that declares `logging` forgot it with its old session)
    /// is answered, whatever the answer.
    pub(super) fn ready_legacy(&mut self, negotiated: Negotiated, now: Instant) {
        let logs = negotiated.capabilities.logging.is_some();
        match self.config.log_level {
            Some(level) if logs => match self.send_level(level, None, now) {
                Ok(_) => self.upkeep.held = Some(Box::new(negotiated)),
                Err(e) => {
                    tracing::debug!(error = %e, "could not send logging/setLevel");
                    self.announce_ready(Box::new(negotiated), now);
                }
            },
            _ => self.announce_ready(Box::new(negotiated), now),
        }
    }

    /// Changes the log level asked of the server, for this session and the ones after it
    /// ([`Session::carry_into`]). Legacy, once ready: `logging/setLevel` is sent, and its
    /// operation completes when the server has it (`Ok(Some(op))`). Before the session is
    /// ready the change is held like any request, and completes once it is in force. In the
    /// `2026-07-28` era the envelope carries it from the next request on: there is nothing
    /// to wait for (`Ok(None)`).
    pub fn change_log_level(
        &mut self,
        level: LoggingLevel,
        now: Instant,
    ) -> Result<Option<OpId>, RequestError> {
        self.set_log_level(Some(level));
        if !self.is_ready() {
            let again = super::Again::new(move |s, op, now| s.level_as(op, level, now));
            let patience = self.config.request_timeout;
            return self
                .hold(super::Ask::Request(again), patience, now)
                .map(Some);
        }
        match self.negotiated() {
            Some(n) if !n.version.is_modern() => {
                let op = self.allocate_op();
                self.send_level(level, Some(op), now).map(|()| Some(op))
            }
            _ => Ok(None),
        }
    }

    /// A held level change, once ready, as operation `op`: sent (legacy), or in force
    /// already (the modern envelope, or the handshake set this level).
    fn level_as(
        &mut self,
        op: OpId,
        level: LoggingLevel,
        now: Instant,
    ) -> Result<(), RequestError> {
        if self.negotiation.is_modern() || self.upkeep.in_force == Some(level) {
            self.events.push_back(Event::Completed {
                op,
                result: Ok(super::listen::empty()),
            });
            return Ok(());
        }
        self.send_level(level, Some(op), now)
    }

    fn send_level(
        &mut self,
        level: LoggingLevel,
        op: Option<OpId>,
        now: Instant,
    ) -> Result<(), RequestError> {
        let params = SetLevelParams {
            level,
            meta: None,
            extra: JsonObject::new(),
        };
        self.request_as::<method::SetLevel>(params, now, PendingKind::LogLevel { op, level })
    }

    /// A `logging/setLevel` ended: its caller's operation completes, and a readiness held
    /// for it is reported.
    pub(super) fn level_answered(
        &mut self,
        op: Option<OpId>,
        level: LoggingLevel,
        result: Result<Box<RawValue>, RequestError>,
        now: Instant,
    ) {
        match &result {
            Ok(_) => self.upkeep.in_force = Some(level),
            Err(e) => {
                self.upkeep.in_force = None;
                tracing::debug!(error = %e, "logging/setLevel failed");
            }
        }
        if let Some(negotiated) = self.upkeep.held.take() {
            self.announce_ready(negotiated, now);
        }
        if let Some(op) = op {
            self.events.push_back(Event::Completed { op, result });
        }
    }

    /// When the keep-alive `ping` is due: legacy, ready, no ping in flight, and the
    /// connection quiet for [`SessionConfig::keep_alive`](crate::SessionConfig::keep_alive).
    pub(super) fn keep_alive_at(&self) -> Option<Instant> {
        let interval = self.config.keep_alive?;
        let negotiated = self.negotiated()?;
        if negotiated.version.is_modern() || self.upkeep.pinging || self.upkeep.held.is_some() {
            return None;
        }
        self.upkeep
            .last_traffic
            .map(|at| crate::later(at, interval))
    }

    /// Sends the keep-alive `ping` if it is due at `now`. Nobody waits for it; one that gets
    /// no answer is logged, not fatal (a server busy with long calls may answer late).
    pub(super) fn keep_alive(&mut self, now: Instant) {
        if self.keep_alive_at().is_none_or(|at| at > now) {
            return;
        }
        tracing::trace!("keep-alive ping");
        let sent =
            self.request_as::<method::Ping>(MetaOnlyParams::default(), now, PendingKind::KeepAlive);
        match sent {
            Ok(()) => self.upkeep.pinging = true,
            Err(e) => tracing::debug!(error = %e, "could not send the keep-alive ping"),
        }
    }

    /// The keep-alive `ping` ended.
    pub(super) fn ping_answered(&mut self, result: Result<(), RequestError>) {
        self.upkeep.pinging = false;
        if let Err(e) = result {
            tracing::warn!(error = %e, "the keep-alive ping got no answer");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};
    use toolwire_types::Implementation;

    use super::super::legacy_peer::{answer, legacy, negotiate, sent};
    use super::*;
    use crate::SessionConfig;

    fn ready(s: &mut Session) -> bool {
        std::iter::from_fn(|| s.poll_event()).any(|e| matches!(e, Event::Ready(_)))
    }

    /// A session asked for `debug`, negotiated with a server that declares `logging`, and
    /// the `logging/setLevel` it then sent, before any `Ready`.
    fn level_sent(t0: Instant) -> (Session, Value) {
        let mut s = legacy(|c| c.with_log_level(Some(LoggingLevel::Debug)));
        negotiate(&mut s, json!({"logging": {}}), t0);
        let set = sent(&mut s).unwrap_or_default();
        assert_eq!(set["method"], "logging/setLevel");
        assert_eq!(set["params"]["level"], "debug");
        assert!(!ready(&mut s), "ready before the level is in force");
        (s, set)
    }

    #[test]
    fn a_new_legacy_session_is_ready_only_once_the_asked_level_is_in_force() {
        let t0 = Instant::now();
        let (mut s, set) = level_sent(t0);
        answer(&mut s, &set["id"], json!({}), t0);
        assert!(ready(&mut s));
    }

    #[test]
    fn a_refused_level_still_ends_in_ready() {
        let t0 = Instant::now();
        let (mut s, set) = level_sent(t0);
        let body =
            json!({"jsonrpc": "2.0", "id": set["id"], "error": {"code": -32601, "message": "no"}});
        s.handle_inbound(body.to_string().as_bytes(), t0);
        assert!(ready(&mut s));
    }

    #[test]
    fn no_level_is_sent_to_a_server_without_logging_or_when_none_was_asked() {
        let t0 = Instant::now();
        let mut s = legacy(|c| c.with_log_level(Some(LoggingLevel::Debug)));
        negotiate(&mut s, json!({}), t0);
        assert!(ready(&mut s));
        assert!(sent(&mut s).is_none());
        let mut s = legacy(|c| c);
        negotiate(&mut s, json!({"logging": {}}), t0);
        assert!(ready(&mut s));
        assert!(sent(&mut s).is_none());
    }

    #[test]
    fn a_level_changed_once_ready_is_sent_and_its_operation_completes_with_the_answer() {
        let t0 = Instant::now();
        let mut s = legacy(|c| c);
        negotiate(&mut s, json!({"logging": {}}), t0);
        assert!(ready(&mut s));
        let op = s.change_log_level(LoggingLevel::Error, t0).ok().flatten();
        let set = sent(&mut s).unwrap_or_default();
        assert_eq!(set["params"]["level"], "error");
        answer(&mut s, &set["id"], json!({}), t0);
        let completed = std::iter::from_fn(|| s.poll_event())
            .any(|e| matches!(e, Event::Completed { op: done, result: Ok(_) } if Some(done) == op));
        assert!(op.is_some() && completed);
        let mut next = SessionConfig::new(Implementation::new("t", "0"));
        s.carry_into(&mut next);
        assert_eq!(next.log_level, Some(LoggingLevel::Error));
    }

    #[test]
    fn the_keep_alive_ping_goes_after_a_quiet_spell_and_traffic_postpones_it() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(30);
        let mut s = legacy(|c| c.with_keep_alive(Some(interval)));
        negotiate(&mut s, json!({}), t0);
        assert!(ready(&mut s));
        assert_eq!(s.poll_timeout(), Some(t0 + interval));
        // Something arrives at t0 + 20 s: the ping moves to t0 + 50 s.
        let t20 = t0 + Duration::from_secs(20);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}});
        s.handle_inbound(note.to_string().as_bytes(), t20);
        s.handle_timeout(t0 + interval);
        assert!(
            sent(&mut s).is_none(),
            "pinged although the connection was not quiet"
        );
        assert_eq!(s.poll_timeout(), Some(t20 + interval));
        s.handle_timeout(t20 + interval);
        let ping = sent(&mut s).unwrap_or_default();
        assert_eq!(ping["method"], "ping");
        // One at a time; its answer is nobody's operation.
        s.handle_timeout(t20 + interval + interval);
        assert!(
            sent(&mut s).is_none(),
            "a second ping while one is in flight"
        );
        answer(&mut s, &ping["id"], json!({}), t20 + interval);
        assert!(
            s.poll_event()
                .is_none_or(|e| !matches!(e, Event::Completed { .. }))
        );
    }

    #[test]
    fn an_unanswered_ping_does_not_end_the_session() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(30);
        let mut s = legacy(|c| {
            c.with_keep_alive(Some(interval))
                .with_timeouts(Duration::from_secs(10), Duration::from_secs(5))
        });
        negotiate(&mut s, json!({}), t0);
        assert!(ready(&mut s));
        s.handle_timeout(t0 + interval);
        assert_eq!(sent(&mut s).unwrap_or_default()["method"], "ping");
        s.handle_timeout(t0 + interval + Duration::from_secs(10));
        assert!(std::iter::from_fn(|| s.poll_event()).all(|e| !matches!(e, Event::Failed(_))));
        assert!(s.negotiated().is_some());
        // The next one is due a quiet spell after the failed one was sent.
        assert_eq!(s.poll_timeout(), Some(t0 + interval + interval));
    }

    #[test]
    fn there_is_no_keep_alive_without_an_interval() {
        let t0 = Instant::now();
        let mut s = legacy(|c| c);
        negotiate(&mut s, json!({}), t0);
        assert!(ready(&mut s));
        assert_eq!(s.poll_timeout(), None);
    }
}

//! Negotiation: the `server/discover` probe (modern) and its fallback to the `initialize`
//! handshake (legacy). [`Negotiation`] is the machine (its [`Phase`], and whether a saved
//! verdict is still unconfirmed); [`after_refusal`] decides what follows a refused probe; the
//! `Session` methods below send what they decide.

use web_time::Instant;

use serde_json::value::RawValue;
use toolwire_types::methods::method;
use toolwire_types::{
    DecodeError, DiscoverResult, ErrorObject, InitializeParams, InitializeResult, JsonObject,
    MetaOnlyParams, Outcome, ProtocolVersion, RequestId, RequestMethod, encode_notification,
};
use toolwire_wire::{MessageKind, RetryClass, SessionStep};

use super::{Pending, PendingKind, Session, outbound};
use crate::{Event, Negotiated, ProtocolMode, SessionError};

pub(super) enum Phase {
    Created,
    Probing {
        version: ProtocolVersion,
        retried: bool,
    },
    Initializing,
    /// `initialize` was refused while a `server/discover` that timed out may still be
    /// answered: that answer decides, and without it this refusal is the verdict.
    AwaitingLateProbe(Box<ErrorObject>),
    Ready(Box<Negotiated>),
    Failed,
}

/// Where negotiation is, and whether a verdict adopted from [`SessionConfig::prior`] still
/// waits for an answer to confirm it.
///
/// [`SessionConfig::prior`]: crate::SessionConfig::prior
pub(super) struct Negotiation {
    phase: Phase,
    unconfirmed: bool,
}

impl Default for Negotiation {
    fn default() -> Self {
        Self {
            phase: Phase::Created,
            unconfirmed: false,
        }
    }
}

impl Negotiation {
    /// What was agreed, once ready.
    pub(super) fn negotiated(&self) -> Option<&Negotiated> {
        match &self.phase {
            Phase::Ready(n) => Some(n),
            _ => None,
        }
    }

    /// Nothing sent yet (or negotiating again from the start).
    pub(super) fn is_created(&self) -> bool {
        matches!(self.phase, Phase::Created)
    }

    /// The `server/discover` probe is in flight.
    pub(super) fn is_probing(&self) -> bool {
        matches!(self.phase, Phase::Probing { .. })
    }

    /// Ready in the `2026-07-28` era.
    pub(super) fn is_modern(&self) -> bool {
        self.negotiated().is_some_and(|n| n.version.is_modern())
    }

    /// A probe at `version` is in flight (`retried`: after a `-32022` named it).
    pub(super) fn probing(&mut self, version: ProtocolVersion, retried: bool) {
        self.phase = Phase::Probing { version, retried };
    }

    /// `initialize` is in flight.
    pub(super) fn initializing(&mut self) {
        self.phase = Phase::Initializing;
    }

    /// `initialize` is in flight, or was refused while a late probe may still be answered.
    pub(super) fn is_initializing(&self) -> bool {
        matches!(
            self.phase,
            Phase::Initializing | Phase::AwaitingLateProbe(_)
        )
    }

    /// `initialize` was refused with `refusal` while a late probe may still be answered.
    pub(super) fn awaiting_late_probe(&mut self, refusal: ErrorObject) {
        self.phase = Phase::AwaitingLateProbe(Box::new(refusal));
    }

    /// The refusal of `initialize` that waits for a late probe, taken (the phase stays).
    pub(super) fn take_refusal(&mut self) -> Option<ErrorObject> {
        match std::mem::replace(&mut self.phase, Phase::Initializing) {
            Phase::AwaitingLateProbe(refusal) => Some(*refusal),
            other => {
                self.phase = other;
                None
            }
        }
    }

    /// Agreed on `negotiated`.
    pub(super) fn ready(&mut self, negotiated: Negotiated) {
        self.phase = Phase::Ready(Box::new(negotiated));
    }

    /// Failed for good.
    pub(super) fn failed(&mut self) {
        self.phase = Phase::Failed;
    }

    /// Whether negotiation failed for good.
    pub(super) fn has_failed(&self) -> bool {
        matches!(self.phase, Phase::Failed)
    }

    /// Back to the start (a saved verdict that no longer holds): confirmed or not, it is gone.
    pub(super) fn restart(&mut self) {
        self.phase = Phase::Created;
        self.unconfirmed = false;
    }

    /// A saved verdict is adopted: it holds until an answer says otherwise.
    pub(super) fn adopted(&mut self) {
        self.unconfirmed = true;
    }

    /// Whether the verdict in force is a saved one no answer has confirmed yet.
    pub(super) fn is_unconfirmed(&self) -> bool {
        self.unconfirmed
    }

    /// An answer succeeded: a saved verdict is confirmed.
    pub(super) fn confirmed(&mut self) {
        self.unconfirmed = false;
    }

    /// The probe was answered: what it was (its version, whether it was the retry), and the
    /// machine back at the start until the answer decides; `None` if no probe was in flight.
    pub(super) fn probe_answered(&mut self) -> Option<(ProtocolVersion, bool)> {
        match std::mem::replace(&mut self.phase, Phase::Created) {
            Phase::Probing { version, retried } => Some((version, retried)),
            other => {
                self.phase = other;
                None
            }
        }
    }
}

/// What follows a `server/discover` refused with a JSON-RPC error.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AfterRefusal {
    /// Probe again at this version (once: the server listed it in `-32022`).
    Probe(ProtocolVersion),
    /// Fall back to `initialize` at this version.
    Initialize(ProtocolVersion),
    /// Fail: falling back would not help, or the mode forbids it.
    Fail,
}

/// The rule after a refused probe: `-32022` names supported versions (probe again once at the
/// newest modern one, else `initialize` at the newest legacy one in [`ProtocolMode::Auto`]);
/// another error that only a modern server sends fails (a fallback would not help); any other
/// error falls back to `initialize` at the newest legacy version, in `Auto` only.
pub(super) fn after_refusal(error: &ErrorObject, retried: bool, auto: bool) -> AfterRefusal {
    if error.code == toolwire_types::error::code::UNSUPPORTED_PROTOCOL_VERSION {
        let supported: Vec<ProtocolVersion> = error
            .unsupported_version()
            .map(|d| {
                d.supported
                    .into_iter()
                    .filter_map(|v| ProtocolVersion::new(v).ok())
                    .collect()
            })
            .unwrap_or_default();
        let newest = |modern: bool| {
            supported
                .iter()
                .filter(|v| v.is_supported() && v.is_modern() == modern)
                .max()
                .cloned()
        };
        return match (newest(true), newest(false)) {
            // Once, even with the version just refused: the server listed it.
            (Some(v), _) if !retried => AfterRefusal::Probe(v),
            (_, Some(v)) if auto => AfterRefusal::Initialize(v),
            _ => AfterRefusal::Fail,
        };
    }
    if error.is_modern_era_evidence() || !auto {
        return AfterRefusal::Fail;
    }
    AfterRefusal::Initialize(ProtocolVersion::LATEST_LEGACY)
}

impl Session {
    /// Adopts what an earlier negotiation settled on ([`SessionConfig::prior`]): a modern
    /// verdict is ready at once, a legacy one goes straight to `initialize` at its version.
    /// Either stays unconfirmed until an answer succeeds.
    ///
    /// [`SessionConfig::prior`]: crate::SessionConfig::prior
    pub(super) fn adopt(&mut self, prior: Negotiated, now: Instant) {
        self.negotiation.adopted();
        if prior.version.is_modern() {
            tracing::debug!(version = %prior.version, "adopting the prior negotiation");
            self.negotiation.ready(prior.clone());
            self.announce_ready(Box::new(prior), now);
            self.send_listen(now);
        } else {
            self.send_initialize(prior.version, now);
        }
    }

    /// The server refused the modern version adopted from a prior negotiation: probe again.
    /// The request that showed it fails with its own error.
    pub(super) fn prior_refused(&mut self, now: Instant) {
        if !self.negotiation.is_modern() {
            return;
        }
        self.negotiation.confirmed();
        tracing::info!("the server refused the prior negotiation's version; negotiating again");
        if let Some(listen) = self.listen.id.take() {
            self.pending.remove(&listen);
            self.events.push_back(Event::CloseStream(listen));
        }
        self.listen.reopen_at = None;
        self.negotiation.restart();
        self.ready = false;
        self.events.push_back(Event::Renegotiating);
        self.send_probe(ProtocolVersion::LATEST, false, now);
    }

    pub(super) fn send_probe(&mut self, version: ProtocolVersion, retried: bool, now: Instant) {
        let mut params = MetaOnlyParams::default();
        self.envelope(&version, &mut params);
        let headers =
            self.sep2243_headers(&version, <method::Discover as toolwire_types::Method>::NAME);
        // A pinned modern version has no fallback to wait less for: the whole deadline.
        let timeout = if self.config.mode == ProtocolMode::Auto {
            self.config.probe_timeout
        } else {
            self.config.request_timeout
        };
        match self.queue_request(
            &version,
            "server/discover",
            &params,
            headers,
            true,
            PendingKind::Probe,
            timeout,
            now,
        ) {
            Ok(_) => self.negotiation.probing(version, retried),
            Err(cause) => self.fail(SessionError::Encode {
                method: "server/discover",
                cause,
            }),
        }
    }

    pub(super) fn send_initialize(&mut self, version: ProtocolVersion, now: Instant) {
        let mut params = InitializeParams {
            protocol_version: version.clone(),
            capabilities: self.config.capabilities.clone(),
            client_info: self.config.client_info.clone(),
            meta: None,
            extra: JsonObject::new(),
        };
        // The legacy version: only the trace context.
        self.envelope(&version, &mut params);
        let timeout = self.config.request_timeout;
        // The version header goes only on requests *after* initialize.
        let queued = self.queue_request(
            &ProtocolVersion::V2024_11_05,
            "initialize",
            &params,
            Vec::new(),
            false,
            PendingKind::Initialize,
            timeout,
            now,
        );
        match queued {
            Ok(_) => self.negotiation.initializing(),
            Err(cause) => self.fail(SessionError::Encode {
                method: "initialize",
                cause,
            }),
        }
    }

    pub(super) fn probe_answered(
        &mut self,
        payload: Result<Box<RawValue>, ErrorObject>,
        now: Instant,
    ) {
        let Some((version, retried)) = self.negotiation.probe_answered() else {
            return;
        };
        let auto = self.config.mode == ProtocolMode::Auto;
        match payload {
            Ok(raw) => match method::Discover::decode_result(&raw) {
                Ok(Outcome::Complete(result)) => self.ready_modern(version, result, now),
                Ok(Outcome::InputRequired(_)) => self.fail(SessionError::Malformed {
                    method: "server/discover",
                    cause: DecodeError::UnexpectedInputRequired {
                        method: "server/discover".into(),
                    },
                }),
                Err(cause) => self.fail(SessionError::Malformed {
                    method: "server/discover",
                    cause,
                }),
            },
            Err(error) => match after_refusal(&error, retried, auto) {
                AfterRefusal::Probe(v) => self.send_probe(v, true, now),
                AfterRefusal::Initialize(v) => {
                    tracing::debug!(
                        code = error.code,
                        %v,
                        "server/discover refused; falling back to initialize"
                    );
                    self.send_initialize(v, now);
                }
                AfterRefusal::Fail => self.fail(SessionError::Refused {
                    method: "server/discover",
                    error,
                }),
            },
        }
    }

    /// No answer to `server/discover` within the probe timeout: `initialize` goes out. Over
    /// stdio the probe stays answerable until `initialize`'s own deadline: a server that is
    /// only slow to start reads its input in order, so a modern one answers the probe first
    /// (and refuses `initialize`), and that answer settles the era. Over HTTP each request
    /// has its own exchange and the transport follows `initialize`'s, so the probe ends here.
    pub(super) fn probe_timed_out(&mut self, id: &RequestId, probe: Pending, now: Instant) {
        let Some((version, _)) = self.negotiation.probe_answered() else {
            return;
        };
        tracing::debug!("no answer to server/discover in time; sending initialize");
        self.send_initialize(ProtocolVersion::LATEST_LEGACY, now);
        if self.carries_headers || !self.negotiation.is_initializing() {
            return;
        }
        let timeout = self.config.request_timeout;
        let deadline = crate::later(now, timeout);
        self.pending.insert(
            id.clone(),
            Pending {
                kind: PendingKind::LateProbe { version },
                deadline,
                timeout,
                hard_deadline: deadline,
                progress_token: None,
                retry_safe: probe.retry_safe,
                trace: None,
            },
        );
    }

    /// The probe that timed out was answered after all. A modern answer while `initialize`
    /// still waits (or was refused) settles the era: `initialize` is forgotten and its
    /// answer dropped. Anything else leaves `initialize` to decide, or fails with its refusal.
    pub(super) fn late_probe_answered(
        &mut self,
        version: ProtocolVersion,
        payload: Result<Box<RawValue>, ErrorObject>,
        now: Instant,
    ) {
        if !self.negotiation.is_initializing() {
            tracing::debug!("a late answer to server/discover after the era was settled; dropped");
            return;
        }
        if let Ok(raw) = &payload
            && let Ok(Outcome::Complete(result)) = method::Discover::decode_result(raw)
        {
            tracing::info!(
                %version,
                "server/discover answered after the probe timeout: the server speaks the 2026-07-28 era"
            );
            self.pending.remove_initialize();
            return self.ready_modern(version, result, now);
        }
        self.late_probe_expired();
    }

    /// The late probe ended without a modern answer: a refusal of `initialize` that waited
    /// for it is the verdict; otherwise `initialize` still decides.
    pub(super) fn late_probe_expired(&mut self) {
        if let Some(error) = self.negotiation.take_refusal() {
            self.fail(SessionError::Refused {
                method: "initialize",
                error,
            });
        }
    }

    pub(super) fn ready_modern(
        &mut self,
        version: ProtocolVersion,
        result: DiscoverResult,
        now: Instant,
    ) {
        let server_info = result.server_info().cloned();
        let negotiated = Negotiated {
            version,
            server_info,
            capabilities: result.capabilities,
            instructions: result.instructions,
        };
        self.negotiation.ready(negotiated.clone());
        self.announce_ready(Box::new(negotiated), now);
        // For the list changes the server declares and the resources subscribed to (a
        // session after a reconnect keeps the subscriptions of the one before).
        self.send_listen(now);
    }

    pub(super) fn initialize_answered(
        &mut self,
        payload: Result<Box<RawValue>, ErrorObject>,
        now: Instant,
    ) {
        let result: InitializeResult = match payload {
            // A legacy verdict from a prior negotiation that no longer holds: probe.
            Err(error) if self.negotiation.is_unconfirmed() => {
                tracing::info!(
                    code = error.code,
                    "initialize at the prior negotiation's version refused; probing"
                );
                self.negotiation.restart();
                return self.send_probe(ProtocolVersion::LATEST, false, now);
            }
            // A slow modern server refuses `initialize` after it read the probe: its answer
            // to the probe may still come (over HTTP, in any order).
            Err(error) if self.pending.has_late_probe() => {
                tracing::debug!(
                    code = error.code,
                    "initialize refused; waiting for the late answer to server/discover"
                );
                return self.negotiation.awaiting_late_probe(error);
            }
            Err(error) => {
                return self.fail(SessionError::Refused {
                    method: "initialize",
                    error,
                });
            }
            Ok(raw) => match method::Initialize::decode_result(&raw) {
                Ok(Outcome::Complete(r)) => r,
                Ok(Outcome::InputRequired(_)) => {
                    return self.fail(SessionError::Malformed {
                        method: "initialize",
                        cause: DecodeError::UnexpectedInputRequired {
                            method: "initialize".into(),
                        },
                    });
                }
                Err(cause) => {
                    return self.fail(SessionError::Malformed {
                        method: "initialize",
                        cause,
                    });
                }
            },
        };
        let version = result.protocol_version.clone();
        if !version.is_supported() || version.is_modern() {
            return self.fail(SessionError::UnsupportedVersion { version });
        }
        // Through the one predicate: over a transport without headers, none.
        let headers = self.version_headers(&version);
        match encode_notification("notifications/initialized", None::<&()>) {
            Ok(body) => {
                let mut out = outbound(
                    body,
                    headers,
                    RetryClass::Never,
                    MessageKind::Notification {
                        method: "notifications/initialized",
                    },
                );
                out.session = SessionStep::Opened;
                self.transmits.push_back(out);
            }
            Err(cause) => {
                return self.fail(SessionError::Encode {
                    method: "notifications/initialized",
                    cause,
                });
            }
        }
        let negotiated = Negotiated {
            version,
            server_info: Some(result.server_info),
            capabilities: result.capabilities,
            instructions: result.instructions,
        };
        self.negotiation.ready(negotiated.clone());
        self.ready_legacy(negotiated, now);
        self.resubscribe(now);
    }
}

#[cfg(test)]
mod tests {
    use toolwire_types::error::code;

    use super::*;

    fn unsupported(supported: &[&str]) -> ErrorObject {
        let mut error = ErrorObject::new(code::UNSUPPORTED_PROTOCOL_VERSION, "unsupported");
        error.data = Some(serde_json::json!({"supported": supported, "requested": "2099-01-01"}));
        error
    }

    #[test]
    fn a_refused_probe_tries_the_listed_modern_version_once_then_the_listed_legacy_one() {
        let listed = unsupported(&["2026-07-28", "2025-06-18", "2024-11-05"]);
        assert_eq!(
            after_refusal(&listed, false, true),
            AfterRefusal::Probe(ProtocolVersion::LATEST)
        );
        assert_eq!(
            after_refusal(&listed, true, true),
            AfterRefusal::Initialize(ProtocolVersion::V2025_06_18)
        );
        assert_eq!(
            after_refusal(&listed, true, false),
            AfterRefusal::Fail,
            "a pinned mode does not fall back"
        );
        assert_eq!(
            after_refusal(&unsupported(&["1999-01-01"]), false, true),
            AfterRefusal::Fail,
            "nothing this client speaks"
        );
    }

    #[test]
    fn a_modern_only_error_fails_and_any_other_falls_back_in_auto_mode() {
        let mismatch = ErrorObject::new(code::HEADER_MISMATCH, "headers");
        assert_eq!(after_refusal(&mismatch, false, true), AfterRefusal::Fail);
        let unknown = ErrorObject::new(code::METHOD_NOT_FOUND, "no such method");
        assert_eq!(
            after_refusal(&unknown, false, true),
            AfterRefusal::Initialize(ProtocolVersion::LATEST_LEGACY)
        );
        assert_eq!(after_refusal(&unknown, false, false), AfterRefusal::Fail);
    }

    #[test]
    fn an_answer_ends_only_a_probe_and_a_restart_forgets_the_saved_verdict() {
        let mut n = Negotiation::default();
        assert!(n.is_created());
        assert_eq!(n.probe_answered(), None);
        n.probing(ProtocolVersion::LATEST, true);
        assert!(n.is_probing());
        assert_eq!(n.probe_answered(), Some((ProtocolVersion::LATEST, true)));
        assert!(n.is_created());

        let agreed = Negotiated {
            version: ProtocolVersion::LATEST,
            server_info: None,
            capabilities: Default::default(),
            instructions: None,
        };
        n.adopted();
        n.ready(agreed);
        assert!(n.is_modern() && n.is_unconfirmed());
        assert_eq!(n.probe_answered(), None, "no probe: the verdict stays");
        assert!(n.negotiated().is_some());
        n.restart();
        assert!(n.is_created() && !n.is_unconfirmed());
    }
}

//! Negotiation: the `server/discover` probe (modern) and its fallback to the `initialize`
//! handshake (legacy), as the [`Phase`] the session is in.

use std::time::Instant;

use serde_json::value::RawValue;
use toolwire_types::methods::method;
use toolwire_types::{
    DecodeError, DiscoverResult, ErrorObject, InitializeParams, InitializeResult, JsonObject,
    MetaOnlyParams, Outcome, ProtocolVersion, RequestMethod, encode_notification,
};
use toolwire_wire::{MessageKind, RetryClass, SessionStep};

use super::{PendingKind, Session, outbound};
use crate::{Event, Negotiated, ProtocolMode, SessionError};

pub(super) enum Phase {
    Created,
    Probing {
        version: ProtocolVersion,
        retried: bool,
    },
    Initializing,
    Ready(Box<Negotiated>),
    Failed,
}

impl Session {
    /// Adopts what an earlier negotiation settled on ([`SessionConfig::prior`]): a modern
    /// verdict is ready at once, a legacy one goes straight to `initialize` at its version.
    /// Either stays unconfirmed until an answer succeeds.
    ///
    /// [`SessionConfig::prior`]: crate::SessionConfig::prior
    pub(super) fn adopt(&mut self, prior: Negotiated, now: Instant) {
        self.unconfirmed = true;
        if prior.version.is_modern() {
            tracing::debug!(version = %prior.version, "adopting the prior negotiation");
            self.phase = Phase::Ready(Box::new(prior.clone()));
            self.events.push_back(Event::Ready(Box::new(prior)));
            self.send_listen(now);
        } else {
            self.send_initialize(prior.version, now);
        }
    }

    /// The server refused the modern version adopted from a prior negotiation: probe again.
    /// The request that showed it fails with its own error.
    pub(super) fn prior_refused(&mut self, now: Instant) {
        if !matches!(&self.phase, Phase::Ready(n) if n.version.is_modern()) {
            return;
        }
        self.unconfirmed = false;
        tracing::info!("the server refused the prior negotiation's version; negotiating again");
        if let Some(listen) = self.listen.id.take() {
            self.pending.remove(&listen);
            self.events.push_back(Event::CloseStream(listen));
        }
        self.listen.reopen_at = None;
        self.phase = Phase::Created;
        self.events.push_back(Event::Renegotiating);
        self.send_probe(ProtocolVersion::LATEST, false, now);
    }

    pub(super) fn send_probe(&mut self, version: ProtocolVersion, retried: bool, now: Instant) {
        let mut params = MetaOnlyParams::default();
        self.envelope(&version, &mut params);
        let headers =
            self.sep2243_headers(&version, <method::Discover as toolwire_types::Method>::NAME);
        let timeout = self.config.probe_timeout;
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
            Ok(_) => self.phase = Phase::Probing { version, retried },
            Err(cause) => self.fail(SessionError::Encode {
                method: "server/discover",
                cause,
            }),
        }
    }

    pub(super) fn send_initialize(&mut self, version: ProtocolVersion, now: Instant) {
        let params = InitializeParams {
            protocol_version: version.clone(),
            capabilities: self.config.capabilities.clone(),
            client_info: self.config.client_info.clone(),
            meta: None,
            extra: JsonObject::new(),
        };
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
            Ok(_) => self.phase = Phase::Initializing,
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
        let Phase::Probing { version, retried } =
            std::mem::replace(&mut self.phase, Phase::Created)
        else {
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
            Err(error)
                if error.code == toolwire_types::error::code::UNSUPPORTED_PROTOCOL_VERSION =>
            {
                let supported: Vec<ProtocolVersion> = error
                    .unsupported_version()
                    .map(|d| {
                        d.supported
                            .into_iter()
                            .filter_map(|v| ProtocolVersion::new(v).ok())
                            .collect()
                    })
                    .unwrap_or_default();
                let modern = supported
                    .iter()
                    .filter(|v| v.is_supported() && v.is_modern())
                    .max()
                    .cloned();
                let legacy = supported
                    .iter()
                    .filter(|v| v.is_supported() && !v.is_modern())
                    .max()
                    .cloned();
                match (modern, legacy) {
                    // Once, even with the version just refused: the server listed it.
                    (Some(v), _) if !retried => self.send_probe(v, true, now),
                    (_, Some(v)) if auto => self.send_initialize(v, now),
                    _ => self.fail(SessionError::Refused {
                        method: "server/discover",
                        error,
                    }),
                }
            }
            Err(error) if error.is_modern_era_evidence() || !auto => {
                // A modern server that refuses us: falling back would not help.
                self.fail(SessionError::Refused {
                    method: "server/discover",
                    error,
                })
            }
            Err(error) => {
                tracing::debug!(
                    code = error.code,
                    "server/discover refused; falling back to initialize"
                );
                self.send_initialize(ProtocolVersion::LATEST_LEGACY, now);
            }
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
        self.phase = Phase::Ready(Box::new(negotiated.clone()));
        self.events.push_back(Event::Ready(Box::new(negotiated)));
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
            Err(error) if std::mem::take(&mut self.unconfirmed) => {
                tracing::info!(
                    code = error.code,
                    "initialize at the prior negotiation's version refused; probing"
                );
                self.phase = Phase::Created;
                return self.send_probe(ProtocolVersion::LATEST, false, now);
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
        self.phase = Phase::Ready(Box::new(negotiated.clone()));
        self.ready_legacy(negotiated, now);
        self.resubscribe(now);
    }
}

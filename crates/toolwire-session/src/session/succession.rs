//! What one session hands the next: the subscriptions and the log level, the ids, the
//! version after a lost legacy session, and a new listing of the tools once ready.

use web_time::Instant;

use toolwire_types::ProtocolVersion;

use super::Session;
use crate::{Event, Negotiated, ProtocolMode, SessionConfig};

/// Why a session is followed by another ([`Session::successor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Succession {
    /// The connection died; the next session runs over a new one.
    Reconnect,
    /// The server no longer knows the legacy session ([`Event::SessionGone`]); the next
    /// session opens a new one over the same transport, at the version this one spoke.
    SessionGone,
}

impl Session {
    /// What a session made after this one (a reconnect's) keeps of it: the resources
    /// subscribed to and the log level asked, which it sends to its own server.
    pub fn carry_into(&self, next: &mut SessionConfig) {
        next.resource_subscriptions = self.config.resource_subscriptions.clone();
        next.log_level = self.config.log_level;
    }

    /// The session that follows this one (after [`Session::interrupt`]), for `why`: made
    /// from `config` with what [`Session::carry_into`] keeps (the new server learns the
    /// subscriptions and the log level during its handshake), over a transport that does or
    /// does not carry headers. After [`Succession::SessionGone`] it speaks the legacy version
    /// this one spoke, without negotiating the era again; after a death that
    /// [`Session::falls_back_on_death`], the latest legacy version. Once ready it lists the
    /// tools again (as its own refresh, [`Event::ToolsRefreshed`]) when a listing succeeded
    /// before.
    /// Request and operation ids go on from this session's, so an answer or failure still
    /// arriving for a request of this one (the same transport, after a lost legacy session)
    /// can never be taken for one of the next. What this one holds ([`Session::carry`], and
    /// what was asked of it since it was spent) the next one holds, under the same ids.
    pub fn successor(
        &mut self,
        why: Succession,
        mut config: SessionConfig,
        carries_headers: bool,
    ) -> Session {
        self.carry_into(&mut config);
        match why {
            Succession::SessionGone => {
                if let Some(version) = self.version().filter(|v| !v.is_modern()) {
                    config = config.with_mode(ProtocolMode::Pinned(version.clone()));
                }
            }
            Succession::Reconnect if self.falls_back_on_death() => {
                config = config.with_mode(ProtocolMode::Pinned(ProtocolVersion::LATEST_LEGACY));
            }
            Succession::Reconnect => {}
        }
        let mut next = Session::new(config, self.cache.clone(), carries_headers);
        next.next_id = self.next_id;
        next.next_op = self.next_op;
        next.listed = self.listed;
        next.relist = self.listed;
        self.hand_over_held(&mut next);
        next
    }

    /// Whether the connection's death now means the server does not know the era probe: it
    /// died while `server/discover` was in flight in [`ProtocolMode::Auto`] (some legacy
    /// servers exit on a method they do not know). The next session then goes straight to
    /// `initialize`, and should come at once, not after a reconnect policy's backoff.
    pub fn falls_back_on_death(&self) -> bool {
        self.is_probing() && self.config.mode == ProtocolMode::Auto
    }

    /// Negotiation finished (and, legacy, the log level asked is in force): says so, a
    /// successor lists the tools again, and what was held goes out (after the relist).
    pub(super) fn announce_ready(&mut self, negotiated: Box<Negotiated>, now: Instant) {
        self.events.push_back(Event::Ready(negotiated));
        self.ready = true;
        if std::mem::take(&mut self.relist) {
            self.request_refresh(now);
        }
        self.release_held(now);
    }
}

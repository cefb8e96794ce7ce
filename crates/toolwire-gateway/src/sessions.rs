//! What the gateway keeps for each legacy session, under its caller: the log level it asked
//! for, the resources it subscribed to, and the URL elicitations its calls were asked. Every
//! look-up names both the session and the caller's principal, so a session id alone (another
//! caller's, a guess) finds nothing; and everything an upstream says outside a call reaches a
//! session only through [`Sessions::hears`]: log lines of a server the caller may see, at the
//! level the session asked for; resource updates it subscribed to; elicitation completions of
//! its own calls.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize as _;
use serde_json::Value;
use toolwire::LoggingLevel;

use crate::lock;

/// How long a URL elicitation asked of a legacy session's call is remembered for its
/// completion notice.
pub(crate) const ELICITATION_KEPT: Duration = Duration::from_secs(30 * 60);
/// The most URL elicitations remembered at once; past it the oldest are forgotten first.
pub(crate) const MAX_ELICITATIONS: usize = 10_000;

/// One legacy session of one caller: who it is, and what it asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SessionKey {
    /// The caller's principal (`-` when callers are not authenticated).
    pub(crate) principal: String,
    /// Its session id (`Mcp-Session-Id`, an HTTP+SSE connection's, `stdio`).
    pub(crate) session: String,
}

impl SessionKey {
    pub(crate) fn new(principal: &str, session: &str) -> Self {
        Self {
            principal: principal.to_owned(),
            session: session.to_owned(),
        }
    }
}

/// What a session asked for.
#[derive(Debug, Default)]
struct SessionState {
    /// Its `logging/setLevel`: log lines outside its calls reach it from this level up; none
    /// before it asks.
    level: Option<LoggingLevel>,
    /// The resources (gateway URIs) it subscribed to.
    resources: BTreeSet<String>,
}

/// Every legacy session's state, and the URL elicitations asked of them.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    /// By session id; the principal is checked on every look-up.
    states: Mutex<HashMap<String, (String, SessionState)>>,
    /// URL elicitations asked of a session's call, by (server, elicitation id).
    elicitations: Mutex<HashMap<(String, String), (SessionKey, Instant)>>,
}

/// What a session hears of, from one source.
pub(crate) enum Heard<'a> {
    /// A log message of `level` (None: the upstream named none) from an upstream the caller
    /// may see.
    Log(Option<LoggingLevel>),
    /// An update of this resource.
    Resource(&'a str),
    /// The completion of this URL elicitation of `server`.
    ElicitationComplete { server: &'a str, id: &'a str },
}

/// The level of a log message's params, if it names one the protocol knows.
pub(crate) fn level_of(params: &Value) -> Option<LoggingLevel> {
    params
        .get("level")
        .and_then(|level| LoggingLevel::deserialize(level).ok())
}

impl Sessions {
    /// Runs `f` on `key`'s state, made if it was not there; None when the session id is held
    /// under another principal (which cannot happen through the front end, which binds a
    /// session to its caller, and is refused all the same).
    fn with<T>(&self, key: &SessionKey, f: impl FnOnce(&mut SessionState) -> T) -> Option<T> {
        let mut states = lock(&self.states);
        let (principal, state) = states
            .entry(key.session.clone())
            .or_insert_with(|| (key.principal.clone(), SessionState::default()));
        (*principal == key.principal).then(|| f(state))
    }

    /// Reads `key`'s state, if it has one.
    fn read<T>(&self, key: &SessionKey, f: impl FnOnce(&SessionState) -> T) -> Option<T> {
        let states = lock(&self.states);
        let (principal, state) = states.get(&key.session)?;
        (*principal == key.principal).then(|| f(state))
    }

    /// `key` asks for log lines from `level` up.
    pub(crate) fn set_level(&self, key: &SessionKey, level: LoggingLevel) {
        self.with(key, |s| s.level = Some(level));
    }

    /// The level `key` asked for, if it asked.
    pub(crate) fn level(&self, key: &SessionKey) -> Option<LoggingLevel> {
        self.read(key, |s| s.level).flatten()
    }

    /// The most verbose level any session asked for (what upstreams are asked to send).
    pub(crate) fn most_verbose(&self) -> Option<LoggingLevel> {
        lock(&self.states)
            .values()
            .filter_map(|(_, s)| s.level)
            .min()
    }

    /// `key` subscribes to (`on`) or unsubscribes from `uri`: whether that changed anything
    /// (a second subscription of the same session to the same resource counts once).
    pub(crate) fn subscribe(&self, key: &SessionKey, uri: &str, on: bool) -> bool {
        self.with(key, |s| {
            if on {
                s.resources.insert(uri.to_owned())
            } else {
                s.resources.remove(uri)
            }
        })
        .unwrap_or(false)
    }

    /// A URL elicitation `id` of `server` was asked of `key`'s call: its completion goes to
    /// that session alone.
    pub(crate) fn asked_url(&self, key: &SessionKey, server: &str, id: &str) {
        let now = Instant::now();
        let mut asked = lock(&self.elicitations);
        if asked.len() >= MAX_ELICITATIONS {
            asked.retain(|_, (_, at)| now.duration_since(*at) < ELICITATION_KEPT);
            if asked.len() >= MAX_ELICITATIONS
                && let Some(oldest) = asked
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone())
            {
                asked.remove(&oldest);
            }
        }
        asked.insert((server.to_owned(), id.to_owned()), (key.clone(), now));
    }

    /// Whether the session `key` hears `heard`.
    pub(crate) fn hears(&self, key: &SessionKey, heard: &Heard<'_>) -> bool {
        match heard {
            Heard::Log(level) => self
                .level(key)
                .is_some_and(|asked| level.is_none_or(|level| level >= asked)),
            Heard::Resource(uri) => self
                .read(key, |s| s.resources.contains(*uri))
                .unwrap_or(false),
            Heard::ElicitationComplete { server, id } => {
                let pair = ((*server).to_owned(), (*id).to_owned());
                let mut asked = lock(&self.elicitations);
                match asked.get(&pair) {
                    Some((asker, at)) if asker == key && at.elapsed() < ELICITATION_KEPT => {
                        asked.remove(&pair);
                        true
                    }
                    _ => false,
                }
            }
        }
    }

    /// The session ended: its state goes; the resources it was still subscribed to, for the
    /// caller to unsubscribe upstream.
    pub(crate) fn ended(&self, session: &str) -> Option<(String, BTreeSet<String>)> {
        let (principal, state) = lock(&self.states).remove(session)?;
        lock(&self.elicitations).retain(|_, (key, _)| key.session != session);
        Some((principal, state.resources))
    }

    /// How many sessions have state here.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.states).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> SessionKey {
        SessionKey::new("iss#alice", "s-a")
    }

    fn bob() -> SessionKey {
        SessionKey::new("iss#bob", "s-b")
    }

    #[test]
    fn log_lines_reach_only_sessions_that_asked_and_only_from_their_level() {
        let sessions = Sessions::default();
        let debug = Heard::Log(Some(LoggingLevel::Debug));
        let error = Heard::Log(Some(LoggingLevel::Error));
        assert!(!sessions.hears(&alice(), &error), "never asked");
        sessions.set_level(&alice(), LoggingLevel::Warning);
        assert!(sessions.hears(&alice(), &error) && !sessions.hears(&alice(), &debug));
        assert!(!sessions.hears(&bob(), &error), "bob never asked");
        assert_eq!(sessions.most_verbose(), Some(LoggingLevel::Warning));
    }

    #[test]
    fn another_principal_naming_the_same_session_id_reads_and_changes_nothing() {
        let sessions = Sessions::default();
        sessions.set_level(&alice(), LoggingLevel::Debug);
        assert!(sessions.subscribe(&alice(), "toolwire://ref__a", true));
        let mallory = SessionKey::new("iss#mallory", "s-a");
        assert!(!sessions.hears(&mallory, &Heard::Log(Some(LoggingLevel::Error))));
        assert!(!sessions.hears(&mallory, &Heard::Resource("toolwire://ref__a")));
        assert!(!sessions.subscribe(&mallory, "toolwire://ref__a", false));
        sessions.set_level(&mallory, LoggingLevel::Emergency);
        assert_eq!(sessions.level(&alice()), Some(LoggingLevel::Debug));
        assert!(sessions.hears(&alice(), &Heard::Resource("toolwire://ref__a")));
    }

    #[test]
    fn updates_reach_the_sessions_that_subscribed_and_a_second_subscription_counts_once() {
        let sessions = Sessions::default();
        assert!(sessions.subscribe(&alice(), "u", true));
        assert!(!sessions.subscribe(&alice(), "u", true), "counted once");
        assert!(sessions.hears(&alice(), &Heard::Resource("u")));
        assert!(!sessions.hears(&bob(), &Heard::Resource("u")));
        assert!(sessions.subscribe(&alice(), "u", false));
        assert!(!sessions.hears(&alice(), &Heard::Resource("u")));
    }

    #[test]
    fn an_elicitation_completes_for_the_session_it_was_asked_of_once() {
        let sessions = Sessions::default();
        sessions.asked_url(&alice(), "ref", "e-1");
        let done = Heard::ElicitationComplete {
            server: "ref",
            id: "e-1",
        };
        let elsewhere = Heard::ElicitationComplete {
            server: "other",
            id: "e-1",
        };
        assert!(!sessions.hears(&bob(), &done));
        assert!(
            !sessions.hears(&alice(), &elsewhere),
            "same id, another server"
        );
        assert!(sessions.hears(&alice(), &done));
        assert!(!sessions.hears(&alice(), &done), "once");
    }

    #[test]
    fn an_ended_session_leaves_nothing_and_hands_back_its_subscriptions() {
        let sessions = Sessions::default();
        sessions.set_level(&alice(), LoggingLevel::Info);
        sessions.subscribe(&alice(), "u", true);
        sessions.asked_url(&alice(), "ref", "e-1");
        let (principal, resources) = sessions.ended("s-a").unwrap();
        assert_eq!(principal, "iss#alice");
        assert_eq!(resources.into_iter().collect::<Vec<_>>(), ["u"]);
        assert_eq!(sessions.len(), 0);
        assert!(lock(&sessions.elicitations).is_empty());
        assert!(sessions.ended("s-a").is_none());
    }
}

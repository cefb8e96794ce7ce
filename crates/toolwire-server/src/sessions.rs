//! The legacy sessions of an HTTP front end, each under the caller that began it: who owns
//! each, what it keeps for resumption (`Last-Event-ID`), and the bounds on all of it
//! ([`crate::Limits`]): idle expiry, a share per caller, a cap in all, bytes of events per
//! session and in all. A session that ends here is handed back to the front end, which tells
//! the protocol layer and the service ([`crate::core::Core::forget`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::core::{Keyed, lock};
use crate::{Limits, SessionKeys};

/// Events kept per session for resumption, at most (and at most
/// [`Limits::events_per_session`] bytes of them).
const EVENT_LOG: usize = 1000;
/// How often expired sessions are looked for, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

struct Session {
    /// The tag of the caller that began it ([`crate::Caller::tag`]; zeros for no caller).
    owner: [u8; 16],
    next_stream: u64,
    /// When it last had a request, or a stream of it ended.
    last_used: Instant,
    /// Its streams open now (the GET stream, SSE answers): a session with one never idles.
    open: usize,
    /// The next sequence number of each stream still open.
    seqs: HashMap<u64, u64>,
    /// (stream, sequence, event data) for `Last-Event-ID` replays, oldest first.
    events: VecDeque<(u64, u64, Bytes)>,
    /// The bytes of `events`.
    event_bytes: usize,
}

impl Session {
    fn new(owner: [u8; 16]) -> Self {
        Self {
            owner,
            next_stream: 0,
            last_used: Instant::now(),
            open: 0,
            seqs: HashMap::new(),
            events: VecDeque::new(),
            event_bytes: 0,
        }
    }

    /// Whether it has been idle longer than `limit` at `now`.
    fn expired(&self, now: Instant, limit: Duration) -> bool {
        self.open == 0 && now.saturating_duration_since(self.last_used) > limit
    }
}

/// A live session found by [`Sessions::owner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    /// Its owner tag.
    pub(crate) owner: [u8; 16],
    /// Whether the lookup began holding it here (a session another replica sealed): the
    /// count of sessions held changed.
    pub(crate) adopted: bool,
}

/// Every legacy session held here.
pub(crate) struct Sessions {
    table: Mutex<Keyed<Session>>,
    /// Sealed session ids ended here, and when: another replica may still accept them, this
    /// one not (until they are past their lifetime anyway).
    ended: Mutex<HashMap<String, Instant>>,
    /// When expired sessions were last looked for.
    swept: Mutex<Instant>,
    /// The bytes of events every session keeps ([`Limits::events_total`]).
    event_bytes: AtomicUsize,
    limits: Limits,
    /// Ids are sealed with these keys: any replica's may be taken up here.
    keys: Option<SessionKeys>,
}

impl Sessions {
    pub(crate) fn new(limits: Limits, keys: Option<SessionKeys>) -> Self {
        Self {
            table: Mutex::new(HashMap::default()),
            ended: Mutex::new(HashMap::new()),
            swept: Mutex::new(Instant::now()),
            event_bytes: AtomicUsize::new(0),
            limits,
            keys,
        }
    }

    /// The owner tag of `sid` when it is a live session here: one this process holds, or
    /// (with keys) one any replica sealed and nobody ended here, which this process then
    /// holds from now on ([`Found::adopted`]). A session idle past [`Limits::session_idle`]
    /// ends (into `ended`).
    pub(crate) fn owner(&self, sid: &str, ended: &mut Vec<String>) -> Option<Found> {
        let now = Instant::now();
        let expired = match lock(&self.table).get(sid) {
            Some(session) if !session.expired(now, self.limits.session_idle) => {
                return Some(Found {
                    owner: session.owner,
                    adopted: false,
                });
            }
            Some(_) => true,
            None => false,
        };
        if expired {
            if self.end(sid) {
                ended.push(sid.to_owned());
            }
            return None;
        }
        let keys = self.keys.as_ref()?;
        if lock(&self.ended).contains_key(sid) {
            return None;
        }
        let owner = keys.opens(sid, std::time::SystemTime::now())?;
        // Begun on another replica: held here under the same bounds as one begun here.
        if !self.room_for(owner, ended) {
            return None;
        }
        self.hold(sid, owner);
        Some(Found {
            owner,
            adopted: true,
        })
    }

    /// A request on `sid`: the session used once more. False when it is not held here
    /// (unknown, expired, ended, or another caller's).
    pub(crate) fn used(&self, sid: &str) -> bool {
        let mut table = lock(&self.table);
        let Some(s) = table.get_mut(sid) else {
            return false;
        };
        s.last_used = Instant::now();
        true
    }

    /// Whether `sid` is held here.
    pub(crate) fn holds(&self, sid: &str) -> bool {
        lock(&self.table).contains_key(sid)
    }

    /// Whether a new session of `owner` may be held: expired sessions end first (at most once
    /// a [`SWEEP_EVERY`]); past [`Limits::sessions_per_caller`], that caller's longest-idle
    /// session ends; past [`Limits::max_sessions`], no. The sessions that ended go into
    /// `ended`.
    pub(crate) fn room_for(&self, owner: [u8; 16], ended: &mut Vec<String>) -> bool {
        let limits = &self.limits;
        let now = Instant::now();
        let sweep = {
            let mut swept = lock(&self.swept);
            let due = now.saturating_duration_since(*swept) >= SWEEP_EVERY;
            if due {
                *swept = now;
            }
            due
        };
        let per_caller = limits.sessions_per_caller.max(1);
        let mut ending = Vec::new();
        let (mine, total, longest_idle) = {
            let table = lock(&self.table);
            if sweep {
                ending.extend(
                    table
                        .iter()
                        .filter(|(_, s)| s.expired(now, limits.session_idle))
                        .map(|(sid, _)| sid.clone()),
                );
            }
            let own = table
                .iter()
                .filter(|(sid, s)| s.owner == owner && !ending.contains(sid));
            let mine = own.clone().count();
            let longest_idle = own
                .filter(|(_, s)| s.open == 0)
                .min_by_key(|(_, s)| s.last_used)
                .map(|(sid, _)| sid.clone());
            (mine, table.len() - ending.len(), longest_idle)
        };
        let mut room = total < limits.max_sessions.max(1);
        if mine >= per_caller {
            match longest_idle {
                Some(sid) => {
                    tracing::info!("a caller is at its cap of sessions: its longest-idle one ends");
                    ending.push(sid);
                    room = true;
                }
                None => room = false,
            }
        }
        for sid in ending {
            if self.end(&sid) {
                ended.push(sid);
            }
        }
        if !room {
            tracing::warn!(
                limit = limits.max_sessions,
                "no room for another legacy session: a new one is refused"
            );
        }
        room
    }

    /// Holds the new session `sid` of `owner`.
    pub(crate) fn hold(&self, sid: &str, owner: [u8; 16]) {
        lock(&self.table)
            .entry(sid.to_owned())
            .or_insert_with(|| Session::new(owner));
    }

    /// How many sessions are held here.
    pub(crate) fn len(&self) -> usize {
        lock(&self.table).len()
    }

    /// Ends `sid` here (deleted, expired, pushed out): whether it was held. A sealed id is
    /// not taken up again here.
    pub(crate) fn end(&self, sid: &str) -> bool {
        let Some(session) = lock(&self.table).remove(sid) else {
            return false;
        };
        self.event_bytes
            .fetch_sub(session.event_bytes, Ordering::Relaxed);
        if self.keys.is_some() {
            let now = Instant::now();
            let mut ended = lock(&self.ended);
            // A sealed id past its lifetime opens nowhere: no need to remember it.
            ended.retain(|_, at| now.saturating_duration_since(*at) < crate::SESSION_LIFETIME);
            ended.insert(sid.to_owned(), now);
        }
        true
    }

    /// A new stream of `sid` (its GET stream, an SSE answer): its number, from 1 (0 for a
    /// session no longer held).
    pub(crate) fn open_stream(&self, sid: &str) -> u64 {
        let mut table = lock(&self.table);
        let Some(s) = table.get_mut(sid) else {
            return 0;
        };
        s.next_stream += 1;
        s.open += 1;
        s.seqs.insert(s.next_stream, 0);
        s.next_stream
    }

    /// The stream `stream` of `sid` ended: the session idles from now on, if nothing else of
    /// it is open.
    pub(crate) fn close_stream(&self, sid: &str, stream: u64) {
        if let Some(s) = lock(&self.table).get_mut(sid)
            && s.seqs.remove(&stream).is_some()
        {
            s.open = s.open.saturating_sub(1);
            s.last_used = Instant::now();
        }
    }

    /// Logs an event of `stream` and returns its id (`stream:sequence`). Kept for replay as
    /// far as [`Limits::events_per_session`] and [`Limits::events_total`] allow: the session's
    /// oldest events go first; one that does not fit is sent, not kept.
    pub(crate) fn log(&self, sid: &str, stream: u64, data: Bytes) -> String {
        let limits = &self.limits;
        let mut table = lock(&self.table);
        let Some(s) = table.get_mut(sid) else {
            return format!("{stream}:0");
        };
        let seq = s.seqs.entry(stream).or_insert(0);
        let this = *seq;
        *seq += 1;
        let size = data.len();
        let total = self.event_bytes.load(Ordering::Relaxed);
        if size <= limits.events_per_session && total + size <= limits.events_total {
            s.events.push_back((stream, this, data));
            s.event_bytes += size;
            self.event_bytes.fetch_add(size, Ordering::Relaxed);
            while s.events.len() > EVENT_LOG || s.event_bytes > limits.events_per_session {
                let Some((_, _, old)) = s.events.pop_front() else {
                    break;
                };
                s.event_bytes -= old.len();
                self.event_bytes.fetch_sub(old.len(), Ordering::Relaxed);
            }
        }
        format!("{stream}:{this}")
    }

    /// What the stream `stream` of `sid` sent (or would have) after its event `seq`, still
    /// kept: each event's id and data.
    pub(crate) fn replay(&self, sid: &str, stream: u64, seq: u64) -> Vec<(String, Bytes)> {
        lock(&self.table)
            .get(sid)
            .map(|s| {
                s.events
                    .iter()
                    .filter(|e| e.0 == stream && e.1 > seq && !e.2.is_empty())
                    .map(|e| (format!("{}:{}", e.0, e.1), e.2.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(edit: impl FnOnce(&mut Limits)) -> Limits {
        let mut limits = Limits::default();
        edit(&mut limits);
        limits
    }

    #[test]
    fn past_its_share_a_caller_loses_its_longest_idle_session_and_nobody_elses() {
        let sessions = Sessions::new(limits(|l| l.sessions_per_caller = 2), None);
        let (alice, bob) = ([1; 16], [2; 16]);
        let mut ended = Vec::new();
        for sid in ["a1", "a2"] {
            assert!(sessions.room_for(alice, &mut ended));
            sessions.hold(sid, alice);
        }
        assert!(sessions.room_for(bob, &mut ended));
        sessions.hold("b1", bob);
        // a1 is used again: a2 is now the longest idle.
        assert!(sessions.used("a1"));
        assert!(sessions.room_for(alice, &mut ended));
        assert_eq!(ended, ["a2"]);
        assert!(sessions.holds("a1") && sessions.holds("b1") && !sessions.holds("a2"));
    }

    #[test]
    fn a_session_with_a_stream_open_is_never_pushed_out_or_expired() {
        let sessions = Sessions::new(
            limits(|l| {
                l.sessions_per_caller = 1;
                l.session_idle = Duration::ZERO;
            }),
            None,
        );
        let mut ended = Vec::new();
        sessions.hold("s", [1; 16]);
        let stream = sessions.open_stream("s");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            sessions.owner("s", &mut ended).map(|f| f.owner),
            Some([1; 16])
        );
        assert!(
            !sessions.room_for([1; 16], &mut ended),
            "its only session is busy"
        );
        sessions.close_stream("s", stream);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(sessions.owner("s", &mut ended), None, "idle past its limit");
        assert_eq!(ended, ["s"]);
    }

    #[test]
    fn events_are_kept_within_the_bytes_of_a_session_and_of_all() {
        let sessions = Sessions::new(
            limits(|l| {
                l.events_per_session = 100;
                l.events_total = 150;
            }),
            None,
        );
        sessions.hold("a", [1; 16]);
        sessions.hold("b", [2; 16]);
        let (a, b) = (sessions.open_stream("a"), sessions.open_stream("b"));
        for n in 0..3 {
            assert_eq!(
                sessions.log("a", a, Bytes::from(vec![b'x'; 40])),
                format!("{a}:{n}")
            );
        }
        // 120 bytes logged, 80 kept: the oldest went.
        assert_eq!(sessions.replay("a", a, 0).len(), 2);
        // b may keep 70 more in all: its 80-byte event is sent, not kept; a 60-byte one is.
        sessions.log("b", b, Bytes::from(vec![b'y'; 80]));
        assert!(sessions.replay("b", b, 0).is_empty());
        sessions.log("b", b, Bytes::from(vec![b'y'; 60]));
        assert_eq!(sessions.replay("b", b, 0).len(), 1);
        // Ending a gives its bytes back.
        assert!(sessions.end("a"));
        assert_eq!(sessions.event_bytes.load(Ordering::Relaxed), 60);
    }
}

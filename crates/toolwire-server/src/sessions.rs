//! The legacy sessions of an HTTP front end, each under the caller that began it: who owns
//! each, what it keeps for resumption (`Last-Event-ID`), and the bounds on all of it
//! ([`crate::Limits`]): idle expiry, a share per caller, a cap in all, bytes of events per
//! session and in all. A session that ends here is handed back to the front end, which tells
//! the protocol layer and the service ([`crate::core::Core::forget`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{Notify, oneshot};

use crate::core::{Keyed, lock};
use crate::cursor::{Carries, Cursor, StreamTag};
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
    /// Each stream still open.
    streams: HashMap<u64, Open>,
    /// Events kept for `Last-Event-ID` replays, oldest first.
    events: VecDeque<Kept>,
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
            streams: HashMap::new(),
            events: VecDeque::new(),
            event_bytes: 0,
        }
    }

    /// Its stream `stream` ended (or was ended here): whoever follows it is woken, and the
    /// session idles from now on if nothing else of it is open.
    fn close(&mut self, stream: u64) {
        if let Some(open) = self.streams.remove(&stream) {
            open.logged.notify_waiters();
            self.open = self.open.saturating_sub(1);
            self.last_used = Instant::now();
        }
    }

    /// Whether it has been idle longer than `limit` at `now`.
    fn expired(&self, now: Instant, limit: Duration) -> bool {
        self.open == 0 && now.saturating_duration_since(self.last_used) > limit
    }
}

/// A stream of a session, open here.
struct Open {
    /// It is a GET stream: it carries what is not an answer.
    listens: bool,
    /// Its next sequence number.
    next: u64,
    tag: StreamTag,
    /// Woken at each event logged and at its end: a resumption follows it live.
    logged: Arc<Notify>,
    /// A GET stream's: dropped with this entry, which ends the stream (its [`Ended`]).
    _ends: Option<oneshot::Sender<()>>,
}

/// Resolves when a GET stream's entry is gone while the stream still runs: a newer one took
/// its place past [`Limits::get_streams_per_session`], or its session ended.
pub(crate) type Ended = oneshot::Receiver<()>;

/// An event kept for replay.
struct Kept {
    stream: u64,
    seq: u64,
    /// Its event id, as sent.
    id: String,
    data: Bytes,
}

/// What a `Last-Event-ID` resumes ([`Sessions::resume`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    /// A stream this process wrote, with something after the client's last event still kept,
    /// or still under way: [`Sessions::after`] reads it, [`Sessions::logged`] follows it.
    Replay,
    /// A GET stream no longer to be had here (another process's, or ended with nothing
    /// after the client's last event): a new one opens instead.
    Listen,
    /// An answer another process wrote: a replica behind the same balancer, which may still
    /// have it, or one that ended. Refused here so that the client (or the balancer) tries
    /// again elsewhere, as often as it tries.
    Elsewhere,
    /// An answer this process no longer keeps (its stream ended, its events past their
    /// bound): the request it answers, when its id was carried, gets an error saying so.
    Lost { id: Option<Value> },
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
    /// This process's mark on its streams' event ids ([`crate::cursor`]).
    process: u64,
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
            process: crate::cursor::process_tag(),
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
    pub(crate) fn open_stream(&self, sid: &str, carries: Carries<'_>) -> u64 {
        self.open(sid, carries, None)
    }

    /// A new GET stream of `sid` ([`Self::open_stream`]) and what ends it early. Past
    /// [`Limits::get_streams_per_session`] GET streams, the session's oldest is closed here
    /// first: the newest carries the session's messages, so an older one sends only
    /// keep-alives, and a client that keeps opening them would otherwise hold a connection
    /// for each for as long as it liked.
    pub(crate) fn open_get_stream(&self, sid: &str) -> (u64, Ended) {
        let (ends, ended) = oneshot::channel();
        (self.open(sid, Carries::Listen, Some(ends)), ended)
    }

    /// Opens a stream of `sid`; a GET stream (`ends`) first closes the oldest past the cap.
    fn open(&self, sid: &str, carries: Carries<'_>, ends: Option<oneshot::Sender<()>>) -> u64 {
        let mut table = lock(&self.table);
        let Some(s) = table.get_mut(sid) else {
            return 0;
        };
        if ends.is_some() {
            let cap = self.limits.get_streams_per_session.max(1);
            loop {
                let listening = s.streams.iter().filter(|(_, open)| open.listens);
                let (count, oldest) =
                    listening.fold((0, u64::MAX), |(n, old), (id, _)| (n + 1, old.min(*id)));
                if count < cap {
                    break;
                }
                s.close(oldest);
            }
        }
        s.next_stream += 1;
        s.open += 1;
        let open = Open {
            listens: matches!(carries, Carries::Listen),
            next: 0,
            tag: StreamTag::new(self.process, s.next_stream, carries),
            logged: Arc::new(Notify::new()),
            _ends: ends,
        };
        s.streams.insert(s.next_stream, open);
        s.next_stream
    }

    /// Which GET stream of `sid` carries its next message: the newest still open (each
    /// message goes on one stream only, and a client that opens another, or resumes one that
    /// a balancer cut, reads the new one); 0 for none. `None`: the session is not held here.
    pub(crate) fn listener(&self, sid: &str) -> Option<u64> {
        let table = lock(&self.table);
        let streams = &table.get(sid)?.streams;
        let open = streams.iter().filter(|(_, open)| open.listens);
        Some(open.map(|(stream, _)| *stream).max().unwrap_or(0))
    }

    /// The stream `stream` of `sid` ended: the session idles from now on, if nothing else of
    /// it is open.
    pub(crate) fn close_stream(&self, sid: &str, stream: u64) {
        if let Some(s) = lock(&self.table).get_mut(sid) {
            s.close(stream);
        }
    }

    /// Logs an event of `stream` and returns its id ([`crate::cursor`]). Kept for replay as
    /// far as [`Limits::events_per_session`] and [`Limits::events_total`] allow: the session's
    /// oldest events go first; one that does not fit is sent, not kept.
    pub(crate) fn log(&self, sid: &str, stream: u64, data: Bytes) -> String {
        let limits = &self.limits;
        let mut table = lock(&self.table);
        let Some(s) = table.get_mut(sid) else {
            return self.nowhere(stream);
        };
        let Some(open) = s.streams.get_mut(&stream) else {
            return self.nowhere(stream);
        };
        let seq = open.next;
        open.next += 1;
        let id = open.tag.event(seq);
        let logged = open.logged.clone();
        let size = data.len();
        let total = self.event_bytes.load(Ordering::Relaxed);
        if size <= limits.events_per_session && total + size <= limits.events_total {
            s.events.push_back(Kept {
                stream,
                seq,
                id: id.clone(),
                data,
            });
            s.event_bytes += size;
            self.event_bytes.fetch_add(size, Ordering::Relaxed);
            while s.events.len() > EVENT_LOG || s.event_bytes > limits.events_per_session {
                let Some(old) = s.events.pop_front() else {
                    break;
                };
                s.event_bytes -= old.data.len();
                self.event_bytes
                    .fetch_sub(old.data.len(), Ordering::Relaxed);
            }
        }
        drop(table);
        logged.notify_waiters();
        id
    }

    /// The id of an event of a stream not open here: one that resumes nothing.
    fn nowhere(&self, stream: u64) -> String {
        StreamTag::new(self.process, stream, Carries::Listen).event(0)
    }

    /// What `cursor` (a `Last-Event-ID` of `sid`) resumes here: the stream, when this process
    /// wrote it and still has something of it to send; else a new GET stream, another
    /// process's answer, or an answer lost ([`Resume`]).
    pub(crate) fn resume(&self, sid: &str, cursor: &Cursor) -> Resume {
        if cursor.process != self.process {
            return match cursor.answer {
                None => Resume::Listen,
                Some(_) => Resume::Elsewhere,
            };
        }
        if self.logged(sid, cursor.stream).is_some()
            || !self.after(sid, cursor.stream, cursor.seq).is_empty()
        {
            return Resume::Replay;
        }
        match &cursor.answer {
            None => Resume::Listen,
            Some(id) => Resume::Lost { id: id.clone() },
        }
    }

    /// What stream `stream` of `sid` sent after its event `seq` and still keeps: each event's
    /// sequence number, id and data.
    pub(crate) fn after(&self, sid: &str, stream: u64, seq: u64) -> Vec<(u64, String, Bytes)> {
        lock(&self.table)
            .get(sid)
            .map(|s| {
                s.events
                    .iter()
                    .filter(|e| e.stream == stream && e.seq > seq && !e.data.is_empty())
                    .map(|e| (e.seq, e.id.clone(), e.data.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// While stream `stream` of `sid` is open: what wakes at its next event, or its end.
    pub(crate) fn logged(&self, sid: &str, stream: u64) -> Option<Arc<Notify>> {
        lock(&self.table)
            .get(sid)?
            .streams
            .get(&stream)
            .map(|open| open.logged.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
        let holds = |sid| sessions.listener(sid).is_some();
        assert!(holds("a1") && holds("b1") && !holds("a2"));
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
        let stream = sessions.open_stream("s", Carries::Listen);
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

    /// The events after the one whose id is `id`, as a resumption from it replays them.
    fn after(sessions: &Sessions, sid: &str, id: &str) -> Vec<(String, Bytes)> {
        let cursor = Cursor::parse(id).unwrap();
        match sessions.resume(sid, &cursor) {
            Resume::Replay => sessions
                .after(sid, cursor.stream, cursor.seq)
                .into_iter()
                .map(|(_, id, data)| (id, data))
                .collect(),
            other => panic!("{other:?}"),
        }
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
        let (a, b) = (
            sessions.open_stream("a", Carries::Listen),
            sessions.open_stream("b", Carries::Listen),
        );
        let primed = (
            sessions.log("a", a, Bytes::new()),
            sessions.log("b", b, Bytes::new()),
        );
        for _ in 0..3 {
            sessions.log("a", a, Bytes::from(vec![b'x'; 40]));
        }
        // 120 bytes logged, 80 kept: the oldest went.
        assert_eq!(after(&sessions, "a", &primed.0).len(), 2);
        // b may keep 70 more in all: its 80-byte event is sent, not kept; a 60-byte one is.
        sessions.log("b", b, Bytes::from(vec![b'y'; 80]));
        assert!(after(&sessions, "b", &primed.1).is_empty());
        sessions.log("b", b, Bytes::from(vec![b'y'; 60]));
        assert_eq!(after(&sessions, "b", &primed.1).len(), 1);
        // Ending a gives its bytes back.
        assert!(sessions.end("a"));
        assert_eq!(sessions.event_bytes.load(Ordering::Relaxed), 60);
    }

    #[test]
    fn the_newest_open_get_stream_carries_the_sessions_messages_and_an_older_one_takes_over() {
        let sessions = Sessions::new(Limits::default(), None);
        sessions.hold("s", [1; 16]);
        assert_eq!(sessions.listener("s"), Some(0));
        let old = sessions.open_stream("s", Carries::Listen);
        let new = sessions.open_stream("s", Carries::Listen);
        // An answer's stream, newer still, carries only its answer.
        sessions.open_stream("s", Carries::Answer(&json!(1)));
        assert_eq!(sessions.listener("s"), Some(new));
        sessions.close_stream("s", new);
        assert_eq!(sessions.listener("s"), Some(old));
        sessions.close_stream("s", old);
        assert_eq!(sessions.listener("s"), Some(0));
        assert_eq!(sessions.listener("another"), None);
    }

    #[test]
    fn a_get_stream_past_the_cap_ends_the_sessions_oldest_and_the_sessions_end_ends_the_rest() {
        let sessions = Sessions::new(limits(|l| l.get_streams_per_session = 2), None);
        sessions.hold("s", [1; 16]);
        sessions.hold("t", [1; 16]);
        let (first, mut first_ended) = sessions.open_get_stream("s");
        let (second, mut second_ended) = sessions.open_get_stream("s");
        // Another session's streams and an answer's stream count for nothing here.
        let (_, mut other_ended) = sessions.open_get_stream("t");
        sessions.open_stream("s", Carries::Answer(&json!(1)));
        assert!(
            first_ended.try_recv().is_err(),
            "two GET streams are within the cap"
        );
        let (third, mut third_ended) = sessions.open_get_stream("s");
        assert!(
            matches!(
                first_ended.try_recv(),
                Err(oneshot::error::TryRecvError::Closed)
            ),
            "the oldest GET stream is ended"
        );
        assert!(second_ended.try_recv().is_err(), "the others go on");
        assert!(other_ended.try_recv().is_err());
        assert_eq!(sessions.listener("s"), Some(third));
        sessions.close_stream("s", third);
        assert_eq!(sessions.listener("s"), Some(second), "not the ended one");
        // Its task closing the ended stream changes nothing: the session has two open still
        // (the second GET stream and the answer's).
        let open = |sessions: &Sessions| lock(&sessions.table).get("s").map(|s| s.open);
        assert_eq!(open(&sessions), Some(2));
        sessions.close_stream("s", first);
        assert_eq!(open(&sessions), Some(2));
        assert!(sessions.end("s"));
        assert!(
            matches!(
                second_ended.try_recv(),
                Err(oneshot::error::TryRecvError::Closed)
            ),
            "a session's end ends its GET streams"
        );
        assert!(
            matches!(
                third_ended.try_recv(),
                Err(oneshot::error::TryRecvError::Closed)
            ),
            "the closed third one's entry is gone too"
        );
        assert!(
            other_ended.try_recv().is_err(),
            "another session's stream goes on"
        );
    }

    #[test]
    fn a_stream_replays_only_its_own_events_after_the_clients_last() {
        let sessions = Sessions::new(Limits::default(), None);
        sessions.hold("s", [1; 16]);
        let (one, two) = (
            sessions.open_stream("s", Carries::Answer(&json!(1))),
            sessions.open_stream("s", Carries::Answer(&json!(2))),
        );
        let first = sessions.log("s", one, Bytes::from_static(b"one-a"));
        sessions.log("s", two, Bytes::from_static(b"two-a"));
        let second = sessions.log("s", one, Bytes::from_static(b"one-b"));
        assert_eq!(
            after(&sessions, "s", &first),
            [(second, Bytes::from_static(b"one-b"))]
        );
    }

    #[test]
    fn another_processs_answer_is_refused_and_its_get_stream_opens_anew() {
        // Two replicas: each writes its own process tag into its event ids.
        let (here, there) = (
            Sessions::new(Limits::default(), None),
            Sessions::new(Limits::default(), None),
        );
        for sessions in [&here, &there] {
            sessions.hold("s", [1; 16]);
        }
        let answer = there.open_stream("s", Carries::Answer(&json!("call-7")));
        let listen = there.open_stream("s", Carries::Listen);
        let answer = there.log("s", answer, Bytes::new());
        let listen = there.log("s", listen, Bytes::from_static(b"note"));
        // `here` has streams with the same numbers: none of theirs is replayed.
        let same = here.open_stream("s", Carries::Listen);
        here.log("s", same, Bytes::from_static(b"not theirs"));
        assert_eq!(
            here.resume("s", &Cursor::parse(&answer).unwrap()),
            Resume::Elsewhere
        );
        assert_eq!(
            here.resume("s", &Cursor::parse(&listen).unwrap()),
            Resume::Listen
        );
    }

    #[test]
    fn an_ended_answer_no_longer_kept_is_lost_and_one_under_way_replays() {
        let sessions = Sessions::new(
            limits(|l| {
                l.events_per_session = 10;
            }),
            None,
        );
        sessions.hold("s", [1; 16]);
        let stream = sessions.open_stream("s", Carries::Answer(&json!(5)));
        let primed = sessions.log("s", stream, Bytes::new());
        // Under way, nothing yet after the priming event: the client is to come back.
        assert_eq!(after(&sessions, "s", &primed), []);
        // Its answer is past the session's bound: sent, not kept; then the stream ends.
        sessions.log("s", stream, Bytes::from(vec![b'z'; 20]));
        sessions.close_stream("s", stream);
        assert_eq!(
            sessions.resume("s", &Cursor::parse(&primed).unwrap()),
            Resume::Lost { id: Some(json!(5)) }
        );
    }
}

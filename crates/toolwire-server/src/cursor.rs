//! The event ids of a legacy session's SSE streams, as any replica reads them back from a
//! `Last-Event-ID`: which process wrote the stream, whether it was the session's GET stream
//! or the answer to a request (and that request's id, when short), and the event's place in
//! it.
//!
//! `{process}-g{stream}-{seq}` for a GET stream, `{process}-a{stream}-{seq}-{id}` for an
//! answer, where `process` is 16 hexadecimal digits drawn at random when the front end
//! starts, `stream` and `seq` count from 0 within the session on that process, and `id` is
//! the request's id as JSON in unpadded base64url (left out, with its dash, when its JSON is
//! longer than [`MAX_ID`]). Replicas behind one load balancer hold a session's streams each
//! in its own memory: the process tag keeps one replica's stream 3 from being read as
//! another's stream 3 (the spec forbids replaying another stream's messages); the kind and
//! the id say what a replica that cannot replay answers instead ([`crate::sessions::Resume`]):
//! a new GET stream, a refusal another replica may not give, or an error to the request.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

/// The longest request id (its JSON text, in bytes) an answer's event ids carry.
pub(crate) const MAX_ID: usize = 64;

/// What a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carries<'a> {
    /// The session's GET stream: notifications and server requests.
    Listen,
    /// The answer to the request with this id (and what comes before it).
    Answer(&'a Value),
}

/// The part of every event id of one stream before its sequence number, and the part after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamTag {
    head: String,
    tail: String,
}

impl StreamTag {
    /// The tag of stream `stream` of process `process`, carrying `carries`.
    pub(crate) fn new(process: u64, stream: u64, carries: Carries<'_>) -> Self {
        match carries {
            Carries::Listen => Self {
                head: format!("{process:016x}-g{stream}-"),
                tail: String::new(),
            },
            Carries::Answer(id) => {
                let json = serde_json::to_vec(id).unwrap_or_default();
                let tail = if json.is_empty() || json.len() > MAX_ID {
                    String::new()
                } else {
                    format!("-{}", URL_SAFE_NO_PAD.encode(json))
                };
                Self {
                    head: format!("{process:016x}-a{stream}-"),
                    tail,
                }
            }
        }
    }

    /// The id of the stream's event `seq`.
    pub(crate) fn event(&self, seq: u64) -> String {
        format!("{}{seq}{}", self.head, self.tail)
    }
}

/// A `Last-Event-ID`, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// The process that wrote the stream.
    pub(crate) process: u64,
    pub(crate) stream: u64,
    /// The last event the client has.
    pub(crate) seq: u64,
    /// `None`: the GET stream; `Some(id)`: an answer, to request `id` when the id says it
    /// (a string or a number).
    pub(crate) answer: Option<Option<Value>>,
}

impl Cursor {
    /// Reads an event id this module wrote; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        // The id, last, may hold dashes of its own (base64url).
        let mut parts = text.splitn(4, '-');
        let process = parts.next()?;
        if process.len() != 16 {
            return None;
        }
        let process = u64::from_str_radix(process, 16).ok()?;
        let stream = parts.next()?;
        let (kind, stream) = stream.split_at_checked(1)?;
        let stream = stream.parse().ok()?;
        let seq = parts.next()?.parse().ok()?;
        let id = parts.next();
        let answer = match (kind, id) {
            ("g", None) => None,
            ("a", None) => Some(None),
            ("a", Some(id)) => Some(Some(
                URL_SAFE_NO_PAD
                    .decode(id)
                    .ok()
                    .and_then(|json| serde_json::from_slice::<Value>(&json).ok())
                    .filter(|id| id.is_string() || id.is_number())?,
            )),
            _ => return None,
        };
        Some(Self {
            process,
            stream,
            seq,
            answer,
        })
    }
}

/// A tag for this process's streams, from the system's random source (or, should it fail,
/// from the clock and the process id: distinct between replicas all the same).
pub(crate) fn process_tag() -> u64 {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 8];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_ok() {
        return u64::from_be_bytes(bytes);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_answers_event_id_reads_back_with_its_process_stream_place_and_request() {
        // `"0>0"` encodes with a dash of base64url's own (`IjA-MCI`).
        for id in [json!(7), json!("call-α"), json!(-1.5), json!("0>0")] {
            let text = StreamTag::new(0xfeed, 3, Carries::Answer(&id)).event(12);
            assert_eq!(
                Cursor::parse(&text),
                Some(Cursor {
                    process: 0xfeed,
                    stream: 3,
                    seq: 12,
                    answer: Some(Some(id.clone())),
                }),
                "{text}"
            );
        }
    }

    #[test]
    fn a_get_streams_event_id_reads_back_as_the_get_stream() {
        let text = StreamTag::new(u64::MAX, 1, Carries::Listen).event(0);
        assert_eq!(text, "ffffffffffffffff-g1-0");
        assert_eq!(
            Cursor::parse(&text),
            Some(Cursor {
                process: u64::MAX,
                stream: 1,
                seq: 0,
                answer: None,
            })
        );
    }

    #[test]
    fn a_request_id_too_long_to_carry_leaves_an_answer_without_one() {
        let long = json!("x".repeat(MAX_ID));
        let text = StreamTag::new(1, 2, Carries::Answer(&long)).event(0);
        assert_eq!(text, "0000000000000001-a2-0");
        assert_eq!(Cursor::parse(&text).map(|c| c.answer), Some(Some(None)));
    }

    #[test]
    fn ids_this_module_did_not_write_are_not_read() {
        for text in [
            "",
            "3:0",
            "0000000000000001-x2-0",
            "000000000000001-g2-0",
            "0000000000000001-g2",
            "0000000000000001-g2-0-MQ",
            "0000000000000001-a2-0-!!",
            "0000000000000001-a2-0-e30",
            "0000000000000001-a2-0-MQ-1",
        ] {
            assert_eq!(Cursor::parse(text), None, "{text}");
        }
    }
}

//! A Server-Sent Events parser with limits (WHATWG HTML, "Event stream interpretation").
//!
//! Written here rather than taken from a crate: the SSE crates we looked at (`eventsource-stream`,
//! `sse-stream`) buffer a line or an event without any bound, and a server must not be able to
//! grow this client's memory at will. Lines end with CRLF, LF or CR (also split across chunks);
//! a leading BOM is skipped; comments (`:`) are ignored; `retry` takes digits only; an `id` with
//! NUL is ignored.

use std::time::Duration;

use bytes::{Bytes, BytesMut};

/// The longest reconnection delay a server's `retry` field can set (30 s): a larger one,
/// or one past what a `u64` holds, is taken as this.
pub const MAX_SSE_RETRY: Duration = Duration::from_secs(30);

/// One dispatched event. Events with empty `data` are dispatched too (unlike in a browser), so
/// that the caller sees the `id` and `retry` of a priming event; skip them for JSON-RPC.
///
/// A `retry` over [`MAX_SSE_RETRY`] is taken as [`MAX_SSE_RETRY`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event` field, if any.
    pub event: Option<String>,
    /// The `data` lines joined with `\n`.
    pub data: Bytes,
    /// The `id` field, if this event had one.
    pub id: Option<String>,
    /// The `retry` field, if this event had a valid one.
    pub retry: Option<Duration>,
}

impl SseEvent {
    /// Whether this event carries a JSON-RPC message: non-empty data and an `event` that is
    /// absent or `message`.
    pub fn is_message(&self) -> bool {
        !self.data.is_empty() && matches!(self.event.as_deref(), None | Some("message"))
    }
}

/// An SSE stream broke a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line was longer than the limit.
    #[error("an SSE line is longer than the {limit}-byte limit")]
    LineTooLong {
        /// The limit.
        limit: usize,
    },
    /// An event's data was larger than the limit.
    #[error("an SSE event is larger than the {limit}-byte limit")]
    EventTooLarge {
        /// The limit.
        limit: usize,
    },
}

/// Incremental parser: feed it chunks as they arrive.
#[derive(Debug)]
pub struct SseParser {
    max_line: usize,
    max_event: usize,
    line: BytesMut,
    /// The previous chunk ended in CR: a LF at the start of the next one belongs to it.
    after_cr: bool,
    /// Still at the very start of the stream (a BOM may follow).
    at_start: bool,
    data: BytesMut,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    retry: Option<Duration>,
}

impl SseParser {
    /// A parser that refuses lines longer than `max_line` bytes and events whose data exceeds
    /// `max_event` bytes.
    pub fn new(max_line: usize, max_event: usize) -> Self {
        Self {
            max_line,
            max_event,
            line: BytesMut::new(),
            after_cr: false,
            at_start: true,
            data: BytesMut::new(),
            has_data: false,
            event: None,
            id: None,
            retry: None,
        }
    }

    /// Parses `chunk`, appending every event it completes to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.at_start && !chunk.is_empty() {
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            let have = self.line.len();
            // The BOM may itself be split; hold back a prefix of it.
            let mut probe = self.line.to_vec();
            probe.extend_from_slice(&chunk[..chunk.len().min(3)]);
            if probe.len() < 3 && BOM.starts_with(&probe) {
                self.line.extend_from_slice(chunk);
                return Ok(());
            }
            self.at_start = false;
            if probe.starts_with(BOM) {
                self.line.clear();
                chunk = &chunk[3 - have..];
            }
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            if self.line.len() + end > self.max_line {
                return Err(SseError::LineTooLong {
                    limit: self.max_line,
                });
            }
            let line = if self.line.is_empty() {
                self.process_line(&chunk[..end], out)?;
                None
            } else {
                self.line.extend_from_slice(&chunk[..end]);
                Some(self.line.split().freeze())
            };
            if let Some(line) = line {
                self.process_line(&line, out)?;
            }
            let cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        if self.line.len() + chunk.len() > self.max_line {
            return Err(SseError::LineTooLong {
                limit: self.max_line,
            });
        }
        self.line.extend_from_slice(chunk);
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                let extra = usize::from(self.has_data);
                if self.data.len() + extra + value.len() > self.max_event {
                    return Err(SseError::EventTooLarge {
                        limit: self.max_event,
                    });
                }
                if self.has_data {
                    self.data.extend_from_slice(b"\n");
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"id" if !value.contains(&0) => {
                self.id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only, so parsing fails only on overflow: that is "longer than the
                // cap" too. A server cannot make the client sleep past `MAX_SSE_RETRY`.
                let ms = std::str::from_utf8(value)
                    .unwrap_or("")
                    .parse::<u64>()
                    .unwrap_or(u64::MAX);
                self.retry = Some(Duration::from_millis(ms).min(MAX_SSE_RETRY));
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = SseEvent {
            event: self.event.take(),
            data: self.data.split().freeze(),
            id: self.id.take(),
            retry: self.retry.take(),
        };
        self.has_data = false;
        if event.data.is_empty() && event.id.is_none() && event.retry.is_none() {
            return;
        }
        out.push(event);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new(1024, 1024);
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out).unwrap();
        }
        out
    }

    fn data(events: &[SseEvent]) -> Vec<String> {
        events
            .iter()
            .filter(|e| e.is_message())
            .map(|e| String::from_utf8(e.data.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn messages_comments_priming_and_fields() {
        let stream = b": keep-alive\n\nid: 1\ndata:\n\nid: 2\nretry: 500\nevent: message\ndata: {\"a\":1}\n\nevent: other\ndata: x\n\ndata: line1\ndata: line2\n\n";
        let events = parse_chunks(&[stream]);
        assert_eq!(data(&events), vec!["{\"a\":1}", "line1\nline2"]);
        assert_eq!(events[0].id.as_deref(), Some("1"));
        assert!(
            events[0].data.is_empty(),
            "priming event is dispatched with its id"
        );
        assert_eq!(events[1].retry, Some(Duration::from_millis(500)));
        assert_eq!(events[2].event.as_deref(), Some("other"));
        assert!(!events[2].is_message());
    }

    #[test]
    fn every_split_point_and_line_ending_gives_the_same_events() {
        for ending in ["\n", "\r\n", "\r"] {
            let text = format!(
                "\u{feff}id: 7{e}data: {{\"x\":\"y\"}}{e}{e}: c{e}data: 2{e}{e}",
                e = ending
            );
            let bytes = text.as_bytes();
            let whole = parse_chunks(&[bytes]);
            assert_eq!(data(&whole), vec!["{\"x\":\"y\"}", "2"], "{ending:?}");
            assert_eq!(whole[0].id.as_deref(), Some("7"));
            for split in 0..bytes.len() {
                let parts = parse_chunks(&[&bytes[..split], &bytes[split..]]);
                assert_eq!(parts, whole, "ending {ending:?} split at {split}");
            }
        }
    }

    #[test]
    fn limits_are_typed_errors() {
        let mut p = SseParser::new(8, 1024);
        let mut out = Vec::new();
        assert_eq!(
            p.feed(b"data: 0123456789\n", &mut out),
            Err(SseError::LineTooLong { limit: 8 })
        );
        let mut p = SseParser::new(8, 1024);
        assert_eq!(
            p.feed(b"data: 0123", &mut out)
                .and_then(|()| p.feed(b"456789", &mut out)),
            Err(SseError::LineTooLong { limit: 8 })
        );
        let mut p = SseParser::new(64, 10);
        assert_eq!(
            p.feed(b"data: 012345\ndata: 6789\n", &mut out),
            Err(SseError::EventTooLarge { limit: 10 })
        );
    }

    #[test]
    fn a_retry_past_the_cap_is_clamped_to_it() {
        let events = parse_chunks(&[
            b"retry: 86400000\ndata: 1\n\nretry: 99999999999999999999999\ndata: 2\n\n",
        ]);
        assert_eq!(events[0].retry, Some(MAX_SSE_RETRY));
        assert_eq!(events[1].retry, Some(MAX_SSE_RETRY));
    }

    #[test]
    fn bad_retry_and_nul_ids_are_ignored() {
        let events = parse_chunks(&[b"retry: 5x\nid: a\0b\ndata: 1\n\n"]);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].retry, None);
        assert_eq!(events[0].id, None);
    }
}

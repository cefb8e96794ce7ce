//! The SSE parser never panics, keeps its limits, and gives the same events however the
//! stream is split into chunks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolwire_http::{SseError, SseParser};

const LINE: usize = 256;
const EVENT: usize = 512;

fn parse(chunks: &[&[u8]]) -> (Vec<toolwire_http::SseEvent>, Option<SseError>) {
    let mut parser = SseParser::new(LINE, EVENT);
    let mut events = Vec::new();
    for chunk in chunks {
        if let Err(e) = parser.feed(chunk, &mut events) {
            return (events, Some(e));
        }
    }
    (events, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let (whole, whole_error) = parse(&[stream]);
    for event in &whole {
        assert!(event.data.len() <= EVENT);
    }
    if whole_error.is_none() {
        let at = usize::from(split).min(stream.len());
        let (parts, parts_error) = parse(&[&stream[..at], &stream[at..]]);
        assert_eq!(parts_error, None);
        assert_eq!(parts, whole);
    }
});

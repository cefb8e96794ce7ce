//! Header value decoding never panics, and encoding any decoded value round-trips through
//! printable ASCII.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolwire_headers::{decode_value, encode_value};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = decode_value(data) {
        let encoded = encode_value(&text);
        assert!(encoded.as_bytes().iter().all(|b| (0x20..=0x7e).contains(b)));
        assert_eq!(decode_value(encoded.as_bytes()).as_deref(), Ok(text.as_str()));
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let encoded = encode_value(s);
        assert!(!encoded.as_bytes().contains(&b'\r') && !encoded.as_bytes().contains(&b'\n'));
        assert_eq!(decode_value(encoded.as_bytes()).as_deref(), Ok(s));
    }
});

//! Phase one and phase two of decoding never panic, and what decodes re-encodes and decodes
//! again to the same method.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolwire_types::{ClientRequest, Frame, Message, ServerNotification, ServerRequest};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = Frame::decode(data) else { return };
    let messages: Vec<Message> = match frame {
        Frame::Single(m) => vec![m],
        Frame::Batch(items) => items.into_iter().filter_map(Result::ok).collect(),
    };
    for message in messages {
        match &message {
            Message::Request(r) => {
                let _ = ClientRequest::decode(&r.method, r.params.as_deref());
                let _ = ServerRequest::decode(&r.method, r.params.as_deref());
            }
            Message::Notification(n) => {
                let _ = ServerNotification::decode(&n.method, n.params.as_deref());
            }
            Message::Response(r) => {
                if let Ok(raw) = &r.payload {
                    use toolwire_types::RequestMethod;
                    let _ = toolwire_types::methods::method::CallTool::decode_result(raw);
                    let _ = toolwire_types::methods::method::ListTools::decode_result(raw);
                }
            }
        }
        let bytes = message.encode().expect("a decoded message re-encodes");
        let again = Message::decode(&bytes).expect("a re-encoded message decodes");
        assert_eq!(again.method(), message.method());
    }
});

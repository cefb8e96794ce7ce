//! Requests from the server (legacy era: `ping`, sampling, elicitation, roots): decoded here,
//! answered here when the answer is the session's to give, handed up otherwise.
//!
//! `ping` is answered at once. A method this client does not know, params that do not
//! decode, a capability the client never declared, a client without a handler
//! ([`SessionConfig::max_server_requests`](crate::SessionConfig::max_server_requests) 0), and
//! one request past that many in flight are refused with the JSON-RPC error the spec
//! names; the rest reach the caller as [`Event::ServerRequest`], decoded, naming the call
//! whose caller answers it (`Session::answered_by`), and count as in flight until
//! [`Session::respond`] answers them.

use toolwire_types::error::code;
use toolwire_types::{ErrorObject, Request, RequestId, ServerRequest};

use super::Session;
use crate::{Event, OpId};

impl Session {
    pub(super) fn server_request(&mut self, request: Request) {
        let Request {
            id, method, params, ..
        } = request;
        let decoded = match ServerRequest::decode(&method, params.as_deref()) {
            Ok(ServerRequest::Ping(_)) => {
                let empty = toolwire_types::EmptyResult::default();
                return self.answer(&id, &method, Ok(&empty));
            }
            Ok(ServerRequest::Other { .. }) => {
                let error = ErrorObject::new(
                    code::METHOD_NOT_FOUND,
                    format!("Method not found: {method}"),
                );
                return self.answer(&id, &method, Err::<&(), _>(error));
            }
            Ok(decoded) => decoded,
            Err(e) => {
                let error = ErrorObject::new(code::INVALID_PARAMS, e.to_string());
                return self.answer(&id, &method, Err::<&(), _>(error));
            }
        };
        let max = self.config.max_server_requests;
        let refusal = if !decoded.declared_by(&self.config.capabilities) {
            let capability = decoded.required_capability().unwrap_or_default();
            Some(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "Method not found: this client did not declare the `{capability}` capability"
                ),
            ))
        } else if max == 0 {
            Some(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("Method not found: no handler for {method} in this client"),
            ))
        } else if self.serving.len() >= max {
            // A server cannot make the client run handlers without bound: it may ask again
            // once earlier requests are answered.
            tracing::warn!(%method, "too many server requests in flight; refused");
            Some(ErrorObject::new(
                code::INTERNAL_ERROR,
                format!("too many requests from the server in flight (at most {max})"),
            ))
        } else {
            None
        };
        match refusal {
            Some(error) => self.answer(&id, &method, Err::<&(), _>(error)),
            None => {
                tracing::debug!(%method, %id, "request from the server");
                self.serving.insert(id.clone());
                self.events.push_back(Event::ServerRequest {
                    id,
                    request: decoded,
                    related: self.answered_by(),
                });
            }
        }
    }

    /// The call whose caller answers a server request arriving now
    /// ([`CallOptions::answers_requests`](crate::CallOptions::answers_requests)): the one
    /// whose response stream carried it, if its caller answers; when the transport cannot say
    /// where it came from, the only such call in flight; else none.
    fn answered_by(&self) -> Option<OpId> {
        if let Some(op) = self.arrived_on {
            return self.pending.answers_requests(op).then_some(op);
        }
        let mut answering = self.pending.answering_requests();
        match (answering.next(), answering.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    /// The session's own answer to a server request.
    fn answer(
        &mut self,
        id: &RequestId,
        method: &str,
        result: Result<&impl serde::Serialize, ErrorObject>,
    ) {
        if let Err(e) = self.respond(id, result) {
            tracing::warn!(error = %e, "could not answer {method}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::{Value, json};
    use toolwire_types::ClientCapabilities;

    use super::super::legacy_peer::{legacy, negotiate};
    use super::*;

    /// A legacy session, ready, that declared `capabilities` and takes `max` server requests
    /// at once.
    fn ready(capabilities: Value, max: usize) -> Session {
        let capabilities: ClientCapabilities =
            serde_json::from_value(capabilities).unwrap_or_default();
        let mut s = legacy(|mut config| {
            config.max_server_requests = max;
            config.with_capabilities(capabilities)
        });
        negotiate(&mut s, json!({}), Instant::now());
        while s.poll_event().is_some() {}
        s
    }

    /// The next message sent, as JSON (null if none).
    fn sent(s: &mut Session) -> Value {
        super::super::legacy_peer::sent(s).unwrap_or_default()
    }

    fn ask(s: &mut Session, id: u64, method: &str, params: Value) {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        s.handle_inbound(body.to_string().as_bytes(), Instant::now());
    }

    fn elicit() -> Value {
        json!({"message": "m", "requestedSchema": {"type": "object", "properties": {}}})
    }

    #[test]
    fn a_declared_request_is_handed_up_decoded_and_anything_else_refused_with_its_code() {
        let mut s = ready(json!({"elicitation": {}}), 4);
        ask(&mut s, 1, "elicitation/create", elicit());
        assert!(matches!(
            s.poll_event(),
            Some(Event::ServerRequest {
                id: RequestId::Number(1),
                request: ServerRequest::Elicit(_),
                related: None,
            })
        ));
        assert_eq!(sent(&mut s), Value::Null, "the caller answers it");
        for (id, method, params, code, says) in [
            (
                2,
                "sampling/createMessage",
                json!({"messages": [], "maxTokens": 1}),
                -32601,
                "`sampling`",
            ),
            (3, "vendor/custom", json!({}), -32601, "vendor/custom"),
            (
                4,
                "elicitation/create",
                json!({"message": 7}),
                -32602,
                "elicitation/create",
            ),
        ] {
            ask(&mut s, id, method, params);
            let answer = sent(&mut s);
            assert_eq!(answer["id"], id);
            assert_eq!(answer["error"]["code"], code, "{method}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{message}");
        }
        assert!(s.poll_event().is_none(), "none of those reached the caller");
        ask(&mut s, 5, "ping", json!({}));
        assert_eq!(
            sent(&mut s),
            json!({"jsonrpc": "2.0", "id": 5, "result": {}})
        );
    }

    #[test]
    fn a_request_names_the_answering_call_whose_stream_carried_it_or_the_only_one_in_flight() {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {}})).unwrap_or_default();
        let mut s = legacy(|mut config| {
            config.max_server_requests = 8;
            config.with_capabilities(capabilities)
        });
        negotiate(&mut s, json!({"tools": {}}), Instant::now());
        while s.poll_event().is_some() {}
        let call = |s: &mut Session, name: &str, answers_requests: bool| {
            let options = crate::CallOptions {
                answers_requests,
                ..crate::CallOptions::default()
            };
            let call = crate::CallRequest::new(name, None, options);
            let op = s.call(Box::new(call), Instant::now()).unwrap();
            let id: RequestId = serde_json::from_value(sent(s)["id"].clone()).unwrap();
            (op, id)
        };
        let (book, book_id) = call(&mut s, "book", true);
        let (_, plain_id) = call(&mut s, "plain", false);
        let mut asked = 0;
        let mut ask_on = |s: &mut Session, stream: Option<&RequestId>| {
            asked += 1;
            let body = json!({"jsonrpc": "2.0", "id": asked, "method": "elicitation/create", "params": elicit()});
            s.handle_inbound_on(body.to_string().as_bytes(), stream, Instant::now());
            match s.poll_event() {
                Some(Event::ServerRequest { related, .. }) => related,
                other => panic!("request {asked}: {other:?}"),
            }
        };
        assert_eq!(
            ask_on(&mut s, Some(&book_id)),
            Some(book),
            "on its own stream"
        );
        assert_eq!(
            ask_on(&mut s, Some(&plain_id)),
            None,
            "on the stream of a call whose caller does not answer: the client's handler"
        );
        assert_eq!(
            ask_on(&mut s, None),
            Some(book),
            "from nowhere known: the only answering call in flight"
        );
        assert_eq!(
            ask_on(&mut s, Some(&RequestId::Number(999))),
            Some(book),
            "on a stream the session does not know: the same"
        );
        let (other, _) = call(&mut s, "other", true);
        assert_ne!(other, book);
        assert_eq!(
            ask_on(&mut s, None),
            None,
            "two answering calls in flight: neither is guessed"
        );
        assert_eq!(
            ask_on(&mut s, Some(&book_id)),
            Some(book),
            "its stream still says"
        );
    }

    #[test]
    fn past_the_cap_requests_are_refused_until_the_caller_answers_one() {
        let mut s = ready(json!({"elicitation": {}}), 2);
        for id in 1..=3 {
            ask(&mut s, id, "elicitation/create", elicit());
        }
        assert!(matches!(s.poll_event(), Some(Event::ServerRequest { .. })));
        assert!(matches!(s.poll_event(), Some(Event::ServerRequest { .. })));
        assert!(s.poll_event().is_none());
        let refused = sent(&mut s);
        assert_eq!(
            (refused["id"].clone(), refused["error"]["code"].clone()),
            (json!(3), json!(-32603))
        );
        // One answered: room for one more.
        let decline = json!({"action": "decline"});
        s.respond(&RequestId::Number(1), Ok(&decline)).ok();
        assert_eq!(sent(&mut s)["result"], decline);
        ask(&mut s, 4, "elicitation/create", elicit());
        assert!(matches!(
            s.poll_event(),
            Some(Event::ServerRequest {
                id: RequestId::Number(4),
                ..
            })
        ));
    }

    #[test]
    fn without_a_handler_every_request_but_ping_is_refused() {
        let mut s = ready(json!({"elicitation": {}}), 0);
        ask(&mut s, 1, "elicitation/create", elicit());
        let error = sent(&mut s)["error"].take();
        let message = error["message"].to_string();
        assert_eq!(error["code"], -32601);
        assert!(message.contains("no handler"), "{message}");
        assert!(s.poll_event().is_none());
    }
}

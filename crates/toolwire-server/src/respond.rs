//! The HTTP responses the front ends answer with: empty, JSON, an SSE stream and its events,
//! a refusal of credentials.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{Either, Full};
use serde_json::Value;

use crate::Denial;
use crate::http::Body;
use crate::streamed::StreamSender;

/// The JSON text of `value` appended to `out`: written straight into the buffer
/// (`Value`'s `Display`, which `to_string` uses, goes through the formatting machinery a
/// token at a time and grows its string several times for one answer).
fn write_json(out: &mut Vec<u8>, value: &Value) {
    // A `Value` always serialises (its keys are strings) and a `Vec` never fails a write.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(value.to_string().as_bytes());
    }
}

/// The JSON text of `value`.
pub(crate) fn json_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(JSON_CAPACITY);
    write_json(&mut out, value);
    out
}

/// The first buffer of an answer's text: a typical tool result fits without growing it.
const JSON_CAPACITY: usize = 512;

/// One SSE event, with an id when given.
pub(crate) fn sse(id: Option<&str>, data: &Value) -> Bytes {
    event(None, id, |out| write_json(out, data))
}

/// One SSE event whose data is JSON text already written (an event kept for resumption).
pub(crate) fn sse_text(id: Option<&str>, json: &[u8]) -> Bytes {
    event(None, id, |out| out.extend_from_slice(json))
}

/// The 2024-11-05 transport's `message` event.
pub(crate) fn sse_message(data: &Value) -> Bytes {
    event(Some("message"), None, |out| write_json(out, data))
}

/// The 2024-11-05 transport's `endpoint` event: where to POST.
pub(crate) fn sse_endpoint(url: &str) -> Bytes {
    event(Some("endpoint"), None, |out| {
        out.extend_from_slice(url.as_bytes());
    })
}

/// An SSE event: its type and id when given, then the data `data` writes.
fn event(name: Option<&str>, id: Option<&str>, data: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut out = Vec::with_capacity(JSON_CAPACITY);
    for (field, value) in [(&b"event: "[..], name), (&b"id: "[..], id)] {
        if let Some(value) = value {
            out.extend_from_slice(field);
            out.extend_from_slice(value.as_bytes());
            out.push(b'\n');
        }
    }
    out.extend_from_slice(b"data: ");
    data(&mut out);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

pub(crate) fn empty(status: StatusCode) -> Response<Body> {
    in_map(HeaderMap::new(), status, None)
}

/// `status` with no body and `Retry-After: secs`.
pub(crate) fn retry_after(status: StatusCode, secs: &'static str) -> Response<Body> {
    let mut response = empty(status);
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static(secs));
    response
}

pub(crate) fn with_body(
    status: StatusCode,
    content_type: &'static str,
    data: Bytes,
) -> Response<Body> {
    in_map(HeaderMap::new(), status, Some((content_type, data)))
}

/// An answer written into the request's own header map, emptied: the JSON text `json`, or
/// nothing. hyper reads a connection's next request into the header map of the response it
/// wrote last, so handing back a map that has held a request's headers spares allocating and
/// growing one for every request (a response made by [`empty`] or [`with_body`] starts from a
/// map with no room).
pub(crate) fn in_request_map(
    headers: HeaderMap,
    status: StatusCode,
    json: Option<Vec<u8>>,
) -> Response<Body> {
    in_map(
        headers,
        status,
        json.map(|json| ("application/json", Bytes::from(json))),
    )
}

/// A whole response of `status` whose headers go into `headers`, emptied first; with a body,
/// its content type and data.
fn in_map(
    mut headers: HeaderMap,
    status: StatusCode,
    body: Option<(&'static str, Bytes)>,
) -> Response<Body> {
    headers.clear();
    let data = match body {
        Some((content_type, data)) => {
            headers.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static(content_type),
            );
            data
        }
        None => Bytes::new(),
    };
    let mut r = Response::new(Either::Left(Full::new(data)));
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r
}

/// The answer to a request refused before it was read.
pub(crate) fn denied(denial: &Denial) -> Response<Body> {
    tracing::info!(status = denial.status, error = %denial.error, reason = %denial.description, "refusing a request");
    let mut response = json_response(denial.status_code(), &denial.body());
    if let Some(secs) = denial.retry_after {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if let Some(challenge) = denial
        .challenge
        .as_deref()
        .and_then(|c| HeaderValue::try_from(c).ok())
    {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    response
}

/// The answer to a request that arrives while the server drains: 503 with `Retry-After: 1`
/// (a client retries it; a balancer sends the retry to a replica that serves), and a JSON-RPC
/// error that says why.
pub(crate) fn draining(id: &Value) -> Response<Body> {
    let why = "the server is shutting down: retry the request (another replica may serve it)";
    retry_later(id, StatusCode::SERVICE_UNAVAILABLE, "1", why)
}

/// The answer to a `subscriptions/listen` past the caller's bound of `cap` open at once: 429
/// with `Retry-After: 5` (a client that ended one, or waits, gets in) and a JSON-RPC error
/// that says why.
pub(crate) fn too_many_listens(id: &Value, cap: usize) -> Response<Body> {
    let why = format!("this caller has {cap} listen streams open, the most it may: end one first");
    retry_later(id, StatusCode::TOO_MANY_REQUESTS, "5", &why)
}

/// `status` with `Retry-After: secs` and a JSON-RPC error for `id` saying `why`.
fn retry_later(id: &Value, status: StatusCode, secs: &'static str, why: &str) -> Response<Body> {
    let refusal = crate::core::error(id, SHUTTING_DOWN, why, None);
    let mut response = json_response(status, &refusal);
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static(secs));
    response
}

/// The JSON-RPC code of [`draining`]'s and [`too_many_listens`]' refusals: one of the range
/// JSON-RPC leaves to servers (none of the spec's codes says "unavailable, retry").
pub(crate) const SHUTTING_DOWN: i64 = -32000;

pub(crate) fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    json_text_response(status, json_bytes(value))
}

/// A JSON response whose text is written already.
pub(crate) fn json_text_response(status: StatusCode, json: Vec<u8>) -> Response<Body> {
    with_body(status, "application/json", Bytes::from(json))
}

pub(crate) fn sse_response() -> (StreamSender, Response<Body>) {
    let (tx, body) = crate::streamed::streamed(16);
    let mut r = Response::new(Either::Right(body));
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    (tx, r)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use http::{HeaderMap, HeaderValue, StatusCode};

    use super::{in_request_map, sse, sse_endpoint, sse_message, sse_text};

    /// An answer in the request's map carries none of the request's headers, only its own, and
    /// keeps the room the request's headers took.
    #[test]
    fn an_answer_in_the_request_map_keeps_its_room_and_none_of_its_headers() {
        let mut request = HeaderMap::new();
        for (i, name) in ["authorization", "mcp-session-id", "mcp-method", "mcp-name"]
            .into_iter()
            .chain([
                "host",
                "accept",
                "user-agent",
                "content-length",
                "x-a",
                "x-b",
            ])
            .enumerate()
        {
            request.insert(name, HeaderValue::from(i));
        }
        let room = request.capacity();
        let answer = in_request_map(request.clone(), StatusCode::OK, Some(b"{}".to_vec()));
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(
            answer.headers().iter().collect::<Vec<_>>(),
            [(
                &http::header::CONTENT_TYPE,
                &HeaderValue::from_static("application/json")
            )]
        );
        assert_eq!(answer.headers().capacity(), room);
        let accepted = in_request_map(request, StatusCode::ACCEPTED, None);
        assert_eq!(accepted.status(), StatusCode::ACCEPTED);
        assert!(accepted.headers().is_empty());
        assert_eq!(accepted.headers().capacity(), room);
    }

    /// Every frame is its fields in the order a reader expects them, ending in a blank line.
    #[test]
    fn each_sse_frame_has_its_type_id_and_data_lines() {
        let data = json!({"a": 1});
        assert_eq!(&sse(Some("7"), &data)[..], b"id: 7\ndata: {\"a\":1}\n\n");
        assert_eq!(&sse(None, &data)[..], b"data: {\"a\":1}\n\n");
        assert_eq!(&sse_text(Some("8"), b"{}")[..], b"id: 8\ndata: {}\n\n");
        assert_eq!(
            &sse_message(&data)[..],
            b"event: message\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(
            &sse_endpoint("/messages?session_id=s")[..],
            b"event: endpoint\ndata: /messages?session_id=s\n\n"
        );
    }
}

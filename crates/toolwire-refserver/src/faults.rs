//! The faults the reference server injects for tests of clients: error statuses, a refused
//! `Accept`, latency, expired sessions, answer streams cut for the client to resume, and a
//! stdio server that exits between calls. They act through the protocol layer's edge hooks
//! ([`toolwire_server::Edge::intercept`], [`toolwire_server::Edge::cut_answer_stream`]) and
//! its stop ([`toolwire_server::serve_stdio_until`]), so a server built on that layer carries
//! none of them. Every fault injected is counted, for tests that must know it happened.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{HeaderValue, Method, StatusCode};
use toolwire_server::Page;

use crate::core::lock;

/// Faults to inject (all off by default).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Faults {
    /// Added before every answer of the HTTP endpoint.
    pub latency: Duration,
    /// Answer 406 to POSTs whose `Accept` is exactly this.
    pub reject_accept: Option<String>,
    /// Answer the first n POSTs 429 with `Retry-After: 1`.
    pub fail_429: u64,
    /// Answer the next n POSTs 503.
    pub fail_503: u64,
    /// Answer every n-th POST 503 (for load under faults).
    pub fail_503_every: Option<u64>,
    /// A legacy session expires (404 from then on) after this many POSTs on it.
    pub session_expiry: Option<u64>,
    /// Cut every n-th legacy SSE answer stream before its answer event (the client resumes
    /// it with `Last-Event-ID`).
    pub cut_sse_every: Option<u64>,
    /// stdio: exit after answering this many `tools/call`s (a server that dies between
    /// calls).
    pub exit_after_calls: Option<u64>,
}

/// The faults of one server, and what they have done so far.
#[derive(Debug, Default)]
pub(crate) struct Injector {
    faults: Faults,
    /// POSTs to the endpoint so far.
    posts: AtomicU64,
    /// Legacy answer streams so far.
    streams: AtomicU64,
    /// `tools/call`s answered so far.
    calls: AtomicU64,
    /// POSTs so far on each legacy session (by `Mcp-Session-Id`); past the expiry, the
    /// session is refused for good.
    sessions: Mutex<HashMap<String, u64>>,
    /// Faults injected so far, every kind.
    pub(crate) injected: std::sync::Arc<AtomicU64>,
    /// Told once the last `tools/call` of [`Faults::exit_after_calls`] is answered.
    pub(crate) exit: tokio::sync::Notify,
}

impl Injector {
    pub(crate) fn new(faults: Faults) -> Self {
        Self {
            faults,
            ..Self::default()
        }
    }

    fn injected(&self) {
        self.injected.fetch_add(1, Ordering::SeqCst);
    }

    /// What the endpoint answers `request` with instead of serving it, if a fault is due;
    /// after the latency.
    pub(crate) async fn intercept(&self, request: &http::request::Parts) -> Option<Page> {
        let faults = &self.faults;
        if !faults.latency.is_zero() {
            tokio::time::sleep(faults.latency).await;
        }
        if request.method != Method::POST {
            return None;
        }
        let n = self.posts.fetch_add(1, Ordering::SeqCst) + 1;
        let status = if n <= faults.fail_429 {
            StatusCode::TOO_MANY_REQUESTS
        } else if n <= faults.fail_429 + faults.fail_503
            || faults
                .fail_503_every
                .is_some_and(|every| every > 0 && n.is_multiple_of(every))
        {
            StatusCode::SERVICE_UNAVAILABLE
        } else if faults.reject_accept.as_deref().is_some_and(|refused| {
            request
                .headers
                .get(http::header::ACCEPT)
                .map(HeaderValue::as_bytes)
                == Some(refused.as_bytes())
        }) {
            StatusCode::NOT_ACCEPTABLE
        } else if self.session_expired(request) {
            StatusCode::NOT_FOUND
        } else {
            return None;
        };
        self.injected();
        let page = Page::new(status.as_u16(), "text/plain", "");
        Some(match status {
            StatusCode::TOO_MANY_REQUESTS => {
                page.with_header(http::header::RETRY_AFTER, HeaderValue::from_static("1"))
            }
            _ => page,
        })
    }

    /// Whether the legacy session `request` names has had its POSTs ([`Faults::session_expiry`]).
    fn session_expired(&self, request: &http::request::Parts) -> bool {
        let Some(limit) = self.faults.session_expiry else {
            return false;
        };
        let Some(session) = request
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let mut sessions = lock(&self.sessions);
        let posts = sessions.entry(session.to_owned()).or_default();
        *posts += 1;
        *posts > limit
    }

    /// Whether this legacy answer stream is cut before its answer ([`Faults::cut_sse_every`]).
    pub(crate) fn cut_answer_stream(&self) -> bool {
        let k = self.streams.fetch_add(1, Ordering::SeqCst) + 1;
        let cut = self
            .faults
            .cut_sse_every
            .is_some_and(|every| every > 0 && k.is_multiple_of(every));
        if cut {
            self.injected();
        }
        cut
    }

    /// A `tools/call` was answered: at the last of [`Faults::exit_after_calls`], the stdio
    /// server is told to stop.
    pub(crate) fn call_answered(&self) {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.faults.exit_after_calls == Some(n) {
            self.injected();
            self.exit.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail by panicking")]

    use super::*;

    fn post(session: Option<&str>, accept: &str) -> http::request::Parts {
        let mut request = http::Request::post("/mcp").header("accept", accept);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn status(page: Option<Page>) -> Option<u16> {
        page.map(|p| p.status)
    }

    #[tokio::test]
    async fn statuses_come_in_their_order_then_the_requests_are_served() {
        let injector = Injector::new(Faults {
            fail_429: 1,
            fail_503: 1,
            ..Faults::default()
        });
        let any = post(None, "*/*");
        let first = injector.intercept(&any).await.unwrap();
        assert_eq!(first.status, 429);
        assert!(
            first
                .headers
                .iter()
                .any(|(name, value)| name == http::header::RETRY_AFTER && value == "1")
        );
        assert_eq!(status(injector.intercept(&any).await), Some(503));
        assert_eq!(status(injector.intercept(&any).await), None);
        assert_eq!(injector.injected.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_session_expires_after_its_posts_and_another_lives_on() {
        let injector = Injector::new(Faults {
            session_expiry: Some(2),
            ..Faults::default()
        });
        let (a, b) = (post(Some("a"), "*/*"), post(Some("b"), "*/*"));
        assert_eq!(status(injector.intercept(&a).await), None);
        assert_eq!(status(injector.intercept(&a).await), None);
        assert_eq!(status(injector.intercept(&a).await), Some(404));
        assert_eq!(status(injector.intercept(&b).await), None, "b is its own");
        assert_eq!(status(injector.intercept(&a).await), Some(404), "for good");
    }

    #[tokio::test]
    async fn only_the_refused_accept_is_answered_406_and_gets_are_never_faulted() {
        let injector = Injector::new(Faults {
            reject_accept: Some("application/json, text/event-stream".into()),
            fail_503_every: Some(1),
            ..Faults::default()
        });
        let get = http::Request::get("/mcp").body(()).unwrap().into_parts().0;
        assert_eq!(status(injector.intercept(&get).await), None);
        let injector = Injector::new(Faults {
            reject_accept: Some("application/json, text/event-stream".into()),
            ..Faults::default()
        });
        let both = post(None, "application/json, text/event-stream");
        assert_eq!(status(injector.intercept(&both).await), Some(406));
        let json = post(None, "application/json");
        assert_eq!(status(injector.intercept(&json).await), None);
    }

    #[test]
    fn every_nth_stream_is_cut_and_the_last_call_tells_the_exit() {
        let injector = Injector::new(Faults {
            cut_sse_every: Some(2),
            exit_after_calls: Some(2),
            ..Faults::default()
        });
        let cuts: Vec<bool> = (0..4).map(|_| injector.cut_answer_stream()).collect();
        assert_eq!(cuts, [false, true, false, true]);
        injector.call_answered();
        assert_eq!(
            injector.injected.load(Ordering::SeqCst),
            2,
            "two cuts so far"
        );
        injector.call_answered();
        assert_eq!(injector.injected.load(Ordering::SeqCst), 3, "and the exit");
    }
}

//! One POST's life: the request with its headers, retries with backoff and `Retry-After`, the
//! 406 `Accept` fallback, and the 404 that replays a lost legacy session before resending.

use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, RETRY_AFTER, USER_AGENT, WWW_AUTHENTICATE,
};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use toolwire_transport::{Outbound, RequestFailure, RequestId, RetryClass, SessionStep};

use crate::authorizer::Auth;
use crate::redirect::{self, MAX_REDIRECTS};
use crate::{
    AcceptProfile, AuthRequest, ERROR_BODY_LIMIT, HttpError, Inner, MAX_AUTH_RESENDS, Refusal,
    Resend, SESSION_ID, SNIPPET, State, lock, parse_challenges,
};

/// What a failed exchange reports.
pub(crate) struct Failure {
    pub(crate) status: Option<StatusCode>,
    pub(crate) body: Bytes,
    pub(crate) error: HttpError,
}

impl Failure {
    /// What `recv` reports for request `id`.
    pub(crate) fn into_request_failure(self, id: RequestId) -> RequestFailure {
        RequestFailure {
            id,
            status: self.status.map(|s| s.as_u16()),
            body: self.body,
            session_gone: matches!(self.error, HttpError::SessionExpired),
            cause: std::sync::Arc::new(self.error),
        }
    }
}

impl From<HttpError> for Failure {
    fn from(error: HttpError) -> Self {
        Self {
            status: None,
            body: Bytes::new(),
            error,
        }
    }
}

/// The `WWW-Authenticate` challenges of a response.
fn challenges(headers: &HeaderMap) -> Vec<crate::Challenge> {
    parse_challenges(
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .map(HeaderValue::as_bytes),
    )
}

pub(crate) fn snippet(body: &[u8]) -> String {
    let cut = body.len().min(SNIPPET);
    String::from_utf8_lossy(&body[..cut]).into_owned()
}

/// `Retry-After` as a delay: delta-seconds or an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

impl Inner {
    /// A request with everything but the per-message headers, to the endpoint (or where a
    /// 308 moved it, or `to` when a 307 redirects this message); `None` for the session id if
    /// it must not be sent.
    pub(crate) fn request(
        &self,
        method: Method,
        body: Bytes,
        with_session: bool,
        to: Option<&Uri>,
    ) -> (Request<Full<Bytes>>, Option<HeaderValue>, AcceptProfile) {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        let state = lock(&self.state);
        *req.uri_mut() = self.endpoint(to, &state).clone();
        let headers = req.headers_mut();
        // The common headers below plus the few every POST adds (Mcp-*, content type, accept).
        headers.reserve(self.config.headers.len() + 12);
        for (name, value) in &self.config.headers {
            headers.append(name, value.clone());
        }
        headers.insert(USER_AGENT, self.config.user_agent.clone());
        if let Some(value) = &self.config.proxy_auth {
            headers.insert(http::header::PROXY_AUTHORIZATION, value.clone());
        }
        let session = if with_session {
            state.session_id.clone()
        } else {
            None
        };
        if let Some(id) = &session {
            headers.insert(SESSION_ID, id.clone());
        }
        (req, session, state.accept)
    }

    /// Where a request goes: `to` (a 307 for this message), else where a 308 moved the
    /// endpoint, else the endpoint.
    fn endpoint<'a>(&'a self, to: Option<&'a Uri>, state: &'a State) -> &'a Uri {
        to.or(state.moved.as_ref()).unwrap_or(&self.uri)
    }

    /// Sends one request and waits for its response head, within the read timeout.
    pub(crate) async fn roundtrip(
        &self,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, HttpError> {
        let sent = self.client.request(req);
        let result = match self.config.read_timeout {
            Some(t) => tokio::time::timeout(t, sent)
                .await
                .map_err(|_| HttpError::ReadTimeout(t))?,
            None => sent.await,
        };
        result.map_err(|e| {
            let timed_out = e.is_connect()
                && crate::error::causes(&e).any(|s| {
                    s.downcast_ref::<std::io::Error>()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
                });
            if timed_out {
                HttpError::ConnectTimeout(self.config.connect_timeout)
            } else {
                crate::error::request_failed(e, self.config.max_response_head)
            }
        })
    }

    /// The start of an error body: up to [`ERROR_BODY_LIMIT`], the rest dropped.
    pub(crate) async fn read_error_body(&self, body: &mut Incoming) -> Bytes {
        let mut buf = BytesMut::new();
        let read = async {
            while let Ok(Some(data)) = self.chunk(body).await {
                let room = ERROR_BODY_LIMIT - buf.len();
                buf.extend_from_slice(&data[..data.len().min(room)]);
                if buf.len() >= ERROR_BODY_LIMIT {
                    break;
                }
            }
        };
        // An error body is advice; never wait long for it.
        let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
        buf.freeze()
    }

    /// Adds the credentials to `req`; their generation. Those given whole go on directly;
    /// an authorizer is asked.
    pub(crate) async fn authorize(
        &self,
        req: &mut Request<Full<Bytes>>,
        mcp_method: Option<&str>,
    ) -> Result<u64, HttpError> {
        let authorizer = match &self.auth {
            Auth::Static(own) => return Ok(own.apply(req.headers_mut())),
            Auth::Custom(authorizer) => authorizer,
        };
        let credentials = authorizer
            .credentials(&AuthRequest {
                method: req.method(),
                uri: req.uri(),
                mcp_method,
                http: &self.executor,
            })
            .await
            .map_err(HttpError::Authorization)?;
        for (name, value) in credentials.headers {
            if let Some(name) = name {
                req.headers_mut().insert(name, value);
            }
        }
        Ok(credentials.generation)
    }

    /// Whether requests of the legacy session must be held back: the server ended it, or
    /// the credentials may stand for someone else since it opened ([`Auth::identity`]: new
    /// credentials given whole, a new OAuth authorization or a logout; not a refresh or a
    /// step-up). Servers bind a session to who opened it; the session above opens a new one
    /// with the new credentials.
    pub(crate) fn session_over(&self) -> bool {
        let mut state = lock(&self.state);
        if state.session_id.is_some() && state.opened_as != self.auth.identity() {
            tracing::debug!("a new identity: the legacy session ends with the old one");
            state.end_session();
        }
        state.session_ended
    }

    /// Asks the authorizer what to do about a 401 or 403 to a POST to `uri` that carried
    /// credentials of `generation`: `Ok(true)` to resend, `Ok(false)` to report the refusal.
    pub(crate) async fn refused(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        uri: &Uri,
        mcp_method: Option<&str>,
        generation: u64,
        attempt: u32,
    ) -> Result<bool, HttpError> {
        let Auth::Custom(authorizer) = &self.auth else {
            return Ok(false);
        };
        if attempt >= MAX_AUTH_RESENDS {
            tracing::warn!(
                attempt,
                "credentials refused again; not resending this message"
            );
            return Ok(false);
        }
        let challenges = challenges(headers);
        // Only POSTs are resent after a refusal (the GET stream reconnects on its own, with
        // fresh credentials).
        let method = Method::POST;
        // While it runs (a refresh, or a person logging in), the client does not count the
        // time against the requests waiting on it.
        let _authorizing = self.authorizing.start();
        let resend = authorizer
            .refused(&Refusal {
                status,
                challenges: &challenges,
                headers,
                request: AuthRequest {
                    method: &method,
                    uri,
                    mcp_method,
                    http: &self.executor,
                },
                generation,
                attempt,
            })
            .await
            .map_err(HttpError::Authorization)?;
        Ok(resend == Resend::Yes)
    }

    /// Turns a final non-success response into a failure (a 401/403 logged with its challenges).
    pub(crate) async fn status_failure(
        &self,
        resp: Response<Incoming>,
        method: Option<&str>,
    ) -> Failure {
        let status = resp.status();
        let (parts, mut body) = resp.into_parts();
        let body = self.read_error_body(&mut body).await;
        self.received(method, status, &body);
        self.refusal_failure(status, &parts.headers, body, method)
    }

    /// The failure a non-success response whose body was read reports (a 401/403 logged with
    /// its challenges).
    pub(crate) fn refusal_failure(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: Bytes,
        method: Option<&str>,
    ) -> Failure {
        let challenges = challenges(headers);
        let www_authenticate = headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter(|v| v.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .map(str::to_owned)
            .collect();
        let snippet = crate::error::json_words(&body).unwrap_or_else(|| snippet(&body));
        if matches!(status.as_u16(), 401 | 403) {
            tracing::warn!(%status, ?challenges, method = method.unwrap_or("(none)"), "the server refused the credentials");
        }
        Failure {
            status: Some(status),
            body,
            error: HttpError::Status {
                status,
                retry_after: retry_after(headers, SystemTime::now()),
                snippet,
                challenges,
                www_authenticate,
            },
        }
    }

    /// POSTs `out` until it has a final response: steps the Accept profile down on 406, ends
    /// a legacy session the server no longer knows (404), resends retry-safe messages on transient failures,
    /// and any message when no connection could be made (nothing was sent). Returns 2xx responses; everything else is a failure.
    pub(crate) async fn post(&self, out: &Outbound) -> Result<Response<Incoming>, Failure> {
        let method = out.kind.method();
        let opens = out.session == SessionStep::Opens;
        let safe = out.retry == RetryClass::Safe;
        let policy = &self.config.retry;
        let mut delays = policy.delays();
        let mut retries = 0;
        let mut auth_resends = 0;
        // Where a 307 sent this message, and how many redirects it followed.
        let mut redirected: Option<Uri> = None;
        let mut redirects = 0;
        loop {
            if !opens && self.session_over() {
                tracing::debug!("the session ended: held back until a new one opens");
                return Err(HttpError::SessionExpired.into());
            }
            let (mut req, sent_session, accept) =
                self.request(Method::POST, out.body.clone(), !opens, redirected.as_ref());
            let headers = req.headers_mut();
            // Room for the message's own headers and the two below: one allocation, no rehash.
            headers.reserve(out.headers.len() + 2);
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Some(value) = accept.header() {
                headers.insert(ACCEPT, value);
            }
            for (name, value) in &out.headers {
                headers.insert(name, value.clone());
            }
            // Credentials of the message's own (a gateway calling for its caller) go as they
            // are: the transport's are not added, and a refusal of them is reported, not
            // answered with the transport's own login.
            let own = headers.contains_key(AUTHORIZATION);
            let generation = if own {
                0
            } else {
                self.authorize(&mut req, method).await?
            };
            if opens {
                lock(&self.state).opened_as = self.auth.identity();
            }
            let uri = (matches!(self.auth, Auth::Custom(_)) && !own).then(|| req.uri().clone());
            if let Some(hook) = &self.config.on_sending {
                hook(method.unwrap_or("(response)"));
            }
            let resp = match self.roundtrip(req).await {
                Ok(resp) => resp,
                Err(e) => {
                    // A message that never left may go again, whatever it is.
                    if (safe || e.nothing_sent()) && retries < policy.max_retries {
                        let delay = delays.next().unwrap_or(policy.max_delay);
                        retries += 1;
                        tracing::info!(retry = retries, ?delay, reason = %e, "resending after a failure before any response");
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    return Err(e.into());
                }
            };
            let status = resp.status();
            if status.is_success() {
                return Ok(resp);
            }
            match status.as_u16() {
                300..=399 => {
                    // Where this attempt went, found again only here: no copy per request.
                    let asked = self
                        .endpoint(redirected.as_ref(), &lock(&self.state))
                        .clone();
                    let next = redirect::target(&asked, status, resp.headers().get(LOCATION))
                        .and_then(|next| {
                            redirects += 1;
                            if redirects > MAX_REDIRECTS {
                                return Err(HttpError::RedirectRefused {
                                    status,
                                    reason: "more than five redirects in a row",
                                });
                            }
                            Ok(next)
                        });
                    let next = match next {
                        Ok(next) => next,
                        Err(error) => {
                            tracing::warn!(%status, error = %error, "redirect not followed");
                            return Err(Failure {
                                status: Some(status),
                                body: Bytes::new(),
                                error,
                            });
                        }
                    };
                    tracing::info!(%status, to = %next.path(), "following a same-origin redirect");
                    if status == StatusCode::PERMANENT_REDIRECT {
                        lock(&self.state).moved = Some(next.clone());
                    }
                    redirected = Some(next);
                }
                406 => {
                    let next = {
                        let mut state = lock(&self.state);
                        if state.accept == accept {
                            state.accept = accept.fallback().unwrap_or(accept);
                        }
                        (state.accept != accept).then_some(state.accept)
                    };
                    match next {
                        Some(next) => {
                            tracing::info!(from = ?accept, to = ?next, "406 Not Acceptable; trying the next Accept profile");
                            continue;
                        }
                        None => return Err(HttpError::NotAcceptable.into()),
                    }
                }
                404 if sent_session.is_some() => {
                    {
                        let mut state = lock(&self.state);
                        if state.session_id == sent_session {
                            state.end_session();
                        }
                    }
                    tracing::warn!(
                        "the server no longer knows the session (404); a new one is to be opened"
                    );
                    let mut body = resp.into_body();
                    let body = self.read_error_body(&mut body).await;
                    self.received(method, status, &body);
                    return Err(Failure {
                        status: Some(status),
                        body,
                        error: HttpError::SessionExpired,
                    });
                }
                401 | 403 if uri.is_some() => {
                    let uri = uri.as_ref().unwrap_or(&self.uri);
                    // The body is read (and the connection freed) before the authorizer runs
                    // its flow.
                    let (parts, mut body) = resp.into_parts();
                    let body = self.read_error_body(&mut body).await;
                    self.received(method, status, &body);
                    let refusal = self.refused(
                        status,
                        &parts.headers,
                        uri,
                        method,
                        generation,
                        auth_resends,
                    );
                    match refusal.await {
                        Ok(true) => {
                            auth_resends += 1;
                            tracing::info!(%status, attempt = auth_resends, "credentials repaired; resending");
                        }
                        Ok(false) => {
                            return Err(self.refusal_failure(status, &parts.headers, body, method));
                        }
                        Err(error) => {
                            return Err(Failure {
                                status: Some(status),
                                body,
                                error,
                            });
                        }
                    }
                }
                408 | 429 | 502 | 503 | 504 if safe && retries < policy.max_retries => {
                    let delay = match retry_after(resp.headers(), SystemTime::now()) {
                        Some(d) if d > policy.max_retry_after => {
                            tracing::info!(%status, retry_after = ?d, "Retry-After beyond the cap; not retrying");
                            return Err(self.status_failure(resp, method).await);
                        }
                        Some(d) => d,
                        None => delays.next().unwrap_or(policy.max_delay),
                    };
                    retries += 1;
                    tracing::info!(retry = retries, %status, ?delay, "resending after a transient status");
                    drop(resp);
                    tokio::time::sleep(delay).await;
                }
                _ => return Err(self.status_failure(resp, method).await),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use http::HeaderValue;
    use http::header::RETRY_AFTER;

    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(3)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        h.insert(
            RETRY_AFTER,
            HeaderValue::try_from(later).unwrap_or(HeaderValue::from_static("x")),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        h.insert(
            RETRY_AFTER,
            HeaderValue::try_from(past).unwrap_or(HeaderValue::from_static("x")),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
    }
}

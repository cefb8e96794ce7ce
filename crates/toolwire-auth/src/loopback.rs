//! The browser step of a login on this machine (RFC 8252): a listener on the loopback
//! interface receives the authorization response, served by hyper and read with `url`.
//!
//! [`LoopbackBrowser`] is an [`AuthorizationHandler`]: it binds the port (the one of a
//! registration when it is free, since servers compare redirect URIs exactly, or exactly a
//! fixed [`LoopbackRedirect`]), has the URL shown to the person by the caller's presenter
//! (which may open a browser with [`open_browser`], and may hand back an address the person
//! pasted), and waits for the first `GET` of the callback path that carries this login's
//! `state`. Anything else that reaches the port (another path, a stale tab, a page probing it)
//! gets an error page and the wait goes on.

use std::convert::Infallible;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use toolwire_http::{BoxFuture, HttpExecutor};
use url::Url;

use crate::{AuthError, AuthorizationHandler, CallbackParams};

/// How long a person has to approve in the browser, by default.
pub const APPROVAL_WAIT: Duration = Duration::from_secs(300);

/// A loopback redirect URI a client is registered with: `http://127.0.0.1:PORT/PATH`,
/// `http://[::1]:PORT/PATH` or `http://localhost:PORT/PATH`, with a port other than 0 and no
/// query or fragment. Kept as written: servers compare it exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopbackRedirect {
    uri: String,
    port: u16,
    path: String,
    /// `localhost`: a browser may reach it over IPv4 or IPv6, so both are bound.
    localhost: bool,
    v6: bool,
}

impl LoopbackRedirect {
    /// The redirect, or `None` for anything a loopback listener cannot serve.
    pub fn parse(uri: &str) -> Option<Self> {
        let url = Url::parse(uri).ok()?;
        if url.scheme() != "http" || url.query().is_some() || url.fragment().is_some() {
            return None;
        }
        // `Url` drops a port that is the scheme's default; a redirect must name its own.
        let port = url.port().filter(|p| *p != 0)?;
        let (localhost, v6) = match url.host()? {
            url::Host::Domain("localhost") => (true, false),
            url::Host::Ipv4(ip) if ip == Ipv4Addr::LOCALHOST => (false, false),
            url::Host::Ipv6(ip) if ip == Ipv6Addr::LOCALHOST => (false, true),
            _ => return None,
        };
        Some(Self {
            uri: uri.to_owned(),
            port,
            path: url.path().to_owned(),
            localhost,
            v6,
        })
    }

    /// The URI as written.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The path the callback comes to.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The addresses to listen on.
    fn addresses(&self) -> Vec<SocketAddr> {
        let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, self.port));
        match (self.localhost, self.v6) {
            (true, _) => vec![v4, v6],
            (false, true) => vec![v6],
            (false, false) => vec![v4],
        }
    }
}

/// What shows the authorization URL to the person (and opens a browser, if it may). It may
/// resolve to the callback the person pasted back (the address the browser was sent to, when
/// the browser runs on another machine); a presenter that takes no paste never resolves.
pub type Presenter =
    Arc<dyn Fn(String) -> BoxFuture<'static, Option<CallbackParams>> + Send + Sync>;

/// The listeners bound for the next authorization, and the path they answer.
struct Bound {
    listeners: Vec<TcpListener>,
    path: String,
}

/// The browser flow on this machine: a loopback listener for the callback, the URL shown by
/// the caller's [`Presenter`]. See the module docs.
pub struct LoopbackBrowser {
    present: Presenter,
    fixed: Option<LoopbackRedirect>,
    wait: Duration,
    bound: Mutex<Option<Bound>>,
}

impl fmt::Debug for LoopbackBrowser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopbackBrowser")
            .field("fixed", &self.fixed)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl LoopbackBrowser {
    /// A browser flow whose URL `present` shows; any free loopback port, `/callback`, and
    /// [`APPROVAL_WAIT`] for the person to approve.
    pub fn new(present: Presenter) -> Self {
        Self {
            present,
            fixed: None,
            wait: APPROVAL_WAIT,
            bound: Mutex::new(None),
        }
    }

    /// Exactly this redirect URI (a client registered with it): its port and path, nothing
    /// else.
    pub fn redirect(mut self, redirect: LoopbackRedirect) -> Self {
        self.fixed = Some(redirect);
        self
    }

    /// How long the person has to approve.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    fn keep(&self, bound: Bound) {
        if let Ok(mut slot) = self.bound.lock() {
            *slot = Some(bound);
        }
    }
}

/// The port of a stored loopback redirect URI of ours (`http://127.0.0.1:PORT/…`).
fn loopback_port(uri: &str) -> Option<u16> {
    LoopbackRedirect::parse(uri)
        .filter(|r| !r.localhost && !r.v6)
        .map(|r| r.port)
}

impl AuthorizationHandler for LoopbackBrowser {
    fn redirect_uri<'a>(
        &'a self,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move {
            if let Some(fixed) = &self.fixed {
                // Exactly the registered one, or nothing: another would be refused.
                let mut listeners = Vec::new();
                for address in fixed.addresses() {
                    match TcpListener::bind(address).await {
                        Ok(listener) => listeners.push(listener),
                        // `localhost` over IPv6 on a host without it: IPv4 alone serves.
                        Err(e) if fixed.localhost && address.is_ipv6() => {
                            tracing::debug!(error = %e, "no IPv6 loopback for the redirect");
                        }
                        Err(e) => {
                            return Err(AuthError::handler(
                                format!("the redirect URI's port {} cannot be bound", fixed.port),
                                Some(Box::new(e)),
                            ));
                        }
                    }
                }
                self.keep(Bound {
                    listeners,
                    path: fixed.path.clone(),
                });
                return Ok(fixed.uri.clone());
            }
            // The port of the registration when it is free (servers compare redirect URIs
            // exactly), else any.
            let kept = match previous.and_then(loopback_port) {
                Some(port) => TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await.ok(),
                None => None,
            };
            let listener = match kept {
                Some(listener) => listener,
                None => TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .await
                    .map_err(|e| AuthError::handler("no loopback port", Some(Box::new(e))))?,
            };
            let port = listener
                .local_addr()
                .map_err(|e| AuthError::handler("no loopback port", Some(Box::new(e))))?
                .port();
            self.keep(Bound {
                listeners: vec![listener],
                path: "/callback".to_owned(),
            });
            Ok(format!("http://127.0.0.1:{port}/callback"))
        })
    }

    fn authorize<'a>(
        &'a self,
        url: &'a str,
        _: &'a HttpExecutor,
    ) -> BoxFuture<'a, Result<CallbackParams, AuthError>> {
        Box::pin(async move {
            let bound = self
                .bound
                .lock()
                .ok()
                .and_then(|mut slot| slot.take())
                .ok_or_else(|| AuthError::handler("no loopback listener", None))?;
            // Only a callback carrying this flow's `state` ends the wait.
            let state = Url::parse(url).ok().and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned())
            });
            let pasted = (self.present)(url.to_owned());
            let pasted = async {
                match pasted.await {
                    Some(params) => params,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                params = serve(bound, state) => params,
                params = pasted => Ok(params),
                () = tokio::time::sleep(self.wait) => Err(AuthError::handler(
                    format!("no answer from the browser within {} s", self.wait.as_secs()),
                    None,
                )),
            }
        })
    }
}

/// Serves the listeners until a `GET` of the callback path carrying `state` (any, when
/// `None`) arrives.
async fn serve(bound: Bound, state: Option<String>) -> Result<CallbackParams, AuthError> {
    let (found, mut answers) = mpsc::channel::<CallbackParams>(1);
    let callback = Arc::new(Callback {
        path: bound.path,
        state,
        found,
    });
    let (failed, mut failures) = mpsc::channel::<std::io::Error>(1);
    let mut accepting = tokio::task::JoinSet::new();
    for listener in bound.listeners {
        let callback = callback.clone();
        let failed = failed.clone();
        accepting.spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        let _ = failed.send(e).await;
                        return;
                    }
                };
                let callback = callback.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let answer = callback.answer(&request);
                        async move { Ok::<_, Infallible>(answer) }
                    });
                    let connection = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    // A page that never finishes its request holds only its own connection.
                    let _ = tokio::time::timeout(Duration::from_secs(10), connection).await;
                });
            }
        });
    }
    drop(failed);
    tokio::select! {
        Some(params) = answers.recv() => Ok(params),
        Some(e) = failures.recv() => Err(AuthError::handler(
            "the loopback listener failed",
            Some(Box::new(e)),
        )),
    }
}

/// What the listener waits for, and where it says it found it.
struct Callback {
    path: String,
    state: Option<String>,
    found: mpsc::Sender<CallbackParams>,
}

impl Callback {
    /// The answer to one request: 404 off the path, 400 without this login's `state`, 200
    /// (and the parameters handed over) for the callback.
    fn answer(&self, request: &Request<Incoming>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET {
            return page(StatusCode::METHOD_NOT_ALLOWED, "");
        }
        let target = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let Ok(url) = Url::parse("http://127.0.0.1/").and_then(|base| base.join(&target)) else {
            return page(StatusCode::BAD_REQUEST, "");
        };
        if url.path() != self.path {
            return page(StatusCode::NOT_FOUND, "");
        }
        let params = CallbackParams::from_query(url.query().unwrap_or(""));
        if self
            .state
            .as_deref()
            .is_some_and(|expected| !params.carries_state(expected))
        {
            tracing::warn!(
                "a callback without this login's state reached the listener; still waiting"
            );
            return page(
                StatusCode::BAD_REQUEST,
                "This is not the login in progress: nothing was done. Finish the login in the tab it opened.",
            );
        }
        let text = if params.error.is_some() {
            "Authorization was refused. You can close this tab."
        } else {
            "Authorized: you can close this tab and go back to the application."
        };
        // The first wins; a second callback of the same login changes nothing.
        let _ = self.found.try_send(params);
        page(StatusCode::OK, text)
    }
}

/// A one-line page with `status`; the connection closes after it.
fn page(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let body = if text.is_empty() {
        Bytes::new()
    } else {
        Bytes::from(format!(
            "<!doctype html><title>Authorization</title><p>{text}</p>"
        ))
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// Opens `url` with `$BROWSER` (a command line; the URL is its last argument), else the
/// platform's opener (`open` on macOS, `rundll32 url.dll,FileProtocolHandler` on Windows, no
/// shell to parse the URL's `&`s; `xdg-open` elsewhere).
pub fn open_browser(url: &str) -> std::io::Result<()> {
    let (program, mut args) = match std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
    {
        Some(browser) => {
            let words = shlex::split(&browser).unwrap_or_default();
            let Some((program, rest)) = words.split_first() else {
                return Err(std::io::Error::other("$BROWSER is empty"));
            };
            (program.clone(), rest.to_vec())
        }
        None if cfg!(target_os = "macos") => ("open".to_owned(), Vec::new()),
        None if cfg!(windows) => (
            "rundll32".to_owned(),
            vec!["url.dll,FileProtocolHandler".to_owned()],
        ),
        None => ("xdg-open".to_owned(), Vec::new()),
    };
    args.push(url.to_owned());
    std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(drop)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// One GET of `target` on `port`; the status line of the answer.
    async fn get(port: u16, target: &str) -> String {
        let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
            return String::new();
        };
        let _ = s
            .write_all(format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await;
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer).await;
        answer.lines().next().unwrap_or("").to_owned()
    }

    #[tokio::test]
    async fn only_the_callback_with_this_logins_state_ends_the_wait() {
        let Ok(listener) = TcpListener::bind("127.0.0.1:0").await else {
            unreachable!("a loopback port")
        };
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let bound = Bound {
            listeners: vec![listener],
            path: "/callback".to_owned(),
        };
        let waiting = tokio::spawn(serve(bound, Some("the-state".to_owned())));
        assert_eq!(get(port, "/elsewhere").await, "HTTP/1.1 404 Not Found");
        assert_eq!(
            get(port, "/callback?code=forged&state=other").await,
            "HTTP/1.1 400 Bad Request"
        );
        assert_eq!(
            get(port, "/callback?error=access_denied").await,
            "HTTP/1.1 400 Bad Request"
        );
        assert!(
            !waiting.is_finished(),
            "a wrong state does not end the login"
        );
        assert_eq!(
            get(port, "/callback?code=real&state=the-state").await,
            "HTTP/1.1 200 OK"
        );
        let params = waiting.await.ok().and_then(Result::ok);
        assert_eq!(
            params.and_then(|p| p.code).map(|c| c.expose().to_owned()),
            Some("real".to_owned())
        );
    }

    #[test]
    fn only_a_loopback_http_redirect_with_a_port_can_be_served() {
        let served = |uri: &str| LoopbackRedirect::parse(uri).map(|r| (r.port, r.path));
        assert_eq!(
            served("http://127.0.0.1:8765/oauth/callback"),
            Some((8765, "/oauth/callback".to_owned()))
        );
        assert_eq!(
            served("http://localhost:8765"),
            Some((8765, "/".to_owned()))
        );
        assert_eq!(
            served("http://[::1]:8765/cb"),
            Some((8765, "/cb".to_owned()))
        );
        for refused in [
            "https://127.0.0.1:8765/cb",
            "http://example.com:8765/cb",
            "http://127.0.0.1/cb",
            "http://127.0.0.1:80/cb",
            "http://127.0.0.1:0/cb",
            "http://127.0.0.1:8765/cb?x=1",
            "http://127.0.0.1:8765/cb#f",
            "http://127.0.0.1:99999/cb",
            "http://127.0.0.2:8765/cb",
            "myapp://callback",
        ] {
            assert_eq!(served(refused), None, "{refused}");
        }
        assert_eq!(
            LoopbackRedirect::parse("http://localhost:8765/cb").map(|r| r.uri),
            Some("http://localhost:8765/cb".to_owned()),
            "kept as written: servers compare it exactly"
        );
    }

    #[test]
    fn a_localhost_redirect_listens_on_both_loopback_families() {
        let both = LoopbackRedirect::parse("http://localhost:8765/cb").map(|r| r.addresses());
        assert_eq!(
            both,
            Some(vec![
                SocketAddr::from((Ipv4Addr::LOCALHOST, 8765)),
                SocketAddr::from((Ipv6Addr::LOCALHOST, 8765)),
            ])
        );
        let v4 = LoopbackRedirect::parse("http://127.0.0.1:8765/cb").map(|r| r.addresses());
        assert_eq!(
            v4,
            Some(vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 8765))])
        );
    }

    #[test]
    fn a_stored_loopback_redirect_of_ours_names_its_port() {
        assert_eq!(
            loopback_port("http://127.0.0.1:41234/callback"),
            Some(41234)
        );
        assert_eq!(loopback_port("http://localhost:41234/callback"), None);
        assert_eq!(loopback_port("http://127.0.0.1:x/callback"), None);
    }
}

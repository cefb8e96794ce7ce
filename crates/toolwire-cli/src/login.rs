//! OAuth for remote servers (`--url`, or a `--config` entry without an `Authorization` header):
//! `login`, `logout`, `auth status`, and the credentials every other command uses.
//!
//! Credentials live in one file (`$TOOLWIRE_CREDENTIALS`, else
//! `$XDG_STATE_HOME/toolwire/credentials.json`, else `~/.local/state/toolwire/…`), 0600. A
//! command that meets a 401 with no usable credentials runs the flow when a person is there
//! (stdin and stderr are terminals), and otherwise fails with exit 3 and "run `toolwire --url
//! URL login`" (or `--config FILE --server NAME`). Credentials given on the command line
//! (`--bearer`) or in the entry (an `Authorization` header) win: no OAuth at all. Over every
//! entry of a file at once no flow runs: a server that needs a login fails, saying so.
//!
//! The browser step ([`LoopbackBrowser`]): a listener on `127.0.0.1` (the port kept with the
//! registration and bound again, since servers compare redirect URIs exactly), the URL opened
//! with `$BROWSER` if set (a command line; the URL is appended), else the platform's opener,
//! and always printed; the first `GET /callback` is the answer. A client registered with a
//! fixed loopback redirect URI (`--redirect-uri`, an entry's `oauth.redirectUri`) has exactly
//! that port and path bound instead. With `--no-browser` the URL is only printed, and the
//! address the browser was sent back to may also be pasted on stdin.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use toolwire::auth::{
    AuthChallenge, AuthError, AuthStatus, AuthorizationHandler, CallbackParams, FileStore,
    NoInteraction, OAuth, OAuthConfig, StaticClient,
};
use toolwire::{BoxFuture, HttpExecutor, HttpTransportBuilder};
use toolwire_host::OAuthEntry;

use crate::{Cli, Failure};

/// How long a person has to approve in the browser.
const APPROVAL_WAIT: Duration = Duration::from_secs(300);

/// `toolwire … login` settings.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct LoginArgs {
    /// The scope to ask for (space-separated), when the server names none.
    #[arg(long)]
    scope: Option<String>,
    /// A client id registered with the authorization server beforehand (no dynamic
    /// registration).
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
    /// The environment variable holding that client's secret.
    #[arg(long, value_name = "VAR", requires = "client_id")]
    client_secret_env: Option<String>,
    /// The one authorization server (issuer) that client is registered with: its id and
    /// secret are never sent to another. Without it, a client with a secret is bound to the
    /// first issuer it is used with.
    #[arg(long, value_name = "URL", requires = "client_id")]
    issuer: Option<String>,
    /// Keep that client's secret in the credentials file, so later commands can refresh
    /// without `--client-secret-env` (default: the secret is never written to disk).
    #[arg(long, requires = "client_secret_env")]
    save_client_secret: bool,
    /// A client ID metadata document URL, used as the client id where servers accept one.
    #[arg(long, value_name = "URL")]
    client_metadata_url: Option<String>,
    /// Print the authorization URL instead of opening a browser.
    #[arg(long)]
    no_browser: bool,
    /// The loopback redirect URI the client is registered with
    /// (`http://127.0.0.1:PORT/PATH`); the listener binds exactly that. Default: a free
    /// port, kept with the registration, and `/callback`.
    #[arg(long, value_name = "URI")]
    redirect_uri: Option<String>,
}

impl LoginArgs {
    /// These settings, with an `mcpServers` entry's `oauth` where they say nothing.
    pub(crate) fn or_entry(&self, entry: Option<&OAuthEntry>) -> Self {
        let mut args = self.clone();
        if let Some(entry) = entry {
            args.client_id = args.client_id.or_else(|| entry.client_id.clone());
            if args.scope.is_none() && !entry.scopes.is_empty() {
                args.scope = Some(entry.scopes.join(" "));
            }
            args.redirect_uri = args.redirect_uri.or_else(|| entry.redirect_uri.clone());
            args.issuer = args.issuer.or_else(|| entry.issuer.clone());
        }
        args
    }
}

/// How this run's command line names the server (`--url URL`, `--config FILE --server
/// NAME`), for the login command a failed authorization names.
pub(crate) static NAMED: OnceLock<String> = OnceLock::new();

/// Whether a person can take part (both ends are terminals).
fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

fn store() -> Result<FileStore, Failure> {
    FileStore::default_location().map_err(|e| Failure::Usage(crate::one_line(&e)))
}

/// The OAuth every HTTP command for `url` uses: the credentials file, and a browser flow when
/// `login` runs or a person is there.
pub(crate) fn oauth(url: &str, args: &LoginArgs, login: bool) -> Result<OAuth, Failure> {
    Ok(OAuth::new(url, config(args, login || interactive())?))
}

/// The OAuth settings with the credentials file (see [`config_in`]).
pub(crate) fn config(args: &LoginArgs, person: bool) -> Result<OAuthConfig, Failure> {
    config_in(store()?, args, person)
}

/// OAuth with the stored credentials on a remote server's settings, unless they carry
/// credentials of their own (`--bearer`, an entry's `Authorization` header). Without a place
/// for credentials (no HOME, no `TOOLWIRE_CREDENTIALS`) the command still runs,
/// unauthenticated.
pub(crate) fn stored(
    url: &str,
    http: HttpTransportBuilder,
    args: &LoginArgs,
) -> Result<HttpTransportBuilder, Failure> {
    if http.has_credentials() {
        return Ok(http);
    }
    let store = match store() {
        Ok(store) => store,
        Err(Failure::Usage(reason) | Failure::Remote(reason)) => {
            tracing::warn!(%reason, "OAuth is off for this command");
            return Ok(http);
        }
    };
    let config = config_in(store, args, interactive())?;
    Ok(http.authorizer(Arc::new(OAuth::new(url, config))))
}

/// The settings of the client: `store`, `args`, and a browser flow when a person takes part
/// (else none: stored credentials only). Where a flow may run, a redirect URI the CLI cannot
/// serve is a usage error.
fn config_in(store: FileStore, args: &LoginArgs, person: bool) -> Result<OAuthConfig, Failure> {
    let mut config = OAuthConfig::new()
        .client_name("toolwire")
        .store(Arc::new(store));
    config = if person {
        let redirect = args
            .redirect_uri
            .as_deref()
            .map(|uri| {
                Redirect::parse(uri).ok_or_else(|| {
                    Failure::Usage(format!(
                        "redirect URI {uri:?}: the CLI serves only http://127.0.0.1:PORT/PATH or http://localhost:PORT/PATH"
                    ))
                })
            })
            .transpose()?;
        config.handler(Arc::new(LoopbackBrowser::new(args.no_browser, redirect)))
    } else {
        config.handler(Arc::new(NoInteraction))
    };
    if let Some(scope) = &args.scope {
        config = config.scope(scope);
    }
    if let Some(id) = &args.client_id {
        let mut client = StaticClient::new(id);
        if let Some(var) = &args.client_secret_env {
            let secret = std::env::var(var).map_err(|_| {
                Failure::Usage(format!(
                    "--client-secret-env {var}: the variable is not set"
                ))
            })?;
            client = client
                .secret(secret)
                .persist_secret(args.save_client_secret);
        }
        if let Some(issuer) = &args.issuer {
            client = client.issuer(issuer);
        }
        config = config.static_client(client);
    }
    if let Some(url) = &args.client_metadata_url {
        config = config.client_metadata_url(url);
    }
    Ok(config)
}

/// What a failure means to the person at the terminal: a login needed gets the command
/// that does it.
pub(crate) fn explain(error: &toolwire::Error) -> Option<String> {
    let toolwire::Error::Authorization(e) = error else {
        return None;
    };
    let named = NAMED.get().map_or("--url URL", String::as_str);
    match &**e {
        AuthError::LoginRequired { .. } | AuthError::Handler(_) if !interactive() => Some(format!(
            "authorization required: run `toolwire {named} login`"
        )),
        _ => None,
    }
}

/// `login`: the challenge of an unauthenticated request, then the flow. `http` is the
/// server's transport settings (its headers, proxy).
pub(crate) async fn login(
    cli: &Cli,
    url: &str,
    http: HttpTransportBuilder,
    args: &LoginArgs,
) -> Result<(), Failure> {
    let oauth = oauth(url, args, true)?;
    let http = http
        .build()
        .map_err(|e| Failure::Usage(crate::one_line(&e)))?
        .executor();
    let challenge = probe(&http, url).await;
    let status = oauth
        .login(&http, &challenge)
        .await
        .map_err(|e| Failure::Remote(format!("login failed: {}", crate::one_line(&e))))?;
    if cli.json {
        say!("{}", status_json(&status));
    } else {
        say_err!("Logged in to {url} ({}).", describe(&status));
    }
    Ok(())
}

/// `logout`: forgets this server's credentials (revoking them where the server can).
pub(crate) async fn logout(
    cli: &Cli,
    url: &str,
    http: HttpTransportBuilder,
) -> Result<(), Failure> {
    let oauth = oauth(url, &LoginArgs::default(), false)?;
    let http = http
        .build()
        .map_err(|e| Failure::Usage(crate::one_line(&e)))?
        .executor();
    let removed = oauth
        .logout(Some(&http))
        .await
        .map_err(|e| Failure::Remote(crate::one_line(&e)))?;
    if cli.json {
        say!("{}", json!({"server": url, "removed": removed}));
    } else if removed == 0 {
        say_err!("No credentials for {url}.");
    } else {
        say_err!("Logged out of {url}.");
    }
    Ok(())
}

/// `auth status`: what is stored (for `--url`, or every server), never a token.
pub(crate) async fn status(cli: &Cli) -> Result<(), Failure> {
    use toolwire::auth::CredentialStore;
    let store = store()?;
    let mut entries: Vec<AuthStatus> = match &cli.url {
        Some(url) => OAuth::new(url, OAuthConfig::new().store(Arc::new(store)))
            .status()
            .await
            .map_err(|e| Failure::Remote(crate::one_line(&e)))?,
        None => store
            .list()
            .await
            .map_err(|e| Failure::Remote(crate::one_line(&e)))?
            .iter()
            .map(AuthStatus::of)
            .collect(),
    };
    entries.sort_by(|a, b| (&a.server, &a.issuer).cmp(&(&b.server, &b.issuer)));
    if cli.json {
        let all: Vec<_> = entries.iter().map(status_json).collect();
        say!("{}", json!({ "credentials": all }));
    } else if entries.is_empty() {
        say_err!("No stored credentials.");
    } else {
        for s in &entries {
            say!("{}  {}", s.server, describe(s));
        }
    }
    Ok(())
}

fn status_json(s: &AuthStatus) -> serde_json::Value {
    json!({
        "server": s.server,
        "issuer": s.issuer,
        "client_id": s.client_id,
        "scope": s.scope,
        "expires_at": s.expires_at,
        "refreshable": s.refreshable,
    })
}

fn describe(s: &AuthStatus) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let expiry = match s.expires_at {
        Some(at) if at > now => format!("expires in {} min", (at - now).div_ceil(60)),
        Some(_) if s.refreshable => "expired, refreshable".to_owned(),
        Some(_) => "expired".to_owned(),
        None => "no expiry".to_owned(),
    };
    format!(
        "issuer {}, client {}, scopes {}, {expiry}",
        s.issuer,
        s.client_id.as_deref().unwrap_or("(configured)"),
        s.scope
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("(none)"),
    )
}

/// What the server says to a request without credentials (its `WWW-Authenticate`).
async fn probe(http: &HttpExecutor, url: &str) -> AuthChallenge {
    let mut request = http::Request::new(bytes::Bytes::from_static(
        br#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#,
    ));
    *request.method_mut() = http::Method::POST;
    let Ok(uri) = url.parse() else {
        return AuthChallenge::default();
    };
    *request.uri_mut() = uri;
    let headers = request.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json, text/event-stream"),
    );
    match http.execute(request).await {
        Ok(response) => AuthChallenge::from_challenges(&toolwire::parse_challenges(
            response
                .headers()
                .get_all(http::header::WWW_AUTHENTICATE)
                .iter()
                .map(http::HeaderValue::as_bytes),
        )),
        Err(_) => AuthChallenge::default(),
    }
}

/// A loopback redirect URI a client is registered with: its port and path, and the URI as
/// written (servers compare it exactly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    uri: String,
    port: u16,
    path: String,
}

impl Redirect {
    /// `http://127.0.0.1:PORT/PATH` or `http://localhost:PORT/PATH` (a port other than 0, no
    /// query or fragment); anything else cannot be served here.
    fn parse(uri: &str) -> Option<Self> {
        let rest = uri.strip_prefix("http://")?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (host, port) = authority.rsplit_once(':')?;
        let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
        let path = if path.is_empty() { "/" } else { path };
        (matches!(host, "127.0.0.1" | "localhost") && !path.contains(['?', '#'])).then(|| Self {
            uri: uri.to_owned(),
            port,
            path: path.to_owned(),
        })
    }
}

/// The browser flow: a loopback listener for the callback, the browser sent to the URL.
pub(crate) struct LoopbackBrowser {
    no_browser: bool,
    /// The redirect URI the client is registered with, if fixed.
    fixed: Option<Redirect>,
    /// The listener and the path it answers.
    listener: Mutex<Option<(TcpListener, String)>>,
}

impl fmt::Debug for LoopbackBrowser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopbackBrowser")
            .field("no_browser", &self.no_browser)
            .field("fixed", &self.fixed)
            .finish_non_exhaustive()
    }
}

impl LoopbackBrowser {
    pub(crate) fn new(no_browser: bool, fixed: Option<Redirect>) -> Self {
        Self {
            no_browser,
            fixed,
            listener: Mutex::new(None),
        }
    }
}

/// The port of a stored loopback redirect URI.
fn loopback_port(uri: &str) -> Option<u16> {
    let rest = uri.strip_prefix("http://127.0.0.1:")?;
    rest.split('/').next()?.parse().ok()
}

impl AuthorizationHandler for LoopbackBrowser {
    fn redirect_uri<'a>(
        &'a self,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move {
            if let Some(fixed) = &self.fixed {
                // Exactly the registered one, or nothing: another would be refused.
                let listener = TcpListener::bind(("127.0.0.1", fixed.port))
                    .await
                    .map_err(|e| {
                        AuthError::Handler(format!(
                            "the redirect URI's port {} cannot be bound: {e}",
                            fixed.port
                        ))
                    })?;
                if let Ok(mut slot) = self.listener.lock() {
                    *slot = Some((listener, fixed.path.clone()));
                }
                return Ok(fixed.uri.clone());
            }
            // The port of the registration when it is free (servers compare redirect URIs
            // exactly), else any.
            let kept = match previous.and_then(loopback_port) {
                Some(port) => TcpListener::bind(("127.0.0.1", port)).await.ok(),
                None => None,
            };
            let listener = match kept {
                Some(l) => l,
                None => TcpListener::bind(("127.0.0.1", 0))
                    .await
                    .map_err(|e| AuthError::Handler(format!("no loopback port: {e}")))?,
            };
            let port = listener
                .local_addr()
                .map_err(|e| AuthError::Handler(e.to_string()))?
                .port();
            if let Ok(mut slot) = self.listener.lock() {
                *slot = Some((listener, "/callback".to_owned()));
            }
            Ok(format!("http://127.0.0.1:{port}/callback"))
        })
    }

    fn authorize<'a>(
        &'a self,
        url: &'a str,
        _: &'a HttpExecutor,
    ) -> BoxFuture<'a, Result<CallbackParams, AuthError>> {
        Box::pin(async move {
            let (listener, path) = self
                .listener
                .lock()
                .ok()
                .and_then(|mut l| l.take())
                .ok_or_else(|| AuthError::Handler("no loopback listener".into()))?;
            say_err!("To authorize, visit:\n\n  {url}\n");
            if self.no_browser {
                say_err!(
                    "Or paste here the address your browser was sent back to, then press Enter."
                );
            } else if let Err(e) = open_browser(url) {
                say_err!("The browser could not be opened ({e}); open the URL above.");
            }
            let pasted = async {
                if !self.no_browser {
                    return std::future::pending().await;
                }
                let mut line = String::new();
                let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
                match stdin.read_line(&mut line).await {
                    Ok(n) if n > 0 => CallbackParams::from_url(line.trim()),
                    _ => std::future::pending().await,
                }
            };
            // Only a callback carrying this flow's `state` ends the wait: anything else that
            // reaches the port (a page probing it, a stale tab) gets an error page.
            let state = url
                .split_once('?')
                .and_then(|(_, query)| CallbackParams::from_query(query).state);
            tokio::select! {
                params = callback(&listener, &path, state.as_deref()) => params,
                params = pasted => params,
                () = tokio::time::sleep(APPROVAL_WAIT) => Err(AuthError::Handler(format!(
                    "no answer from the browser within {} minutes",
                    APPROVAL_WAIT.as_secs() / 60
                ))),
            }
        })
    }
}

/// Opens `url` with `$BROWSER` (a command line; the URL is its last argument), else the
/// platform's opener.
fn open_browser(url: &str) -> std::io::Result<()> {
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
        // No shell: `cmd /c start` would parse the URL, whose `&`s (and whatever else an
        // authorization server puts there) are command separators to it.
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

/// Serves the loopback listener until a `GET` of `path` carrying `state` (any, when `None`);
/// other paths get 404, a callback with another or no `state` an error page, and the wait
/// goes on.
async fn callback(
    listener: &TcpListener,
    path: &str,
    state: Option<&str>,
) -> Result<CallbackParams, AuthError> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| AuthError::Handler(format!("the loopback listener failed: {e}")))?;
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        let read = async {
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .is_err()
        {
            continue;
        }
        let text = String::from_utf8_lossy(&head);
        let target = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("");
        let Some(query) = target
            .strip_prefix(path)
            .filter(|q| q.is_empty() || q.starts_with('?'))
        else {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let params = CallbackParams::from_query(query);
        if state.is_some_and(|expected| !params.carries_state(expected)) {
            tracing::warn!(
                "a callback without this login's state reached the listener; still waiting"
            );
            let page = "This is not the login in progress: nothing was done. Finish the login in the tab it opened.";
            answer(&mut stream, "400 Bad Request", page).await;
            continue;
        }
        let page = if params.error.is_some() {
            "Authorization was refused. You can close this tab."
        } else {
            "Authorized: you can close this tab and go back to the terminal."
        };
        answer(&mut stream, "200 OK", page).await;
        return Ok(params);
    }
}

/// Answers the browser with `status` and a one-line page, and closes the connection.
async fn answer(stream: &mut tokio::net::TcpStream, status: &str, page: &str) {
    let html = format!("<!doctype html><title>toolwire</title><p>{page}</p>");
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
        html.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One GET of `target` on `port`; the status line of the answer.
    async fn get(port: u16, target: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap_or_else(|e| unreachable!("loopback connect: {e}"));
        let _ = s
            .write_all(format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await;
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer).await;
        answer.lines().next().unwrap_or("").to_owned()
    }

    #[tokio::test]
    async fn a_callback_with_another_state_gets_an_error_page_and_the_login_goes_on() {
        let Ok(listener) = TcpListener::bind("127.0.0.1:0").await else {
            unreachable!("a loopback port")
        };
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let waiting =
            tokio::spawn(async move { callback(&listener, "/callback", Some("the-state")).await });
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
    fn a_stored_loopback_redirect_names_its_port() {
        assert_eq!(
            loopback_port("http://127.0.0.1:41234/callback"),
            Some(41234)
        );
        assert_eq!(loopback_port("http://localhost:41234/callback"), None);
        assert_eq!(loopback_port("http://127.0.0.1:x/callback"), None);
    }

    #[test]
    fn only_a_loopback_http_redirect_with_a_port_can_be_served() {
        let served = |uri: &str| Redirect::parse(uri).map(|r| (r.port, r.path));
        assert_eq!(
            served("http://127.0.0.1:8765/oauth/callback"),
            Some((8765, "/oauth/callback".to_owned()))
        );
        assert_eq!(
            served("http://localhost:8765"),
            Some((8765, "/".to_owned()))
        );
        for refused in [
            "https://127.0.0.1:8765/cb",
            "http://example.com:8765/cb",
            "http://127.0.0.1/cb",
            "http://127.0.0.1:0/cb",
            "http://127.0.0.1:8765/cb?x=1",
            "http://127.0.0.1:99999/cb",
            "myapp://callback",
        ] {
            assert_eq!(served(refused), None, "{refused}");
        }
        assert_eq!(
            Redirect::parse("http://localhost:8765/cb").map(|r| r.uri),
            Some("http://localhost:8765/cb".to_owned()),
            "kept as written: servers compare it exactly"
        );
    }
}

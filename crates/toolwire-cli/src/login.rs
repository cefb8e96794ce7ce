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
//! The browser step is `toolwire_auth`'s `LoopbackBrowser` (a listener on the loopback
//! interface, the registration's port kept; a fixed `--redirect-uri` or entry
//! `oauth.redirectUri` bound exactly): here the URL is printed and opened with `$BROWSER` or
//! the platform's opener; with `--no-browser` it is only printed, and the address the browser
//! was sent back to may also be pasted on stdin.

use std::sync::{Arc, OnceLock};

use serde_json::json;
use tokio::io::AsyncBufReadExt;
use toolwire::auth::{
    AuthChallenge, AuthError, AuthStatus, CallbackParams, FileStore, LoopbackBrowser,
    LoopbackRedirect, NoInteraction, OAuth, OAuthConfig, Presenter, StaticClient, open_browser,
};
use toolwire::{HttpExecutor, HttpTransportBuilder};
use toolwire_host::OAuthEntry;

use crate::{Cli, Failure};

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

/// `host` with the stored logins for its remote entries (no flow runs for many servers at
/// once); without a credentials file, OAuth is off, said as a warning.
pub(crate) fn stored_logins(host: toolwire_host::HostBuilder) -> toolwire_host::HostBuilder {
    match config(&LoginArgs::default(), false) {
        Ok(oauth) => host.oauth(oauth),
        Err(Failure::Usage(reason) | Failure::Remote(reason)) => {
            tracing::warn!(%reason, "OAuth is off for this command");
            host
        }
    }
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
                LoopbackRedirect::parse(uri).ok_or_else(|| {
                    Failure::Usage(format!(
                        "redirect URI {uri:?}: the CLI serves only http://127.0.0.1:PORT/PATH, http://[::1]:PORT/PATH or http://localhost:PORT/PATH"
                    ))
                })
            })
            .transpose()?;
        config.handler(Arc::new(loopback_browser(args.no_browser, redirect)))
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
        AuthError::LoginRequired { .. } | AuthError::Handler { .. } if !interactive() => {
            Some(format!(
                "authorization required: run `toolwire {named} login` (OAuth), or give `--bearer TOKEN` or `--header 'Authorization: …'` if the server takes credentials it issued"
            ))
        }
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
    let status = oauth.login(&http, &challenge).await.map_err(|e| {
        // A server that names no OAuth metadata may not do OAuth at all.
        let hint = if challenge.resource_metadata.is_none() {
            "; the server's 401 names no OAuth metadata: if it takes a token it issued, give `--bearer TOKEN` (or `--header 'Authorization: …'`) instead of logging in"
        } else {
            ""
        };
        Failure::Remote(format!("login failed: {}{hint}", crate::one_line(&e)))
    })?;
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

/// The browser step at a terminal: the URL printed, the browser opened (unless
/// `--no-browser`), and with `--no-browser` the address the browser was sent back to taken
/// from stdin as well.
fn loopback_browser(no_browser: bool, fixed: Option<LoopbackRedirect>) -> LoopbackBrowser {
    let present: Presenter = Arc::new(move |url: String| {
        Box::pin(async move {
            say_err!("To authorize, visit:\n\n  {url}\n");
            if !no_browser {
                if let Err(e) = open_browser(&url) {
                    say_err!("The browser could not be opened ({e}); open the URL above.");
                }
                return None;
            }
            say_err!("Or paste here the address your browser was sent back to, then press Enter.");
            let mut line = String::new();
            let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
            match stdin.read_line(&mut line).await {
                Ok(n) if n > 0 => CallbackParams::from_url(line.trim()).ok(),
                _ => None,
            }
        })
    });
    let browser = LoopbackBrowser::new(present);
    match fixed {
        Some(redirect) => browser.redirect(redirect),
        None => browser,
    }
}

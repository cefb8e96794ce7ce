//! Per-user logins to upstreams: an upstream configured `perUser` is called with a token the
//! caller got by logging in to that upstream's authorization server through the gateway. A
//! caller without one is answered with a URL elicitation (`-32042`) whose link is the
//! gateway's own sign-in page ([`CONNECT_PATH`]), signed so that no one can make one up: it
//! names the gateway account the login will be stored under and the upstream, and only when
//! the person in the browser goes on does it send the browser to the upstream authorization
//! server's own page (found and registered for by Toolwire's OAuth client,
//! `toolwire_auth::OAuth`, with the gateway's callback as its redirect URI, [`CALLBACK_PATH`]),
//! binding that browser with a cookie. The callback is taken only from a browser so bound to
//! that login: an authorization link taken out of the flow and sent to someone else completes
//! nothing. It finishes the login, the tokens are kept for that caller and upstream
//! (refreshed as they near expiry), legacy clients hear `notifications/elicitation/complete`,
//! and the retried call goes through.
//!
//! With a vault every replica shares ([`Vault::shared`]), a login made through one replica is
//! used by the others (a replica without one reads the vault again before it asks the caller
//! to sign in), and a callback that reaches another replica than the one whose link it follows
//! is handed over to it through the vault.

use crate::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, oneshot};
use toolwire::HttpExecutor;
use toolwire::auth::{
    AuthChallenge, AuthError, AuthorizationHandler, CallbackParams, CredentialStore, MemoryStore,
    OAuth, OAuthConfig, Secret, StaticClient,
};

use super::vault::Vault;

/// The future an [`AuthorizationHandler`] answers with.
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
use toolwire_headers::Header;
use toolwire_server::{Change, Page, RpcError};
use toolwire_types::error::code;

/// Where the upstreams' authorization servers send the user back.
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";

/// The gateway's sign-in page: the link a caller is given.
pub(crate) const CONNECT_PATH: &str = "/oauth/connect";

/// The tool a caller ends its own login to a per-user upstream with (listed unprefixed, like
/// the discovery tools, so no upstream's tool can have its name).
pub const SIGN_OUT: &str = "sign_out";

/// How long a login link waits for its callback.
pub const LOGIN_WAIT: Duration = Duration::from_secs(600);

/// How long a call waits for the upstream's authorization server to be found and a link made.
const LINK_WAIT: Duration = Duration::from_secs(20);

/// The most (caller, upstream) OAuth clients, and callers' in-memory stores, kept at once: past
/// it a tenth are dropped (never one whose login is under way). A dropped client is made again
/// from the vault on the caller's next call; a dropped in-memory store (no vault) is a login
/// the caller makes again.
const MAX_KEPT: usize = 10_000;

/// Makes room in `map` for one more entry: past [`MAX_KEPT`], drops a tenth of the entries
/// `keep` does not hold on to.
fn make_room<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    keep: impl Fn(&K) -> bool,
) {
    if map.len() < MAX_KEPT {
        return;
    }
    let dropped: Vec<K> = map
        .keys()
        .filter(|k| !keep(k))
        .take(MAX_KEPT / 10)
        .cloned()
        .collect();
    for key in dropped {
        map.remove(&key);
    }
}

/// Settings of a per-user upstream.
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PerUserConfig {
    /// A client registered with the upstream's authorization server (without one, the gateway
    /// registers itself dynamically, RFC 7591).
    #[serde(default)]
    pub client_id: Option<String>,
    /// The environment variable holding that client's secret, if it has one.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The secret itself, for a program that has it at hand (never read from a file).
    #[serde(skip)]
    pub client_secret: Option<Secret>,
    /// The scope to ask for.
    #[serde(default)]
    pub scope: Option<String>,
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<CallbackParams>>>>;

/// A caller's principal and an upstream's name.
type Key = (String, String);

/// Logins under way: their link and elicitation id.
type Underway = Arc<Mutex<HashMap<Key, (String, String)>>>;

/// The authorization step of one caller's login to one upstream: the link goes to the call
/// waiting for it, the callback comes back through the gateway's [`CALLBACK_PATH`].
#[derive(Debug)]
struct Handler {
    redirect_uri: String,
    pending: Pending,
    /// Where the next authorization URL goes (the call that started the login).
    link: Mutex<Option<oneshot::Sender<String>>>,
}

impl AuthorizationHandler for Handler {
    fn redirect_uri<'a>(&'a self, _: Option<&'a str>) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move { Ok(self.redirect_uri.clone()) })
    }

    fn authorize<'a>(
        &'a self,
        url: &'a str,
        _: &'a HttpExecutor,
    ) -> BoxFuture<'a, Result<CallbackParams, AuthError>> {
        Box::pin(async move {
            let state = CallbackParams::from_url(url)?
                .state
                .ok_or_else(|| AuthError::handler("the authorization URL has no state", None))?;
            let (tx, rx) = oneshot::channel();
            lock(&self.pending).insert(state.clone(), tx);
            if let Some(link) = lock(&self.link).take() {
                let _ = link.send(url.to_owned());
            }
            match tokio::time::timeout(LOGIN_WAIT, rx).await {
                Ok(Ok(params)) => Ok(params),
                _ => {
                    lock(&self.pending).remove(&state);
                    Err(AuthError::handler(
                        "the sign-in link was not followed in time",
                        None,
                    ))
                }
            }
        })
    }
}

/// One caller's OAuth client for one upstream.
struct Login {
    oauth: OAuth,
    handler: Arc<Handler>,
}

/// Every per-user login of a gateway.
pub(crate) struct Logins {
    redirect_uri: String,
    /// The gateway's public origin, for the sign-in page's links.
    origin: String,
    /// Signs sign-in links and binds browsers to them (the vault's, so every replica's; else
    /// this process's own).
    binder: ring::hmac::Key,
    pending: Pending,
    /// (caller's principal, upstream) → its OAuth client.
    clients: Mutex<HashMap<Key, Arc<Login>>>,
    /// (caller's principal, upstream) → the login under way: its link and elicitation id.
    underway: Underway,
    /// Each caller's tokens, without a vault.
    stores: Mutex<HashMap<String, Arc<dyn CredentialStore>>>,
    vault: Option<Arc<Vault>>,
    /// Set once this replica listens for callbacks handed over through a shared vault.
    listening: tokio::sync::OnceCell<()>,
}

fn failed(server: &str, why: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        code::INTERNAL_ERROR,
        format!("server `{server}`: no login for this caller: {why}"),
    )
}

impl Logins {
    /// Logins whose callbacks come to `origin` (the gateway's public origin), tokens kept in
    /// `vault` or in memory.
    pub(crate) fn new(origin: &str, vault: Option<Vault>) -> Self {
        let binder = vault.as_ref().map_or_else(
            || {
                let mut key = [0u8; 32];
                let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key);
                ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key)
            },
            Vault::binder,
        );
        Self {
            redirect_uri: format!("{origin}{CALLBACK_PATH}"),
            origin: origin.to_owned(),
            binder,
            pending: Arc::default(),
            clients: Mutex::default(),
            underway: Arc::default(),
            stores: Mutex::default(),
            vault: vault.map(Arc::new),
            listening: tokio::sync::OnceCell::new(),
        }
    }

    /// `principal`'s store: its record in the vault, or one in memory.
    fn store(&self, principal: &str) -> Arc<dyn CredentialStore> {
        if let Some(vault) = &self.vault {
            return vault.store(principal);
        }
        let mut stores = lock(&self.stores);
        if !stores.contains_key(principal) {
            let underway = lock(&self.underway);
            make_room(&mut stores, |p| underway.keys().any(|(q, _)| q == p));
        }
        stores
            .entry(principal.to_owned())
            .or_insert_with(|| Arc::new(MemoryStore::new()))
            .clone()
    }

    /// The vault, when other replicas share it.
    fn shared(&self) -> Option<&Arc<Vault>> {
        self.vault.as_ref().filter(|v| v.shared())
    }

    /// Makes sure this replica hears the callbacks other replicas hand over (a task that
    /// listens, and listens again after a failure), waiting until it first listens.
    async fn listen(&self) {
        let Some(vault) = self.shared() else {
            return;
        };
        let (vault, pending) = (vault.clone(), self.pending.clone());
        self.listening
            .get_or_init(|| async move {
                let (subscribed, first) = oneshot::channel();
                tokio::spawn(async move {
                    let mut subscribed = Some(subscribed);
                    loop {
                        let (tx, rx) = oneshot::channel();
                        let deliver = |query: &str| deliver(&pending, query);
                        let listening = vault.listen_callbacks(deliver, tx);
                        let notify = async {
                            if rx.await.is_ok()
                                && let Some(first) = subscribed.take()
                            {
                                let _ = first.send(());
                            }
                            std::future::pending::<()>().await;
                        };
                        tokio::select! {
                            outcome = listening => if let Err(e) = outcome {
                                tracing::warn!(error = %e, "not hearing sign-in callbacks from other replicas; trying again");
                            },
                            () = notify => {}
                        }
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                });
                if tokio::time::timeout(LINK_WAIT, first).await.is_err() {
                    tracing::warn!("the vault's channel could not be listened to: callbacks that reach another replica will not come back here");
                }
            })
            .await;
    }

    fn login(
        &self,
        principal: &str,
        server: &str,
        url: &str,
        config: &PerUserConfig,
    ) -> Arc<Login> {
        let key = (principal.to_owned(), server.to_owned());
        if let Some(login) = lock(&self.clients).get(&key) {
            return login.clone();
        }
        let login = self.new_login(principal, url, config);
        let mut clients = lock(&self.clients);
        {
            let underway = lock(&self.underway);
            make_room(&mut clients, |k| underway.contains_key(k));
        }
        clients.entry(key).or_insert(login).clone()
    }

    /// A new OAuth client of `principal` for the upstream at `url`, kept nowhere.
    fn new_login(&self, principal: &str, url: &str, config: &PerUserConfig) -> Arc<Login> {
        let handler = Arc::new(Handler {
            redirect_uri: self.redirect_uri.clone(),
            pending: self.pending.clone(),
            link: Mutex::new(None),
        });
        let mut oauth = OAuthConfig::new()
            .client_name("Toolwire gateway")
            .store(self.store(principal))
            .handler(handler.clone());
        if let Some(id) = &config.client_id {
            let mut client = StaticClient::new(id.clone());
            if let Some(secret) = &config.client_secret {
                client = client.secret(secret.clone());
            }
            oauth = oauth.static_client(client);
        }
        if let Some(scope) = &config.scope {
            oauth = oauth.scope(scope);
        }
        Arc::new(Login {
            oauth: OAuth::new(url, oauth),
            handler,
        })
    }

    /// The `Authorization` of `principal`'s call to `server` (at `url`); without a login, a
    /// `-32042` URL elicitation whose link logs the caller in (one login under way at a
    /// time per caller and upstream: a second call gets the same link). `announce` hears the
    /// login's completion.
    pub(crate) async fn authorization(
        &self,
        server: &str,
        url: &str,
        config: &PerUserConfig,
        principal: &str,
        http: &HttpExecutor,
        announce: &broadcast::Sender<Change>,
    ) -> Result<Header, RpcError> {
        let key = (principal.to_owned(), server.to_owned());
        let mut login = self.login(principal, server, url, config);
        // With a shared vault, another replica may have made this login since this one last
        // read it: read again (a new client) before asking the caller to sign in.
        let rereads = if self.shared().is_some() { 2 } else { 1 };
        for read in 1..=rereads {
            match login.oauth.authorization(http).await {
                Ok(Some(value)) => {
                    return toolwire_headers::authorization_header(value.expose())
                        .ok_or_else(|| failed(server, "the token cannot travel in a header"));
                }
                Ok(None) => {}
                Err(e) => return Err(failed(server, toolwire::ErrorChain(&e))),
            }
            if read < rereads {
                if lock(&self.underway).contains_key(&key) {
                    // A sign-in is under way here, and its client waits for its callback;
                    // another replica may have finished one meanwhile: a client of its own
                    // reads the vault, and takes the cached one's place if it found a login.
                    let fresh = self.new_login(principal, url, config);
                    if let Ok(Some(value)) = fresh.oauth.authorization(http).await {
                        lock(&self.clients).insert(key.clone(), fresh);
                        return toolwire_headers::authorization_header(value.expose())
                            .ok_or_else(|| failed(server, "the token cannot travel in a header"));
                    }
                } else {
                    lock(&self.clients).remove(&key);
                    login = self.login(principal, server, url, config);
                }
            }
        }
        if let Some((link, id)) = lock(&self.underway).get(&key).cloned() {
            return Err(sign_in(server, &link, &id));
        }
        self.listen().await;
        let (tx, rx) = oneshot::channel();
        *lock(&login.handler.link) = Some(tx);
        let id = toolwire_server::random_id();
        let (underway, announce, http) = (self.underway.clone(), announce.clone(), http.clone());
        let (task_login, task_key, task_id) = (login.clone(), key.clone(), id.clone());
        tokio::spawn(async move {
            let outcome = task_login
                .oauth
                .login(&http, &AuthChallenge::default())
                .await;
            lock(&underway).remove(&task_key);
            match outcome {
                Ok(_) => {
                    tracing::info!(target: "toolwire_gateway::audit", caller = %task_key.0, upstream = %task_key.1, "signed in to the upstream");
                    // Only the sessions of the caller who signed in hear it.
                    let _ = announce.send(Change::ForCaller {
                        principal: task_key.0.clone(),
                        change: Box::new(Change::ElicitationComplete(task_id)),
                    });
                }
                Err(e) => {
                    tracing::info!(caller = %task_key.0, upstream = %task_key.1, error = %toolwire::ErrorChain(&e), "a sign-in to an upstream did not finish");
                }
            }
        });
        let authorize = match tokio::time::timeout(LINK_WAIT, rx).await {
            Ok(Ok(link)) => link,
            _ => {
                return Err(failed(
                    server,
                    "its authorization server could not be reached to make a sign-in link",
                ));
            }
        };
        let link = self.connect_link(principal, server, &authorize);
        lock(&self.underway).insert(key, (link.clone(), id.clone()));
        Err(sign_in(server, &link, &id))
    }

    /// Ends `principal`'s login to `server` (at `url`): the refresh token revoked at the
    /// authorization server where it has a revocation endpoint, the tokens gone from the
    /// caller's store; a login under way is forgotten. How many logins there were.
    pub(crate) async fn sign_out(
        &self,
        server: &str,
        url: &str,
        config: &PerUserConfig,
        principal: &str,
        http: &HttpExecutor,
    ) -> Result<usize, RpcError> {
        let key = (principal.to_owned(), server.to_owned());
        let login = self.login(principal, server, url, config);
        let removed = login
            .oauth
            .logout(Some(http))
            .await
            .map_err(|e| failed(server, toolwire::ErrorChain(&e)))?;
        lock(&self.clients).remove(&key);
        lock(&self.underway).remove(&key);
        tracing::info!(target: "toolwire_gateway::audit", caller = %principal, upstream = %server, removed, "signed out of the upstream");
        Ok(removed)
    }

    /// The link to the gateway's sign-in page for `principal`'s login to `server` at the
    /// authorization URL `authorize`: signed, valid for [`LOGIN_WAIT`].
    fn connect_link(&self, principal: &str, server: &str, authorize: &str) -> String {
        let until = super::unix_now() + LOGIN_WAIT.as_secs();
        let payload = json!({"p": principal, "s": server, "u": authorize, "e": until}).to_string();
        let payload = URL_SAFE_NO_PAD.encode(payload);
        let tag = URL_SAFE_NO_PAD.encode(ring::hmac::sign(&self.binder, payload.as_bytes()));
        format!("{}{CONNECT_PATH}?t={payload}.{tag}", self.origin)
    }

    /// What a sign-in link's token `t` says, if the gateway signed it and it is not past its
    /// time: (principal, server, authorization URL).
    fn opened(&self, token: &str) -> Option<(String, String, String)> {
        let (payload, tag) = token.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        ring::hmac::verify(&self.binder, payload.as_bytes(), &tag).ok()?;
        let payload: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        if payload["e"].as_u64()? < super::unix_now() {
            return None;
        }
        let text = |k: &str| payload[k].as_str().map(str::to_owned);
        Some((text("p")?, text("s")?, text("u")?))
    }

    /// The cookie that binds a browser to the login whose OAuth `state` this is: its name
    /// (several sign-ins may be under way in one browser) and value (only the gateway can
    /// make it).
    fn binding(&self, state: &str) -> (String, String) {
        let mac = ring::hmac::sign(&self.binder, format!("bind:{state}").as_bytes());
        let name = mac
            .as_ref()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        (
            format!("toolwire-sign-in-{name}"),
            URL_SAFE_NO_PAD.encode(&mac.as_ref()[6..]),
        )
    }

    /// The page of `GET /oauth/connect?t=…`: the account and upstream the sign-in is for and a
    /// link on; with `go=1`, the browser is bound to the login (a cookie) and sent to the
    /// upstream's authorization server.
    pub(crate) fn connect(&self, query: Option<&str>) -> Page {
        let mut token = None;
        let mut go = false;
        for pair in query.unwrap_or("").split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_encoding::percent_decode_str(v).decode_utf8_lossy();
            match k {
                "t" => token = Some(v.into_owned()),
                "go" => go = v == "1",
                _ => {}
            }
        }
        let Some((principal, server, authorize)) = token.as_deref().and_then(|t| self.opened(t))
        else {
            return html(
                400,
                "Unknown sign-in",
                "<p>This sign-in link is not one this gateway made, or it has expired. Ask your agent to try again.</p>",
            );
        };
        if !go {
            let on = format!(
                "{CONNECT_PATH}?t={}&go=1",
                token.as_deref().unwrap_or_default()
            );
            let body = format!(
                concat!(
                    "<p>You are about to sign in to <b>{server}</b> for the gateway account ",
                    "<b>{principal}</b>.</p><p>The gateway will call <b>{server}</b> with the ",
                    "account you sign in with, whenever <b>{principal}</b> asks it to. Go on only ",
                    "if <b>{principal}</b> is you: if someone sent you this link, close this ",
                    "page.</p><p><a href=\"{on}\">Sign in to {server} as {principal}</a></p>"
                ),
                server = escape(&server),
                principal = escape(&principal),
                on = escape(&on),
            );
            return html(200, "Sign in through the gateway", &body);
        }
        let state = CallbackParams::from_url(&authorize)
            .ok()
            .and_then(|p| p.state)
            .unwrap_or_default();
        let (name, value) = self.binding(&state);
        let secure = if self.origin.starts_with("https://") {
            "; Secure"
        } else {
            ""
        };
        let cookie = format!(
            "{name}={value}; Path={CALLBACK_PATH}; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
            LOGIN_WAIT.as_secs()
        );
        let mut page = html(303, "Signing in", "<p>On to the sign-in page.</p>");
        for (header, value) in [
            (http::header::LOCATION, authorize),
            (http::header::SET_COOKIE, cookie),
        ] {
            if let Ok(value) = http::HeaderValue::try_from(value) {
                page = page.with_header(header, value);
            }
        }
        page.with_header(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-store"),
        )
    }

    /// The page of `GET /oauth/callback?…`: the parameters go to the login that waits for
    /// them, here or (through a shared vault) on the replica that made the link, when the
    /// browser is the one the gateway's sign-in page sent on for that login.
    pub(crate) async fn callback(&self, query: Option<&str>, headers: &http::HeaderMap) -> Page {
        let query = query.unwrap_or("");
        let state = CallbackParams::from_query(query).state.unwrap_or_default();
        let (name, value) = self.binding(&state);
        let bound = headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .flat_map(|h| h.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .any(|(n, v)| n == name && v == value);
        if !bound {
            tracing::info!(target: "toolwire_gateway::audit", "refused a sign-in callback from a browser the gateway's sign-in page did not send");
            return html(
                403,
                "Sign-in not started here",
                "<p>This sign-in was not started in this browser through the gateway's sign-in page, so it is not completed. Open the sign-in link your agent gave you, in this browser.</p>",
            );
        }
        let mut delivered = deliver(&self.pending, query);
        if !delivered && let Some(vault) = self.shared() {
            delivered = vault.hand_over_callback(query).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "a sign-in callback could not be handed to the other replicas");
                false
            });
        }
        match delivered {
            true => html(
                200,
                "Signed in",
                "<p>Signed in. You can close this window and go back to your agent.</p>",
            ),
            false => html(
                400,
                "Unknown sign-in",
                "<p>This sign-in link is unknown, used or expired. Ask your agent to try again.</p>",
            ),
        }
    }
}

/// A small HTML page: `title` and `body` (HTML already escaped).
fn html(status: u16, title: &str, body: &str) -> Page {
    Page::new(
        status,
        "text/html; charset=utf-8",
        format!("<!doctype html><meta charset=\"utf-8\"><title>{title}</title>{body}\n"),
    )
    .with_header(
        http::header::CONTENT_SECURITY_POLICY,
        http::HeaderValue::from_static("default-src 'none'"),
    )
}

/// `text` for HTML.
fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

/// Gives a callback's parameters (its `query`) to the login here that waits for its `state`:
/// whether one did.
fn deliver(pending: &Pending, query: &str) -> bool {
    let params = CallbackParams::from_query(query);
    let waiting = params
        .state
        .as_ref()
        .and_then(|state| lock(pending).remove(state));
    waiting.is_some_and(|login| login.send(params).is_ok())
}

/// The `-32042` error that asks the caller to sign in at `link`.
fn sign_in(server: &str, link: &str, id: &str) -> RpcError {
    RpcError::new(
        code::URL_ELICITATION_REQUIRED,
        format!("Sign in to `{server}` to let the gateway call it for you"),
    )
    .with_data(json!({"elicitations": [{
        "mode": "url",
        "elicitationId": id,
        "url": link,
        "message": format!("Sign in to `{server}`: the gateway calls it with your account from then on."),
    }]}))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_a_tenth_of_the_entries_go_and_the_held_ones_stay() {
        let mut map: HashMap<u32, ()> = (0..u32::try_from(MAX_KEPT).unwrap())
            .map(|k| (k, ()))
            .collect();
        make_room(&mut map, |k| *k < 5);
        assert_eq!(map.len(), MAX_KEPT - MAX_KEPT / 10);
        assert!((0..5).all(|k| map.contains_key(&k)), "a held entry went");
        // Below the bound nothing goes.
        let before = map.len();
        make_room(&mut map, |_| false);
        assert_eq!(map.len(), before);
    }

    #[tokio::test]
    async fn the_callers_kept_in_memory_stay_within_the_bound() {
        let logins = Logins::new("https://gw.example", None);
        let config = PerUserConfig::default();
        for caller in 0..MAX_KEPT + 50 {
            logins.login(
                &format!("caller-{caller}"),
                "up",
                "https://up.example/mcp",
                &config,
            );
        }
        assert!(lock(&logins.clients).len() <= MAX_KEPT);
        assert!(lock(&logins.stores).len() <= MAX_KEPT);
        // The newest caller is among them.
        let newest = (format!("caller-{}", MAX_KEPT + 49), "up".to_owned());
        assert!(lock(&logins.clients).contains_key(&newest));
    }
}

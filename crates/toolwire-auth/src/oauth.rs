//! [`OAuth`]: the authorizer the HTTP transport asks for credentials. It keeps the current
//! tokens for the fast path (a header from memory), refreshes them before they expire, and on
//! a refusal runs one authorization for every request that was refused with the same
//! credentials (single flight: the credentials' generation tells a stale refusal from a new
//! one).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, StatusCode};
use toolwire_http::{
    AuthRequest, Authorizer, AuthorizerError, BoxFuture, Credentials, HttpExecutor, Refusal, Resend,
};

use crate::challenge::{AuthChallenge, Scheme};
use crate::config::OAuthConfig;
use crate::flow::Flow;
use crate::flow::{DPOP, DPOP_NONCE};
use crate::jwt::DpopKey;
use crate::scope;
use crate::store::{ClientKind, ClientRegistration, StoredAuth};
use crate::token::Tokens;
use crate::{AuthError, ConfigProblem};

/// How the current credentials came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Origin {
    /// From the store, or none yet.
    #[default]
    Loaded,
    /// From a refresh.
    Refreshed,
    /// From an authorization just made.
    Authorized,
}

#[derive(Default)]
struct Current {
    loaded: bool,
    entry: Option<StoredAuth>,
    /// The client of `entry` (also a configured one, which is not stored).
    client: Option<ClientRegistration>,
    generation: u64,
    origin: Origin,
    /// The DPoP key of `entry`'s tokens, if they are bound to one.
    dpop: Option<Arc<DpopKey>>,
    /// The resource server's latest `DPoP-Nonce`.
    rs_nonce: Option<String>,
    /// Flows run so far, and the error of the last one if it failed: refusals that waited for
    /// a flow that failed share its error instead of starting another.
    flows: u64,
    failed: Option<AuthError>,
}

struct Shared {
    server: String,
    config: OAuthConfig,
    current: Mutex<Current>,
    /// One refresh or authorization at a time.
    flight: tokio::sync::Mutex<()>,
    /// Turned by each authorization that is not a step-up, and by a logout: the credentials
    /// may stand for someone else ([`Authorizer::identity`]). Read on every message, so an
    /// atomic rather than a field of `current`.
    identity: AtomicU64,
}

/// OAuth 2.1 for one MCP server: an [`Authorizer`] for its HTTP transport. Cheap to clone.
#[derive(Clone)]
pub struct OAuth {
    shared: Arc<Shared>,
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.current();
        f.debug_struct("OAuth")
            .field("server", &self.shared.server)
            .field("issuer", &current.entry.as_ref().map(|e| &e.issuer))
            .field("generation", &current.generation)
            .finish_non_exhaustive()
    }
}

/// What `auth status` shows of an entry: never a token.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthStatus {
    /// The MCP server.
    pub server: String,
    /// The issuer.
    pub issuer: String,
    /// The client id.
    pub client_id: Option<String>,
    /// The scope granted.
    pub scope: Option<String>,
    /// When the access token expires (seconds since the epoch).
    pub expires_at: Option<u64>,
    /// Whether a refresh token is held.
    pub refreshable: bool,
}

impl AuthStatus {
    /// What `entry` shows.
    pub fn of(entry: &StoredAuth) -> Self {
        Self {
            server: entry.server.clone(),
            issuer: entry.issuer.clone(),
            client_id: entry.client.as_ref().map(|c| c.client_id.clone()),
            scope: entry.tokens.as_ref().and_then(|t| t.scope.clone()),
            expires_at: entry.tokens.as_ref().and_then(|t| t.expires_at),
            refreshable: entry
                .tokens
                .as_ref()
                .is_some_and(|t| t.refresh_token.is_some()),
        }
    }
}

fn header(tokens: &Tokens) -> Option<HeaderValue> {
    let mut value = HeaderValue::try_from(format!(
        "{} {}",
        tokens.token_type,
        tokens.access_token.expose()
    ))
    .ok()?;
    value.set_sensitive(true);
    Some(value)
}

impl OAuth {
    /// OAuth for the MCP server at `server` (its URL, as given to the transport).
    pub fn new(server: impl Into<String>, config: OAuthConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                server: server.into(),
                config,
                current: Mutex::new(Current::default()),
                flight: tokio::sync::Mutex::new(()),
                identity: AtomicU64::new(0),
            }),
        }
    }

    /// The server's URL.
    pub fn server(&self) -> &str {
        &self.shared.server
    }

    fn current(&self) -> MutexGuard<'_, Current> {
        self.shared
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn flow<'a>(&'a self, http: &'a HttpExecutor, dpop: Option<&'a DpopKey>) -> Flow<'a> {
        Flow {
            server: &self.shared.server,
            config: &self.shared.config,
            dpop,
            http,
        }
    }

    /// Loads the newest stored entry for this server, once.
    async fn load(&self) -> Result<(), AuthError> {
        if self.current().loaded {
            return Ok(());
        }
        let entries = self.shared.config.store.list().await?;
        let newest = entries
            .into_iter()
            .filter(|e| e.server == self.shared.server)
            .max_by_key(|e| e.saved_at);
        let mut current = self.current();
        if !current.loaded {
            current.loaded = true;
            if let Some(entry) = newest {
                current.client = self.stored_client(&entry);
                current.dpop = entry
                    .dpop_key
                    .as_ref()
                    .and_then(|k| DpopKey::from_pkcs8(k).ok())
                    .map(Arc::new);
                current.entry = Some(entry);
                current.generation += 1;
            }
        }
        Ok(())
    }

    /// The client to use with a stored entry: the configured one when the entry was made with
    /// it (it holds the secret, which the store may not), else the stored registration.
    fn stored_client(&self, entry: &StoredAuth) -> Option<ClientRegistration> {
        match &entry.client {
            Some(c) if c.kind == ClientKind::Static => self
                .static_client(&entry.issuer)
                .filter(|s| s.client_id == c.client_id)
                .or_else(|| Some(c.clone())),
            Some(c) => Some(c.clone()),
            None => self.static_client(&entry.issuer),
        }
    }

    /// The configured client as a registration, when it may be used with `issuer`.
    fn static_client(&self, issuer: &str) -> Option<ClientRegistration> {
        let s = self.shared.config.static_client.as_ref()?;
        if s.issuer
            .as_deref()
            .is_some_and(|b| !crate::metadata::issuer_matches(b, issuer))
        {
            return None;
        }
        Some(ClientRegistration {
            client_id: s.client_id.clone(),
            client_secret: s.secret.clone(),
            auth_method: crate::client_auth::choose(
                None,
                s.secret.is_some(),
                s.key.is_some(),
                None,
            ),
            redirect_uri: None,
            kind: ClientKind::Static,
        })
    }

    /// Makes `entry` current and keeps it. The caller holds the store's lock, so no other
    /// process's save falls between its read and this write.
    async fn adopt(
        &self,
        entry: StoredAuth,
        client: ClientRegistration,
        origin: Origin,
    ) -> Result<(), AuthError> {
        if let Err(e) = self.shared.config.store.save(&entry).await {
            // The tokens still work for this process.
            tracing::warn!(error = %e, "the new credentials could not be saved");
        }
        self.make_current(entry, client, origin)
    }

    /// Makes `entry` current without saving it (it is what the store holds).
    fn make_current(
        &self,
        entry: StoredAuth,
        client: ClientRegistration,
        origin: Origin,
    ) -> Result<(), AuthError> {
        let dpop = entry
            .dpop_key
            .as_ref()
            .map(DpopKey::from_pkcs8)
            .transpose()?
            .map(Arc::new);
        let mut current = self.current();
        current.entry = Some(entry);
        current.client = Some(client);
        current.dpop = dpop;
        current.generation += 1;
        current.origin = origin;
        current.loaded = true;
        Ok(())
    }

    /// Refreshes the current tokens (under the flight lock). Another process holding the same
    /// store may have refreshed them already: the store is locked, read again, and a newer
    /// entry is adopted instead of spending the refresh token a second time.
    async fn refresh_locked(&self, http: &HttpExecutor) -> Result<(), AuthError> {
        let (entry, client) = {
            let current = self.current();
            match (&current.entry, &current.client) {
                (Some(e), Some(c)) => (e.clone(), c.clone()),
                _ => return Err(AuthError::Config(ConfigProblem::NothingToRefresh)),
            }
        };
        let store = &self.shared.config.store;
        let _lock = store.lock().await?;
        // Another process may have refreshed since this one read the store: its tokens are
        // the newest, and with a rotating refresh token only the newest refresh token may be
        // spent (spending an older one can make the server revoke the whole grant).
        let (entry, client) = match store.load(&entry.key()).await? {
            Some(newer) if newer.tokens != entry.tokens => {
                let client = self.stored_client(&newer).unwrap_or(client);
                let fresh = newer.tokens.as_ref().is_some_and(|t| {
                    !t.expires_within(
                        self.shared.config.clock.now(),
                        self.shared.config.refresh_skew.as_secs(),
                    )
                });
                self.make_current(newer.clone(), client.clone(), Origin::Refreshed)?;
                if fresh {
                    tracing::debug!("another process refreshed these tokens; using theirs");
                    return Ok(());
                }
                tracing::debug!("another process refreshed these tokens; refreshing theirs");
                (newer, client)
            }
            _ => (entry, client),
        };
        let key = entry
            .dpop_key
            .as_ref()
            .map(DpopKey::from_pkcs8)
            .transpose()?;
        let tokens = self
            .flow(http, key.as_ref())
            .refresh(&entry, &client)
            .await?;
        tracing::info!(issuer = %entry.issuer, "access token refreshed");
        let entry = StoredAuth {
            tokens: Some(tokens),
            saved_at: self.shared.config.clock.now(),
            ..entry
        };
        self.adopt(entry, client, Origin::Refreshed).await
    }

    /// Runs an authorization (under the flight lock): discovery afresh, then the grant.
    /// `step_up` replaces the first-authorization scope rules.
    async fn authorize_locked(
        &self,
        http: &HttpExecutor,
        challenge: &AuthChallenge,
        step_up: Option<scope::Scopes>,
    ) -> Result<(), AuthError> {
        let stepping_up = step_up.is_some();
        let discovered = self.flow(http, None).discover(challenge).await?;
        // DPoP when the resource server challenged with it and the authorization server
        // signs ES256 proofs; the key is the one the tokens are kept with, or a new one.
        let dpop = match (
            challenge.scheme,
            &discovered.meta.dpop_signing_alg_values_supported,
        ) {
            (Some(Scheme::DPoP), Some(algs)) if algs.iter().any(|a| a == "ES256") => {
                let kept = self.current().dpop.clone();
                Some(match kept {
                    Some(key) => key,
                    None => Arc::new(DpopKey::generate()?),
                })
            }
            _ => None,
        };
        let flow = self.flow(http, dpop.as_deref());
        let stored = self
            .shared
            .config
            .store
            .load(&flow.key(&discovered.issuer))
            .await?;
        let scopes = step_up.unwrap_or_else(|| {
            scope::first(
                challenge.scope.as_deref(),
                discovered
                    .prm
                    .as_ref()
                    .and_then(|p| p.scopes_supported.as_deref()),
                &self.shared.config.scopes,
            )
        });
        let (entry, client) = flow.obtain(&discovered, scopes, stored.as_ref()).await?;
        tracing::info!(issuer = %entry.issuer, scope = entry.tokens.as_ref().and_then(|t| t.scope.as_deref()).unwrap_or(""), "authorized");
        {
            let _lock = self.shared.config.store.lock().await?;
            self.adopt(entry, client, Origin::Authorized).await?;
        }
        if !stepping_up {
            // Whoever approved it may not be who approved the tokens before.
            self.shared.identity.fetch_add(1, Ordering::Release);
        }
        Ok(())
    }

    /// Runs `work` as a flow, unless a flow that started after the caller's refusal already
    /// failed (then its error is shared) or changed the credentials.
    async fn single_flight<F>(
        &self,
        generation: u64,
        seen_flows: u64,
        work: F,
    ) -> Result<Resend, AuthError>
    where
        F: std::future::Future<Output = Result<Resend, AuthError>>,
    {
        let _flight = self.shared.flight.lock().await;
        {
            let current = self.current();
            if current.generation != generation {
                return Ok(Resend::Yes);
            }
            if current.flows != seen_flows
                && let Some(e) = &current.failed
            {
                return Err(e.clone());
            }
        }
        let outcome = work.await;
        let mut current = self.current();
        current.flows += 1;
        current.failed = outcome.as_ref().err().cloned();
        outcome
    }

    /// Logs in now, before any request: the flow a 401 would start, for `toolwire login`.
    /// `challenge` is what the server answered an unauthenticated request with, if it did.
    pub async fn login(
        &self,
        http: &HttpExecutor,
        challenge: &AuthChallenge,
    ) -> Result<AuthStatus, AuthError> {
        let _flight = self.shared.flight.lock().await;
        self.authorize_locked(http, challenge, None).await?;
        let current = self.current();
        current
            .entry
            .as_ref()
            .map(AuthStatus::of)
            .ok_or_else(|| AuthError::store("no entry after login", None))
    }

    /// The `Authorization` value of the stored token (`Bearer …`), refreshed first when it is
    /// about to expire; None when nobody has logged in yet (or the refresh failed and no
    /// token is left). For a service that sends it with requests of its own making (a gateway
    /// calling on its caller's behalf). A DPoP-bound token needs a proof per request, which
    /// such a service cannot add: it is an error.
    pub async fn authorization(
        &self,
        http: &HttpExecutor,
    ) -> Result<Option<crate::Secret>, AuthError> {
        self.refreshed(http).await?;
        let current = self.current();
        let Some(tokens) = current.entry.as_ref().and_then(|e| e.tokens.as_ref()) else {
            return Ok(None);
        };
        if tokens.token_type != "Bearer" {
            return Err(AuthError::Config(ConfigProblem::TokenType(
                tokens.token_type.clone(),
            )));
        }
        if tokens.expires_within(self.shared.config.clock.now(), 0) {
            return Ok(None);
        }
        Ok(Some(crate::Secret::new(format!(
            "Bearer {}",
            tokens.access_token.expose()
        ))))
    }

    /// Forgets this server's credentials (every issuer), revoking the refresh token where
    /// the server has a revocation endpoint (best effort). How many entries were removed.
    pub async fn logout(&self, http: Option<&HttpExecutor>) -> Result<usize, AuthError> {
        let store = &self.shared.config.store;
        // Held to the end: a refresh in another process cannot save these entries back.
        let _lock = store.lock().await?;
        let entries: Vec<StoredAuth> = store
            .list()
            .await?
            .into_iter()
            .filter(|e| e.server == self.shared.server)
            .collect();
        for entry in &entries {
            if let (Some(http), Some(endpoint), Some(tokens)) = (
                http,
                entry
                    .revocation_endpoint
                    .as_ref()
                    .filter(|e| crate::metadata::secure_endpoint(e)),
                &entry.tokens,
            ) {
                let client = self.stored_client(entry);
                if let (Some(client), Some(token)) = (
                    client,
                    tokens.refresh_token.as_ref().or(Some(&tokens.access_token)),
                ) {
                    let mut form = crate::client_auth::Form::new();
                    form.add("token", token.clone());
                    if form
                        .authenticate(
                            client.auth_method,
                            &client.client_id,
                            client.client_secret.as_ref(),
                            None,
                        )
                        .is_ok()
                        && let Ok(request) = form.to_request(endpoint)
                    {
                        match http.execute(request).await {
                            Ok(r) => tracing::debug!(status = %r.status(), "revoked"),
                            Err(e) => {
                                tracing::info!(error = %e, "revocation failed; the credentials are forgotten all the same")
                            }
                        }
                    }
                }
            }
            store.remove(&entry.key()).await?;
        }
        let mut current = self.current();
        current.entry = None;
        current.client = None;
        current.generation += 1;
        self.shared.identity.fetch_add(1, Ordering::Release);
        Ok(entries.len())
    }

    /// What is stored for this server, newest first (never a token).
    pub async fn status(&self) -> Result<Vec<AuthStatus>, AuthError> {
        let mut entries: Vec<StoredAuth> = self
            .shared
            .config
            .store
            .list()
            .await?
            .into_iter()
            .filter(|e| e.server == self.shared.server)
            .collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.saved_at));
        Ok(entries.iter().map(AuthStatus::of).collect())
    }

    /// Loads the stored entry, and refreshes its token first when it is about to expire (a
    /// failed refresh leaves the old token: a refusal of it starts the flow).
    async fn refreshed(&self, http: &HttpExecutor) -> Result<(), AuthError> {
        self.load().await?;
        let skew = self.shared.config.refresh_skew.as_secs();
        let (expiring, generation) = {
            let current = self.current();
            let tokens = current.entry.as_ref().and_then(|e| e.tokens.as_ref());
            (
                tokens.is_some_and(|t| {
                    t.refresh_token.is_some()
                        && t.expires_within(self.shared.config.clock.now(), skew)
                }),
                current.generation,
            )
        };
        if expiring {
            let _flight = self.shared.flight.lock().await;
            let still = self.current().generation == generation;
            if still && let Err(e) = self.refresh_locked(http).await {
                tracing::info!(error = %e, "refreshing before expiry failed");
            }
        }
        Ok(())
    }

    async fn credentials_inner(&self, request: &AuthRequest<'_>) -> Result<Credentials, AuthError> {
        self.refreshed(request.http).await?;
        let current = self.current();
        let mut headers = HeaderMap::new();
        if let Some(tokens) = current.entry.as_ref().and_then(|e| e.tokens.as_ref()) {
            if let Some(value) = header(tokens) {
                headers.insert(AUTHORIZATION, value);
            }
            if let (Some(key), true) = (&current.dpop, tokens.token_type == "DPoP") {
                // A proof per request: this method, this URL, this token, the server's nonce.
                let uri = request.uri;
                let url = format!(
                    "{}://{}{}",
                    uri.scheme_str().unwrap_or("https"),
                    uri.authority().map_or("", |a| a.as_str()),
                    uri.path()
                );
                let proof = key.proof(
                    request.method.as_str(),
                    &url,
                    Some(tokens.access_token.expose()),
                    current.rs_nonce.as_deref(),
                    self.shared.config.clock.now(),
                )?;
                let mut value = HeaderValue::try_from(proof)
                    .map_err(|_| AuthError::Config(ConfigProblem::Signing("a DPoP proof")))?;
                value.set_sensitive(true);
                headers.insert(DPOP, value);
            }
        }
        Ok(Credentials::new(headers, current.generation))
    }

    async fn refused_inner(&self, refusal: &Refusal<'_>) -> Result<Resend, AuthError> {
        let challenge = AuthChallenge::from_challenges(refusal.challenges);
        let http = refusal.request.http;
        let seen_flows = self.current().flows;
        if refusal.status == StatusCode::UNAUTHORIZED
            && challenge.error.as_deref() == Some("use_dpop_nonce")
            && let Some(nonce) = refusal
                .headers
                .get(DPOP_NONCE)
                .and_then(|v| v.to_str().ok())
        {
            // Not a refusal of the token: the next proof carries the nonce (RFC 9449 §9).
            let mut current = self.current();
            if current.rs_nonce.as_deref() != Some(nonce) {
                tracing::debug!("the resource server asks for a DPoP nonce");
                current.rs_nonce = Some(nonce.to_owned());
                return Ok(Resend::Yes);
            }
        }
        match refusal.status {
            StatusCode::FORBIDDEN => {
                if !challenge.insufficient_scope() {
                    return Ok(Resend::No);
                }
                self.single_flight(refusal.generation, seen_flows, async {
                    let (requested, granted) = {
                        let current = self.current();
                        let tokens = current.entry.as_ref().and_then(|e| e.tokens.as_ref());
                        (
                            scope::parse(tokens.and_then(|t| t.requested_scope.as_deref())),
                            scope::parse(tokens.and_then(|t| t.scope.as_deref())),
                        )
                    };
                    let challenged = scope::parse(challenge.scope.as_deref());
                    let Some(union) = scope::step_up(&requested, &granted, &challenged) else {
                        return Err(AuthError::InsufficientScope {
                            required: challenge.scope.clone().unwrap_or_default(),
                        });
                    };
                    tracing::info!(scope = %scope::join(&union).unwrap_or_default(), "the server asks for more scope; authorizing again");
                    self.authorize_locked(http, &challenge, Some(union)).await?;
                    Ok(Resend::Yes)
                })
                .await
            }
            StatusCode::UNAUTHORIZED => {
                self.single_flight(refusal.generation, seen_flows, async {
                    let (has_tokens, refreshable, origin) = {
                        let current = self.current();
                        let tokens = current.entry.as_ref().and_then(|e| e.tokens.as_ref());
                        (
                            tokens.is_some(),
                            tokens.is_some_and(|t| t.refresh_token.is_some())
                                && current.client.is_some(),
                            current.origin,
                        )
                    };
                    if has_tokens && origin == Origin::Authorized && refusal.attempt > 0 {
                        return Err(AuthError::Rejected {
                            description: challenge.description.clone(),
                        });
                    }
                    if refreshable && origin != Origin::Refreshed {
                        match self.refresh_locked(http).await {
                            Ok(()) => return Ok(Resend::Yes),
                            Err(e) => {
                                tracing::info!(error = %e, "refresh failed; authorizing again");
                            }
                        }
                    }
                    self.authorize_locked(http, &challenge, None).await?;
                    Ok(Resend::Yes)
                })
                .await
            }
            _ => Ok(Resend::No),
        }
    }
}

impl Authorizer for OAuth {
    fn credentials<'a>(
        &'a self,
        request: &'a AuthRequest<'a>,
    ) -> BoxFuture<'a, Result<Credentials, AuthorizerError>> {
        Box::pin(async move {
            self.credentials_inner(request)
                .await
                .map_err(|e| Box::new(e) as AuthorizerError)
        })
    }

    fn refused<'a>(
        &'a self,
        refusal: &'a Refusal<'a>,
    ) -> BoxFuture<'a, Result<Resend, AuthorizerError>> {
        Box::pin(async move {
            self.refused_inner(refusal)
                .await
                .map_err(|e| Box::new(e) as AuthorizerError)
        })
    }

    fn identity(&self) -> u64 {
        self.shared.identity.load(Ordering::Acquire)
    }
}

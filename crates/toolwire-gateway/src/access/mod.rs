//! Who may call the gateway, and what each caller sees: the gateway as an OAuth 2.1 resource
//! server, API keys, and the policy.
//!
//! - **Protected resource metadata** (RFC 9728) at `/.well-known/oauth-protected-resource` and
//!   at the same path followed by the endpoint's path, naming the configured authorization
//!   servers.
//! - **401** with `WWW-Authenticate: Bearer resource_metadata="…"` (and `scope`, and
//!   `error="invalid_token"` when a token was given) for a request without valid
//!   credentials; **403** `insufficient_scope` for a token without the scopes required;
//!   **503** when the issuer's keys cannot be fetched (nothing could be checked).
//! - **JWT access tokens** checked against each issuer's JWK set (`toolwire_auth::verify`):
//!   signature, `iss`, `aud` (the gateway's resource, or the configured audience),
//!   `exp`/`nbf` with a minute of skew; a DPoP-bound token (`cnf.jkt`) only with the `DPoP`
//!   scheme and a fresh proof for this request.
//! - **API keys**: kept in the config as SHA-256 hashes, presented as bearer tokens.
//! - **Policy** ([`RuleConfig`]): what each caller may see and call.
//!
//! Tokens and keys never reach a log, an error or `Debug`.

mod config;
mod gate;
mod login;
mod policy;
mod upstream;
mod vault;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use toolwire::auth::verify::{
    AccessToken, DpopVerifier, Introspector, Jwks, JwtVerifier, TokenError,
};
use toolwire_server::{Caller, Denial, Page};

pub use config::{AccessConfig, ApiKeyConfig, IntrospectionConfig, LimitsConfig, PinTools};
use config::{client_secret, executor};
pub(crate) use gate::principal;
pub use login::{LOGIN_WAIT, PerUserConfig, SIGN_OUT};
pub(crate) use policy::View;
pub use policy::{CallerMatchConfig, RuleConfig};
pub use upstream::{ExchangeConfig, UpstreamConfig, UpstreamCredentials};
pub use vault::{VAULT_KEY_ENV, VaultConfig};

/// What went wrong setting up access control.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// The `gateway` section does not hold together.
    #[error("gateway access: {0}")]
    Config(String),
    /// An authorization server's metadata or keys could not be found.
    #[error("gateway access: authorization server {issuer}: {error}")]
    Issuer {
        /// The issuer.
        issuer: String,
        /// Why.
        #[source]
        error: toolwire::auth::AuthError,
    },
}

/// Access control, ready to check requests ([`crate::GatewayBuilder::access`]).
pub struct Access {
    resource: String,
    /// Where the metadata is served: the root path and the endpoint's.
    metadata_paths: [String; 2],
    /// The URL challenges name.
    metadata_url: String,
    authorization_servers: Vec<String>,
    verifiers: Vec<JwtVerifier>,
    introspector: Option<Introspector>,
    dpop: DpopVerifier,
    /// SHA-256 of each key → its name.
    api_keys: HashMap<[u8; 32], String>,
    scopes_required: Vec<String>,
    policy: Option<policy::Policy>,
    /// Credentials verified before, by the SHA-256 of the credential.
    known: Mutex<HashMap<[u8; 32], Known>>,
    /// Credentials refused before, by their SHA-256: until when (and why) they are refused
    /// without being checked again, so one bad token sent again and again costs one check.
    refused: Mutex<HashMap<[u8; 32], (u64, Denial)>>,
    /// Introspections allowed now (a token bucket): unknown opaque tokens cannot make the
    /// gateway hammer the authorization server.
    introspections: Mutex<(f64, std::time::Instant)>,
    /// The bucket's size and its refill per second.
    introspection_rate: (f64, f64),
    /// Upstreams called with their callers' credentials, by entry name.
    upstreams: HashMap<String, upstream::Upstream>,
    /// Callers' logins to per-user upstreams.
    logins: Option<login::Logins>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("resource", &self.resource)
            .field("authorization_servers", &self.authorization_servers)
            .field("api_keys", &self.api_keys.len())
            .field("policy", &self.policy.is_some())
            .finish_non_exhaustive()
    }
}

/// How long a verified token is trusted without being checked again (seconds).
pub const TOKEN_RECHECK: u64 = 300;

/// How long an introspected token is trusted without asking again (seconds): a revoked token
/// stops working within this.
pub const INTROSPECTION_RECHECK: u64 = 60;

/// The most tokens remembered as verified.
const MAX_KNOWN: usize = 10_000;

/// Keeps `value` under the credential digest `key` in `map`, which holds at most
/// [`MAX_KNOWN`]: past it, what `until` says is over at `now` goes, and if that is not enough,
/// everything (each is checked again when next presented).
fn remember<V>(
    map: &mut HashMap<[u8; 32], V>,
    key: [u8; 32],
    value: V,
    now: u64,
    until: impl Fn(&V) -> u64,
) {
    if map.len() >= MAX_KNOWN {
        map.retain(|_, v| until(v) > now);
        if map.len() >= MAX_KNOWN {
            map.clear();
        }
    }
    map.insert(key, value);
}

/// How long a refused credential is refused without being checked again (seconds).
pub const REFUSAL_KEPT: u64 = 60;

/// Introspections of tokens never seen before, at most, in a burst and per second after it:
/// past them, a new opaque token is answered 503 (`temporarily_unavailable`, try again)
/// rather than checked, so a flood of invented tokens costs the authorization server
/// [`INTROSPECTION_RATE`] calls a second, not one each.
pub const INTROSPECTION_BURST: f64 = 100.0;
/// See [`INTROSPECTION_BURST`].
pub const INTROSPECTION_RATE: f64 = 50.0;

/// A credential verified before: who it stands for, the DPoP key it is bound to, until when
/// it is trusted without another check.
struct Known {
    caller: Arc<Caller>,
    jkt: Option<String>,
    until: u64,
}

/// Seconds since the Unix epoch.
pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn sha256(text: &str) -> [u8; 32] {
    toolwire::auth::verify::sha256(text.as_bytes())
}

/// `text` made safe inside a quoted header parameter.
fn quotable(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .map(|c| if matches!(c, '"' | '\\') { '\'' } else { c })
        .collect()
}

/// The origin and path of an absolute `http(s)` URL.
fn split_url(url: &str) -> Option<(&str, &str)> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let cut = rest.find('/').unwrap_or(rest.len());
    let origin = url.get(..url.len() - rest.len() + cut)?;
    Some((origin, rest.get(cut..).unwrap_or("")))
}

impl Access {
    /// Access control from `config`; `resource` is the endpoint's URL when the config does
    /// not name one. Each authorization server's metadata is fetched now, so a wrong issuer
    /// stops the gateway at start rather than refusing every caller later.
    pub async fn new(config: &AccessConfig, resource: &str) -> Result<Self, AccessError> {
        let resource = config
            .resource
            .clone()
            .unwrap_or_else(|| resource.to_owned());
        let (origin, path) = split_url(&resource).ok_or_else(|| {
            AccessError::Config(format!("resource {resource:?} is not an http(s) URL"))
        })?;
        let origin = origin.to_owned();
        let path = path.trim_end_matches('/');
        let metadata_paths = [
            "/.well-known/oauth-protected-resource".to_owned(),
            format!("/.well-known/oauth-protected-resource{path}"),
        ];
        let metadata_url = format!("{origin}{}", metadata_paths[1]);
        let audience = config.audience.clone().unwrap_or_else(|| resource.clone());
        let mut verifiers = Vec::new();
        for issuer in &config.authorization_servers {
            let http = executor(issuer, &format!("authorization server {issuer}"))?;
            let keys = Jwks::discover(issuer, http)
                .await
                .map_err(|error| AccessError::Issuer {
                    issuer: issuer.clone(),
                    error,
                })?;
            verifiers.push(JwtVerifier::new(issuer.clone(), audience.clone(), keys));
        }
        let introspection_rate =
            config
                .introspection
                .as_ref()
                .map_or((INTROSPECTION_BURST, INTROSPECTION_RATE), |i| {
                    (
                        i.burst.unwrap_or(INTROSPECTION_BURST).max(1.0),
                        i.per_second.unwrap_or(INTROSPECTION_RATE).max(0.0),
                    )
                });
        let introspector = match &config.introspection {
            None => None,
            Some(i) => {
                let secret = client_secret(
                    i.client_secret.as_ref(),
                    i.client_secret_env.as_deref(),
                    "introspection",
                )?
                .ok_or_else(|| {
                    AccessError::Config(
                        "introspection: no client secret (clientSecretEnv names the variable that holds it)".into(),
                    )
                })?;
                let http = executor(&i.endpoint, "introspection")?;
                Some(Introspector::new(
                    i.endpoint.clone(),
                    i.issuer.clone(),
                    audience.clone(),
                    i.client_id.clone(),
                    secret,
                    http,
                ))
            }
        };
        let mut api_keys = HashMap::new();
        for key in &config.api_keys {
            let hex = key.sha256.trim().to_ascii_lowercase();
            let bytes: Option<Vec<u8>> = (hex.len() == 64)
                .then(|| {
                    (0..32)
                        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
                        .collect()
                })
                .flatten();
            let Some(digest) = bytes.and_then(|b| <[u8; 32]>::try_from(b).ok()) else {
                return Err(AccessError::Config(format!(
                    "API key {:?}: sha256 must be 64 hexadecimal digits",
                    key.name
                )));
            };
            if api_keys.insert(digest, key.name.clone()).is_some() {
                return Err(AccessError::Config(format!(
                    "API key {:?}: the same key is configured twice",
                    key.name
                )));
            }
        }
        let issuers = config.authorization_servers.len()
            + usize::from(
                config
                    .introspection
                    .as_ref()
                    .is_some_and(|i| !config.authorization_servers.contains(&i.issuer)),
            );
        let policy = config
            .policy
            .as_deref()
            .map(|rules| policy::Policy::new(rules, issuers))
            .transpose()?;
        let mut upstreams = HashMap::new();
        for (server, settings) in &config.upstreams {
            if let Some(upstream) = upstream::Upstream::new(server, settings)? {
                if !config.authenticates()
                    || config.authorization_servers.is_empty() && config.introspection.is_none()
                {
                    return Err(AccessError::Config(format!(
                        "upstream {server}: calling with the caller's credentials needs callers with access tokens (authorizationServers or introspection)"
                    )));
                }
                upstreams.insert(server.clone(), upstream);
            }
        }
        Ok(Self {
            resource,
            metadata_paths,
            metadata_url,
            authorization_servers: {
                let mut servers = config.authorization_servers.clone();
                if let Some(i) = &config.introspection
                    && !servers.contains(&i.issuer)
                {
                    servers.push(i.issuer.clone());
                }
                servers
            },
            verifiers,
            introspector,
            dpop: DpopVerifier::default(),
            api_keys,
            scopes_required: config.scopes_required.clone(),
            policy,
            known: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
            introspections: Mutex::new((introspection_rate.0, std::time::Instant::now())),
            introspection_rate,
            logins: match upstreams.values().any(upstream::Upstream::per_user) {
                true => Some(login::Logins::new(
                    &origin,
                    config.vault.as_ref().map(vault::Vault::new).transpose()?,
                )),
                false => None,
            },
            upstreams,
        })
    }

    /// The resource (the endpoint's public URL).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Whether callers must authenticate.
    pub fn authenticates(&self) -> bool {
        !self.verifiers.is_empty() || !self.api_keys.is_empty() || self.introspector.is_some()
    }

    /// The `Authorization` header a call of `caller` to `server` carries, when that upstream
    /// is called with its callers' credentials.
    pub(crate) async fn upstream_authorization(
        &self,
        server: &str,
        caller: Option<&Caller>,
        announce: &tokio::sync::broadcast::Sender<toolwire_server::Change>,
    ) -> Result<Option<toolwire_headers::Header>, toolwire_server::RpcError> {
        match self.upstreams.get(server) {
            Some(upstream) => upstream
                .authorization(server, caller, self.logins.as_ref(), announce)
                .await
                .map(Some),
            None => Ok(None),
        }
    }

    /// The upstreams called with their callers' credentials.
    pub(crate) fn caller_credential_servers(&self) -> impl Iterator<Item = &str> {
        self.upstreams.keys().map(String::as_str)
    }

    /// Whether `server`'s calls carry each caller's own credentials (per-user, pass-through,
    /// exchange) rather than the entry's.
    pub(crate) fn calls_as_caller(&self, server: &str) -> bool {
        self.upstreams.contains_key(server)
    }

    /// The [`login::SIGN_OUT`] tool, when some upstream's callers sign in to it.
    pub(crate) fn sign_out_tool(&self) -> Option<Value> {
        self.logins.as_ref()?;
        let servers: Vec<&String> = self
            .upstreams
            .iter()
            .filter(|(_, u)| u.per_user())
            .map(|(name, _)| name)
            .collect();
        Some(json!({
            "name": login::SIGN_OUT,
            "title": "Sign out of a server",
            "description": "Ends your sign-in to one of the servers you signed in to through this gateway: the gateway forgets your tokens for it and asks its authorization server to revoke them. Your next call to it asks you to sign in again.",
            "inputSchema": {"type": "object", "properties": {
                "server": {"type": "string", "enum": servers,
                    "description": "The server to sign out of."}
            }, "required": ["server"]},
            "annotations": {"destructiveHint": true, "idempotentHint": true, "openWorldHint": true}
        }))
    }

    /// A call of the [`login::SIGN_OUT`] tool by `caller`: `None` when this gateway has no
    /// per-user upstream (the name is then nobody's).
    pub(crate) async fn sign_out(
        &self,
        caller: Option<&Caller>,
        arguments: &Value,
    ) -> Option<toolwire_server::Answer> {
        let logins = self.logins.as_ref()?;
        let failed = |why: String| {
            Some(Ok(
                json!({"content": [{"type": "text", "text": why}], "isError": true}),
            ))
        };
        let Some(caller) = caller else {
            return failed("only a signed-in caller has logins to end".into());
        };
        let server = arguments["server"].as_str().unwrap_or("");
        let Some(upstream) = self.upstreams.get(server) else {
            return failed(format!("`{server}` is not a server you sign in to"));
        };
        match upstream.sign_out(server, &caller.principal, logins).await {
            Some(Ok(removed)) => {
                let text = match removed {
                    0 => format!("You were not signed in to `{server}`."),
                    _ => format!(
                        "Signed out of `{server}`: the next call to it asks you to sign in again."
                    ),
                };
                Some(Ok(json!({"content": [{"type": "text", "text": text}],
                    "structuredContent": {"server": server, "signedOut": removed > 0}})))
            }
            Some(Err(e)) => Some(Err(e)),
            None => failed(format!("`{server}` is not a server you sign in to")),
        }
    }

    /// Whether some upstream's refusals of a caller's token go to the caller as they came (a
    /// `tools/call`'s response then waits for its first event: [`toolwire_server::Edge::may_challenge`]).
    pub(crate) fn relays_challenges(&self) -> bool {
        self.upstreams
            .values()
            .any(upstream::Upstream::relays_challenge)
    }

    /// `error` as the caller hears it: when `server` relays challenges and refused the
    /// caller's token (401, or 403), with the upstream's status and `WWW-Authenticate`.
    pub(crate) fn relay_challenge(
        &self,
        server: &str,
        error: toolwire_server::RpcError,
        cause: &(dyn std::error::Error + 'static),
    ) -> toolwire_server::RpcError {
        if !self
            .upstreams
            .get(server)
            .is_some_and(upstream::Upstream::relays_challenge)
        {
            return error;
        }
        if let Some(toolwire::HttpError::Status {
            status,
            www_authenticate,
            ..
        }) = toolwire::HttpError::find(cause)
            && matches!(status.as_u16(), 401 | 403)
            && !www_authenticate.is_empty()
        {
            let challenge = www_authenticate.join(", ");
            let denial = if status.as_u16() == 401 {
                toolwire_server::Denial::unauthorized(
                    challenge,
                    "invalid_token",
                    format!("server `{server}` refused the token"),
                )
            } else {
                toolwire_server::Denial::forbidden(
                    challenge,
                    format!("server `{server}` needs more scope"),
                )
            };
            return error.with_challenge(denial);
        }
        error
    }

    /// What `caller` may see and call.
    pub(crate) fn view(&self, caller: Option<&Caller>) -> View<'_> {
        self.policy
            .as_ref()
            .map_or_else(View::everything, |p| p.view(caller))
    }

    /// The protected resource metadata, at its paths.
    pub(crate) async fn page(
        &self,
        path: &str,
        query: Option<&str>,
        headers: &http::HeaderMap,
    ) -> Option<Page> {
        if path == login::CALLBACK_PATH {
            return match &self.logins {
                Some(logins) => Some(logins.callback(query, headers).await),
                None => None,
            };
        }
        if path == login::CONNECT_PATH {
            return self.logins.as_ref().map(|logins| logins.connect(query));
        }
        if self.authorization_servers.is_empty() || !self.metadata_paths.iter().any(|p| p == path) {
            return None;
        }
        let mut metadata = json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
            "dpop_signing_alg_values_supported": ["ES256", "ES384", "RS256", "PS256", "EdDSA"],
        });
        if !self.scopes_required.is_empty() {
            metadata["scopes_supported"] = json!(self.scopes_required);
        }
        Some(Page::new(200, "application/json", metadata.to_string()))
    }

    /// A challenge of `scheme`, with an error when there is one.
    fn challenge(&self, scheme: &str, error: Option<(&str, &str)>) -> String {
        let mut challenge = format!(r#"{scheme} resource_metadata="{}""#, self.metadata_url);
        if !self.scopes_required.is_empty() {
            challenge.push_str(&format!(r#", scope="{}""#, self.scopes_required.join(" ")));
        }
        if let Some((code, description)) = error {
            challenge.push_str(&format!(
                r#", error="{code}", error_description="{}""#,
                quotable(description)
            ));
        }
        challenge
    }

    fn invalid(&self, scheme: &str, why: &str) -> Denial {
        Denial::unauthorized(
            self.challenge(scheme, Some(("invalid_token", why))),
            "invalid_token",
            why,
        )
    }

    /// Who sent `request`, or how it is refused (see the module's documentation). A token
    /// seen before is not checked again until [`TOKEN_RECHECK`] seconds have passed (or it
    /// expired); its DPoP proof, when bound, is checked every time.
    pub(crate) async fn authenticate(
        &self,
        request: &http::request::Parts,
    ) -> Result<Option<Arc<Caller>>, Denial> {
        if !self.authenticates() {
            return Ok(None);
        }
        let authorization = request
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let Some((scheme, token)) = authorization.and_then(|a| a.trim().split_once(' ')) else {
            return Err(Denial::unauthorized(
                self.challenge("Bearer", None),
                "invalid_request",
                "this gateway needs credentials: an access token or an API key",
            ));
        };
        let token = token.trim();
        let dpop = scheme.eq_ignore_ascii_case("DPoP");
        if !dpop && !scheme.eq_ignore_ascii_case("Bearer") {
            return Err(self.invalid("Bearer", "only the Bearer and DPoP schemes are accepted"));
        }
        let digest = sha256(token);
        let now = unix_now();
        let cached = self
            .known()
            .get(&digest)
            .filter(|known| known.until > now)
            .map(|known| (known.caller.clone(), known.jkt.clone()));
        let refused = crate::lock(&self.refused)
            .get(&digest)
            .filter(|(until, _)| *until > now)
            .map(|(_, denial)| denial.clone());
        if let Some(denial) = refused {
            return Err(denial);
        }
        let (caller, jkt) = match cached {
            Some(known) => known,
            None => {
                let known = match self.identify(token, &digest, dpop, now).await {
                    Ok(known) => known,
                    Err(denial) => {
                        // A refusal of the token itself is remembered; "try again later" not.
                        if denial.status == 401 {
                            let refusal = (now + REFUSAL_KEPT, denial.clone());
                            remember(&mut crate::lock(&self.refused), digest, refusal, now, |r| {
                                r.0
                            });
                        }
                        return Err(denial);
                    }
                };
                let found = (known.caller.clone(), known.jkt.clone());
                remember(&mut self.known(), digest, known, now, |k| k.until);
                found
            }
        };
        self.check_binding(request, token, dpop, jkt.as_deref())?;
        if !caller.has_scopes(self.scopes_required.iter().map(String::as_str)) {
            let needed = self.scopes_required.join(" ");
            return Err(Denial::forbidden(
                self.challenge(
                    "Bearer",
                    Some((
                        "insufficient_scope",
                        &format!("this gateway needs scope {needed}"),
                    )),
                ),
                format!("this gateway needs scope {needed}"),
            ));
        }
        Ok(Some(caller))
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Known>> {
        crate::lock(&self.known)
    }

    /// Takes one introspection from the bucket, if there is one.
    fn may_introspect(&self) -> bool {
        let mut bucket = crate::lock(&self.introspections);
        let now = std::time::Instant::now();
        let (burst, rate) = self.introspection_rate;
        let refill = now.duration_since(bucket.1).as_secs_f64() * rate;
        *bucket = ((bucket.0 + refill).min(burst), now);
        if bucket.0 >= 1.0 {
            bucket.0 -= 1.0;
            true
        } else {
            false
        }
    }

    /// Who `token` stands for: an API key's name, or a JWT's issuer and subject once verified.
    async fn identify(
        &self,
        token: &str,
        digest: &[u8; 32],
        dpop: bool,
        now: u64,
    ) -> Result<Known, Denial> {
        if !dpop && let Some(name) = self.api_keys.get(digest) {
            let mut caller = Caller::new(format!("key:{name}"));
            caller.api_key = Some(name.clone());
            return Ok(Known {
                caller: Arc::new(caller),
                jkt: None,
                until: now + TOKEN_RECHECK,
            });
        }
        let scheme = if dpop { "DPoP" } else { "Bearer" };
        if !JwtVerifier::looks_like_jwt(token) || self.verifiers.is_empty() {
            let Some(introspector) = &self.introspector else {
                return Err(self.invalid("Bearer", "the token is not one this gateway accepts"));
            };
            if !self.may_introspect() {
                tracing::warn!(
                    "more new opaque tokens than may be introspected: one is answered 503"
                );
                return Err(Denial::unavailable(
                    "too many new tokens to check at once; try again in a moment",
                ));
            }
            let checked = introspector.check(token).await;
            // Asked again after a minute, so a revocation takes effect soon.
            return self.known_from(checked, token, scheme, now + INTROSPECTION_RECHECK);
        }
        let Some(verifier) = self
            .verifiers
            .iter()
            .find(|v| v.claims_issuer(token))
            .or_else(|| self.verifiers.first())
        else {
            return Err(self.invalid("Bearer", "the token is not one this gateway accepts"));
        };
        let verified = verifier.verify(token).await;
        self.known_from(verified, token, scheme, now + TOKEN_RECHECK)
    }

    /// What a check of a token found, as a remembered credential trusted until `recheck` (or
    /// its expiry), or its refusal.
    fn known_from(
        &self,
        checked: Result<AccessToken, TokenError>,
        token: &str,
        scheme: &str,
        recheck: u64,
    ) -> Result<Known, Denial> {
        let verified = match checked {
            Ok(verified) => verified,
            Err(TokenError::KeysUnavailable(why)) => {
                tracing::warn!(%why, "cannot check tokens: the authorization server is unavailable");
                return Err(Denial::unavailable(
                    "the authorization server cannot be reached to check the token; try again later",
                ));
            }
            Err(e) => return Err(self.invalid(scheme, &e.to_string())),
        };
        let until = verified.expires_at.min(recheck);
        let jkt = verified.dpop_jkt.clone();
        let caller = caller_of(verified, token)
            .ok_or_else(|| self.invalid(scheme, "the token names no subject or client"))?;
        Ok(Known {
            caller: Arc::new(caller),
            jkt,
            until,
        })
    }

    /// A DPoP-bound token only with the `DPoP` scheme and a valid proof; the `DPoP` scheme only
    /// with a bound token (RFC 9449 §7).
    fn check_binding(
        &self,
        request: &http::request::Parts,
        token: &str,
        dpop: bool,
        jkt: Option<&str>,
    ) -> Result<(), Denial> {
        match (jkt, dpop) {
            (None, false) => Ok(()),
            (None, true) => Err(self.invalid("DPoP", "the token is not DPoP-bound")),
            (Some(_), false) => Err(self.invalid(
                "DPoP",
                "the token is DPoP-bound: present it with the DPoP scheme and a proof",
            )),
            (Some(jkt), true) => {
                let proofs: Vec<&str> = request
                    .headers
                    .get_all("dpop")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .collect();
                let [proof] = proofs.as_slice() else {
                    return Err(Denial::unauthorized(
                        self.challenge(
                            "DPoP",
                            Some(("invalid_dpop_proof", "one DPoP proof is needed")),
                        ),
                        "invalid_dpop_proof",
                        "one DPoP proof is needed",
                    ));
                };
                self.dpop
                    .check(proof, request.method.as_str(), &self.resource, token, jkt)
                    .map_err(|e| {
                        let why = e.to_string();
                        Denial::unauthorized(
                            self.challenge("DPoP", Some(("invalid_dpop_proof", &why))),
                            "invalid_dpop_proof",
                            why,
                        )
                    })
            }
        }
    }
}

/// The caller a verified token stands for; None for a token that names neither a subject nor
/// a client.
fn caller_of(token: AccessToken, raw: &str) -> Option<Caller> {
    // A subject and a client id are names in two namespaces: a client whose id is a user's
    // subject must not be that user (its sessions, its logins, its exchanged tokens).
    let principal = match (&token.subject, &token.client_id) {
        (Some(subject), _) => format!("{}#{subject}", token.issuer),
        (None, Some(client)) => format!("{}#client:{client}", token.issuer),
        (None, None) => return None,
    };
    let mut caller = Caller::new(principal);
    caller.credential = Some(toolwire_server::Credential::new(raw));
    caller.subject = token.subject;
    caller.client_id = token.client_id;
    caller.scopes = token.scopes;
    caller.claims = token.claims;
    Some(caller)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_splits_into_its_origin_and_path() {
        assert_eq!(
            split_url("https://gw.example:8443/mcp"),
            Some(("https://gw.example:8443", "/mcp"))
        );
        assert_eq!(split_url("http://h"), Some(("http://h", "")));
        assert_eq!(split_url("ftp://h/x"), None);
    }

    #[test]
    fn challenge_text_from_a_token_cannot_break_the_header() {
        assert_eq!(quotable("kid \"x\"\r\n\\y"), "kid 'x''y");
    }
}

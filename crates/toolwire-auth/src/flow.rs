//! The network half of an authorization: discovery, registration and the grants, as one
//! straight line of requests through the transport's own HTTP client. Every decision is a
//! pure function of another module; this file only fetches and hands over.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Request};
use serde_json::{Value, json};
use toolwire_http::HttpExecutor;

use crate::authorize::{AuthorizationRequest, authorization_url, check_callback};
use crate::challenge::AuthChallenge;
use crate::client_auth::{self, Form, TokenAuthMethod};
use crate::config::{Assertion, Grant, OAuthConfig};
use crate::jwt::DpopKey;
use crate::metadata::{self, ResourceMetadata, ServerMetadata};
use crate::pkce::{Pkce, random};
use crate::scope::{self, Scopes};
use crate::secret::Secret;
use crate::store::{ClientKind, ClientRegistration, StoreKey, StoredAuth};
use crate::token::{self, Tokens};
use crate::{AuthError, ConfigProblem, discovery};

/// What discovery found.
#[derive(Debug, Clone)]
pub(crate) struct Discovered {
    /// The RFC 8707 resource: the metadata's `resource` as published, else the server URL.
    pub(crate) resource: String,
    /// The issuer, as the metadata spell it.
    pub(crate) issuer: String,
    pub(crate) prm: Option<ResourceMetadata>,
    pub(crate) meta: ServerMetadata,
    /// The metadata are the 2025-03-26 defaults (nothing was published).
    pub(crate) defaults: bool,
}

/// The RFC 7523 grant type.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// `DPoP` (RFC 9449 §4.1).
pub(crate) const DPOP: http::HeaderName = http::HeaderName::from_static("dpop");
/// `DPoP-Nonce` (RFC 9449 §8).
pub(crate) const DPOP_NONCE: http::HeaderName = http::HeaderName::from_static("dpop-nonce");

pub(crate) struct Flow<'a> {
    pub(crate) server: &'a str,
    pub(crate) config: &'a OAuthConfig,
    pub(crate) http: &'a HttpExecutor,
    /// Proofs go with token requests (the tokens become DPoP-bound).
    pub(crate) dpop: Option<&'a DpopKey>,
}

/// `Some(json)` for a 200 with a JSON object, `None` for any other status (try the next
/// candidate); an error when the request itself failed.
pub(crate) async fn fetch_json(http: &HttpExecutor, url: &str) -> Result<Option<Value>, AuthError> {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    let response = http.get(url, headers).await.map_err(|e| AuthError::Http {
        url: without_query(url),
        cause: Arc::new(e),
    })?;
    if !response.status().is_success() {
        tracing::debug!(url = %without_query(url), status = %response.status(), "no metadata here");
        return Ok(None);
    }
    match serde_json::from_slice::<Value>(response.body()) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        _ => Err(AuthError::discovery(
            without_query(url),
            "the answer is not a JSON object",
            None,
        )),
    }
}

/// Refuses a URL a peer named whose host is, or resolves to, a link-local or cloud metadata
/// address (a blind request from this machine is all such a URL can be for). A name that does
/// not resolve is left to the fetch to report.
async fn peer_named(url: &str) -> Result<(), AuthError> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Ok(());
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    let refused = || {
        AuthError::discovery(
            without_query(url),
            "refused: a link-local or cloud metadata address",
            None,
        )
    };
    match parsed.host() {
        Some(url::Host::Ipv4(ip)) if metadata::forbidden_address(ip.into()) => Err(refused()),
        Some(url::Host::Ipv6(ip)) if metadata::forbidden_address(ip.into()) => Err(refused()),
        Some(url::Host::Domain(name)) => match tokio::net::lookup_host((name, port)).await {
            Ok(mut addrs) => {
                if addrs.any(|a| metadata::forbidden_address(a.ip())) {
                    Err(refused())
                } else {
                    Ok(())
                }
            }
            Err(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// A URL without its query (which may hold codes or state), for errors and logs.
pub(crate) fn without_query(url: &str) -> String {
    url.split(['?', '#']).next().unwrap_or(url).to_owned()
}

impl Flow<'_> {
    /// Protected resource metadata (validated against the server), then the authorization
    /// server's metadata (validated against the issuer), or the 2025-03-26 fallbacks when the
    /// server publishes no resource metadata.
    pub(crate) async fn discover(
        &self,
        challenge: &AuthChallenge,
    ) -> Result<Discovered, AuthError> {
        let mut prm = None;
        if let Some(url) = challenge.resource_metadata.as_deref() {
            // The server names this URL: cleartext only on its own origin or loopback, and
            // never a link-local or cloud metadata address.
            if !metadata::secure_endpoint(url) && !metadata::same_origin(url, self.server) {
                return Err(AuthError::discovery(
                    without_query(url),
                    "resource_metadata is neither https, loopback nor the server's own origin",
                    None,
                ));
            }
            peer_named(url).await?;
        }
        for url in
            discovery::resource_metadata_urls(self.server, challenge.resource_metadata.as_deref())?
        {
            if let Some(value) = fetch_json(self.http, &url).await? {
                let parsed: ResourceMetadata = serde_json::from_value(value).map_err(|e| {
                    AuthError::discovery(
                        url.clone(),
                        "the metadata does not decode",
                        Some(Box::new(e)),
                    )
                })?;
                prm = Some(parsed);
                break;
            }
        }
        let Some(prm) = prm else {
            return self.discover_legacy().await;
        };
        metadata::check_resource(prm.resource.as_deref(), self.server)?;
        let resource = prm
            .resource
            .clone()
            .unwrap_or_else(|| self.server.to_owned());
        let issuer = prm.authorization_servers.first().cloned().ok_or_else(|| {
            AuthError::discovery(
                self.server.to_owned(),
                "the protected resource metadata name no authorization server",
                None,
            )
        })?;
        // An issuer reached in clear could have its metadata rewritten on the way (endpoints
        // that redeem the code and verifier elsewhere).
        if !metadata::secure_endpoint(&issuer) {
            return Err(AuthError::UnsafeServer {
                issuer,
                reason: "the issuer is neither https nor loopback".into(),
            });
        }
        peer_named(&issuer).await?;
        let meta = self.server_metadata(&issuer, true).await?.ok_or_else(|| {
            AuthError::discovery(
                issuer.clone(),
                "the authorization server publishes no metadata",
                None,
            )
        })?;
        Ok(Discovered {
            resource,
            issuer,
            prm: Some(prm),
            meta,
            defaults: false,
        })
    }

    /// The 2025-03-26 revision: the MCP server's origin is the authorization server; its
    /// metadata, or the default endpoints.
    async fn discover_legacy(&self) -> Result<Discovered, AuthError> {
        let issuer = discovery::legacy_issuer(self.server)?;
        tracing::debug!(%issuer, "no protected resource metadata; the 2025-03-26 discovery");
        // Under that revision the metadata's location comes from the MCP server, not from an
        // issuer, so the issuer it names is taken as it is (0.1.16's suite names
        // `{origin}/oauth`); RFC 8414's equality check applies to issuers discovered as such.
        let (meta, defaults) = match self.server_metadata(&issuer, false).await? {
            Some(meta) => (meta, false),
            None => (ServerMetadata::defaults(&issuer), true),
        };
        Ok(Discovered {
            resource: self.server.to_owned(),
            issuer: meta.issuer.clone(),
            prm: None,
            meta,
            defaults,
        })
    }

    /// The first metadata document found for `issuer`; with `strict`, one that names another
    /// issuer stops the flow (never falls through to another candidate or the defaults).
    async fn server_metadata(
        &self,
        issuer: &str,
        strict: bool,
    ) -> Result<Option<ServerMetadata>, AuthError> {
        for url in discovery::server_metadata_urls(issuer)? {
            if let Some(value) = fetch_json(self.http, &url).await? {
                let meta: ServerMetadata = serde_json::from_value(value).map_err(|e| {
                    AuthError::discovery(
                        url.clone(),
                        "the metadata does not decode",
                        Some(Box::new(e)),
                    )
                })?;
                if strict && !metadata::issuer_matches(issuer, &meta.issuer) {
                    return Err(AuthError::IssuerMismatch {
                        url,
                        expected: issuer.to_owned(),
                        found: meta.issuer,
                    });
                }
                return Ok(Some(meta));
            }
        }
        Ok(None)
    }

    /// The issuer a configured client's binding is checked against. Discovered through
    /// resource metadata, it is verified (the metadata had to name it). Under the 2025-03-26
    /// rules the MCP server's origin *is* the authorization server, so its metadata may only
    /// speak for that origin: an issuer it claims elsewhere is taken as the origin, and can
    /// never match a client bound to another authorization server.
    fn binding_issuer(&self, d: &Discovered) -> String {
        if d.prm.is_some() || metadata::same_origin(&d.issuer, self.server) {
            d.issuer.clone()
        } else {
            discovery::legacy_issuer(self.server).unwrap_or_default()
        }
    }

    /// The issuer a configured client is bound to: the one it was configured with, else, for
    /// a client with a secret or key, the one it was first used with (found in the store:
    /// every entry keeps its client). A public client's id is no secret and is not bound.
    async fn bound_issuer(
        &self,
        s: &crate::config::StaticClient,
    ) -> Result<Option<String>, AuthError> {
        if let Some(bound) = &s.issuer {
            return Ok(Some(bound.clone()));
        }
        if s.secret.is_none() && s.key.is_none() {
            return Ok(None);
        }
        Ok(self
            .config
            .store
            .list()
            .await?
            .into_iter()
            .find(|e| {
                e.client
                    .as_ref()
                    .is_some_and(|c| c.kind == ClientKind::Static && c.client_id == s.client_id)
            })
            .map(|e| e.issuer))
    }

    /// A client identity for this authorization server: the stored registration, a
    /// configured client (for this issuer), a client ID metadata document, or a new dynamic
    /// registration, in that order.
    pub(crate) async fn client(
        &self,
        d: &Discovered,
        stored: Option<&ClientRegistration>,
        redirect_uri: Option<&str>,
    ) -> Result<ClientRegistration, AuthError> {
        self.client_for(d, stored, redirect_uri, &Scopes::new())
            .await
    }

    /// [`Flow::client`] for a flow that asks for `asked` (registered with a new client).
    pub(crate) async fn client_for(
        &self,
        d: &Discovered,
        stored: Option<&ClientRegistration>,
        redirect_uri: Option<&str>,
        asked: &Scopes,
    ) -> Result<ClientRegistration, AuthError> {
        let supported = d.meta.token_endpoint_auth_methods_supported.as_deref();
        // A stored configured client yields to the one configured now (it may have changed).
        if let Some(c) = stored.filter(|c| {
            !(c.kind == ClientKind::Static && self.config.static_client.is_some())
                && (c.kind != ClientKind::Registered
                    || redirect_uri.is_none()
                    || c.redirect_uri.as_deref() == redirect_uri)
        }) {
            return Ok(c.clone());
        }
        if let Some(s) = &self.config.static_client {
            let issuer = self.binding_issuer(d);
            match self.bound_issuer(s).await? {
                Some(bound) if !metadata::issuer_matches(&bound, &issuer) => {
                    tracing::info!(configured = %bound, issuer = %issuer, "the configured client belongs to another issuer; not using it here");
                }
                _ => {
                    return Ok(ClientRegistration {
                        client_id: s.client_id.clone(),
                        client_secret: s.secret.clone(),
                        auth_method: client_auth::choose(
                            None,
                            s.secret.is_some(),
                            s.key.is_some(),
                            supported,
                        ),
                        redirect_uri: redirect_uri.map(str::to_owned),
                        kind: ClientKind::Static,
                    });
                }
            }
        }
        if let (Some(true), Some(url)) = (
            d.meta.client_id_metadata_document_supported,
            self.config
                .client_metadata_url
                .as_ref()
                .filter(|u| metadata::metadata_document_url(u)),
        ) {
            return Ok(ClientRegistration {
                client_id: url.clone(),
                client_secret: None,
                auth_method: TokenAuthMethod::None,
                redirect_uri: redirect_uri.map(str::to_owned),
                kind: ClientKind::MetadataDocument,
            });
        }
        match (&d.meta.registration_endpoint, redirect_uri) {
            (Some(endpoint), Some(redirect)) => self.register(d, endpoint, redirect, asked).await,
            _ => Err(AuthError::NoClient {
                issuer: d.issuer.clone(),
            }),
        }
    }

    /// Dynamic client registration (RFC 7591), as a native client that wants refresh tokens.
    async fn register(
        &self,
        d: &Discovered,
        endpoint: &str,
        redirect_uri: &str,
        asked: &Scopes,
    ) -> Result<ClientRegistration, AuthError> {
        let method =
            client_auth::for_registration(d.meta.token_endpoint_auth_methods_supported.as_deref());
        let native = metadata::secure_endpoint(redirect_uri) && redirect_uri.starts_with("http:")
            || !redirect_uri.starts_with("http");
        let mut body = json!({
            "client_name": self.config.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method.as_str(),
            "application_type": if native { "native" } else { "web" },
        });
        // Some servers refuse to authorize scopes a client did not register.
        let mut scopes = self.config.scopes.clone();
        if let Some(prm) = &d.prm {
            scopes.extend(prm.scopes_supported.iter().flatten().cloned());
        }
        scopes.extend(asked.iter().cloned());
        if let Some(scope) = scope::join(&scopes) {
            body["scope"] = Value::String(scope);
        }
        let mut request = Request::new(Bytes::from(body.to_string()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = endpoint
            .parse()
            .map_err(|_| AuthError::discovery(endpoint.to_owned(), "not a valid URL", None))?;
        request
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        request
            .headers_mut()
            .insert(ACCEPT, HeaderValue::from_static("application/json"));
        let response = self.send(endpoint, request).await?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(token::refusal("registration", status, response.body()));
        }
        let value: Value = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
        let client_id = value["client_id"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| AuthError::Refused {
                step: "registration",
                status: Some(status),
                error: "invalid_response".into(),
                description: Some("the answer has no client_id".into()),
            })?;
        let secret = value["client_secret"].as_str().map(Secret::new);
        let granted = value["token_endpoint_auth_method"]
            .as_str()
            .and_then(TokenAuthMethod::from_name);
        tracing::info!(issuer = %d.issuer, client_id, "registered a client");
        Ok(ClientRegistration {
            client_id: client_id.to_owned(),
            // The method asked for, unless the server says it granted another.
            auth_method: granted.unwrap_or(method),
            client_secret: secret,
            redirect_uri: Some(redirect_uri.to_owned()),
            kind: ClientKind::Registered,
        })
    }

    async fn send(
        &self,
        url: &str,
        request: Request<Bytes>,
    ) -> Result<http::Response<Bytes>, AuthError> {
        self.http
            .execute(request)
            .await
            .map_err(|e| AuthError::Http {
                url: without_query(url),
                cause: Arc::new(e),
            })
    }

    /// Client authentication on a form, signing an assertion for `private_key_jwt`.
    fn authenticate(
        &self,
        form: &mut Form,
        client: &ClientRegistration,
        audience: &str,
    ) -> Result<(), AuthError> {
        let assertion = match client.auth_method {
            TokenAuthMethod::PrivateKeyJwt => {
                let key = self
                    .config
                    .static_client
                    .as_ref()
                    .and_then(|s| s.key.as_ref())
                    .ok_or_else(|| AuthError::Config(ConfigProblem::NoSigningKey))?;
                Some(Secret::new(key.client_assertion(
                    &client.client_id,
                    audience,
                    self.config.clock.now(),
                )?))
            }
            _ => None,
        };
        form.authenticate(
            client.auth_method,
            &client.client_id,
            client.client_secret.as_ref(),
            assertion,
        )?;
        Ok(())
    }

    /// Posts `form` to the token endpoint and reads the tokens. With a DPoP key, each attempt
    /// carries a fresh proof, and a `use_dpop_nonce` answer is tried once more with the
    /// server's nonce.
    async fn token_request(
        &self,
        step: &'static str,
        endpoint: &str,
        form: Form,
        requested: Option<&str>,
        previous_refresh: Option<&Secret>,
    ) -> Result<Tokens, AuthError> {
        let mut nonce: Option<String> = None;
        loop {
            let mut request = form.to_request(endpoint)?;
            if let Some(key) = self.dpop {
                let proof = key.proof(
                    "POST",
                    endpoint,
                    None,
                    nonce.as_deref(),
                    self.config.clock.now(),
                )?;
                request.headers_mut().insert(
                    DPOP,
                    HeaderValue::try_from(proof)
                        .map_err(|_| AuthError::Config(ConfigProblem::Signing("a DPoP proof")))?,
                );
            }
            let response = self.send(endpoint, request).await?;
            let status = response.status().as_u16();
            if let (Some(_), None, AuthError::Refused { error, .. }) = (
                self.dpop,
                &nonce,
                &token::refusal(step, status, response.body()),
            ) && status == 400
                && error == "use_dpop_nonce"
                && let Some(n) = response
                    .headers()
                    .get(DPOP_NONCE)
                    .and_then(|v| v.to_str().ok())
            {
                tracing::debug!("the authorization server asks for a DPoP nonce");
                nonce = Some(n.to_owned());
                continue;
            }
            return token::parse(
                step,
                status,
                response.body(),
                requested,
                previous_refresh,
                self.config.clock.now(),
            );
        }
    }

    /// Obtains tokens with the configured grant: `scopes` asked for, with the client `stored`
    /// had, if any. The entry to keep.
    pub(crate) async fn obtain(
        &self,
        d: &Discovered,
        mut scopes: Scopes,
        stored: Option<&StoredAuth>,
    ) -> Result<(StoredAuth, ClientRegistration), AuthError> {
        let code_flow = matches!(self.config.grant, Grant::AuthorizationCode);
        if d.defaults {
            metadata::check_endpoints(&d.meta)?;
        } else {
            metadata::check_server(&d.meta, code_flow)?;
        }
        let token_endpoint =
            d.meta
                .token_endpoint
                .clone()
                .ok_or_else(|| AuthError::UnsafeServer {
                    issuer: d.issuer.clone(),
                    reason: "it has no token endpoint".into(),
                })?;
        let stored_client = stored.and_then(|s| s.client.as_ref());
        // Each grant makes its form (and its client); the token request is the same for all.
        let mut form = Form::new();
        let (client, scope) = match &self.config.grant {
            Grant::AuthorizationCode => {
                let handler = self
                    .config
                    .handler
                    .as_ref()
                    .filter(|h| h.interactive())
                    .ok_or_else(|| AuthError::LoginRequired {
                        server: self.server.to_owned(),
                    })?;
                let previous = stored_client.and_then(|c| c.redirect_uri.as_deref());
                let redirect_uri = handler.redirect_uri(previous).await?;
                let consent = scope::with_offline_access(
                    &mut scopes,
                    d.meta.scopes_supported.as_deref(),
                    self.config.offline_access,
                );
                // A new registration names every scope this flow asks for: some servers
                // refuse to authorize a scope the client did not register (the Python SDK's
                // refuses `offline_access` so).
                let client = self
                    .client_for(d, stored_client, Some(&redirect_uri), &scopes)
                    .await?;
                let scope = scope::join(&scopes);
                let pkce = Pkce::new()?;
                let state = random(32)?;
                let authorize = d.meta.authorization_endpoint.clone().unwrap_or_default();
                let url = authorization_url(&AuthorizationRequest {
                    endpoint: &authorize,
                    client_id: &client.client_id,
                    redirect_uri: &redirect_uri,
                    state: &state,
                    code_challenge: &pkce.challenge,
                    scope: scope.as_deref(),
                    resource: &d.resource,
                    consent,
                })?;
                tracing::info!(issuer = %d.issuer, scope = scope.as_deref().unwrap_or(""), "authorizing");
                let callback = handler.authorize(&url, self.http).await?;
                let issuer = (!d.defaults).then_some(d.meta.issuer.as_str());
                let advertised =
                    d.meta.authorization_response_iss_parameter_supported == Some(true);
                let code = check_callback(&callback, &state, issuer, advertised)?;
                form.add("grant_type", "authorization_code")
                    .add("code", code)
                    .add("redirect_uri", redirect_uri.as_str())
                    .add("code_verifier", pkce.verifier);
                (client, scope)
            }
            Grant::ClientCredentials => {
                let scope = scope::join(&scopes);
                form.add("grant_type", "client_credentials")
                    .add_opt("scope", scope.as_deref());
                (self.client(d, stored_client, None).await?, scope)
            }
            Grant::JwtBearer { assertion } => {
                let assertion = match assertion {
                    Assertion::Value(v) => v.clone(),
                    Assertion::File(path) => Secret::new(
                        tokio::fs::read_to_string(path)
                            .await
                            .map_err(|e| {
                                AuthError::Config(ConfigProblem::AssertionFile {
                                    path: path.clone(),
                                    cause: std::sync::Arc::new(e),
                                })
                            })?
                            .trim()
                            .to_owned(),
                    ),
                };
                let scope = scope::join(&scopes);
                form.add("grant_type", JWT_BEARER)
                    .add("assertion", assertion)
                    .add_opt("scope", scope.as_deref());
                (self.client(d, stored_client, None).await?, scope)
            }
            Grant::EnterpriseManaged {
                idp_token_endpoint,
                idp_client_id,
                id_token,
            } => {
                let scope = scope::join(&scopes);
                let mut exchange = Form::new();
                exchange
                    .add(
                        "grant_type",
                        "urn:ietf:params:oauth:grant-type:token-exchange",
                    )
                    .add(
                        "requested_token_type",
                        "urn:ietf:params:oauth:token-type:id-jag",
                    )
                    .add("subject_token", id_token.clone())
                    .add(
                        "subject_token_type",
                        "urn:ietf:params:oauth:token-type:id_token",
                    )
                    .add("audience", d.meta.issuer.as_str())
                    .add("resource", d.resource.as_str())
                    .add_opt("scope", scope.as_deref())
                    .add("client_id", idp_client_id.as_str());
                let grant = self
                    .token_request(
                        "identity assertion exchange",
                        idp_token_endpoint,
                        exchange,
                        scope.as_deref(),
                        None,
                    )
                    .await?;
                form.add("grant_type", JWT_BEARER)
                    .add("assertion", grant.access_token)
                    .add_opt("scope", scope.as_deref());
                (self.client(d, stored_client, None).await?, scope)
            }
        };
        form.add("resource", d.resource.as_str());
        self.authenticate(&mut form, &client, &d.meta.issuer)?;
        let tokens = self
            .token_request(
                "token request",
                &token_endpoint,
                form,
                scope.as_deref(),
                None,
            )
            .await?;
        let entry = StoredAuth {
            server: self.server.to_owned(),
            issuer: d.issuer.clone(),
            resource: d.resource.clone(),
            token_endpoint,
            revocation_endpoint: d.meta.revocation_endpoint.clone(),
            // A configured client is kept too (its id records which issuer it was first used
            // with); its secret only when the configuration asks, so that a secret given from
            // the environment stays out of files unless wanted.
            client: Some(match (&self.config.static_client, client.kind) {
                (Some(s), ClientKind::Static) if !s.persist_secret => ClientRegistration {
                    client_secret: None,
                    ..client.clone()
                },
                _ => client.clone(),
            }),
            dpop_key: self.dpop.map(|k| k.pkcs8().clone()),
            tokens: Some(tokens),
            saved_at: self.config.clock.now(),
        };
        Ok((entry, client))
    }

    /// Refreshes `entry`'s tokens with `client` (RFC 6749 §6), sending the same resource; a
    /// refresh token that is not rotated is kept.
    pub(crate) async fn refresh(
        &self,
        entry: &StoredAuth,
        client: &ClientRegistration,
    ) -> Result<Tokens, AuthError> {
        let old = entry
            .tokens
            .as_ref()
            .ok_or_else(|| AuthError::Config(ConfigProblem::NothingToRefresh))?;
        let refresh = old
            .refresh_token
            .clone()
            .ok_or_else(|| AuthError::Config(ConfigProblem::NoRefreshToken))?;
        let mut form = Form::new();
        form.add("grant_type", "refresh_token")
            .add("refresh_token", refresh.clone())
            .add("resource", entry.resource.as_str());
        self.authenticate(&mut form, client, &entry.issuer)?;
        let mut tokens = self
            .token_request(
                "refresh",
                &entry.token_endpoint,
                form,
                old.scope.as_deref(),
                Some(&refresh),
            )
            .await?;
        tokens.requested_scope = old.requested_scope.clone();
        Ok(tokens)
    }

    /// The key of an entry for this server and `issuer`.
    pub(crate) fn key(&self, issuer: &str) -> StoreKey {
        StoreKey {
            server: self.server.to_owned(),
            issuer: issuer.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urls_a_peer_names_on_link_local_or_metadata_addresses_are_refused_without_a_request() {
        for url in [
            "https://169.254.169.254/latest/meta-data",
            "http://[fe80::1]/x",
            "https://[fd00:ec2::254]/",
            "https://100.100.100.200/",
        ] {
            assert!(
                matches!(peer_named(url).await, Err(AuthError::Discovery { .. })),
                "{url}"
            );
        }
        for url in [
            "http://127.0.0.1:1/x",
            "http://localhost:1/x",
            "https://[::1]/",
        ] {
            assert!(peer_named(url).await.is_ok(), "{url}");
        }
    }
}

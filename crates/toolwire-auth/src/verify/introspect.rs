//! Opaque access tokens, checked by asking their authorization server (RFC 7662
//! introspection): the resource server authenticates as a client (`client_secret_basic`) and
//! gets back whether the token is active and what it grants. The answer must name this
//! resource in `aud` and the configured issuer in `iss` when it names one; an inactive token
//! says nothing more.

use serde_json::Value;
use toolwire_http::HttpExecutor;

use super::{AccessToken, TokenError, names_audience, scopes_of};
use crate::client_auth::{Form, TokenAuthMethod};
use crate::{Clock, Secret};

/// Asks one authorization server about tokens for one resource.
#[derive(Clone)]
pub struct Introspector {
    endpoint: String,
    issuer: String,
    audience: String,
    client_id: String,
    secret: Secret,
    http: HttpExecutor,
    clock: Clock,
}

impl std::fmt::Debug for Introspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspector")
            .field("endpoint", &self.endpoint)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl Introspector {
    /// Introspection at `endpoint` of `issuer`'s tokens for `audience`, as the client
    /// `client_id` with `secret`.
    pub fn new(
        endpoint: impl Into<String>,
        issuer: impl Into<String>,
        audience: impl Into<String>,
        client_id: impl Into<String>,
        secret: Secret,
        http: HttpExecutor,
    ) -> Self {
        Self {
            endpoint: endpoint.into(),
            issuer: issuer.into(),
            audience: audience.into(),
            client_id: client_id.into(),
            secret,
            http,
            clock: Clock::system(),
        }
    }

    /// Reads the time from `clock`.
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The issuer whose tokens it checks.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// What the authorization server says of `token`.
    pub async fn check(&self, token: &str) -> Result<AccessToken, TokenError> {
        let unavailable = |why: String| {
            TokenError::KeysUnavailable(format!("introspection at {}: {why}", self.endpoint))
        };
        let mut form = Form::new();
        form.add("token", token)
            .add("token_type_hint", "access_token")
            .authenticate(
                TokenAuthMethod::ClientSecretBasic,
                &self.client_id,
                Some(&self.secret),
                None,
            )
            .map_err(|e| unavailable(e.to_string()))?;
        let request = form
            .to_request(&self.endpoint)
            .map_err(|e| unavailable(e.to_string()))?;
        let response = self
            .http
            .execute(request)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let answer: Option<Value> = serde_json::from_slice(response.body()).ok();
        // Some servers answer an inactive token with an error status and `active: false`
        // (the TypeScript SDK's example does, with 401): what it says is what counts.
        if let Some(answer) = &answer
            && answer["active"] == Value::Bool(false)
        {
            return Err(TokenError::Inactive);
        }
        if !response.status().is_success() {
            return Err(unavailable(format!("HTTP {}", response.status())));
        }
        let answer = answer.ok_or_else(|| unavailable("the answer is not JSON".into()))?;
        self.read(&answer)
    }

    /// The token an introspection answer describes, checked.
    fn read(&self, answer: &Value) -> Result<AccessToken, TokenError> {
        if answer["active"] != Value::Bool(true) {
            return Err(TokenError::Inactive);
        }
        let Value::Object(claims) = answer.clone() else {
            return Err(TokenError::Inactive);
        };
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        if text("iss").is_some_and(|iss| iss != self.issuer) {
            return Err(TokenError::Issuer);
        }
        if !names_audience(&claims, &self.audience) {
            return Err(TokenError::Audience);
        }
        let now = self.clock.now();
        let expires_at = claims
            .get("exp")
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX);
        if now >= expires_at {
            return Err(TokenError::Expired);
        }
        Ok(AccessToken {
            issuer: self.issuer.clone(),
            subject: text("sub").map(str::to_owned),
            client_id: text("client_id").map(str::to_owned),
            scopes: scopes_of(&claims),
            expires_at,
            dpop_jkt: claims
                .get("cnf")
                .and_then(|c| c.get("jkt"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            claims,
        })
    }
}

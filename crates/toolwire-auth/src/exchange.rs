//! Token exchange (RFC 8693) for a service that calls another on its caller's behalf (a
//! gateway in front of MCP servers): the caller's access token, presented at the
//! authorization server with the service's own client credentials, is exchanged for a token
//! whose audience is the server called. The caller's token itself never leaves for that
//! server, as the MCP authorization spec asks.

use std::sync::Arc;

use crate::client_auth::{Form, TokenAuthMethod};
use crate::flow::without_query;
use crate::{AuthError, Clock, Secret, Tokens, token};

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Exchanges callers' tokens at one token endpoint, as one client.
#[derive(Clone)]
pub struct TokenExchange {
    endpoint: String,
    client_id: String,
    secret: Secret,
    http: toolwire_http::HttpExecutor,
    clock: Clock,
}

impl std::fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchange")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl TokenExchange {
    /// Exchanges at `endpoint` (a token endpoint) as `client_id` with `secret`
    /// (`client_secret_basic`).
    pub fn new(
        endpoint: impl Into<String>,
        client_id: impl Into<String>,
        secret: Secret,
        http: toolwire_http::HttpExecutor,
    ) -> Self {
        Self {
            endpoint: endpoint.into(),
            client_id: client_id.into(),
            secret,
            http,
            clock: Clock::system(),
        }
    }

    /// A token for `resource` (RFC 8707; with `audience` when the authorization server names
    /// its resources otherwise) standing for the holder of `subject_token`, with `scope` if
    /// given.
    pub async fn exchange(
        &self,
        subject_token: &str,
        resource: &str,
        audience: Option<&str>,
        scope: Option<&str>,
    ) -> Result<Tokens, AuthError> {
        let mut form = Form::new();
        form.add("grant_type", TOKEN_EXCHANGE)
            .add("subject_token", subject_token)
            .add("subject_token_type", ACCESS_TOKEN)
            .add("requested_token_type", ACCESS_TOKEN)
            .add("resource", resource)
            .add_opt("audience", audience)
            .add_opt("scope", scope)
            .authenticate(
                TokenAuthMethod::ClientSecretBasic,
                &self.client_id,
                Some(&self.secret),
                None,
            )?;
        let request = form.to_request(&self.endpoint)?;
        let response = self
            .http
            .execute(request)
            .await
            .map_err(|e| AuthError::Http {
                url: without_query(&self.endpoint),
                cause: Arc::new(e),
            })?;
        token::parse(
            "token exchange",
            response.status().as_u16(),
            response.body(),
            scope,
            None,
            self.clock.now(),
        )
    }
}

//! How an OAuth client is set up: [`OAuthConfig`].

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::handler::AuthorizationHandler;
use crate::jwt::SigningKey;
use crate::scope::{self, Scopes};
use crate::secret::Secret;
use crate::store::{CredentialStore, MemoryStore};

/// A client registered with an authorization server beforehand.
#[derive(Clone)]
pub struct StaticClient {
    pub(crate) client_id: String,
    pub(crate) secret: Option<Secret>,
    pub(crate) issuer: Option<String>,
    pub(crate) key: Option<Arc<SigningKey>>,
    pub(crate) persist_secret: bool,
}

impl fmt::Debug for StaticClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticClient")
            .field("client_id", &self.client_id)
            .field("secret", &self.secret)
            .field("issuer", &self.issuer)
            .field("key", &self.key)
            .field("persist_secret", &self.persist_secret)
            .finish()
    }
}

impl StaticClient {
    /// A public client with this id.
    pub fn new(client_id: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            secret: None,
            issuer: None,
            key: None,
            persist_secret: false,
        }
    }

    /// Its secret (a confidential client).
    pub fn secret(mut self, secret: impl Into<Secret>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// The one issuer it is registered with: it is never sent to another. Without one, a
    /// client with a secret or key is bound to the first issuer it is used with (recorded in
    /// the credential store); a server that names another authorization server later gets
    /// neither its id nor its secret. Under the 2025-03-26 rules (no resource metadata) only
    /// the MCP server's own origin can be that issuer.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Keep the secret in the credential store beside the tokens (default: no), so that a
    /// later process not given the secret can still refresh them. Without it, the store
    /// keeps the client's id only and the secret must be configured again.
    pub fn persist_secret(mut self, persist: bool) -> Self {
        self.persist_secret = persist;
        self
    }

    /// A key for `private_key_jwt`.
    pub fn signing_key(mut self, key: SigningKey) -> Self {
        self.key = Some(Arc::new(key));
        self
    }
}

/// Where a JWT bearer assertion comes from.
#[derive(Clone, Debug)]
pub enum Assertion {
    /// This one.
    Value(Secret),
    /// Read from this file at each use (a workload's projected token, rotated in place).
    File(PathBuf),
}

/// The grant tokens are obtained with.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Grant {
    /// A person approves in a browser: authorization code with PKCE (the default).
    #[default]
    AuthorizationCode,
    /// A machine with its own credentials (`client_credentials`; a static client with a secret
    /// or a signing key).
    ClientCredentials,
    /// A workload's identity token as an RFC 7523 assertion (`jwt-bearer`); one request, no
    /// retry.
    JwtBearer {
        /// The assertion.
        assertion: Assertion,
    },
    /// Enterprise-managed authorization: the identity provider exchanges the user's ID token
    /// for an identity assertion grant (RFC 8693), which the authorization server takes as a
    /// `jwt-bearer` assertion.
    EnterpriseManaged {
        /// The identity provider's token endpoint.
        idp_token_endpoint: String,
        /// This client's id at the identity provider.
        idp_client_id: String,
        /// The user's ID token.
        id_token: Secret,
    },
}

/// How an OAuth client behaves. Defaults: a public native client named `toolwire`, an
/// in-memory store, no handler (stored tokens only), refresh a minute before expiry,
/// `offline_access` asked for when the server lists it.
#[derive(Clone)]
pub struct OAuthConfig {
    pub(crate) client_name: String,
    pub(crate) static_client: Option<StaticClient>,
    pub(crate) client_metadata_url: Option<String>,
    pub(crate) scopes: Scopes,
    pub(crate) offline_access: bool,
    pub(crate) grant: Grant,
    pub(crate) refresh_skew: Duration,
    pub(crate) store: Arc<dyn CredentialStore>,
    pub(crate) handler: Option<Arc<dyn AuthorizationHandler>>,
    pub(crate) clock: Clock,
}

impl fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("client_name", &self.client_name)
            .field("static_client", &self.static_client)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .field("store", &self.store)
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

impl Default for OAuthConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl OAuthConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self {
            client_name: "toolwire".into(),
            static_client: None,
            client_metadata_url: None,
            scopes: Scopes::new(),
            offline_access: true,
            grant: Grant::AuthorizationCode,
            refresh_skew: Duration::from_secs(60),
            store: Arc::new(MemoryStore::new()),
            handler: None,
            clock: Clock::system(),
        }
    }

    /// The `client_name` a dynamic registration sends.
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// A pre-registered client, used before registering dynamically.
    pub fn static_client(mut self, client: StaticClient) -> Self {
        self.static_client = Some(client);
        self
    }

    /// A client ID metadata document URL (https, with a path; another is never used), used
    /// as the client id by servers that accept them.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// The scope asked for when neither the server's challenge nor its metadata name one.
    pub fn scopes<I: IntoIterator<Item = S>, S: Into<String>>(mut self, scopes: I) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The scope, as a space-separated string.
    pub fn scope(mut self, scope: &str) -> Self {
        self.scopes = scope::parse(Some(scope));
        self
    }

    /// Whether to ask for `offline_access` (a refresh token) when the server lists it.
    pub fn offline_access(mut self, ask: bool) -> Self {
        self.offline_access = ask;
        self
    }

    /// The grant (default: authorization code).
    pub fn grant(mut self, grant: Grant) -> Self {
        self.grant = grant;
        self
    }

    /// How long before expiry an access token is refreshed (default 60 s).
    pub fn refresh_skew(mut self, skew: Duration) -> Self {
        self.refresh_skew = skew;
        self
    }

    /// Where the time is read (default: the system clock): a simulation or a test gives its
    /// own, so that tokens age without waiting.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Where registrations and tokens are kept (default: memory).
    pub fn store(mut self, store: Arc<dyn CredentialStore>) -> Self {
        self.store = store;
        self
    }

    /// How a person approves (without one, only stored tokens and machine grants work).
    pub fn handler(mut self, handler: Arc<dyn AuthorizationHandler>) -> Self {
        self.handler = Some(handler);
        self
    }
}

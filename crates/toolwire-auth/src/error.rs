//! What can go wrong while authorizing.

use std::sync::Arc;

/// The error below an [`AuthError`] (an HTTP failure, a file's, a document that does not
/// decode), shared so that the error stays cheap to clone.
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// Why authorization failed. Never holds a token, secret, code or verifier: only what the
/// servers said (`error`, `error_description`), the URLs and issuers involved, and the error
/// below as its `source` (each level says only its own part, so an error chain shows every
/// level once).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// Metadata could not be fetched or read.
    #[error("OAuth discovery failed at {url}: {reason}")]
    Discovery {
        /// The URL asked.
        url: String,
        /// Why, in words.
        reason: String,
        /// The error below, if there was one (a URL or a document that does not parse).
        #[source]
        cause: Option<Cause>,
    },
    /// The protected resource metadata names a resource that is not this server (RFC 9728
    /// §3.3): nothing was sent to its authorization server.
    #[error("the protected resource metadata is for {resource}, not for {server}; not authorizing")]
    ResourceMismatch {
        /// The `resource` the metadata names.
        resource: String,
        /// The MCP server's URL.
        server: String,
    },
    /// The authorization server metadata's `issuer` is not the issuer it was fetched for
    /// (RFC 8414 §3.3): nothing was sent to its endpoints.
    #[error("the authorization server metadata at {url} names issuer {found}, not {expected}")]
    IssuerMismatch {
        /// Where the metadata came from.
        url: String,
        /// The issuer it was fetched for.
        expected: String,
        /// The issuer it names.
        found: String,
    },
    /// The authorization server cannot be used safely (no PKCE S256, no `code` response
    /// type, an endpoint that is neither https nor loopback).
    #[error("the authorization server {issuer} cannot be used: {reason}")]
    UnsafeServer {
        /// The issuer.
        issuer: String,
        /// Why.
        reason: String,
    },
    /// No client identity for this authorization server: it offers no registration and no
    /// client is configured for it.
    #[error("no client identity for {issuer}: it offers no registration; configure a client id")]
    NoClient {
        /// The issuer.
        issuer: String,
    },
    /// The authorization server refused something (registration, the authorization request,
    /// a token request) with an OAuth error.
    #[error("{step} refused by the authorization server{}: {error}{}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default(), description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        /// `registration`, `authorization`, `token request`, `refresh`.
        step: &'static str,
        /// The HTTP status, when there was one.
        status: Option<u16>,
        /// The OAuth `error` code.
        error: String,
        /// The `error_description`, if any.
        description: Option<String>,
    },
    /// The authorization response did not come from this flow (`state`), or from another
    /// issuer (RFC 9207 `iss`): no token was requested.
    #[error("the authorization response was refused: {0}")]
    Callback(CallbackRefusal),
    /// The server keeps demanding scopes that were already granted: authorizing again
    /// cannot help.
    #[error(
        "the server requires scope `{required}`, already granted; authorizing again cannot help"
    )]
    InsufficientScope {
        /// The scope the server asked for.
        required: String,
    },
    /// The server refused freshly issued credentials.
    #[error("the server refused new credentials{}", description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Rejected {
        /// The challenge's `error_description`.
        description: Option<String>,
    },
    /// The server needs authorization and this client may not start a flow (a
    /// non-interactive handler, or no handler).
    #[error("authorization required for {server}: log in first")]
    LoginRequired {
        /// The MCP server.
        server: String,
    },
    /// The user agent step failed (the browser, the loopback listener, a paste).
    #[error("the authorization step failed: {what}")]
    Handler {
        /// What failed.
        what: String,
        /// The error below, if there was one.
        #[source]
        cause: Option<Cause>,
    },
    /// The credential store failed.
    #[error("the credential store failed: {what}")]
    Store {
        /// What it was doing (a path, no content).
        what: String,
        /// The error below, if there was one.
        #[source]
        cause: Option<Cause>,
    },
    /// An exchange with the authorization server failed at the HTTP level.
    #[error("request to {url} failed")]
    Http {
        /// The URL asked (no query).
        url: String,
        /// The transport's error.
        #[source]
        cause: Cause,
    },
    /// The configuration cannot work (a missing secret, a bad key, nothing to refresh).
    #[error("invalid OAuth configuration: {0}")]
    Config(ConfigProblem),
}

/// Why an authorization response was refused before any token was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallbackRefusal {
    /// The redirect pasted or received could not be read as a URL.
    #[error("the redirect is not a URL: {0}")]
    NotAUrl(String),
    /// Its `state` is another flow's.
    #[error("its state is not this flow's")]
    ForeignState,
    /// It has no `state`.
    #[error("it carries no state")]
    NoState,
    /// Its `iss` (RFC 9207) names another issuer than the one asked.
    #[error("it was issued by {issued_by}, not by {expected}")]
    WrongIssuer {
        /// The `iss` it carries.
        issued_by: String,
        /// The issuer the flow asked.
        expected: String,
    },
    /// The authorization server advertises `iss` (RFC 9207) and the response has none.
    #[error("the server advertises the iss parameter and the response has none")]
    NoIssuer,
    /// It has no `code` (and no `error`).
    #[error("it carries no code")]
    NoCode,
}

/// What makes an OAuth configuration or its stored state unusable.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// `client_secret_basic` or `client_secret_post` without a secret.
    #[error("{method} needs a client secret")]
    NoClientSecret {
        /// The token endpoint authentication method.
        method: &'static str,
    },
    /// `private_key_jwt` without a key to sign with.
    #[error("private_key_jwt needs a signing key")]
    NoSigningKey,
    /// The client id or secret holds what a `Basic` header cannot carry.
    #[error("the client id or secret cannot be sent")]
    UnsendableClientCredentials,
    /// The private key is not PKCS#8 PEM.
    #[error("the private key is not a PKCS#8 PEM")]
    KeyNotPem,
    /// The private key is of a kind not signed with here.
    #[error("the private key is neither P-256 nor RSA")]
    KeyAlgorithm,
    /// Signing (an assertion, a DPoP proof) failed.
    #[error("signing {0} failed")]
    Signing(&'static str),
    /// No DPoP key could be made.
    #[error("no DPoP key could be made")]
    DpopKey,
    /// The DPoP key stored with the credentials cannot be read.
    #[error("the stored DPoP key is not {0}")]
    StoredDpopKey(&'static str),
    /// The system's random number generator failed.
    #[error("the system random number generator failed")]
    Random,
    /// A refresh was asked with no credentials to refresh.
    #[error("nothing to refresh")]
    NothingToRefresh,
    /// A refresh was asked and no refresh token is held.
    #[error("no refresh token")]
    NoRefreshToken,
    /// The token is of a type this client cannot send (not `Bearer` or `DPoP`).
    #[error("a {0} token cannot be sent without this client's proof")]
    TokenType(String),
    /// A JWK set with no key a verifier can use.
    #[error("the JWK set holds no signing key this verifier can use")]
    EmptyKeySet,
    /// A client assertion's file could not be read.
    #[error("{}", .path.display())]
    AssertionFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        cause: Cause,
    },
}

impl AuthError {
    /// [`AuthError::Handler`] for `what`, with the error below if any.
    pub fn handler(
        what: impl Into<String>,
        cause: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Handler {
            what: what.into(),
            cause: cause.map(Arc::from),
        }
    }

    /// [`AuthError::Store`] for `what`, with the error below if any.
    pub fn store(
        what: impl Into<String>,
        cause: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Store {
            what: what.into(),
            cause: cause.map(Arc::from),
        }
    }

    /// [`AuthError::Discovery`] at `url` for `reason`, with the error below if any.
    pub(crate) fn discovery(
        url: impl Into<String>,
        reason: impl Into<String>,
        cause: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Discovery {
            url: url.into(),
            reason: reason.into(),
            cause: cause.map(Arc::from),
        }
    }
}

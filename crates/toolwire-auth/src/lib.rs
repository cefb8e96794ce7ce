//! OAuth 2.1 for the Toolwire MCP client, as the MCP authorization spec asks of a client.
//!
//! [`OAuth`] is an [`Authorizer`](toolwire_http::Authorizer): the HTTP transport asks it for
//! headers before every request and tells it about every 401 and 403. On a refusal it runs
//! the flow once for every request refused with the same credentials, then those requests are
//! sent again; the session above never sees an authorization round.
//!
//! What a flow does, in order:
//! - **Discovery**: protected resource metadata (RFC 9728) from the challenge's
//!   `resource_metadata`, else the path-aware well-known URL, else the root one; its
//!   `resource` must be this server (same origin, a path prefix) before anything else is
//!   sent. Then the authorization server's metadata (RFC 8414 path insertion, OpenID
//!   insertion and appending; never the root for an issuer with a path), whose `issuer` must
//!   be the one it was fetched for, compared as strings. A server with no resource metadata
//!   gets the 2025-03-26 rules: its origin is the authorization server, whose metadata or
//!   default endpoints (`/authorize`, `/token`, `/register`) are used.
//! - **Client identity**: the stored registration for this issuer, a configured client
//!   (never sent to an issuer it is not bound to), a client ID metadata document, or dynamic
//!   registration (RFC 7591) as a native client that wants refresh tokens.
//! - **Scope**: the challenge's, else the resource metadata's `scopes_supported`, else the
//!   configured default, else none (omitted); `offline_access` only when the authorization
//!   server lists it; a step-up after `403 insufficient_scope` asks for everything asked and
//!   granted before plus what is challenged, and gives up when that was granted already.
//! - **Grant**: authorization code with PKCE S256 through an [`AuthorizationHandler`], the
//!   callback's `state` and RFC 9207 `iss` checked before any token request; or a machine
//!   grant ([`Grant`]): client credentials (secret or `private_key_jwt`), a workload's
//!   JWT bearer assertion, or enterprise-managed authorization (RFC 8693 exchange for an
//!   identity assertion grant, then JWT bearer). The RFC 8707 `resource` goes with every
//!   authorization, token and refresh request, identical each time.
//! - **DPoP** (RFC 9449): when the resource server challenges with `DPoP` and the
//!   authorization server signs ES256 proofs, tokens are bound to a key of the client's
//!   ([`DpopKey`], kept with them); every token request and every MCP request carries a fresh
//!   proof, and a server's `use_dpop_nonce` is answered once with its nonce.
//! - **Tokens**: kept in a [`CredentialStore`] keyed by server **and** issuer
//!   ([`MemoryStore`], [`FileStore`]); refreshed a minute before expiry and after a 401;
//!   a rotated refresh token is saved at once. Every refresh, authorization and logout holds
//!   the store's lock (a file lock for [`FileStore`]) around its read and write, and a
//!   refresh first adopts what another process stored meanwhile, spending only the newest
//!   refresh token, so processes sharing a store never spend a rotated one.
//!
//! - **The browser step on this machine**: [`LoopbackBrowser`], an [`AuthorizationHandler`]
//!   with a loopback listener for the callback (the registration's port kept, a fixed
//!   [`LoopbackRedirect`] bound exactly, `localhost` on both loopback families), the URL shown
//!   by the application's [`Presenter`] ([`open_browser`] opens one).
//!
//! - **The resource server's side** ([`verify`]): JWT access tokens checked against an
//!   issuer's JWK set (found through its metadata, fetched again as it rotates) and DPoP
//!   proofs, for a server or gateway that requires tokens. Verification is hand-written over
//!   ring (about a hundred lines of JWS and JWK): `jsonwebtoken` has no ring backend (it wants
//!   aws-lc, a C build, or RustCrypto's `rsa`, with an open timing advisory).
//! - **Token exchange** ([`TokenExchange`], RFC 8693): a caller's token exchanged for one
//!   whose audience is the server a gateway calls on the caller's behalf.
//!
//! Secrets ([`Secret`]: tokens, client secrets, codes, verifiers) never appear in `Debug`,
//! errors or logs; the headers carrying them are marked sensitive.
//!
//! # Dependencies
//! - `toolwire-http`: the [`Authorizer`](toolwire_http::Authorizer) seam, the challenge
//!   parser, and the transport's own HTTP client ([`HttpExecutor`](toolwire_http::HttpExecutor)):
//!   OAuth traffic shares its TLS roots, proxy and timeouts, with no second HTTP stack.
//! - `ring` (already under rustls): SHA-256 for PKCE, the system RNG for verifiers, states
//!   and JWT ids, ES256/RS256 signatures for client assertions. Chosen over `oauth2` (no
//!   discovery, registration, RFC 9207 or token exchange, and about eighty crates with
//!   second copies of `rand`, `sha2` and `thiserror`) and `jsonwebtoken` (no ring backend).
//! - `rustls-pki-types` (already under rustls): PKCS#8 PEM parsing for signing keys.
//! - `url` (already under the HTTP transport): building well-known and authorization URLs
//!   and comparing origins; issuers and resources stay the strings received.
//! - `base64`, `serde`, `serde_json`, `http`, `bytes`, `thiserror`, `tracing`, `tokio`
//!   (locks, the blocking file store): as everywhere in the workspace.
//! - `nix` (`fs`): `flock` on the credentials file while refreshing (`File::lock` needs a
//!   newer Rust than the workspace's minimum).
//! - `hyper` (`server`, `http1`), `hyper-util`, `http-body-util` (already under the HTTP
//!   transport): the loopback listener's HTTP, rather than a hand-written request reader.
//! - `shlex`: `$BROWSER` is a command line.
//! - `tempfile`: each save writes a uniquely named file opened exclusively (`O_EXCL`: no
//!   predictable name, no symlink followed, 0600 from the start) and renames it over the
//!   credentials file; hand-rolling unique names is what let two saves share one file.

mod authorize;
mod challenge;
mod client_auth;
mod clock;
mod config;
mod discovery;
mod error;
mod exchange;
mod flow;
mod handler;
mod jwt;
mod loopback;
mod metadata;
mod oauth;
mod pkce;
mod scope;
mod secret;
mod store;
mod token;
pub mod verify;

pub use authorize::{AuthorizationRequest, CallbackParams, authorization_url, check_callback};
pub use challenge::{AuthChallenge, Scheme};
pub use client_auth::TokenAuthMethod;
pub use clock::Clock;
pub use config::{Assertion, Grant, OAuthConfig, StaticClient};
pub use discovery::{resource_metadata_urls, server_metadata_urls};
pub use error::{AuthError, CallbackRefusal, Cause, ConfigProblem};
pub use exchange::TokenExchange;
pub use handler::{AuthorizationHandler, FetchRedirect, NoInteraction};
pub use jwt::{DpopKey, SigningKey};
pub use loopback::{APPROVAL_WAIT, LoopbackBrowser, LoopbackRedirect, Presenter, open_browser};
pub use metadata::{ResourceMetadata, ServerMetadata, check_resource, issuer_matches};
pub use oauth::{AuthStatus, OAuth};
pub use secret::Secret;
pub use store::{
    ClientKind, ClientRegistration, CredentialStore, FileStore, MemoryStore, StoreKey, StoreLock,
    StoredAuth,
};
pub use token::Tokens;

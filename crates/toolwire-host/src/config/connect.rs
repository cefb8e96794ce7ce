//! From an entry to a client: [`ServerConfig::connect`], and the transport settings an entry
//! gives.

use std::time::Duration;

use toolwire::auth::{OAuthConfig, StaticClient};
use toolwire::{
    Client, ClientBuilder, HttpTransport, HttpTransportBuilder, StaticAuthorization, StdioConfig,
};

use super::{ServerConfig, ServerTransport};

/// Why a server entry cannot be connected as it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The entry is not of the kind asked for (an HTTP entry asked for its stdio settings).
    #[error("server `{server}` is not a {wanted} server")]
    WrongTransport {
        /// The server.
        server: String,
        /// What was asked for.
        wanted: &'static str,
    },
    /// The client refused the entry's settings (a header or URL its transport refuses, a
    /// stdio command that cannot be started).
    #[error("server `{server}`")]
    Client {
        /// The server.
        server: String,
        /// Why.
        #[source]
        source: toolwire::Error,
    },
}

impl ServerConfig {
    /// The stdio settings of a `Stdio` entry: its command, arguments, `env` on top of the
    /// allow-listed environment, and `cwd`.
    pub fn stdio_config(&self) -> Result<StdioConfig, ConnectError> {
        match &self.transport {
            ServerTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut config = StdioConfig::new(command, args);
                for (name, value) in env {
                    config = config.with_env(name, value);
                }
                if let Some(cwd) = cwd {
                    config = config.with_cwd(cwd);
                }
                Ok(config)
            }
            _ => Err(ConnectError::WrongTransport {
                server: self.name.clone(),
                wanted: "stdio",
            }),
        }
    }

    /// The HTTP transport settings of an `Http` or `Sse` entry: its URL and `headers` (a
    /// header the transport refuses is the error of its `build`). An `Authorization` header
    /// becomes the transport's credentials ([`StaticAuthorization::header`]: a bearer token,
    /// or the value as written for another scheme; one a header cannot hold is the error
    /// here), never shown in `Debug` or logs;
    /// one that fills in empty (`Bearer ${TOKEN:-}` without a token) is left out. An `Sse` entry's settings
    /// are built with `build_sse` (or connected with `ClientBuilder::connect_sse`). TLS
    /// roots are [`TlsRoots::from_env`](toolwire::TlsRoots::from_env): the bundle that
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR` name, Mozilla's otherwise.
    pub fn http_transport(&self) -> Result<HttpTransportBuilder, ConnectError> {
        match &self.transport {
            ServerTransport::Http {
                url,
                headers,
                unix_socket,
            }
            | ServerTransport::Sse {
                url,
                headers,
                unix_socket,
            } => {
                let mut builder =
                    HttpTransport::builder(url.as_str()).tls_roots(toolwire::TlsRoots::from_env());
                if let Some(socket) = unix_socket {
                    builder = builder.unix_socket(socket);
                }
                for (name, value) in headers {
                    builder = if !name.eq_ignore_ascii_case("authorization") {
                        builder.header(name, value)
                    } else if credentials(name, value) {
                        // The transport owns `Authorization`: credentials given whole.
                        let given = StaticAuthorization::header(value).map_err(|e| {
                            ConnectError::Client {
                                server: self.name.clone(),
                                source: toolwire::Error::Connection(
                                    toolwire::ConnectionError::Transport(std::sync::Arc::new(
                                        toolwire::TransportError::Setup(Box::new(e)),
                                    )),
                                ),
                            }
                        })?;
                        builder.credentials(given)
                    } else {
                        builder
                    };
                }
                Ok(builder)
            }
            ServerTransport::Stdio { .. } => Err(ConnectError::WrongTransport {
                server: self.name.clone(),
                wanted: "HTTP",
            }),
        }
    }
}

impl ServerConfig {
    /// Connects the entry with `client`'s settings, the one way from an entry to a client
    /// (`Host` and the CLI take it): a stdio entry starts its command now (a command that
    /// cannot start is the error here); an `http` entry speaks Streamable HTTP and falls
    /// back to the 2024-11-05 HTTP+SSE transport when the server refuses it
    /// (`ClientBuilder::connect_http`); an `sse` entry speaks HTTP+SSE. The entry's
    /// `timeout`, when set, replaces `client`'s, and so does a pinned `protocol`. Every later connection (after a death, with
    /// `client`'s reconnect policy, or after `Client::disconnect`) is made from the same
    /// settings.
    pub fn connect(&self, client: ClientBuilder) -> Result<Client, ConnectError> {
        self.connect_with(client, Ok::<_, ConnectError>, |stdio| stdio)
    }

    /// [`ServerConfig::connect`] with the caller's changes to the transport settings:
    /// `http` edits a remote entry's (headers, proxy, TLS roots, credentials: the CLI applies
    /// its flags there), `stdio` a stdio entry's (where the child's stderr goes).
    pub fn connect_with<E: From<ConnectError>>(
        &self,
        mut client: ClientBuilder,
        http: impl FnOnce(HttpTransportBuilder) -> Result<HttpTransportBuilder, E>,
        stdio: impl FnOnce(StdioConfig) -> StdioConfig,
    ) -> Result<Client, E> {
        if let Some(timeout) = self.timeout {
            client = client.timeouts(timeout, timeout.min(Duration::from_secs(5)));
        }
        if self.protocol != toolwire::ProtocolMode::Auto {
            client = client.mode(self.protocol.clone());
        }
        let refused = |source| ConnectError::Client {
            server: self.name.clone(),
            source,
        };
        let connected = match &self.transport {
            ServerTransport::Stdio { .. } => client.connect_stdio(stdio(self.stdio_config()?)),
            ServerTransport::Http { .. } => client.connect_http(http(self.http_transport()?)?),
            ServerTransport::Sse { .. } => client.connect_sse(http(self.http_transport()?)?),
        };
        Ok(connected.map_err(refused)?)
    }

    /// The URL of a remote entry.
    pub fn url(&self) -> Option<&str> {
        match &self.transport {
            ServerTransport::Http { url, .. } | ServerTransport::Sse { url, .. } => Some(url),
            ServerTransport::Stdio { .. } => None,
        }
    }

    /// Whether the entry carries credentials of its own: an `Authorization` header that does
    /// not fill in empty.
    pub fn has_authorization(&self) -> bool {
        match &self.transport {
            ServerTransport::Http { headers, .. } | ServerTransport::Sse { headers, .. } => {
                carries_credentials(headers)
            }
            ServerTransport::Stdio { .. } => false,
        }
    }

    /// The OAuth settings for this entry, on top of `base` (its store and handler): the
    /// entry's `clientId` as a pre-registered client and its `scopes`, where it has them.
    /// `None` for a stdio entry and for one with an `Authorization` header of its own: those
    /// are not authorized by OAuth.
    pub fn oauth_config(&self, base: OAuthConfig) -> Option<OAuthConfig> {
        if self.url().is_none() || self.has_authorization() {
            return None;
        }
        let Some(entry) = &self.oauth else {
            return Some(base);
        };
        let mut config = base;
        if let Some(id) = &entry.client_id {
            let mut client = StaticClient::new(id);
            if let Some(issuer) = &entry.issuer {
                client = client.issuer(issuer);
            }
            config = config.static_client(client);
        }
        if !entry.scopes.is_empty() {
            config = config.scopes(entry.scopes.iter().cloned());
        }
        Some(config)
    }
}

/// Whether a header carries credentials: an `Authorization` whose value is more than blank or
/// a bare `Bearer` (what `Bearer ${TOKEN:-}` fills in to without a token).
fn credentials(name: &str, value: &str) -> bool {
    let value = value.trim();
    name.eq_ignore_ascii_case("authorization")
        && !value.is_empty()
        && !value.eq_ignore_ascii_case("bearer")
}

/// Whether any of an entry's headers carries credentials.
pub(super) fn carries_credentials(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(name, value)| credentials(name, value))
}

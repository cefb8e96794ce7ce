//! How the client authenticates at the token endpoint (RFC 6749 §2.3, RFC 7523 §2.2), and the
//! form-encoded requests it sends there.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request};
use serde::{Deserialize, Serialize};

use crate::secret::Secret;
use crate::{AuthError, ConfigProblem};

/// A token endpoint authentication method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuthMethod {
    /// A public client: `client_id` in the body, no secret.
    None,
    /// `Authorization: Basic` with the form-encoded id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the body.
    ClientSecretPost,
    /// A signed JWT assertion (RFC 7523).
    PrivateKeyJwt,
}

impl TokenAuthMethod {
    /// The registered name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::ClientSecretBasic => "client_secret_basic",
            Self::ClientSecretPost => "client_secret_post",
            Self::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method for a name; `None` for one this client does not speak.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "none" => Self::None,
            "client_secret_basic" => Self::ClientSecretBasic,
            "client_secret_post" => Self::ClientSecretPost,
            "private_key_jwt" => Self::PrivateKeyJwt,
            _ => return None,
        })
    }
}

/// The method for a client: the one it was registered with when the server supports it;
/// otherwise, with a secret, `client_secret_basic` (the RFC 8414 default) before
/// `client_secret_post`; with a signing key, `private_key_jwt`; else `none`.
pub(crate) fn choose(
    registered: Option<TokenAuthMethod>,
    has_secret: bool,
    has_key: bool,
    supported: Option<&[String]>,
) -> TokenAuthMethod {
    let allowed = |m: TokenAuthMethod| match supported {
        None => matches!(
            m,
            TokenAuthMethod::ClientSecretBasic | TokenAuthMethod::None
        ),
        Some(list) => list.iter().any(|s| s == m.as_str()),
    };
    if let Some(m) = registered.filter(|m| allowed(*m)) {
        return m;
    }
    if has_key && allowed(TokenAuthMethod::PrivateKeyJwt) {
        return TokenAuthMethod::PrivateKeyJwt;
    }
    if has_secret {
        for m in [
            TokenAuthMethod::ClientSecretBasic,
            TokenAuthMethod::ClientSecretPost,
        ] {
            if allowed(m) {
                return m;
            }
        }
    }
    if has_key {
        return TokenAuthMethod::PrivateKeyJwt;
    }
    if has_secret {
        return TokenAuthMethod::ClientSecretBasic;
    }
    TokenAuthMethod::None
}

/// The method to ask for in a dynamic registration: `none` when the server takes it (a native
/// client keeps no secret worth the name), else `client_secret_basic`, else
/// `client_secret_post`.
pub(crate) fn for_registration(supported: Option<&[String]>) -> TokenAuthMethod {
    let Some(list) = supported else {
        return TokenAuthMethod::None;
    };
    [
        TokenAuthMethod::None,
        TokenAuthMethod::ClientSecretBasic,
        TokenAuthMethod::ClientSecretPost,
    ]
    .into_iter()
    .find(|m| list.iter().any(|s| s == m.as_str()))
    .unwrap_or(TokenAuthMethod::None)
}

/// A form POST to a token endpoint, with its client authentication.
#[derive(Debug, Default)]
pub(crate) struct Form {
    pairs: Vec<(&'static str, Secret)>,
    basic: Option<Secret>,
}

impl Form {
    /// An empty form.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds a parameter.
    pub(crate) fn add(&mut self, name: &'static str, value: impl Into<Secret>) -> &mut Self {
        self.pairs.push((name, value.into()));
        self
    }

    /// Adds a parameter when there is one.
    pub(crate) fn add_opt(&mut self, name: &'static str, value: Option<&str>) -> &mut Self {
        if let Some(v) = value {
            self.pairs.push((name, Secret::new(v)));
        }
        self
    }

    /// The value of parameter `name`.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.expose())
    }

    /// Authenticates the client: `client_id` always goes in the body (some servers require it
    /// even with Basic), then the method's own part. `assertion` is the signed JWT for
    /// `private_key_jwt`.
    pub(crate) fn authenticate(
        &mut self,
        method: TokenAuthMethod,
        client_id: &str,
        secret: Option<&Secret>,
        assertion: Option<Secret>,
    ) -> Result<&mut Self, AuthError> {
        self.add("client_id", client_id);
        match method {
            TokenAuthMethod::None => {}
            TokenAuthMethod::ClientSecretBasic => {
                let secret = secret.ok_or_else(|| {
                    AuthError::Config(ConfigProblem::NoClientSecret {
                        method: "client_secret_basic",
                    })
                })?;
                let enc = |s: &str| {
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                };
                let pair = format!("{}:{}", enc(client_id), enc(secret.expose()));
                self.basic = Some(Secret::new(format!("Basic {}", STANDARD.encode(pair))));
            }
            TokenAuthMethod::ClientSecretPost => {
                let secret = secret.ok_or_else(|| {
                    AuthError::Config(ConfigProblem::NoClientSecret {
                        method: "client_secret_post",
                    })
                })?;
                self.add("client_secret", secret.clone());
            }
            TokenAuthMethod::PrivateKeyJwt => {
                let assertion =
                    assertion.ok_or_else(|| AuthError::Config(ConfigProblem::NoSigningKey))?;
                self.add(
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                );
                self.add("client_assertion", assertion);
            }
        }
        Ok(self)
    }

    /// The HTTP request: `POST endpoint`, form-encoded, `Accept: application/json`, the Basic
    /// header (marked sensitive) when the method uses one.
    pub(crate) fn to_request(&self, endpoint: &str) -> Result<Request<Bytes>, AuthError> {
        let mut body = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in &self.pairs {
            body.append_pair(name, value.expose());
        }
        let mut request = Request::new(Bytes::from(body.finish()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = endpoint
            .parse()
            .map_err(|_| AuthError::discovery(endpoint.to_owned(), "not a valid URL", None))?;
        let headers = request.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(basic) = &self.basic {
            let mut value = HeaderValue::try_from(basic.expose())
                .map_err(|_| AuthError::Config(ConfigProblem::UnsendableClientCredentials))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_method_follows_the_registration_then_the_servers_list() {
        use TokenAuthMethod as M;
        let basic = list(&["client_secret_basic"]);
        let post = list(&["client_secret_post"]);
        let none = list(&["none"]);
        let jwt = list(&["private_key_jwt"]);
        // (registered, secret, key, supported) -> chosen
        type Row<'a> = (Option<M>, bool, bool, Option<&'a [String]>, M);
        let table: &[Row<'_>] = &[
            (
                Some(M::ClientSecretPost),
                true,
                false,
                Some(&post),
                M::ClientSecretPost,
            ),
            (
                Some(M::ClientSecretPost),
                true,
                false,
                Some(&basic),
                M::ClientSecretBasic,
            ),
            (None, true, false, Some(&basic), M::ClientSecretBasic),
            (None, true, false, Some(&post), M::ClientSecretPost),
            (None, true, false, None, M::ClientSecretBasic),
            (None, false, false, Some(&none), M::None),
            (Some(M::None), true, false, Some(&none), M::None),
            (None, false, true, Some(&jwt), M::PrivateKeyJwt),
        ];
        for (registered, secret, key, supported, want) in table {
            assert_eq!(
                choose(*registered, *secret, *key, *supported),
                *want,
                "{registered:?} {supported:?}"
            );
        }
        assert_eq!(for_registration(Some(&basic)), M::ClientSecretBasic);
        assert_eq!(
            for_registration(Some(&list(&["client_secret_post", "none"]))),
            M::None
        );
        assert_eq!(for_registration(None), M::None);
    }

    #[test]
    fn basic_encodes_the_id_and_secret_and_every_method_sends_the_client_id() {
        let secret = Secret::new("s3cr:et");
        let mut form = Form::new();
        form.add("grant_type", "client_credentials");
        form.authenticate(
            TokenAuthMethod::ClientSecretBasic,
            "my id",
            Some(&secret),
            None,
        )
        .expect("basic");
        assert_eq!(form.get("client_id"), Some("my id"));
        assert_eq!(form.get("client_secret"), Option::None);
        assert!(
            !format!("{form:?}").contains("s3cr"),
            "the form's Debug hides values"
        );
        let req = form.to_request("https://as/token").expect("request");
        let auth = req.headers()[AUTHORIZATION].clone();
        assert!(auth.is_sensitive());
        let decoded = STANDARD
            .decode(auth.to_str().expect("ascii").trim_start_matches("Basic "))
            .expect("base64");
        assert_eq!(decoded, b"my+id:s3cr%3Aet");
        assert_eq!(
            req.body().as_ref(),
            b"grant_type=client_credentials&client_id=my+id"
        );

        let mut post = Form::new();
        post.authenticate(TokenAuthMethod::ClientSecretPost, "id", Some(&secret), None)
            .expect("post");
        assert_eq!(post.get("client_secret"), Some("s3cr:et"));
        let req = post.to_request("https://as/token").expect("request");
        assert!(req.headers().get(AUTHORIZATION).is_none());

        let mut none = Form::new();
        none.authenticate(TokenAuthMethod::None, "id", Some(&secret), None)
            .expect("none");
        assert_eq!(none.get("client_secret"), Option::None);
        assert!(
            Form::new()
                .authenticate(
                    TokenAuthMethod::ClientSecretBasic,
                    "id",
                    Option::None,
                    Option::None
                )
                .is_err()
        );
    }
}

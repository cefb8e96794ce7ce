//! A scripted MCP server behind OAuth on one loopback peer: protected resource metadata,
//! authorization server metadata, dynamic registration, an `/authorize` that approves at once
//! (302 to the redirect URI with `code`, `state` and `iss`), a `/token` that issues rotating
//! refresh tokens, and an MCP endpoint that wants the current token (Bearer, or DPoP with a
//! proof bound to it and the server's nonce). Its state says what it does and records what it
//! saw.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::http::{HttpPeer, Part, Recorded, Reply};

/// What the scripted authorization server does, and what it saw.
#[derive(Debug, Default)]
pub struct As {
    /// The access token the MCP endpoint accepts now.
    pub valid: Option<String>,
    /// Access tokens issued so far.
    pub issued: u32,
    /// `expires_in` of the tokens it issues.
    pub expires_in: u64,
    /// Refresh requests are refused with `invalid_grant`.
    pub revoke_refresh: bool,
    /// The metadata name this issuer instead of the real one.
    pub wrong_issuer: Option<String>,
    /// The resource metadata name this resource instead of the server.
    pub wrong_resource: Option<String>,
    /// The MCP endpoint refuses every token.
    pub refuse_all: bool,
    /// Form bodies of token requests.
    pub token_forms: Vec<String>,
    /// `/authorize` requests.
    pub authorizations: u32,
    /// `/register` requests.
    pub registrations: u32,
    /// DPoP: the resource server challenges with it, wants a nonce, and checks each proof.
    pub dpop: bool,
    /// DPoP proofs seen by the MCP endpoint (their `jti`s).
    pub proofs: Vec<String>,
    /// The MCP endpoint answers 403 `insufficient_scope` naming this scope to a token
    /// granted without it.
    pub require_scope: Option<String>,
    /// The scope the last authorization asked for (granted as asked).
    pub asked_scope: Option<String>,
    /// The query of the last `/authorize` request (client id, redirect URI, …).
    pub authorize_query: Vec<(String, String)>,
    /// OAuth 2.1 reuse detection: a refresh token that was already rotated away revokes the
    /// whole grant (every token issued so far stops working). While the grant stands, every
    /// access token it issued is accepted, as a real resource server accepts any unexpired
    /// token.
    pub reuse_detection: bool,
    /// The refresh token issued last (the only one a refresh may spend).
    pub latest_refresh: Option<String>,
    /// Access tokens issued under the standing grant.
    pub live: Vec<String>,
    /// Refreshes that spent a rotated refresh token (each revoked the grant).
    pub reused: u32,
    /// The metadata names a revocation endpoint (RFC 7009), `/revoke`.
    pub revocation: bool,
    /// The tokens `/revoke` was asked to revoke (a revoked refresh token ends the grant: its
    /// access tokens stop working too).
    pub revoked: Vec<String>,
    /// No protected resource metadata (404): clients fall back to the 2025-03-26 rules.
    pub no_prm: bool,
    /// The resource metadata name this authorization server instead of the peer itself.
    pub prm_issuer: Option<String>,
    /// The `scope` the last registration named.
    pub registered_scope: Option<String>,
    /// Authorizations asking for a scope the client did not register are refused
    /// (`invalid_scope`), as the Python SDK's authorization server does.
    pub strict_scopes: bool,
}

/// The claims of a compact JWT.
pub fn claims(jwt: &str) -> Value {
    let part = jwt.split('.').nth(1).unwrap_or("");
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap_or_default(),
    )
    .unwrap_or(Value::Null)
}

/// The pairs of a form body.
pub fn form(body: &Bytes) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

/// The value of `name` among `pairs`.
pub fn get<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// An MCP server's handler.
type Mcp = dyn Fn(&Recorded) -> Reply + Send + Sync;

fn handle(state: &Mutex<As>, mcp: Option<&Mcp>, req: &Recorded) -> Reply {
    let mut s = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let base = format!("http://{}", req.header("host"));
    let path = req.path.split('?').next().unwrap_or("").to_owned();
    match path.as_str() {
        "/mcp" if s.dpop => {
            let auth = req.header("authorization");
            let challenge = |error: &str| {
                format!(
                    r#"DPoP error="{error}", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
                )
            };
            let Some(token) = auth
                .strip_prefix("DPoP ")
                .filter(|t| s.valid.as_deref() == Some(*t))
            else {
                return Reply::status(401).header("www-authenticate", &challenge("invalid_token"));
            };
            let proof = claims(req.header("dpop"));
            let ath = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
                ring::digest::digest(&ring::digest::SHA256, token.as_bytes()),
            );
            // A proof for another request, or not bound to this token, is refused (and the
            // client's call fails).
            if proof["htm"] != "POST"
                || proof["htu"] != format!("{base}/mcp")
                || proof["ath"] != ath
            {
                return Reply::status(401)
                    .header("www-authenticate", &challenge("invalid_dpop_proof"));
            }
            s.proofs
                .push(proof["jti"].as_str().unwrap_or("").to_owned());
            if proof["nonce"] != "rs-nonce-1" {
                return Reply::status(401)
                    .header("www-authenticate", &challenge("use_dpop_nonce"))
                    .header("dpop-nonce", "rs-nonce-1");
            }
            Reply::json(
                200,
                json!({"jsonrpc": "2.0", "id": req.rpc_id(), "result": {}}).to_string(),
            )
        }
        "/mcp" => {
            let auth = req.header("authorization");
            let ok = !s.refuse_all
                && (s
                    .valid
                    .as_deref()
                    .is_some_and(|t| auth == format!("Bearer {t}"))
                    || (s.reuse_detection
                        && auth
                            .strip_prefix("Bearer ")
                            .is_some_and(|t| s.live.iter().any(|l| l == t))));
            if !ok {
                return Reply::status(401).header(
                    "www-authenticate",
                    &format!(r#"Bearer error="invalid_token", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#),
                );
            }
            if let Some(needed) = &s.require_scope
                && !s
                    .asked_scope
                    .as_deref()
                    .is_some_and(|a| a.split(' ').any(|x| x == needed))
            {
                return Reply::status(403).header(
                    "www-authenticate",
                    &format!(r#"Bearer error="insufficient_scope", scope="{needed}", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#),
                );
            }
            // The MCP server behind the check, when there is one.
            if let Some(mcp) = mcp {
                drop(s);
                return mcp(req);
            }
            match req.rpc_id() {
                Some(id) => Reply::json(
                    200,
                    json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string(),
                ),
                None => Reply::status(202),
            }
        }
        "/.well-known/oauth-protected-resource/mcp" | "/.well-known/oauth-protected-resource"
            if s.no_prm =>
        {
            Reply::status(404)
        }
        "/.well-known/oauth-protected-resource/mcp" => Reply::json(
            200,
            json!({
                "resource": s.wrong_resource.clone().unwrap_or(format!("{base}/mcp")),
                "authorization_servers": [s.prm_issuer.clone().unwrap_or(base)],
                "scopes_supported": ["mcp:read"],
            })
            .to_string(),
        ),
        "/.well-known/oauth-authorization-server" => Reply::json(
            200,
            json!({
                "revocation_endpoint": s.revocation.then(|| format!("{base}/revoke")),
                "issuer": s.wrong_issuer.clone().unwrap_or(base.clone()),
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post"],
                "authorization_response_iss_parameter_supported": true,
                "scopes_supported": ["mcp:read", "offline_access"],
                "dpop_signing_alg_values_supported": ["ES256"],
            })
            .to_string(),
        ),
        "/revoke" if s.revocation => {
            let f = form(&req.body);
            let token = get(&f, "token").unwrap_or("").to_owned();
            if s.latest_refresh.as_deref() == Some(token.as_str()) {
                s.live.retain(|t| t == "gw-own");
            }
            s.revoked.push(token);
            Reply::status(200)
        }
        "/register" => {
            s.registrations += 1;
            s.registered_scope = serde_json::from_slice::<Value>(&req.body)
                .ok()
                .and_then(|v| v["scope"].as_str().map(str::to_owned));
            Reply::json(201, json!({"client_id": "cid", "client_secret": "client-secret-x", "token_endpoint_auth_method": "client_secret_post"}).to_string())
        }
        "/authorize" => {
            s.authorizations += 1;
            let q: Vec<(String, String)> = url::form_urlencoded::parse(
                req.path.split_once('?').map_or("", |(_, q)| q).as_bytes(),
            )
            .into_owned()
            .collect();
            s.asked_scope = get(&q, "scope").map(str::to_owned);
            s.authorize_query.clone_from(&q);
            let redirect = get(&q, "redirect_uri").unwrap_or("").to_owned();
            let state_param = get(&q, "state").unwrap_or("").to_owned();
            let registered = s.registered_scope.clone().unwrap_or_default();
            if s.strict_scopes
                && get(&q, "scope")
                    .unwrap_or("")
                    .split(' ')
                    .any(|a| !a.is_empty() && !registered.split(' ').any(|r| r == a))
            {
                let location = format!(
                    "{redirect}?error=invalid_scope&error_description=Client+was+not+registered+with+that+scope&state={state_param}"
                );
                return Reply::status(302).header("location", &location);
            }
            let location = format!(
                "{redirect}?code=the-code-x&state={state_param}&iss={}",
                url::form_urlencoded::byte_serialize(base.as_bytes()).collect::<String>()
            );
            Reply::status(302).header("location", &location)
        }
        "/token" => {
            let body = String::from_utf8_lossy(&req.body).into_owned();
            s.token_forms.push(body);
            let f = form(&req.body);
            if get(&f, "grant_type") == Some("refresh_token") && s.revoke_refresh {
                return Reply::json(
                    400,
                    json!({"error": "invalid_grant", "error_description": "revoked"}).to_string(),
                );
            }
            if s.reuse_detection
                && get(&f, "grant_type") == Some("refresh_token")
                && get(&f, "refresh_token") != s.latest_refresh.as_deref()
            {
                s.reused += 1;
                s.latest_refresh = None;
                s.live.clear();
                s.valid = None;
                return Reply::json(
                    400,
                    json!({"error": "invalid_grant", "error_description": "refresh token reused: grant revoked"}).to_string(),
                );
            }
            if s.dpop && claims(req.header("dpop"))["htu"] != format!("{base}/token") {
                return Reply::json(400, json!({"error": "invalid_dpop_proof"}).to_string());
            }
            s.issued += 1;
            let token = format!("access-token-{}", s.issued);
            s.valid = Some(token.clone());
            s.live.push(token.clone());
            s.latest_refresh = Some(format!("refresh-token-{}", s.issued));
            Reply::status(200)
                .header("content-type", "application/json")
                // Slow, so that refusals pile up while the first flow runs.
                .part(Part::Sleep(Duration::from_millis(150)))
                .part(Part::Data(Bytes::from(
                    json!({"access_token": token, "token_type": if s.dpop { "DPoP" } else { "Bearer" }, "expires_in": s.expires_in, "refresh_token": format!("refresh-token-{}", s.issued), "scope": s.asked_scope.as_deref().unwrap_or("mcp:read")}).to_string(),
                )))
        }
        _ => Reply::status(404),
    }
}

/// Starts the server with the state `setup` makes (tokens last an hour unless it says
/// otherwise); the state stays shared with the server. Authorized MCP requests get `{}`.
pub async fn peer(setup: impl FnOnce(&mut As)) -> (HttpPeer, Arc<Mutex<As>>) {
    start(setup, None).await
}

/// The same, with a real MCP server (both eras, JSON answers) behind the token check.
pub async fn protected_server(setup: impl FnOnce(&mut As)) -> (HttpPeer, Arc<Mutex<As>>) {
    let mcp: Box<Mcp> = Box::new(crate::http::scripted(
        crate::Eras::Both,
        crate::http::Framing::Json,
    ));
    start(setup, Some(mcp)).await
}

async fn start(setup: impl FnOnce(&mut As), mcp: Option<Box<Mcp>>) -> (HttpPeer, Arc<Mutex<As>>) {
    let mut state = As {
        expires_in: 3600,
        ..As::default()
    };
    setup(&mut state);
    let state = Arc::new(Mutex::new(state));
    let s = state.clone();
    (
        HttpPeer::start(move |req| handle(&s, mcp.as_deref(), req)).await,
        state,
    )
}

//! A static authorization server for the token-checking case: metadata naming its JWK set,
//! the set (one P-256 key), and an access token signed with that key for the gateway.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;

use base64::Engine as _;
use serde_json::json;
use toolwire::auth::{DpopKey, SigningKey};

use super::Error;

/// The audience the token is for: the gateway's `--public-url`.
pub(super) const AUDIENCE: &str = "http://bench-gateway/mcp";

/// A running issuer (a thread answering until the process ends) and a token of it.
pub(super) struct Issuer {
    pub(super) url: String,
    pub(super) token: String,
}

/// Starts the issuer on a loopback port and mints a day-long token for [`AUDIENCE`].
pub(super) fn start() -> Result<Issuer, Error> {
    let key = DpopKey::generate()?;
    let der = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(key.pkcs8().expose())?;
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(der)
    );
    let signer = SigningKey::from_pem(&pem)?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")}).to_string();
    let jwks = json!({"keys": [key.jwk()]}).to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let n = stream.read(&mut request).unwrap_or(0);
            let head = String::from_utf8_lossy(&request[..n]);
            let path = head.split_whitespace().nth(1).unwrap_or("");
            let body = match path {
                "/.well-known/oauth-authorization-server" => metadata.as_str(),
                "/jwks" => jwks.as_str(),
                _ => "",
            };
            let status = if body.is_empty() {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let token = signer.sign(&json!({"iss": url, "aud": AUDIENCE, "sub": "bench",
        "client_id": "bench", "iat": now, "exp": now + 86_400, "scope": "mcp"}))?;
    Ok(Issuer { url, token })
}

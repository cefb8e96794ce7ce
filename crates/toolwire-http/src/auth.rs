//! Bearer tokens that never leak, and `WWW-Authenticate` challenges (RFC 9110 §11.6.1).

use std::fmt;

/// A bearer token. Its `Debug` never shows it, and the header it becomes is marked sensitive
/// (hyper and h2 keep it out of their logs and HPACK tables).
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The `Authorization` header value, or `None` if the token holds characters a header
    /// cannot (CR, LF, other controls): such a token is never sent.
    pub(crate) fn header_value(&self) -> Option<http::HeaderValue> {
        let mut value = http::HeaderValue::try_from(format!("Bearer {}", self.0)).ok()?;
        value.set_sensitive(true);
        Some(value)
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

impl From<String> for BearerToken {
    fn from(token: String) -> Self {
        Self(token)
    }
}

impl From<&str> for BearerToken {
    fn from(token: &str) -> Self {
        Self(token.to_owned())
    }
}

/// One challenge of a `WWW-Authenticate` header: `Bearer resource_metadata="…", scope="…"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The scheme (`Bearer`), as sent.
    pub scheme: String,
    /// Its `name=value` parameters, names lower-cased, quoted values unescaped.
    pub params: Vec<(String, String)>,
    /// A `token68` credential instead of parameters (`Basic` realms do not use it; some do).
    pub token68: Option<String>,
}

impl Challenge {
    /// The value of parameter `name` (case-insensitive).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// Parses the challenges of one or more `WWW-Authenticate` header values. Unparseable parts
/// are skipped, never an error: the header is advice for a hook, not protocol.
pub fn parse_challenges<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Vec<Challenge> {
    let mut out = Vec::new();
    for value in values {
        parse_into(value, &mut out);
    }
    out
}

fn parse_into(s: &[u8], out: &mut Vec<Challenge>) {
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < s.len() && (s[*i] == b' ' || s[*i] == b'\t') {
            *i += 1;
        }
    };
    let token = |i: &mut usize| -> Option<String> {
        let start = *i;
        while *i < s.len() && is_tchar(s[*i]) {
            *i += 1;
        }
        (start < *i).then(|| String::from_utf8_lossy(&s[start..*i]).into_owned())
    };
    loop {
        while i < s.len() && (s[i] == b',' || s[i] == b' ' || s[i] == b'\t') {
            i += 1;
        }
        let Some(scheme) = token(&mut i) else {
            return;
        };
        let mut challenge = Challenge {
            scheme,
            params: Vec::new(),
            token68: None,
        };
        skip_ws(&mut i);
        // Parameters until the next challenge (a token followed by a space, not by `=`).
        loop {
            let mark = i;
            while i < s.len() && (s[i] == b',' || s[i] == b' ' || s[i] == b'\t') {
                i += 1;
            }
            let Some(name) = token(&mut i) else {
                // token68 (`abc==`) or the end.
                let start = i;
                while i < s.len() && (is_tchar(s[i]) || s[i] == b'/' || s[i] == b'=') {
                    i += 1;
                }
                if start < i && challenge.params.is_empty() {
                    challenge.token68 = Some(String::from_utf8_lossy(&s[start..i]).into_owned());
                }
                break;
            };
            skip_ws(&mut i);
            if i >= s.len() || s[i] != b'=' {
                // `name` starts the next challenge.
                i = mark;
                break;
            }
            i += 1;
            skip_ws(&mut i);
            if i < s.len() && s[i] == b'"' {
                i += 1;
                let mut value = Vec::new();
                while i < s.len() && s[i] != b'"' {
                    if s[i] == b'\\' && i + 1 < s.len() {
                        i += 1;
                    }
                    value.push(s[i]);
                    i += 1;
                }
                i += 1;
                challenge.params.push((
                    name.to_ascii_lowercase(),
                    String::from_utf8_lossy(&value).into_owned(),
                ));
            } else if let Some(value) = token(&mut i) {
                challenge.params.push((name.to_ascii_lowercase(), value));
            } else {
                // `name=` then `=` padding: a token68 after all.
                let mut token68 = format!("{name}=");
                while i < s.len() && s[i] == b'=' {
                    token68.push('=');
                    i += 1;
                }
                if challenge.params.is_empty() {
                    challenge.token68 = Some(token68);
                }
            }
        }
        out.push(challenge);
        if i >= s.len() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenge_with_quoted_params() {
        let h = br#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write", error="insufficient_scope""#;
        let c = parse_challenges([&h[..]]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].scheme, "Bearer");
        assert_eq!(
            c[0].param("RESOURCE_METADATA"),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
        assert_eq!(c[0].param("scope"), Some("files:read files:write"));
        assert_eq!(c[0].param("error"), Some("insufficient_scope"));
    }

    #[test]
    fn several_challenges_token68_and_escapes() {
        let h =
            br#"Basic realm="a \"quoted\" realm", Bearer error=invalid_token, Negotiate abc123=="#;
        let c = parse_challenges([&h[..]]);
        let schemes: Vec<&str> = c.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["Basic", "Bearer", "Negotiate"]);
        assert_eq!(c[0].param("realm"), Some("a \"quoted\" realm"));
        assert_eq!(c[1].param("error"), Some("invalid_token"));
        assert_eq!(c[2].token68.as_deref(), Some("abc123=="));
        assert!(parse_challenges([&b"  ,, "[..]]).is_empty());
        assert_eq!(parse_challenges([&b"Bearer"[..]])[0].params, vec![]);
    }

    #[test]
    fn token_is_redacted_and_never_forms_a_bad_header() {
        let t = BearerToken::new("s3cr3t");
        assert!(!format!("{t:?}").contains("s3cr3t"));
        let v = t.header_value().expect("valid token");
        assert!(v.is_sensitive());
        assert!(BearerToken::new("a\r\nX-Evil: 1").header_value().is_none());
    }
}

//! Header names and values, and the `=?base64?…?=` wrapper.
//!
//! Names and values are built once, in the form an HTTP library sends (`http`'s types): the
//! session hands them to the transport as they are, with no conversion per request.

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The prefix of the Base64 wrapper (case-sensitive).
pub const BASE64_PREFIX: &str = "=?base64?";
/// The suffix of the Base64 wrapper (case-sensitive).
pub const BASE64_SUFFIX: &str = "?=";

/// A header name: a static standard name or a shared `Mcp-Param-{Name}`, as written and in
/// the (lower-case) form it travels in.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HeaderName {
    written: Repr,
    wire: http::HeaderName,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl HeaderName {
    /// A standard name: as written, and its lower-case wire form.
    pub(crate) const fn from_static(written: &'static str, wire: &'static str) -> Self {
        Self {
            written: Repr::Static(written),
            wire: http::HeaderName::from_static(wire),
        }
    }

    /// A name built from RFC 9110 `tchar`s (checked by the caller); `None` for anything else.
    pub(crate) fn shared(name: Arc<str>) -> Option<Self> {
        let wire = http::HeaderName::from_bytes(name.as_bytes()).ok()?;
        Some(Self {
            written: Repr::Shared(name),
            wire,
        })
    }

    /// The name as written (`Mcp-Param-Region`); compare case-insensitively.
    pub fn as_str(&self) -> &str {
        match &self.written {
            Repr::Static(s) => s,
            Repr::Shared(s) => s,
        }
    }

    /// The name as it travels (`mcp-param-region`), shared, ready for an HTTP request.
    pub fn as_http(&self) -> &http::HeaderName {
        &self.wire
    }
}

impl fmt::Debug for HeaderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for HeaderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A header value that is safe to send: printable ASCII and interior spaces only.
///
/// The only way to make one is [`encode_value`], which wraps anything else in Base64, so CR,
/// LF, other control characters and non-ASCII can never reach a header. It is held as the
/// `http` value it travels as: static for methods, versions and booleans (no allocation), one
/// allocation for anything else.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HeaderValue(http::HeaderValue);

impl HeaderValue {
    /// A value known to be safe (`true`, a method name); checked in debug builds.
    pub(crate) fn from_static(s: &'static str) -> Self {
        debug_assert!(!needs_base64(s), "{s:?} is not a safe header value");
        Self(http::HeaderValue::from_static(s))
    }

    /// A value checked by its maker to be visible ASCII, sent as it is.
    pub(crate) fn plain(value: http::HeaderValue) -> Self {
        Self(value)
    }

    /// An integer in decimal (always plain ASCII).
    pub(crate) fn sensitive(mut value: http::HeaderValue) -> Self {
        value.set_sensitive(true);
        Self(value)
    }

    pub(crate) fn from_integer(i: i64) -> Self {
        Self(http::HeaderValue::from(i))
    }

    /// The value.
    pub fn as_str(&self) -> &str {
        // Only printable ASCII gets in (see the type's docs), so this never falls back.
        self.0.to_str().unwrap_or_default()
    }

    /// The value as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The value as it travels, ready for an HTTP request.
    pub fn as_http(&self) -> &http::HeaderValue {
        &self.0
    }

    /// Whether the value is the Base64 wrapper.
    pub fn is_base64(&self) -> bool {
        is_wrapped(self.as_str())
    }
}

impl fmt::Debug for HeaderValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_sensitive() {
            return f.write_str("<redacted>");
        }
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for HeaderValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_sensitive() {
            return f.write_str("<redacted>");
        }
        f.write_str(self.as_str())
    }
}

/// One header to send.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    /// Its name.
    pub name: HeaderName,
    /// Its value.
    pub value: HeaderValue,
}

impl Header {
    /// The header as an HTTP library takes it: both parts moved out, nothing converted.
    pub fn into_http(self) -> (http::HeaderName, http::HeaderValue) {
        (self.name.wire, self.value.0)
    }
}

fn is_wrapped(s: &str) -> bool {
    s.len() >= BASE64_PREFIX.len() + BASE64_SUFFIX.len()
        && s.starts_with(BASE64_PREFIX)
        && s.ends_with(BASE64_SUFFIX)
}

/// Whether a string must be Base64-wrapped to travel as a header value (SEP-2243 §Value
/// Encoding): leading or trailing space or tab, any control character (interior tab included),
/// anything outside ASCII, or a value that already looks like the wrapper.
pub fn needs_base64(s: &str) -> bool {
    let bytes = s.as_bytes();
    let edge = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    edge(bytes.first())
        || edge(bytes.last())
        || bytes.iter().any(|b| !(0x20..0x7f).contains(b))
        || is_wrapped(s)
}

/// Encodes a string as a header value: as is when safe, else `=?base64?{standard, padded}?=`.
pub fn encode_value(s: &str) -> HeaderValue {
    if !needs_base64(s)
        && let Ok(plain) = http::HeaderValue::from_str(s)
    {
        return HeaderValue(plain);
    }
    let len = BASE64_PREFIX.len() + s.len().div_ceil(3) * 4 + BASE64_SUFFIX.len();
    let mut out = String::with_capacity(len);
    out.push_str(BASE64_PREFIX);
    // Encode in chunks of whole 3-byte groups through a stack buffer: no intermediate String.
    let mut buf = [0u8; 256];
    for chunk in s.as_bytes().chunks(192) {
        // 192 input bytes encode to exactly 256 output bytes, so the buffer always fits.
        let n = STANDARD.encode_slice(chunk, &mut buf).unwrap_or(0);
        // Base64 output is ASCII, so this never fails.
        out.push_str(std::str::from_utf8(&buf[..n]).unwrap_or(""));
    }
    out.push_str(BASE64_SUFFIX);
    // The wrapper is printable ASCII, so `http` takes the string's buffer as it is; the
    // fallback (the wrapper of nothing) cannot be reached.
    http::HeaderValue::try_from(out)
        .map_or_else(|_| HeaderValue::from_static("=?base64??="), HeaderValue)
}

/// Why a received header value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueDecodeError {
    /// The value holds bytes a header value may not (control characters other than tab, or
    /// bytes outside ASCII).
    #[error("header value contains a byte that is not allowed (0x{byte:02x})")]
    InvalidByte {
        /// The first offending byte.
        byte: u8,
    },
    /// The wrapper's content is not standard padded Base64.
    #[error("invalid Base64 inside the =?base64?…?= wrapper")]
    BadBase64,
    /// The wrapper's content decodes to bytes that are not UTF-8.
    #[error("the =?base64?…?= wrapper does not decode to UTF-8")]
    NotUtf8,
}

/// Decodes a received header value: the wrapper is unwrapped and decoded; anything else
/// (including an upper-case `=?BASE64?`, or a missing prefix or suffix) is taken literally.
pub fn decode_value(raw: &[u8]) -> Result<String, ValueDecodeError> {
    decode_value_text(raw).map(std::borrow::Cow::into_owned)
}

/// [`decode_value`], borrowing the header's own text when it is not Base64-wrapped (the
/// usual case: no copy).
pub(crate) fn decode_value_text(raw: &[u8]) -> Result<std::borrow::Cow<'_, str>, ValueDecodeError> {
    if let Some(&byte) = raw.iter().find(|&&b| (b < 0x20 && b != b'\t') || b >= 0x7f) {
        return Err(ValueDecodeError::InvalidByte { byte });
    }
    // Checked above: every byte is ASCII, so this cannot fail; keep the typed path anyway.
    let text = std::str::from_utf8(raw).map_err(|_| ValueDecodeError::NotUtf8)?;
    if !is_wrapped(text) {
        return Ok(std::borrow::Cow::Borrowed(text));
    }
    let inner = &text[BASE64_PREFIX.len()..text.len() - BASE64_SUFFIX.len()];
    let bytes = STANDARD
        .decode(inner)
        .map_err(|_| ValueDecodeError::BadBase64)?;
    String::from_utf8(bytes)
        .map(std::borrow::Cow::Owned)
        .map_err(|_| ValueDecodeError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SEP's own vectors (recomputed in the digest, §1.5).
    #[test]
    fn sep_vectors() {
        let table = [
            ("us-west1", "us-west1"),
            (" us-west1", "=?base64?IHVzLXdlc3Qx?="),
            ("us-west1 ", "=?base64?dXMtd2VzdDEg?="),
            (" us-west1 ", "=?base64?IHVzLXdlc3QxIA==?="),
            ("us west 1", "us west 1"),
            ("true", "true"),
            ("42", "42"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("日本語", "=?base64?5pel5pys6Kqe?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("line1\r\nline2", "=?base64?bGluZTENCmxpbmUy?="),
            ("\tindented", "=?base64?CWluZGVudGVk?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
            ("", ""),
            ("a\tb", "=?base64?YQli?="),
            ("del\u{7f}", "=?base64?ZGVsfw==?="),
        ];
        for (input, expected) in table {
            let v = encode_value(input);
            assert_eq!(v.as_str(), expected, "encode {input:?}");
            assert_eq!(
                decode_value(v.as_bytes()).unwrap(),
                input,
                "decode {expected:?}"
            );
        }
    }

    #[test]
    fn decoding_rules() {
        let table: [(&[u8], Result<&str, ValueDecodeError>); 8] = [
            (b"=?base64?SGVsbG8=?=", Ok("Hello")),
            (b"=?base64?SGVsbG8?=", Err(ValueDecodeError::BadBase64)),
            (b"=?base64?!!!!?=", Err(ValueDecodeError::BadBase64)),
            (b"=?BASE64?SGVsbG8=?=", Ok("=?BASE64?SGVsbG8=?=")),
            (b"=?base64?SGVsbG8=", Ok("=?base64?SGVsbG8=")),
            (
                b"a\r\nb",
                Err(ValueDecodeError::InvalidByte { byte: b'\r' }),
            ),
            (b"=?base64?/w==?=", Err(ValueDecodeError::NotUtf8)),
            (
                b"caf\xc3\xa9",
                Err(ValueDecodeError::InvalidByte { byte: 0xc3 }),
            ),
        ];
        for (input, expected) in table {
            assert_eq!(
                decode_value(input).as_deref().map_err(Clone::clone),
                expected,
                "{input:?}"
            );
        }
    }
}

#[cfg(test)]
mod long_values {
    use super::*;

    /// Values longer than one encoding chunk (192 bytes) and than the inline size.
    #[test]
    fn long_values_round_trip() {
        for len in [23, 24, 25, 191, 192, 193, 1000] {
            let s: String = "é ".repeat(len);
            let v = encode_value(&s);
            assert!(v.is_base64());
            assert_eq!(
                v.as_str().len(),
                BASE64_PREFIX.len() + s.len().div_ceil(3) * 4 + BASE64_SUFFIX.len()
            );
            assert_eq!(decode_value(v.as_bytes()).unwrap(), s);
        }
    }
}

//! MCP protocol revisions and what each one allows.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The two protocol eras.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// `2024-11-05` … `2025-11-25`: the `initialize` handshake, sessions.
    Legacy,
    /// `2026-07-28` and later: no handshake, a `_meta` envelope on every request.
    Modern,
}

/// The HTTP transport shape a revision uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpShape {
    /// The deprecated HTTP+SSE transport of `2024-11-05` (two endpoints, an `endpoint` event).
    HttpSse,
    /// Streamable HTTP (`2025-03-26` and later).
    Streamable,
}

/// An MCP protocol revision string such as `2025-11-25`.
///
/// Revisions are ISO dates and are ordered by ordinal string comparison, as every official SDK
/// does; a revision this crate does not know (a later date, a draft name) is kept verbatim and
/// compared the same way. The value must be non-empty visible ASCII, because it travels in the
/// `MCP-Protocol-Version` HTTP header.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtocolVersion(Cow<'static, str>);

/// A protocol version string that cannot be used (empty, or not visible ASCII).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid protocol version {value:?}: must be non-empty visible ASCII")]
pub struct InvalidProtocolVersion {
    /// The rejected value.
    pub value: String,
}

impl ProtocolVersion {
    /// `2024-11-05`: the first revision; HTTP+SSE transport.
    pub const V2024_11_05: Self = Self(Cow::Borrowed("2024-11-05"));
    /// `2025-03-26`: Streamable HTTP; JSON-RPC batching.
    pub const V2025_03_26: Self = Self(Cow::Borrowed("2025-03-26"));
    /// `2025-06-18`: the `MCP-Protocol-Version` header, structured content, elicitation.
    pub const V2025_06_18: Self = Self(Cow::Borrowed("2025-06-18"));
    /// `2025-11-25`: SSE polling, URL elicitation; the last legacy revision.
    pub const V2025_11_25: Self = Self(Cow::Borrowed("2025-11-25"));
    /// `2026-07-28`: stateless, `server/discover`, the `_meta` envelope, SEP-2243 headers.
    pub const V2026_07_28: Self = Self(Cow::Borrowed("2026-07-28"));

    /// The newest revision this crate speaks.
    pub const LATEST: Self = Self::V2026_07_28;
    /// The newest legacy (handshake) revision this crate speaks.
    pub const LATEST_LEGACY: Self = Self::V2025_11_25;
    /// The first modern revision; everything at or after it is modern.
    pub const FIRST_MODERN: Self = Self::V2026_07_28;

    /// Every revision this crate speaks, newest first.
    pub const SUPPORTED: &'static [ProtocolVersion] = &[
        Self::V2026_07_28,
        Self::V2025_11_25,
        Self::V2025_06_18,
        Self::V2025_03_26,
        Self::V2024_11_05,
    ];

    /// The version string of a revision this crate names, in a constant (`None` for one read
    /// from a peer).
    pub const fn known(&self) -> Option<&'static str> {
        match &self.0 {
            Cow::Borrowed(s) => Some(s),
            Cow::Owned(_) => None,
        }
    }

    /// The legacy revisions this crate speaks, newest first (what a server offers in
    /// `initialize`).
    pub fn legacy() -> impl Iterator<Item = &'static ProtocolVersion> {
        Self::SUPPORTED.iter().filter(|v| !v.is_modern())
    }

    /// Parses a version string received from a peer or a user.
    pub fn new(value: impl Into<String>) -> Result<Self, InvalidProtocolVersion> {
        let value = value.into();
        if let Some(known) = Self::SUPPORTED.iter().find(|v| v.as_str() == value) {
            return Ok(known.clone());
        }
        if value.is_empty() || !value.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(InvalidProtocolVersion { value });
        }
        Ok(Self(Cow::Owned(value)))
    }

    /// The version string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this crate speaks this revision.
    pub fn is_supported(&self) -> bool {
        Self::SUPPORTED.contains(self)
    }

    /// The era of this revision (by ordinal comparison with `2026-07-28`).
    pub fn era(&self) -> Era {
        if *self >= Self::FIRST_MODERN {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// Modern: no handshake, per-request `_meta`, `resultType` on every result.
    pub fn is_modern(&self) -> bool {
        self.era() == Era::Modern
    }

    /// Whether requests carry SEP-2243 `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*` headers over HTTP.
    pub fn uses_sep2243_headers(&self) -> bool {
        self.is_modern()
    }

    /// Whether the revision has the `initialize` handshake (and so `notifications/initialized`).
    pub fn has_initialize(&self) -> bool {
        !self.is_modern()
    }

    /// Whether the revision has sessions (`Mcp-Session-Id` over Streamable HTTP).
    pub fn has_sessions(&self) -> bool {
        !self.is_modern()
    }

    /// Whether `ping` exists (removed in `2026-07-28`).
    pub fn has_ping(&self) -> bool {
        !self.is_modern()
    }

    /// Whether the HTTP client sends the `MCP-Protocol-Version` header (`2025-06-18` and later).
    pub fn sends_version_header(&self) -> bool {
        *self >= Self::V2025_06_18
    }

    /// Whether JSON-RPC batches are allowed (only `2025-03-26`).
    pub fn allows_batching(&self) -> bool {
        *self == Self::V2025_03_26
    }

    /// Whether tool results may carry `structuredContent` (`2025-06-18` and later).
    pub fn has_structured_content(&self) -> bool {
        *self >= Self::V2025_06_18
    }

    /// Whether SSE streams may be resumed with `Last-Event-ID` (legacy Streamable HTTP only).
    pub fn has_sse_resumption(&self) -> bool {
        *self >= Self::V2025_03_26 && !self.is_modern()
    }

    /// The HTTP transport shape of this revision.
    pub fn http_shape(&self) -> HttpShape {
        if *self < Self::V2025_03_26 {
            HttpShape::HttpSse
        } else {
            HttpShape::Streamable
        }
    }
}

impl fmt::Debug for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProtocolVersion({})", self.as_str())
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ProtocolVersion {
    type Err = InvalidProtocolVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl Serialize for ProtocolVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ProtocolVersion {
        ProtocolVersion::new(s).unwrap()
    }

    #[test]
    fn the_legacy_revisions_are_the_supported_ones_before_the_first_modern_newest_first() {
        let legacy: Vec<&str> = ProtocolVersion::legacy()
            .map(ProtocolVersion::as_str)
            .collect();
        assert_eq!(
            legacy,
            ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
        );
        assert_eq!(ProtocolVersion::LATEST.known(), Some("2026-07-28"));
        assert_eq!(v("2099-01-01").known(), None);
    }

    #[test]
    fn ordering_is_ordinal() {
        let mut all = ProtocolVersion::SUPPORTED.to_vec();
        all.sort();
        let strs: Vec<_> = all.iter().map(ProtocolVersion::as_str).collect();
        assert_eq!(
            strs,
            [
                "2024-11-05",
                "2025-03-26",
                "2025-06-18",
                "2025-11-25",
                "2026-07-28"
            ]
        );
        assert!(v("2027-01-01") > ProtocolVersion::LATEST);
    }

    #[test]
    fn queries_per_revision() {
        // (version, modern, headers, sessions, version header, batching, structured, shape)
        let table = [
            (
                "2024-11-05",
                false,
                false,
                true,
                false,
                false,
                false,
                HttpShape::HttpSse,
            ),
            (
                "2025-03-26",
                false,
                false,
                true,
                false,
                true,
                false,
                HttpShape::Streamable,
            ),
            (
                "2025-06-18",
                false,
                false,
                true,
                true,
                false,
                true,
                HttpShape::Streamable,
            ),
            (
                "2025-11-25",
                false,
                false,
                true,
                true,
                false,
                true,
                HttpShape::Streamable,
            ),
            (
                "2026-07-28",
                true,
                true,
                false,
                true,
                false,
                true,
                HttpShape::Streamable,
            ),
            (
                "2027-03-01",
                true,
                true,
                false,
                true,
                false,
                true,
                HttpShape::Streamable,
            ),
        ];
        for (s, modern, headers, sessions, vh, batch, structured, shape) in table {
            let p = v(s);
            assert_eq!(p.is_modern(), modern, "{s} modern");
            assert_eq!(p.uses_sep2243_headers(), headers, "{s} headers");
            assert_eq!(p.has_sessions(), sessions, "{s} sessions");
            assert_eq!(p.has_initialize(), sessions, "{s} initialize");
            assert_eq!(p.has_ping(), !modern, "{s} ping");
            assert_eq!(p.sends_version_header(), vh, "{s} version header");
            assert_eq!(p.allows_batching(), batch, "{s} batching");
            assert_eq!(p.has_structured_content(), structured, "{s} structured");
            assert_eq!(p.http_shape(), shape, "{s} shape");
        }
    }

    #[test]
    fn rejects_what_cannot_be_a_header() {
        for bad in ["", "2025 11 25", "2025-11-25\r\n", "versión"] {
            let err = ProtocolVersion::new(bad).unwrap_err();
            assert_eq!(err.value, bad);
        }
        assert!(!v("DRAFT-2026-v1").is_supported());
        assert!(v("2025-11-25").is_supported());
        assert!(serde_json::from_str::<ProtocolVersion>("\"\"").is_err());
    }
}

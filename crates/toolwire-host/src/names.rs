//! What a server's tool is called in a host's merged snapshot: [`Naming`].
//!
//! LLM providers accept tool names matching `^[A-Za-z0-9_-]{1,64}$` (OpenAI's rule; Anthropic's
//! and Gemini's are no looser), and an agent that hands a host's tools to a model must meet it.
//! A qualified name `server__tool` breaks it as soon as the server or the tool has a dot, a
//! slash or a space in its name, or the two together exceed 64 characters; cutting such a name
//! at 64 turns two long names with a common beginning into one.
//!
//! [`Naming::ProviderSafe`] keeps a qualified name that already meets the rule, and maps any
//! other to a short form that does: every character outside the set becomes `_`, the result is
//! cut to 55 characters, and `_` and the first 8 hexadecimal digits of the SHA-256 of the
//! qualified name (its UTF-8 bytes) follow. So:
//! - the short form depends on the server's and the tool's names alone: the same after a
//!   restart, a list change or another server's arrival, on every machine;
//! - two different qualified names get the same short form only if their digests agree in 32
//!   bits (or a tool is named exactly like another's short form); a host that meets such a
//!   collision keeps the first name, leaves the second tool out and reports both
//!   ([`NameCollision`], [`crate::HostTools::collisions`]);
//! - the tool's own name is kept beside it ([`crate::HostTool::tool`]), so a call by the
//!   short form reaches the server under the name the server gave.
//!
//! ```
//! use toolwire_host::{Naming, provider_safe};
//!
//! assert_eq!(provider_safe("github__create_issue"), "github__create_issue");
//! let dotted = provider_safe("files.v2__read.file");
//! assert!(dotted.starts_with("files_v2__read_file_") && dotted.len() == 28);
//! let long = format!("search__{}", "very_long_tool_name_".repeat(4));
//! assert_eq!(provider_safe(&long).len(), 64);
//! assert_eq!(Naming::ProviderSafe.name("github", "__", "create_issue"), "github__create_issue");
//! ```

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// The longest tool name LLM providers accept.
pub const PROVIDER_NAME_MAX: usize = 64;

/// How many hexadecimal digits of the digest a short form carries.
const TAG_DIGITS: usize = 8;

/// How a host names each server's tools in its merged snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Naming {
    /// `{server}{separator}{tool}`, exactly as the server names the tool.
    #[default]
    Qualified,
    /// A name every LLM provider accepts: the qualified name when it already matches
    /// `^[A-Za-z0-9_-]{1,64}$`, else its short form ([`provider_safe`]).
    ProviderSafe,
}

impl Naming {
    /// The name `server`'s tool `tool` gets.
    pub fn name(self, server: &str, separator: &str, tool: &str) -> String {
        let qualified = format!("{server}{separator}{tool}");
        match self {
            Self::Qualified => qualified,
            Self::ProviderSafe => match provider_safe(&qualified) {
                Cow::Borrowed(_) => qualified,
                Cow::Owned(short) => short,
            },
        }
    }
}

impl fmt::Display for Naming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Qualified => "qualified",
            Self::ProviderSafe => "provider-safe",
        })
    }
}

/// A [`Naming`] spelled other than `qualified` or `provider-safe`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown naming `{0}` (expected `qualified` or `provider-safe`)")]
pub struct UnknownNaming(pub String);

impl FromStr for Naming {
    type Err = UnknownNaming;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "qualified" => Ok(Self::Qualified),
            "provider-safe" => Ok(Self::ProviderSafe),
            other => Err(UnknownNaming(other.to_owned())),
        }
    }
}

/// Whether every LLM provider accepts `name` as a tool name: 1 to 64 characters, each an ASCII
/// letter or digit, `_` or `-`.
pub fn is_provider_safe(name: &str) -> bool {
    (1..=PROVIDER_NAME_MAX).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `qualified` itself when providers accept it ([`is_provider_safe`]), else its short form:
/// the characters outside the set replaced by `_`, cut to 55, then `_` and the first 8
/// hexadecimal digits of the SHA-256 of `qualified`.
pub fn provider_safe(qualified: &str) -> Cow<'_, str> {
    if is_provider_safe(qualified) {
        return Cow::Borrowed(qualified);
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, qualified.as_bytes());
    let tag: String = digest
        .as_ref()
        .iter()
        .take(TAG_DIGITS / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let keep = PROVIDER_NAME_MAX - TAG_DIGITS - 1;
    let mut short: String = qualified
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(keep)
        .collect();
    short.push('_');
    short.push_str(&tag);
    Cow::Owned(short)
}

/// Two tools that would have the same name in the merged snapshot. The first keeps it; the
/// second is left out until one of them goes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool `{tool}` of server `{server}` and tool `{kept_tool}` of server `{kept_server}` would both be named `{name}`; `{tool}` is left out (leave one out with the entry's `excludeTools`, or use qualified names)"
)]
pub struct NameCollision {
    /// The name both would have.
    pub name: String,
    /// The server of the tool that has the name.
    pub kept_server: String,
    /// That tool, as its server names it.
    pub kept_tool: String,
    /// The server of the tool left out.
    pub server: String,
    /// That tool, as its server names it.
    pub tool: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_providers_accept_is_kept_as_it_is() {
        for name in ["github__create_issue", "a", "x-y_Z09", &"n".repeat(64)] {
            assert!(is_provider_safe(name), "{name}");
            assert!(matches!(provider_safe(name), Cow::Borrowed(n) if n == name));
        }
    }

    #[test]
    fn every_short_form_matches_the_providers_rule_and_ends_in_the_digest() {
        let cases = [
            "files.v2__read.file".to_owned(),
            "srv__tool with spaces".to_owned(),
            "srv__ünïcödé".to_owned(),
            "srv__a/b".to_owned(),
            format!("srv__{}", "x".repeat(60)),
            format!("{}__{}", "s".repeat(100), "t".repeat(100)),
            String::new(),
        ];
        for qualified in &cases {
            let short = provider_safe(qualified);
            assert!(is_provider_safe(&short), "{qualified:?} -> {short:?}");
            assert_ne!(short, qualified.as_str());
            let digest = ring::digest::digest(&ring::digest::SHA256, qualified.as_bytes());
            let tag = format!(
                "_{:02x}{:02x}{:02x}{:02x}",
                digest.as_ref()[0],
                digest.as_ref()[1],
                digest.as_ref()[2],
                digest.as_ref()[3]
            );
            assert!(short.ends_with(&tag), "{short} does not end in {tag}");
        }
    }

    #[test]
    fn a_short_form_is_the_same_on_every_call_and_documented_exactly() {
        // Pinned: a host that restarts, or another machine, names the tool the same.
        let digest = ring::digest::digest(&ring::digest::SHA256, b"files.v2__read.file");
        let expected = format!(
            "files_v2__read_file_{}",
            digest.as_ref()[..4]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        assert_eq!(provider_safe("files.v2__read.file"), expected);
        assert_eq!(
            provider_safe("files.v2__read.file"),
            provider_safe("files.v2__read.file")
        );
    }

    #[test]
    fn long_names_with_a_common_beginning_stay_apart() {
        let stem = "analytics__run_the_quarterly_revenue_report_for_the_region_of";
        let a = provider_safe(&format!("{stem}_emea")).into_owned();
        let b = provider_safe(&format!("{stem}_apac")).into_owned();
        assert_eq!(a.len(), 64);
        assert_eq!(b.len(), 64);
        assert_ne!(a, b, "cut at 64 alone, the two would be one name");
    }

    #[test]
    fn names_that_differ_only_in_a_replaced_character_stay_apart() {
        assert_ne!(provider_safe("srv__a.b"), provider_safe("srv__a/b"));
        assert_ne!(provider_safe("srv__a.b"), "srv__a_b");
    }

    #[test]
    fn naming_reads_and_writes_its_two_spellings() {
        for naming in [Naming::Qualified, Naming::ProviderSafe] {
            assert_eq!(naming.to_string().parse::<Naming>(), Ok(naming));
        }
        assert_eq!(
            "safe".parse::<Naming>(),
            Err(UnknownNaming("safe".to_owned()))
        );
        assert_eq!(
            Naming::Qualified.name("files.v2", "__", "read.file"),
            "files.v2__read.file"
        );
        assert!(is_provider_safe(&Naming::ProviderSafe.name(
            "files.v2",
            "__",
            "read.file"
        )));
    }
}

//! What a server's tool is called in a host's merged snapshot: [`Naming`].
//!
//! LLM providers accept tool names matching `^[A-Za-z0-9_-]{1,64}$` (OpenAI's rule; Anthropic's
//! and Gemini's are no looser), and an agent that hands a host's tools to a model must meet it.
//! A qualified name `server__tool` breaks it as soon as the server or the tool has a dot, a
//! slash or a space in its name, or the two together exceed 64 characters; cutting such a name
//! at 64 turns two long names with a common beginning into one.
//!
//! [`Naming::ProviderSafe`] keeps a qualified name that already meets the rule, and maps any
//! other to a short form that does and that keeps the tool's own name where it can, since that
//! is what a model chooses by: every character outside the set becomes `_`, the server's part
//! is cut to what the tool's leaves and followed by `_` and the first 8 hexadecimal digits of
//! the SHA-256 of the qualified name (its UTF-8 bytes), then the separator and the tool's name
//! (`{server}_{digest}{separator}{tool}`). The tool's name is cut only when it alone leaves no
//! room (one character of the server's is kept). So:
//! - every tool of a server with a long name keeps its own name, at the end;
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
//! assert_eq!(provider_safe("github", "__", "create_issue"), "github__create_issue");
//! let dotted = provider_safe("files.v2", "__", "read.file");
//! assert!(dotted.starts_with("files_v2_") && dotted.ends_with("__read_file") && dotted.len() == 28);
//! let server = "a-very-long-server-name-from-a-registry-that-names-everything-at-length";
//! let long = provider_safe(server, "__", "create_issue");
//! assert_eq!(long.len(), 64);
//! assert!(long.ends_with("__create_issue"));
//! assert_eq!(Naming::ProviderSafe.name("github", "__", "create_issue"), "github__create_issue");
//! ```

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
        match self {
            Self::Qualified => format!("{server}{separator}{tool}"),
            Self::ProviderSafe => provider_safe(server, separator, tool),
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

/// `{server}{separator}{tool}` itself when providers accept it ([`is_provider_safe`]), else its
/// short form: the characters outside the set replaced by `_`, the server's part cut to what
/// the tool's leaves and followed by `_` and the first 8 hexadecimal digits of the SHA-256 of
/// the qualified name, then the separator and the tool's name (cut only when it alone is too
/// long).
pub fn provider_safe(server: &str, separator: &str, tool: &str) -> String {
    let qualified = format!("{server}{separator}{tool}");
    if is_provider_safe(&qualified) {
        return qualified;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, qualified.as_bytes());
    let tag: String = digest
        .as_ref()
        .iter()
        .take(TAG_DIGITS / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let (server, separator, tool) = (safe(server), safe(separator), safe(tool));
    // What the server's part needs besides its own characters: `_`, the digest, the separator.
    let fixed = 1 + TAG_DIGITS + separator.len();
    let server_room = PROVIDER_NAME_MAX
        .saturating_sub(fixed + tool.len())
        .max(1)
        .min(server.len());
    let tool_room = PROVIDER_NAME_MAX.saturating_sub(fixed + server_room);
    // Each is ASCII now: a cut at a byte is a cut at a character.
    format!(
        "{}_{tag}{separator}{}",
        &server[..server_room],
        &tool[..tool_room.min(tool.len())]
    )
}

/// `name` with every character providers refuse replaced by `_`.
fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
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

    fn tag_of(qualified: &str) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, qualified.as_bytes());
        digest.as_ref()[..4]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn a_name_providers_accept_is_kept_as_it_is() {
        for (server, tool) in [("github", "create_issue"), ("a", "b"), ("x-y", "Z09")] {
            assert_eq!(
                provider_safe(server, "__", tool),
                format!("{server}__{tool}")
            );
        }
        let longest = "n".repeat(62);
        assert_eq!(provider_safe("s", "_", &longest).len(), 64);
    }

    #[test]
    fn every_short_form_matches_the_providers_rule_and_carries_the_digest() {
        let long = "x".repeat(60);
        let (s100, t100) = ("s".repeat(100), "t".repeat(100));
        let cases: [(&str, &str); 6] = [
            ("files.v2", "read.file"),
            ("srv", "tool with spaces"),
            ("srv", "ünïcödé"),
            ("srv", "a/b"),
            ("srv", &long),
            (&s100, &t100),
        ];
        for (server, tool) in cases {
            let short = provider_safe(server, "__", tool);
            assert!(is_provider_safe(&short), "{server}/{tool} -> {short:?}");
            let tag = tag_of(&format!("{server}__{tool}"));
            assert!(short.contains(&format!("_{tag}__")), "{short} lacks {tag}");
        }
    }

    #[test]
    fn a_short_form_is_the_same_on_every_call_and_documented_exactly() {
        // Pinned: a host that restarts, or another machine, names the tool the same.
        let expected = format!("files_v2_{}__read_file", tag_of("files.v2__read.file"));
        assert_eq!(provider_safe("files.v2", "__", "read.file"), expected);
    }

    #[test]
    fn under_a_long_server_name_every_tool_keeps_its_own_name() {
        let server = "registry.example.com/acme/mcp-server-for-the-quarterly-revenue-reports";
        let tools = [
            "list_reports",
            "get_report",
            "create_report",
            "delete_report",
        ];
        let names: Vec<String> = tools
            .iter()
            .map(|t| provider_safe(server, "__", t))
            .collect();
        for (name, tool) in names.iter().zip(tools) {
            assert!(is_provider_safe(name), "{name}");
            assert!(name.ends_with(&format!("__{tool}")), "{name} lost {tool}");
        }
        let distinct: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), tools.len(), "{names:?}");
    }

    #[test]
    fn a_tool_name_too_long_alone_is_cut_after_one_character_of_the_server() {
        let tool = "t".repeat(100);
        let short = provider_safe("server", "__", &tool);
        assert_eq!(short.len(), 64);
        assert!(short.starts_with(&format!("s_{}__ttt", tag_of(&format!("server__{tool}")))));
    }

    #[test]
    fn long_names_with_a_common_beginning_stay_apart() {
        let stem = "run_the_quarterly_revenue_report_for_the_region_of";
        let a = provider_safe("analytics", "__", &format!("{stem}_emea"));
        let b = provider_safe("analytics", "__", &format!("{stem}_apac"));
        assert_eq!(a.len(), 64);
        assert_eq!(b.len(), 64);
        assert_ne!(a, b, "cut at 64 alone, the two would be one name");
    }

    #[test]
    fn names_that_differ_only_in_a_replaced_character_stay_apart() {
        assert_ne!(
            provider_safe("srv", "__", "a.b"),
            provider_safe("srv", "__", "a/b")
        );
        assert_ne!(provider_safe("srv", "__", "a.b"), "srv__a_b");
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

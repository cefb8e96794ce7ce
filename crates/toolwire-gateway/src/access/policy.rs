//! Who may see and call what: rules from the config, each naming the callers it is for and
//! the servers, tools and prompts it opens (or closes), by glob.
//!
//! A caller is given the union of what the rules that match it allow, less what any of them
//! denies. With rules configured, a caller no rule matches sees nothing. A tool or prompt is
//! allowed when its server is (`servers`) or one of its names is (`tools`, which also name
//! prompts); resources, templates, completions and tasks go with their server. A tool has two
//! names a glob is matched against: the one the gateway lists it under (its provider-safe
//! short form, an alias) and its upstream identity, `server{separator}tool` with the server's
//! own name for it ([`ItemNames`]): a denial written either way holds whatever the naming or
//! the aliases. What is not allowed is absent from listings and refused as unknown if asked for
//! by name, so a caller cannot tell a hidden tool from one that does not exist.

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use toolwire_server::Caller;

use super::AccessError;

/// Which callers a rule is for; every member given must match (none given: every caller,
/// authenticated or not).
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallerMatchConfig {
    /// The token's issuer, a glob (needed beside `subject` when several issuers are trusted:
    /// a subject is a name only within its issuer).
    #[serde(default)]
    pub issuer: Option<String>,
    /// The token's subject, a glob.
    #[serde(default)]
    pub subject: Option<String>,
    /// The OAuth client, a glob.
    #[serde(default)]
    pub client_id: Option<String>,
    /// The API key's name, a glob.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Scopes that must all have been granted.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// One rule of the `policy` list.
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleConfig {
    /// Who the rule is for.
    #[serde(default)]
    pub callers: CallerMatchConfig,
    /// Servers (config entry names, globs) whose every tool, prompt and resource it opens.
    #[serde(default)]
    pub servers: Vec<String>,
    /// Tools and prompts it opens, by the name the gateway lists them under or their
    /// qualified upstream name, `server__tool` (globs).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Tools and prompts it closes, whatever opened them, by either of those names (globs).
    #[serde(default)]
    pub deny: Vec<String>,
}

fn glob(pattern: &str) -> Result<globset::GlobMatcher, AccessError> {
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| AccessError::Config(format!("policy: {pattern:?} is not a glob: {e}")))
}

fn set(patterns: &[String]) -> Result<GlobSet, AccessError> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        builder.add(
            Glob::new(pattern).map_err(|e| {
                AccessError::Config(format!("policy: {pattern:?} is not a glob: {e}"))
            })?,
        );
    }
    builder
        .build()
        .map_err(|e| AccessError::Config(format!("policy: {e}")))
}

#[derive(Debug)]
struct CallerMatch {
    issuer: Option<globset::GlobMatcher>,
    subject: Option<globset::GlobMatcher>,
    client_id: Option<globset::GlobMatcher>,
    api_key: Option<globset::GlobMatcher>,
    scopes: Vec<String>,
}

impl CallerMatch {
    fn matches(&self, caller: Option<&Caller>) -> bool {
        let unconditional = self.subject.is_none()
            && self.issuer.is_none()
            && self.client_id.is_none()
            && self.api_key.is_none()
            && self.scopes.is_empty();
        let Some(caller) = caller else {
            return unconditional;
        };
        let field = |m: &Option<globset::GlobMatcher>, v: &Option<String>| match m {
            None => true,
            Some(m) => v.as_deref().is_some_and(|v| m.is_match(v)),
        };
        // A token's principal is `{issuer}#{who}` (an issuer has no `#`); an API key's has no
        // issuer.
        let issuer = caller
            .principal
            .split_once('#')
            .map(|(issuer, _)| issuer.to_owned());
        field(&self.issuer, &issuer)
            && field(&self.subject, &caller.subject)
            && field(&self.client_id, &caller.client_id)
            && field(&self.api_key, &caller.api_key)
            && caller.has_scopes(self.scopes.iter().map(String::as_str))
    }
}

#[derive(Debug)]
struct Rule {
    callers: CallerMatch,
    servers: GlobSet,
    tools: GlobSet,
    deny: GlobSet,
}

/// The rules, compiled.
#[derive(Debug)]
pub(crate) struct Policy {
    rules: Vec<Rule>,
}

impl Policy {
    /// The rules; `issuers` is how many issuers are trusted (a rule that names a subject
    /// without its issuer is refused when there are several).
    pub(crate) fn new(rules: &[RuleConfig], issuers: usize) -> Result<Self, AccessError> {
        let rules = rules
            .iter()
            .map(|r| {
                let optional = |p: &Option<String>| p.as_deref().map(glob).transpose();
                if issuers > 1 && r.callers.subject.is_some() && r.callers.issuer.is_none() {
                    return Err(AccessError::Config(format!(
                        "policy: callers.subject {:?} needs callers.issuer: {issuers} issuers are trusted, and a subject is a name only within its issuer",
                        r.callers.subject.as_deref().unwrap_or_default()
                    )));
                }
                Ok(Rule {
                    callers: CallerMatch {
                        issuer: optional(&r.callers.issuer)?,
                        subject: optional(&r.callers.subject)?,
                        client_id: optional(&r.callers.client_id)?,
                        api_key: optional(&r.callers.api_key)?,
                        scopes: r.callers.scopes.clone(),
                    },
                    servers: set(&r.servers)?,
                    tools: set(&r.tools)?,
                    deny: set(&r.deny)?,
                })
            })
            .collect::<Result<_, AccessError>>()?;
        Ok(Self { rules })
    }

    /// What `caller` may see.
    pub(crate) fn view(&self, caller: Option<&Caller>) -> View<'_> {
        View {
            rules: Some(
                self.rules
                    .iter()
                    .filter(|r| r.callers.matches(caller))
                    .collect(),
            ),
        }
    }
}

/// The names a tool or prompt is known by, each matched against a rule's `tools` and `deny`.
#[derive(Debug)]
pub(crate) struct ItemNames<'a> {
    /// As the gateway lists it.
    pub(crate) listed: &'a str,
    /// Its upstream identity, `server{separator}name` with the server's own name for it, when
    /// that differs from the listed one.
    pub(crate) upstream: Option<String>,
}

impl<'a> ItemNames<'a> {
    /// An item known by its listed name alone.
    pub(crate) fn listed(listed: &'a str) -> Self {
        Self {
            listed,
            upstream: None,
        }
    }

    /// A tool listed as `listed`, `own` on `server`.
    pub(crate) fn tool(listed: &'a str, server: &str, separator: &str, own: &str) -> Self {
        let upstream = format!("{server}{separator}{own}");
        Self {
            listed,
            upstream: (upstream != listed).then_some(upstream),
        }
    }
}

/// What one caller may see and call.
#[derive(Debug)]
pub(crate) struct View<'a> {
    /// The rules that match it; None when no policy is configured (everything is allowed).
    rules: Option<Vec<&'a Rule>>,
}

impl View<'_> {
    /// Everything (no policy).
    pub(crate) fn everything() -> Self {
        Self { rules: None }
    }

    /// Whether everything is allowed, so nothing needs filtering.
    pub(crate) fn is_everything(&self) -> bool {
        self.rules.is_none()
    }

    /// Whether the tool or prompt `names` name, of `server`, is allowed.
    pub(crate) fn item(&self, server: &str, names: &ItemNames<'_>) -> bool {
        let Some(rules) = &self.rules else {
            return true;
        };
        let matches = |set: &GlobSet| {
            set.is_match(names.listed) || names.upstream.as_deref().is_some_and(|n| set.is_match(n))
        };
        rules
            .iter()
            .any(|r| r.servers.is_match(server) || matches(&r.tools))
            && !rules.iter().any(|r| matches(&r.deny))
    }

    /// Whether `server`'s resources, templates, completions and tasks are allowed.
    pub(crate) fn server(&self, server: &str) -> bool {
        self.rules
            .as_ref()
            .is_none_or(|rules| rules.iter().any(|r| r.servers.is_match(server)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn policy(rules: serde_json::Value) -> Policy {
        let rules: Vec<RuleConfig> = serde_json::from_value(rules).unwrap();
        Policy::new(&rules, 1).unwrap()
    }

    /// Names as the qualified naming lists them: the listed name is the upstream identity.
    fn n(name: &str) -> ItemNames<'_> {
        ItemNames::listed(name)
    }

    fn caller(subject: &str, scopes: &[&str]) -> Caller {
        let mut c = Caller::new(format!("iss#{subject}"));
        c.subject = Some(subject.into());
        c.scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
        c
    }

    #[test]
    fn a_caller_gets_the_union_of_its_rules_less_every_denial() {
        let p = policy(json!([
            {"callers": {"subject": "alice"}, "tools": ["github__list_*"]},
            {"callers": {"scopes": ["docs"]}, "servers": ["docs"], "deny": ["docs__drop"]},
            {"callers": {"subject": "bob"}, "servers": ["*"], "deny": ["*__delete_*"]}
        ]));
        let alice = caller("alice", &["docs"]);
        let v = p.view(Some(&alice));
        assert!(v.item("github", &n("github__list_issues")));
        assert!(!v.item("github", &n("github__delete_repo")));
        assert!(v.item("docs", &n("docs__search")));
        assert!(
            !v.item("docs", &n("docs__drop")),
            "denied by the rule that opened it"
        );
        assert!(v.server("docs") && !v.server("github"));

        let bob = caller("bob", &[]);
        let v = p.view(Some(&bob));
        assert!(v.item("github", &n("github__list_issues")) && v.server("github"));
        assert!(!v.item("github", &n("github__delete_repo")));
        // A denial binds only the callers of its own rule.
        assert!(v.item("docs", &n("docs__drop")));

        // No rule for carol: nothing at all.
        let carol = caller("carol", &[]);
        let v = p.view(Some(&carol));
        assert!(!v.item("github", &n("github__list_issues")) && !v.server("docs"));
        // Nor for a caller nobody authenticated.
        assert!(!p.view(None).item("github", &n("github__list_issues")));
    }

    #[test]
    fn a_rule_without_callers_is_for_everyone_and_no_policy_allows_everything() {
        let p = policy(json!([{"tools": ["echo__*"]}]));
        assert!(p.view(None).item("echo", &n("echo__say")));
        assert!(
            p.view(Some(&caller("x", &[])))
                .item("echo", &n("echo__say"))
        );
        assert!(!p.view(None).item("other", &n("other__say")));
        assert!(
            View::everything().item("any", &n("any__thing")) && View::everything().server("any")
        );
    }

    #[test]
    fn a_denial_of_the_upstream_name_holds_under_a_short_form_or_an_alias() {
        let p = policy(json!([{"servers": ["ref.v2", "other"],
            "deny": ["ref.v2__execute_sql", "other__execute_sql"]}]));
        let v = p.view(None);
        // The provider-safe short form of `ref.v2__execute_sql`, and an alias of
        // `other__execute_sql`: neither listed name matches the denial.
        let short = ItemNames::tool(
            "ref_v2__execute_sql_d0bba14d",
            "ref.v2",
            "__",
            "execute_sql",
        );
        let alias = ItemNames::tool("run_query", "other", "__", "execute_sql");
        assert!(!v.item("ref.v2", &short) && !v.item("other", &alias));
        // Their siblings stay allowed.
        assert!(v.item(
            "other",
            &ItemNames::tool("other__echo", "other", "__", "echo")
        ));
        // And `tools` opens a tool by its upstream name as well.
        let p = policy(json!([{"tools": ["other__execute_sql"]}]));
        assert!(p.view(None).item("other", &alias));
        assert!(
            !p.view(None)
                .item("other", &ItemNames::tool("x", "other", "__", "echo"))
        );
    }

    #[test]
    fn a_subject_matches_within_its_issuer_and_needs_one_named_when_several_are_trusted() {
        let rules: Vec<RuleConfig> = serde_json::from_value(json!([{"callers":
            {"issuer": "https://a.example", "subject": "admin"}, "servers": ["*"]}]))
        .unwrap();
        let p = Policy::new(&rules, 2).unwrap();
        let mut from_a = Caller::new("https://a.example#admin");
        from_a.subject = Some("admin".into());
        let mut from_b = Caller::new("https://b.example#admin");
        from_b.subject = Some("admin".into());
        assert!(p.view(Some(&from_a)).server("ref"));
        assert!(
            !p.view(Some(&from_b)).server("ref"),
            "another issuer's admin"
        );
        let bare: Vec<RuleConfig> =
            serde_json::from_value(json!([{"callers": {"subject": "admin"}}])).unwrap();
        assert!(
            matches!(Policy::new(&bare, 2), Err(AccessError::Config(m)) if m.contains("callers.issuer"))
        );
        assert!(Policy::new(&bare, 1).is_ok());
    }

    #[test]
    fn a_bad_glob_or_an_unknown_member_is_a_config_error() {
        let bad: Vec<RuleConfig> = serde_json::from_value(json!([{"tools": ["a[b"]}])).unwrap();
        assert!(matches!(Policy::new(&bad, 1), Err(AccessError::Config(m)) if m.contains("a[b")));
        let typo = serde_json::from_value::<Vec<RuleConfig>>(json!([{"tool": ["x"]}]));
        assert!(typo.is_err());
    }
}

//! Who may see and call what: rules from the config, each naming the callers it is for and
//! the servers, tools and prompts it opens (or closes), by glob.
//!
//! A caller is given the union of what the rules that match it allow, less what any of them
//! denies. With rules configured, a caller no rule matches sees nothing. A tool or prompt is
//! allowed when its server is (`servers`) or its name as the gateway lists it is (`tools`,
//! which also name prompts); resources, templates, completions and tasks go with their
//! server. What is not allowed is absent from listings and refused as unknown if asked for
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
    /// Tools and prompts it opens, by the name the gateway lists them under (globs).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Tools and prompts it closes, whatever opened them (globs).
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
    subject: Option<globset::GlobMatcher>,
    client_id: Option<globset::GlobMatcher>,
    api_key: Option<globset::GlobMatcher>,
    scopes: Vec<String>,
}

impl CallerMatch {
    fn matches(&self, caller: Option<&Caller>) -> bool {
        let unconditional = self.subject.is_none()
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
        field(&self.subject, &caller.subject)
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
    pub(crate) fn new(rules: &[RuleConfig]) -> Result<Self, AccessError> {
        let rules = rules
            .iter()
            .map(|r| {
                let optional = |p: &Option<String>| p.as_deref().map(glob).transpose();
                Ok(Rule {
                    callers: CallerMatch {
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

    /// Whether the tool or prompt listed as `name`, of `server`, is allowed.
    pub(crate) fn item(&self, server: &str, name: &str) -> bool {
        let Some(rules) = &self.rules else {
            return true;
        };
        rules
            .iter()
            .any(|r| r.servers.is_match(server) || r.tools.is_match(name))
            && !rules.iter().any(|r| r.deny.is_match(name))
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
        Policy::new(&rules).unwrap()
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
        assert!(v.item("github", "github__list_issues"));
        assert!(!v.item("github", "github__delete_repo"));
        assert!(v.item("docs", "docs__search"));
        assert!(
            !v.item("docs", "docs__drop"),
            "denied by the rule that opened it"
        );
        assert!(v.server("docs") && !v.server("github"));

        let bob = caller("bob", &[]);
        let v = p.view(Some(&bob));
        assert!(v.item("github", "github__list_issues") && v.server("github"));
        assert!(!v.item("github", "github__delete_repo"));
        // A denial binds only the callers of its own rule.
        assert!(v.item("docs", "docs__drop"));

        // No rule for carol: nothing at all.
        let carol = caller("carol", &[]);
        let v = p.view(Some(&carol));
        assert!(!v.item("github", "github__list_issues") && !v.server("docs"));
        // Nor for a caller nobody authenticated.
        assert!(!p.view(None).item("github", "github__list_issues"));
    }

    #[test]
    fn a_rule_without_callers_is_for_everyone_and_no_policy_allows_everything() {
        let p = policy(json!([{"tools": ["echo__*"]}]));
        assert!(p.view(None).item("echo", "echo__say"));
        assert!(p.view(Some(&caller("x", &[]))).item("echo", "echo__say"));
        assert!(!p.view(None).item("other", "other__say"));
        assert!(View::everything().item("any", "any__thing") && View::everything().server("any"));
    }

    #[test]
    fn a_bad_glob_or_an_unknown_member_is_a_config_error() {
        let bad: Vec<RuleConfig> = serde_json::from_value(json!([{"tools": ["a[b"]}])).unwrap();
        assert!(matches!(Policy::new(&bad), Err(AccessError::Config(m)) if m.contains("a[b")));
        let typo = serde_json::from_value::<Vec<RuleConfig>>(json!([{"tool": ["x"]}]));
        assert!(typo.is_err());
    }
}

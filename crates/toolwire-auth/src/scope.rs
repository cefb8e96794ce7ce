//! Which scopes to ask for (MCP authorization "Scope Selection Strategy", SEP-2350 step-up,
//! SEP-2207 `offline_access`). Scopes are space-separated strings on the wire; here they are
//! ordered sets so unions keep a stable order.

use std::collections::BTreeSet;

/// A set of scope tokens.
pub(crate) type Scopes = BTreeSet<String>;

/// The tokens of a space-separated scope string.
pub(crate) fn parse(scope: Option<&str>) -> Scopes {
    scope
        .unwrap_or("")
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The wire form; `None` for an empty set (the parameter is then omitted, never sent empty).
pub(crate) fn join(scopes: &Scopes) -> Option<String> {
    (!scopes.is_empty()).then(|| scopes.iter().cloned().collect::<Vec<_>>().join(" "))
}

/// The scope of a first authorization: the challenge's, else everything the protected
/// resource metadata lists, else the configured default, else none.
pub(crate) fn first(
    challenge: Option<&str>,
    supported: Option<&[String]>,
    configured: &Scopes,
) -> Scopes {
    let challenged = parse(challenge);
    if !challenged.is_empty() {
        return challenged;
    }
    if let Some(supported) = supported.filter(|s| !s.is_empty()) {
        return supported.iter().cloned().collect();
    }
    configured.clone()
}

/// The scope of a step-up after `403 insufficient_scope`: what was asked before, what was
/// granted, and what is challenged now (SEP-2350: never lose a scope already held). `None`
/// when the challenged scopes are all granted already: authorizing again cannot help.
pub(crate) fn step_up(requested: &Scopes, granted: &Scopes, challenged: &Scopes) -> Option<Scopes> {
    if !challenged.is_empty() && challenged.is_subset(granted) {
        return None;
    }
    if challenged.is_empty() && !granted.is_empty() {
        // A refusal that names no scope: the same scope again would get the same answer.
        return None;
    }
    let mut union = requested.clone();
    union.extend(granted.iter().cloned());
    union.extend(challenged.iter().cloned());
    Some(union)
}

/// Adds `offline_access` when the authorization server lists it and a refresh token is
/// wanted (SEP-2207), and only to a scope that asks for something. Whether it was added (the
/// authorization request then carries `prompt=consent`).
pub(crate) fn with_offline_access(
    scopes: &mut Scopes,
    server_supported: Option<&[String]>,
    wanted: bool,
) -> bool {
    let listed = server_supported.is_some_and(|s| s.iter().any(|x| x == "offline_access"));
    if wanted && listed && !scopes.is_empty() && !scopes.contains("offline_access") {
        scopes.insert("offline_access".to_owned());
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> Scopes {
        parse(Some(s))
    }

    #[test]
    fn first_authorization_takes_the_challenge_then_the_metadata_then_the_default() {
        let supported = vec!["mcp:basic".to_owned(), "mcp:read".to_owned()];
        let configured = set("custom");
        // (challenge, scopes_supported, configured) -> expected
        type Row<'a> = (Option<&'a str>, Option<&'a [String]>, &'a Scopes, &'a str);
        let table: &[Row<'_>] = &[
            (
                Some("mcp:basic"),
                Some(&supported),
                &configured,
                "mcp:basic",
            ),
            (None, Some(&supported), &configured, "mcp:basic mcp:read"),
            (
                Some("  "),
                Some(&supported),
                &configured,
                "mcp:basic mcp:read",
            ),
            (None, Some(&[]), &configured, "custom"),
            (None, None, &configured, "custom"),
        ];
        for (challenge, supported, configured, want) in table {
            assert_eq!(
                first(*challenge, *supported, configured),
                set(want),
                "{challenge:?} {supported:?}"
            );
        }
        assert_eq!(
            join(&first(None, None, &Scopes::new())),
            None,
            "no scope is omitted, not sent empty"
        );
    }

    #[test]
    fn step_up_unions_prior_granted_and_challenged_and_gives_up_when_already_granted() {
        assert_eq!(
            step_up(&set("mcp:basic"), &set("mcp:basic"), &set("mcp:write")),
            Some(set("mcp:basic mcp:write"))
        );
        assert_eq!(
            step_up(&set("a"), &set("b"), &set("c")),
            Some(set("a b c")),
            "nothing requested or granted is dropped"
        );
        assert_eq!(
            step_up(&set("mcp:admin"), &set("mcp:admin"), &set("mcp:admin")),
            None
        );
        assert_eq!(step_up(&set("a"), &set("a b"), &set("b")), None);
        assert_eq!(step_up(&set("a"), &set("a"), &Scopes::new()), None);
    }

    #[test]
    fn offline_access_only_when_listed_wanted_and_scoped() {
        let listed = vec!["mcp:basic".to_owned(), "offline_access".to_owned()];
        let unlisted = vec!["mcp:basic".to_owned(), "mcp:read".to_owned()];
        let mut s = set("mcp:basic");
        assert!(with_offline_access(&mut s, Some(&listed), true));
        assert_eq!(s, set("mcp:basic offline_access"));
        let mut s = set("mcp:basic");
        assert!(!with_offline_access(&mut s, Some(&unlisted), true));
        assert!(!with_offline_access(&mut s, None, true));
        assert!(!with_offline_access(&mut s, Some(&listed), false));
        assert_eq!(s, set("mcp:basic"));
        let mut empty = Scopes::new();
        assert!(!with_offline_access(&mut empty, Some(&listed), true));
    }
}

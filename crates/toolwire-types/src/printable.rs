//! Text a peer wrote, made safe to show: a server's strings and a child's stderr may hold
//! escape sequences that a terminal (or a log viewer) would obey.

use std::borrow::Cow;

/// Whether `c` may be shown as it is: anything but control characters (newline and tab
/// excepted) and bidirectional overrides, which reorder what a reader sees.
fn harmless(c: char) -> bool {
    c == '\n'
        || c == '\t'
        || !(c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
}

/// `text` with every control character (but newline and tab) and bidirectional override
/// written as a `\uXXXX` escape; borrowed when there is none. Inside JSON text the result is
/// still JSON (such characters can only stand inside its strings).
pub fn printable(text: &str) -> Cow<'_, str> {
    if text.chars().all(harmless) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if harmless(c) {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        }
    }
    Cow::Owned(out)
}

/// A URL as it may be shown: `user:password@` becomes `…@` and every query value `…` (tokens
/// travel there: `?api_key=…`), the rest as it is. Borrowed when there is nothing to hide.
pub fn redacted_url(url: &str) -> Cow<'_, str> {
    let (head, fragment) = url
        .split_once('#')
        .map_or((url, None), |(h, f)| (h, Some(f)));
    let (base, query) = head
        .split_once('?')
        .map_or((head, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let userinfo = base[scheme_end..authority_end].rfind('@');
    if userinfo.is_none() && query.is_none_or(|q| !q.contains('=')) {
        return Cow::Borrowed(url);
    }
    let mut out = String::with_capacity(url.len());
    out.push_str(&base[..scheme_end]);
    match userinfo {
        Some(at) => {
            out.push('…');
            out.push_str(&base[scheme_end + at..]);
        }
        None => out.push_str(&base[scheme_end..]),
    }
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}=…"),
                None => pair.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    Cow::Owned(out)
}

/// Whether an option's name says its value is a secret (`--api-key`, `--token`, `PASSWORD`).
fn secret_name(name: &str) -> bool {
    let name = name.trim_start_matches('-').to_ascii_lowercase();
    [
        "token",
        "key",
        "secret",
        "password",
        "passwd",
        "pwd",
        "auth",
        "credential",
        "bearer",
        "cookie",
    ]
    .iter()
    .any(|s| name.contains(s))
}

/// A command line as it may be shown: the value of an option whose name says it is a secret
/// (`--token X`, `--api-key=X`) becomes `…`, and URLs are shown as [`redacted_url`] shows them.
pub fn redacted_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for arg in args {
        if hide_next {
            out.push("…".to_owned());
            hide_next = false;
            continue;
        }
        if let Some((name, _)) = arg.split_once('=').filter(|(n, _)| n.starts_with('-')) {
            if secret_name(name) {
                out.push(format!("{name}=…"));
                continue;
            }
        } else if arg.starts_with('-') && secret_name(arg) {
            hide_next = true;
            out.push(arg.clone());
            continue;
        }
        out.push(redacted_arg(arg));
    }
    out
}

/// One argument as it may be shown: a URL as [`redacted_url`] shows it; `user:secret@host`
/// (credentials without a scheme) with the part before `@` hidden; anything else as it is, so
/// that a package pinned or scoped with `@` (`pkg@1.0.0`, `@scope/pkg@latest`,
/// `pkg@npm:other@1`) shows exactly what will run.
fn redacted_arg(arg: &str) -> String {
    if arg.contains("://") {
        return redacted_url(arg).into_owned();
    }
    match arg.split_once('@') {
        Some((login, host)) if login.contains(':') && !login.contains('/') && !host.is_empty() => {
            format!("…@{host}")
        }
        _ => arg.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{printable, redacted_args, redacted_url};

    #[test]
    fn escape_sequences_and_bidi_overrides_are_shown_not_obeyed() {
        assert_eq!(printable("plain\ttext\nnext"), "plain\ttext\nnext");
        assert_eq!(
            printable("\u{1b}]0;pwned\u{7}title"),
            "\\u001b]0;pwned\\u0007title"
        );
        assert_eq!(printable("a\u{9b}2Jb\u{7f}"), "a\\u009b2Jb\\u007f");
        assert_eq!(printable("evil\u{202e}txt.exe"), "evil\\u202etxt.exe");
        assert_eq!(printable("\r"), "\\u000d");
        let json = serde_json::json!({"text": "x\u{9b}y"}).to_string();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&printable(&json)).ok(),
            Some(serde_json::json!({"text": "x\u{9b}y"}))
        );
    }

    #[test]
    fn credentials_and_query_values_in_urls_are_hidden() {
        assert_eq!(
            redacted_url("https://mcp.example/mcp"),
            "https://mcp.example/mcp"
        );
        assert_eq!(
            redacted_url("https://alice:s3cret@mcp.example/mcp?api_key=k1&v=2#top"),
            "https://…@mcp.example/mcp?api_key=…&v=…#top"
        );
        assert_eq!(redacted_url("http://h/p?flag"), "http://h/p?flag");
    }

    #[test]
    fn secret_options_in_a_command_line_are_hidden() {
        let args: Vec<String> = [
            "-y",
            "server",
            "--token",
            "t0k",
            "--api-key=k3y",
            "--port",
            "8080",
            "https://u:p@h/x",
            "admin:hunter2@db.internal",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            redacted_args(&args),
            [
                "-y",
                "server",
                "--token",
                "…",
                "--api-key=…",
                "--port",
                "8080",
                "https://…@h/x",
                "…@db.internal"
            ]
        );
    }

    #[test]
    fn packages_pinned_or_scoped_with_an_at_sign_are_shown_whole() {
        let args: Vec<String> = [
            "-y",
            "some-pkg@1.0.0",
            "@modelcontextprotocol/server-everything@latest",
            "alias@npm:real-pkg@2",
            "git+ssh://git@github.com/o/r.git",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            redacted_args(&args),
            [
                "-y",
                "some-pkg@1.0.0",
                "@modelcontextprotocol/server-everything@latest",
                "alias@npm:real-pkg@2",
                "git+ssh://…@github.com/o/r.git"
            ]
        );
    }
}

//! URL elicitation at the terminal. A server that needs the user to visit a page out of band
//! (an OAuth consent for a third party, a payment) asks with an `elicitation/create` request in
//! URL mode, or answers a call with `-32042` naming the URLs. The CLI shows the message, the URL
//! and its host on stderr, and opens the URL in the browser only when the user agrees at a
//! terminal; without one (a pipe, `batch`) it opens nothing. Only `https` and `http` URLs are
//! ever opened. The CLI collects no form input: form-mode elicitations are declined.

use std::io::IsTerminal;
use std::time::Duration;

use serde_json::{Value, json};
use toolwire::types::ElicitParams;
use toolwire::{BoxFuture, ClientCapabilities, ErrorObject, ServerNotification, ServerRequest};

use crate::{Cli, Command};

/// Whether the user can be asked: a terminal on stdin and stderr, and a command that does not
/// read its input from stdin (`batch` does).
pub(crate) fn interactive(cli: &Cli) -> bool {
    !matches!(cli.command, Command::Batch)
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal()
}

/// What the CLI declares: URL-mode elicitation only (`{}` would mean form mode).
pub(crate) fn capabilities() -> ClientCapabilities {
    serde_json::from_value(json!({"elicitation": {"url": {}}})).unwrap_or_default()
}

/// Answers the server's requests: a URL-mode elicitation is shown and, with the user's
/// consent at a terminal, opened (`accept`); refused there, `decline`; with nobody to ask,
/// `cancel`. A form-mode one is declined. Anything else is refused with `-32601`.
pub(crate) fn handler(
    interactive: bool,
) -> impl Fn(ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>> + Send + Sync + 'static
{
    move |request| {
        Box::pin(async move {
            match request {
                ServerRequest::Elicit(params) if params.is_url() => {
                    let action = match (interactive, show(&params)) {
                        (false, _) | (_, None) => "cancel",
                        (true, Some(url)) => {
                            if agree().await {
                                open(url);
                                "accept"
                            } else {
                                "decline"
                            }
                        }
                    };
                    Ok(json!({"action": action}))
                }
                ServerRequest::Elicit(params) => {
                    say_err!(
                        "toolwire: the server asks for form input, which this command does not collect (declined): {}",
                        params.message
                    );
                    Ok(json!({"action": "decline"}))
                }
                other => Err(ErrorObject::new(
                    toolwire::types::error::code::METHOD_NOT_FOUND,
                    format!(
                        "Method not found: {} is not answered by the toolwire CLI",
                        other.method()
                    ),
                )),
            }
        })
    }
}

/// After a call answered `-32042`: shows each URL, and at a terminal opens those the user
/// agrees to and waits (up to `wait`) for the server to say each one was completed
/// (`notifications/elicitation/complete`). Whether the call is worth trying again.
pub(crate) async fn complete(
    client: &toolwire::Client,
    elicitations: &[ElicitParams],
    interactive: bool,
    wait: Duration,
) -> bool {
    // Subscribed before anything is opened, so no completion is missed.
    let mut notices = client.notifications();
    let mut waiting: Vec<String> = Vec::new();
    for elicitation in elicitations {
        let Some(url) = show(elicitation) else {
            continue;
        };
        if interactive && agree().await {
            open(url);
            waiting.extend(elicitation.elicitation_id.clone());
        }
    }
    if waiting.is_empty() {
        return false;
    }
    say_err!(
        "toolwire: waiting for the server to confirm (up to {} s)…",
        wait.as_secs()
    );
    let confirmed = tokio::time::timeout(wait, async {
        while !waiting.is_empty() {
            let Some(notice) = notices.recv().await else {
                return false;
            };
            if let ServerNotification::ElicitationComplete(p) = &notice.notification {
                waiting.retain(|id| *id != p.elicitation_id);
            }
        }
        true
    })
    .await;
    matches!(confirmed, Ok(true))
}

/// Shows a URL elicitation on stderr: the server's message, the URL and its host. The URL, if
/// it is one the CLI would open (`https` or `http` with a host).
fn show(elicitation: &ElicitParams) -> Option<&str> {
    let url = elicitation.url.as_deref()?;
    say_err!(
        "toolwire: the server asks you to open a page: {}",
        elicitation.message
    );
    say_err!("  {url}");
    let parsed: Option<http::Uri> = url.parse().ok();
    let host = parsed
        .as_ref()
        .filter(|u| matches!(u.scheme_str(), Some("https" | "http")))
        .and_then(http::Uri::host);
    match host {
        Some(host) => {
            say_err!("  (on {host})");
            Some(url)
        }
        None => {
            say_err!("  (not an https or http URL: it will not be opened)");
            None
        }
    }
}

/// Asks at the terminal whether to open the URL just shown; anything but `y`/`yes` is no.
async fn agree() -> bool {
    crate::terminal::write(true, "Open it in your browser? [y/N] ", false);
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    matches!(answer, Ok(Ok(line)) if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}

/// Opens `url` in the browser; a failure is said, not fatal.
fn open(url: &str) {
    if let Err(e) = toolwire::auth::open_browser(url) {
        say_err!("toolwire: could not open a browser ({e}); open the URL above yourself");
    }
}

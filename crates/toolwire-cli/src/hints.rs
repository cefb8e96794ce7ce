//! What a failure most likely means where the words of a library or of clap do not say it:
//! an option of toolwire given after the command, a TLS failure.

use super::*;

/// A tip for an option of the whole command line given after its subcommand
/// (`toolwire tools list --url URL`), which clap reports as unexpected there.
pub(crate) fn misplaced_option(error: &clap::Error) -> Option<String> {
    use clap::CommandFactory as _;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(given)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let name = given
        .trim_start_matches('-')
        .split('=')
        .next()
        .unwrap_or("");
    let top = Cli::command();
    let known = top.get_arguments().any(|a| a.get_long() == Some(name));
    known.then(|| {
        format!(
            "tip: `--{name}` is an option of toolwire itself: give it before the command (toolwire --{name} … COMMAND)"
        )
    })
}

/// What a TLS failure most likely means, where the library's words do not say it: a
/// certificate this machine does not trust, or a port that does not speak TLS at all.
pub(crate) fn tls_hint(reason: &str) -> Option<&'static str> {
    if reason.contains("invalid peer certificate") {
        Some(
            "the server's certificate is not one this machine trusts: for a private CA give its bundle in SSL_CERT_FILE or SSL_CERT_DIR",
        )
    } else if reason.contains("InvalidContentType") || reason.contains("corrupt message") {
        Some("the server does not seem to speak TLS on this port: try http://")
    } else {
        None
    }
}

/// A failure to reach `url` said as such, naming it: the library's chain of causes
/// ("protocol negotiation failed: server/discover got no answer: request 1 got no answer: no
/// connection could be made: client error (Connect): tcp connect error: …") says that nothing
/// could be sent, not to what. None when `reason` is not a failure to connect.
pub(crate) fn unreachable(url: &str, reason: &str) -> Option<String> {
    const MARK: &str = "no connection could be made";
    let at = reason.find(MARK)?;
    // Only where nothing but the request's own wrappers come before: a connection that
    // failed on the way to an authorization server is said as the library says it.
    let wrappers = reason[..at].trim_end_matches(": ");
    let only_wrappers = wrappers.is_empty()
        || wrappers.split(": ").all(|part| {
            part == "protocol negotiation failed"
                || part.ends_with(" got no answer")
                || part.starts_with("transport I/O failed")
        });
    if !only_wrappers {
        return None;
    }
    let cause = reason[at + MARK.len()..]
        .trim_start_matches(": ")
        .trim_start_matches("client error (Connect): ")
        .trim_start_matches("tcp connect error: ");
    let shown = toolwire::types::redacted_url(url);
    Some(if cause.is_empty() {
        format!("cannot connect to {shown}")
    } else {
        format!("cannot connect to {shown}: {cause}")
    })
}

#[cfg(test)]
mod tests {
    use super::{tls_hint, unreachable};

    #[test]
    fn a_refused_connection_names_the_url_and_the_cause_only() {
        let reason = "protocol negotiation failed: server/discover got no answer: request 1 got no answer: no connection could be made: client error (Connect): tcp connect error: Connection refused (os error 111)";
        assert_eq!(
            unreachable("http://u:p@127.0.0.1:1/mcp?key=s", reason).as_deref(),
            Some(
                "cannot connect to http://…@127.0.0.1:1/mcp?key=…: Connection refused (os error 111)"
            )
        );
        assert_eq!(unreachable("http://h/mcp", "tool `x` failed: boom"), None);
        // On the way to somewhere else (an authorization server): left as it is.
        let elsewhere = "authorization failed: discovery at https://as.example/x: no connection could be made: dns error";
        assert_eq!(unreachable("http://h/mcp", elsewhere), None);
    }

    #[test]
    fn a_certificate_this_machine_does_not_trust_points_at_ssl_cert_file() {
        let reason = "no connection could be made: invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))";
        assert!(tls_hint(reason).is_some_and(|h| h.contains("SSL_CERT_FILE")));
        assert_eq!(tls_hint("connection refused"), None);
    }
}

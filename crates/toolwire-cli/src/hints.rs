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

#[cfg(test)]
mod tests {
    use super::tls_hint;

    #[test]
    fn a_certificate_this_machine_does_not_trust_points_at_ssl_cert_file() {
        let reason = "no connection could be made: invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))";
        assert!(tls_hint(reason).is_some_and(|h| h.contains("SSL_CERT_FILE")));
        assert_eq!(tls_hint("connection refused"), None);
    }
}

//! The errors of transports.

use std::fmt;
use std::process::ExitStatus;

/// How a child process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitDescription {
    /// Its exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

impl From<ExitStatus> for ExitDescription {
    fn from(status: ExitStatus) -> Self {
        #[cfg(unix)]
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        #[cfg(not(unix))]
        let signal = None;
        Self {
            code: status.code(),
            signal,
        }
    }
}

impl fmt::Display for ExitDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(signal)) => write!(f, "killed by signal {signal}"),
            (None, None) => f.write_str("unknown status"),
        }
    }
}

fn tail(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; last stderr: {}", lines.join(" | "))
    }
}

/// Why a transport could not send or receive.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The server process could not be started.
    #[error("could not start `{program}`")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing a pipe or socket failed.
    #[error("transport I/O failed")]
    Io(#[source] std::io::Error),
    /// The server process exited.
    #[error("the server process ended ({status}){}", tail(stderr_tail))]
    ChildExited {
        /// How it ended.
        status: ExitDescription,
        /// Its last lines of stderr.
        stderr_tail: Vec<String>,
    },
    /// The server closed its stdout but kept running; it was killed.
    #[error(
        "the server process closed its stdout but kept running, so it was stopped{}",
        tail(stderr_tail)
    )]
    StdoutClosed {
        /// Its last lines of stderr.
        stderr_tail: Vec<String>,
    },
    /// An incoming message exceeded the configured limit; it was dropped.
    #[error("incoming message larger than the {limit}-byte limit was dropped")]
    MessageTooLarge {
        /// The limit.
        limit: usize,
    },
    /// An outgoing message contains a newline, which would break newline-delimited framing.
    #[error("outgoing message contains a newline; stdio messages must be compact JSON")]
    EmbeddedNewline,
    /// The transport was closed.
    #[error("the transport is closed")]
    Closed,
    /// The transport could not be set up (a bad URL, no TLS roots).
    #[error("the transport could not be set up")]
    Setup(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// One request got no answer (an HTTP error status, a connection that failed, a response
    /// stream that broke); the transport itself goes on.
    #[error(transparent)]
    Request(toolwire_wire::RequestFailure),
}

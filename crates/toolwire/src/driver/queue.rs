//! Commands that wait for the session to be ready, each up to its caller's deadline.

use super::*;

/// A command waiting for the session to be ready, and when its caller stops waiting.
pub(super) struct Queued {
    pub(super) deadline: Instant,
    pub(super) command: Command,
}

impl Driver {
    /// How long a caller waits: a call's own deadline, else the session's request timeout.
    pub(super) fn patience(&self, options: Option<&CallOptions>) -> Duration {
        options
            .and_then(|o| o.timeout)
            .unwrap_or(self.link.session.request_timeout)
    }

    /// The options of a command that has them (a call).
    pub(super) fn options_of(command: &Command) -> Option<&CallOptions> {
        match command {
            Command::Call { request, .. } => Some(&request.options),
            _ => None,
        }
    }

    /// Queues a command until the session is ready; its caller waits up to its
    /// [`Driver::patience`].
    pub(super) fn queue(&mut self, command: Command) {
        let deadline =
            toolwire_session::later(Instant::now(), self.patience(Self::options_of(&command)));
        self.queued.push(Queued { deadline, command });
    }

    /// Fails the queued commands whose callers stopped waiting.
    pub(super) fn expire_queued(&mut self, now: Instant) {
        let (expired, kept): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut self.queued)
            .into_iter()
            .partition(|q| q.deadline <= now);
        self.queued = kept;
        // Before the first handshake ever finished, what the transport saw of the server is
        // the useful part (a child still installing itself, or waiting on the network).
        let peer = (!self.ever_ready && !expired.is_empty())
            .then(|| self.transport.peer_state())
            .flatten();
        for queued in expired {
            let waited = self.patience(Self::options_of(&queued.command));
            let error = match &peer {
                Some(peer) => Error::Connection(crate::ConnectionError::Unanswered {
                    method: "the handshake",
                    peer: peer.clone(),
                }),
                None => Error::Timeout(waited),
            };
            fail_command(queued.command, error);
        }
    }

    /// The earliest deadline of a queued command.
    pub(super) fn next_queued_deadline(&self) -> Option<Instant> {
        self.queued.iter().map(|q| q.deadline).min()
    }
}

//! How each [`Command`] is issued on the session, and whose operation it is.

use super::*;

/// `{}`: what a request that needs no answer from the server answers.
fn empty_result() -> Box<RawValue> {
    serde_json::value::to_raw_value(&serde_json::Map::new())
        .unwrap_or_else(|_| RawValue::NULL.to_owned())
}

impl Driver {
    pub(super) fn issue(&mut self, command: Command) {
        self.note_identity();
        let now = Instant::now();
        // The requests this command queues carry its caller's trace context, and only they:
        // what the session sends on its own afterwards carries none.
        self.session.set_trace_context(command.trace().cloned());
        match command {
            Command::Call {
                call,
                hooks,
                request,
                reply,
                ..
            } => match self.session.call(request, now) {
                Ok(op) => self.waiters.call(op, call, reply, hooks),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::ListTools { mode, reply, .. } => {
                match self.session.list_tools_with(mode, now) {
                    Ok(op) => self.waiters.list(op, reply),
                    Err(e) => drop(reply.send(Err(e.into()))),
                }
            }
            Command::Request { issue, reply, .. } => match issue(&mut self.session, now) {
                Ok(Some(op)) => self.waiters.request(op, reply),
                Ok(None) => drop(reply.send(Ok(empty_result()))),
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Command::Cancel { call } => self.cancel(call),
            Command::Respond { id, result } => {
                if let Err(e) = self
                    .session
                    .respond(&id, result.as_ref().map_err(Clone::clone))
                {
                    tracing::warn!(error = %e, %id, "could not answer the server's request");
                }
            }
            Command::Start { .. } | Command::Close { .. } => {}
        }
        self.session.set_trace_context(None);
    }

    /// The caller stopped waiting for call `call` (rare: looked for, not indexed). Its
    /// `Completed(Cancelled)` finds a receiver that is gone.
    pub(super) fn cancel(&mut self, call: u64) {
        let op = self.waiters.find_call(call);
        if let Some(id) =
            op.and_then(|op| self.session.cancel(op, Some("the caller stopped waiting")))
        {
            self.transport.cancel(&id);
        }
    }
}

//! Who waits for what: each operation a driver issued on its session, with the caller's reply
//! and, for a call, its hooks (progress, its log lines, the server's requests about it). The
//! driver hands here what the session says of an operation, by its [`OpId`].

use std::collections::HashMap;

use serde_json::value::RawValue;
use tokio::sync::oneshot;
use toolwire_cache::ListOutcome;
use toolwire_session::OpId;

use crate::{CallHooks, Error};

/// Where a caller waits for its answer.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// Looked up several times per call: `foldhash` with a random seed per table (SipHash, the
/// std default, cost more than the lookups themselves). The keys are ids the client chose.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Who waits for one operation, and how to answer them.
enum Waiter {
    /// A `tools/call` of the caller's call `call`.
    Call {
        call: u64,
        reply: Reply<Box<RawValue>>,
        hooks: CallHooks,
    },
    /// A `tools/list` walk.
    List(Reply<ListOutcome>),
    /// Any other request.
    Request(Reply<Box<RawValue>>),
}

/// Every operation someone waits for, on one driver.
#[derive(Default)]
pub(crate) struct Waiters(FastMap<OpId, Waiter>);

impl Waiters {
    /// Call `call`'s `tools/call` is operation `op`.
    pub(crate) fn call(
        &mut self,
        op: OpId,
        call: u64,
        reply: Reply<Box<RawValue>>,
        hooks: CallHooks,
    ) {
        self.0.insert(op, Waiter::Call { call, reply, hooks });
    }

    /// A `tools/list` walk is operation `op`.
    pub(crate) fn list(&mut self, op: OpId, reply: Reply<ListOutcome>) {
        self.0.insert(op, Waiter::List(reply));
    }

    /// Another request is operation `op`.
    pub(crate) fn request(&mut self, op: OpId, reply: Reply<Box<RawValue>>) {
        self.0.insert(op, Waiter::Request(reply));
    }

    /// Operation `op`, a call or a request, finished: its caller hears `result`.
    pub(crate) fn complete(&mut self, op: OpId, result: Result<Box<RawValue>, Error>) {
        if let Some(Waiter::Call { reply, .. } | Waiter::Request(reply)) = self.0.remove(&op) {
            drop(reply.send(result));
        }
    }

    /// Walk `op` finished: its caller hears `result`.
    pub(crate) fn listed(&mut self, op: OpId, result: Result<ListOutcome, Error>) {
        if let Some(Waiter::List(reply)) = self.0.remove(&op) {
            drop(reply.send(result));
        }
    }

    /// The hooks of operation `op`, while it is a call someone waits for.
    pub(crate) fn hooks(&self, op: OpId) -> Option<&CallHooks> {
        match self.0.get(&op) {
            Some(Waiter::Call { hooks, .. }) => Some(hooks),
            _ => None,
        }
    }

    /// The operation of the caller's call `call` (rare: looked for, not indexed).
    pub(crate) fn find_call(&self, call: u64) -> Option<OpId> {
        self.0.iter().find_map(|(op, waiter)| {
            matches!(waiter, Waiter::Call { call: c, .. } if *c == call).then_some(*op)
        })
    }

    /// Every operation failed with `error`.
    pub(crate) fn fail_all(&mut self, error: &Error) {
        for (_, waiter) in self.0.drain() {
            match waiter {
                Waiter::Call { reply, .. } | Waiter::Request(reply) => {
                    drop(reply.send(Err(error.clone())));
                }
                Waiter::List(reply) => drop(reply.send(Err(error.clone()))),
            }
        }
    }
}

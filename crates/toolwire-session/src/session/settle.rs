//! The settle barrier: a `tools/call` result that announces tool changes is held until the
//! cache shows them (or its deadline passes), and a call answered with a header mismatch waits
//! for a re-list to be reissued.

use web_time::Instant;

use serde_json::value::RawValue;
use toolwire_cache::ToolSnapshot;
use toolwire_types::{ErrorObject, ProtocolVersion, TraceContext};

use super::Session;
use super::call::CallRequest;
use super::refresh::Refresh;
use crate::{Event, OpId, RequestError, SettleMode};

/// What the barrier holds: results waiting for announced changes, and calls waiting for a
/// re-list to be reissued. Pure bookkeeping; the session decides what to do with what it
/// releases.
#[derive(Default)]
pub(super) struct SettleBarrier {
    held: Vec<Held>,
    relists: Vec<Relist>,
}

/// A result the settle barrier holds.
pub(super) struct Held {
    pub(super) op: OpId,
    pub(super) result: Box<RawValue>,
    pub(super) expect: Expect,
    pub(super) deadline: Instant,
}

/// What releases a held result.
pub(super) enum Expect {
    /// The announced changes, with the definition hashes of the updated tools before.
    Changes {
        registers: Vec<String>,
        unregisters: Vec<String>,
        updates: Vec<(String, Option<u64>)>,
    },
    /// The end of refresh number `seq`.
    Refresh { seq: u64 },
}

impl Expect {
    /// Whether `snapshot` (and the refreshes so far) show what it waits for.
    pub(super) fn is_met(&self, snapshot: &ToolSnapshot, refresh: &Refresh) -> bool {
        match self {
            Self::Refresh { seq } => refresh.has_finished(*seq),
            Self::Changes {
                registers,
                unregisters,
                updates,
            } => {
                registers.iter().all(|n| snapshot.contains(n))
                    && !unregisters.iter().any(|n| snapshot.contains(n))
                    && updates.iter().all(|(n, before)| {
                        snapshot
                            .get(n)
                            .is_some_and(|t| Some(t.definition_hash()) != *before)
                    })
            }
        }
    }
}

/// A call answered with a header mismatch, waiting for refresh number `seq` to reissue it.
pub(super) struct Relist {
    pub(super) op: OpId,
    pub(super) call: Box<CallRequest>,
    pub(super) error: ErrorObject,
    pub(super) seq: u64,
    /// The trace context the call carried, which it carries again.
    pub(super) trace: Option<TraceContext>,
}

impl SettleBarrier {
    /// Holds a result.
    pub(super) fn hold(&mut self, held: Held) {
        self.held.push(held);
    }

    /// Parks a call until refresh `relist.seq` ends.
    pub(super) fn wait_for_relist(&mut self, relist: Relist) {
        self.relists.push(relist);
    }

    /// Whether a result is held (a list change then refreshes even without auto-refresh).
    pub(super) fn is_holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether operation `op` is held.
    pub(super) fn holds(&self, op: OpId) -> bool {
        self.held.iter().any(|h| h.op == op)
    }

    /// Forgets operation `op`; whether it was held or parked.
    pub(super) fn cancel(&mut self, op: OpId) -> bool {
        let before = self.held.len() + self.relists.len();
        self.held.retain(|h| h.op != op);
        self.relists.retain(|r| r.op != op);
        self.held.len() + self.relists.len() < before
    }

    /// Takes everything: the held results and the parked calls (the connection ended).
    pub(super) fn take_all(&mut self) -> (Vec<Held>, Vec<Relist>) {
        (
            std::mem::take(&mut self.held),
            std::mem::take(&mut self.relists),
        )
    }

    /// The earliest deadline of a held result.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.held.iter().map(|h| h.deadline).min()
    }

    /// Takes the held results whose deadline is at or before `now`.
    pub(super) fn expired(&mut self, now: Instant) -> Vec<Held> {
        let (late, held) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.deadline <= now);
        self.held = held;
        late
    }

    /// Takes the held results whose changes `snapshot` shows, and the parked calls whose
    /// re-list has ended.
    pub(super) fn release(
        &mut self,
        snapshot: &ToolSnapshot,
        refresh: &Refresh,
    ) -> (Vec<Held>, Vec<Relist>) {
        let (ready, held) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.expect.is_met(snapshot, refresh));
        self.held = held;
        let (due, waiting) = std::mem::take(&mut self.relists)
            .into_iter()
            .partition(|r| refresh.has_finished(r.seq));
        self.relists = waiting;
        (ready, due)
    }
}

impl Session {
    /// A call was answered with a header mismatch: re-list, then reissue it once.
    pub(super) fn relist_and_retry(
        &mut self,
        op: OpId,
        call: Box<CallRequest>,
        error: ErrorObject,
        trace: Option<TraceContext>,
        now: Instant,
    ) {
        tracing::warn!(
            tool = %call.name,
            code = error.code,
            "the server says the Mcp-Param-* headers do not match the arguments; re-listing the \
             tools and retrying once"
        );
        self.tools_fresh.invalidate();
        match self.request_refresh(now) {
            Some(seq) => self.barrier.wait_for_relist(Relist {
                op,
                call,
                error,
                seq,
                trace,
            }),
            None => self.events.push_back(Event::Completed {
                op,
                result: Err(RequestError::Server { error }),
            }),
        }
    }

    /// Releases held results whose changes the cache now shows, and reissues calls whose
    /// re-list is done.
    pub(super) fn recheck(&mut self, now: Instant) {
        let snapshot = self.cache.snapshot();
        let (ready, due) = self.barrier.release(&snapshot, &self.refresh);
        for h in ready {
            tracing::debug!(
                op = h.op.0,
                "the announced tool changes are in; releasing the result"
            );
            self.events.push_back(Event::Completed {
                op: h.op,
                result: Ok(h.result),
            });
        }
        for r in due {
            if !self.refresh.last_ok() {
                self.events.push_back(Event::Completed {
                    op: r.op,
                    result: Err(RequestError::Server { error: r.error }),
                });
                continue;
            }
            tracing::info!(tool = %r.call.name, "retrying the call with headers from the fresh tool list");
            let issued = self.traced(r.trace, |s| s.issue_call(r.op, r.call, false, now));
            if let Err(e) = issued {
                self.events.push_back(Event::Completed {
                    op: r.op,
                    result: Err(e),
                });
            }
        }
    }

    /// The settle barrier: hands `raw` over now, or holds it until the changes it announces
    /// are in the cache.
    pub(super) fn settle(&mut self, op: OpId, raw: Box<RawValue>, now: Instant) {
        let announced = toolwire_types::ToolChanges::announced_in(&raw);
        let registers = announced.registers.unwrap_or_default();
        let unregisters = announced.unregisters.unwrap_or_default();
        let updates = announced.updates.unwrap_or_default();
        let expect = if registers.is_empty() && unregisters.is_empty() && updates.is_empty() {
            if self.config.settle == SettleMode::AnnouncedOrRefresh && self.refresh.under_way() {
                Expect::Refresh {
                    seq: self.refresh.latest_wanted(),
                }
            } else {
                return self.events.push_back(Event::Completed {
                    op,
                    result: Ok(raw),
                });
            }
        } else {
            let snapshot = self.cache.snapshot();
            let updates = updates
                .into_iter()
                .map(|n| {
                    let before = snapshot.get(&n).map(|t| t.definition_hash());
                    (n, before)
                })
                .collect();
            Expect::Changes {
                registers,
                unregisters,
                updates,
            }
        };
        let announces = matches!(expect, Expect::Changes { .. });
        self.barrier.hold(Held {
            op,
            result: raw,
            expect,
            deadline: crate::later(now, self.config.settle_timeout),
        });
        // Perhaps the cache shows them already (the list change came first).
        self.recheck(now);
        if self.barrier.holds(op) && announces && !self.server_announces_list_changes() {
            // No list change will come: fetch the list now.
            self.request_refresh(now);
        }
    }

    /// Whether the server will tell us when its tool list changes.
    pub(super) fn server_announces_list_changes(&self) -> bool {
        let declared = self
            .negotiated()
            .and_then(|n| n.capabilities.tools.as_ref())
            .and_then(|t| t.list_changed)
            .unwrap_or(false);
        let modern = self.version().is_some_and(ProtocolVersion::is_modern);
        // In the modern era list changes come only on the listen stream.
        declared && (!modern || self.listen.is_open())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use toolwire_cache::ToolCache;

    use super::*;

    fn tool(name: &str, description: &str) -> toolwire_types::Tool {
        serde_json::from_value(json!({"name": name, "description": description,
            "inputSchema": {"type": "object"}}))
        .unwrap()
    }

    fn list(cache: &ToolCache, tools: Vec<toolwire_types::Tool>) {
        let mut listing = cache.begin_listing();
        listing.add_page(tools);
        cache.commit_listing(listing);
    }

    fn held(op: u64, expect: Expect, deadline: Instant) -> Held {
        Held {
            op: OpId::for_test(op),
            result: serde_json::value::to_raw_value(&json!({"content": []})).unwrap(),
            expect,
            deadline,
        }
    }

    fn changes(
        registers: &[&str],
        unregisters: &[&str],
        updates: &[(&str, Option<u64>)],
    ) -> Expect {
        Expect::Changes {
            registers: registers.iter().map(|s| s.to_string()).collect(),
            unregisters: unregisters.iter().map(|s| s.to_string()).collect(),
            updates: updates.iter().map(|(n, h)| (n.to_string(), *h)).collect(),
        }
    }

    fn released(barrier: &mut SettleBarrier, cache: &ToolCache, refresh: &Refresh) -> Vec<u64> {
        let (ready, _) = barrier.release(&cache.snapshot(), refresh);
        ready.iter().map(|h| h.op.0).collect()
    }

    #[test]
    fn a_result_is_released_only_once_the_cache_shows_every_announced_change() {
        let cache = ToolCache::default();
        list(&cache, vec![tool("old", "v1"), tool("gone", "x")]);
        let before = cache.snapshot().get("old").map(|t| t.definition_hash());
        let refresh = Refresh::default();
        let mut barrier = SettleBarrier::default();
        let t = Instant::now();
        barrier.hold(held(1, changes(&["new"], &["gone"], &[("old", before)]), t));
        // Registered, but `gone` is still there and `old` unchanged.
        list(
            &cache,
            vec![tool("old", "v1"), tool("gone", "x"), tool("new", "n")],
        );
        assert!(released(&mut barrier, &cache, &refresh).is_empty());
        // Removed, but `old` unchanged.
        list(&cache, vec![tool("old", "v1"), tool("new", "n")]);
        assert!(released(&mut barrier, &cache, &refresh).is_empty());
        assert!(barrier.holds(OpId::for_test(1)));
        // Everything in.
        list(&cache, vec![tool("old", "v2"), tool("new", "n")]);
        assert_eq!(released(&mut barrier, &cache, &refresh), [1]);
        assert!(!barrier.is_holding());
    }

    #[test]
    fn a_result_waiting_for_a_refresh_is_released_by_its_end_and_parked_calls_with_it() {
        let cache = ToolCache::default();
        let mut refresh = Refresh::default();
        assert_eq!(refresh.request(), super::super::refresh::Wanted::Start);
        let seq = refresh.started(OpId::for_test(9));
        let mut barrier = SettleBarrier::default();
        barrier.hold(held(1, Expect::Refresh { seq }, Instant::now()));
        assert!(released(&mut barrier, &cache, &refresh).is_empty());
        refresh.finished(true);
        assert_eq!(released(&mut barrier, &cache, &refresh), [1]);
    }

    #[test]
    fn deadlines_and_cancellation() {
        let t = Instant::now();
        let mut barrier = SettleBarrier::default();
        barrier.hold(held(
            1,
            changes(&["a"], &[], &[]),
            t + Duration::from_millis(10),
        ));
        barrier.hold(held(
            2,
            changes(&["b"], &[], &[]),
            t + Duration::from_millis(5),
        ));
        barrier.hold(held(
            3,
            changes(&["c"], &[], &[]),
            t + Duration::from_millis(20),
        ));
        assert_eq!(barrier.next_deadline(), Some(t + Duration::from_millis(5)));
        let late: Vec<u64> = barrier
            .expired(t + Duration::from_millis(10))
            .iter()
            .map(|h| h.op.0)
            .collect();
        assert_eq!(late, [1, 2]);
        assert_eq!(barrier.next_deadline(), Some(t + Duration::from_millis(20)));
        assert!(barrier.cancel(OpId::for_test(3)));
        assert!(!barrier.cancel(OpId::for_test(3)), "already gone");
        assert_eq!(barrier.next_deadline(), None);
    }
}

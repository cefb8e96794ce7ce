//! How long the last `tools/list` stays fresh (SEP-2549): each page on its own clock
//! (`received + ttlMs`, an absent or negative `ttlMs` is 0), the listing fresh while every
//! page is; invalidated at once by a list change or a header mismatch, and a walk that was
//! asked before an invalidation never makes the listing fresh again. A listing any page of
//! which was not `cacheScope: public` belongs to the authorization context that fetched it.

use std::time::Duration;

use web_time::Instant;

use toolwire_cache::{Commit, ListOutcome, SnapshotDiff};

/// What a `tools/list` walk in progress has learned about its freshness.
#[derive(Debug, Clone, Copy)]
pub(super) struct WalkClock {
    /// The invalidation count when the walk started.
    epoch: u64,
    /// The walk was asked to leave freshness alone ([`crate::CacheMode::Bypass`]).
    bypass: bool,
    /// Asked in [`crate::CacheMode::Use`]: the last listing, even stale, may stand in if the
    /// walk fails.
    pub(super) stale_ok: bool,
    /// The earliest page expiry so far (`None` before the first page).
    until: Option<Instant>,
    /// Every page so far was `cacheScope: public`.
    public: bool,
    /// The walk started over once already (a cursor the server no longer took).
    pub(super) restarted: bool,
}

impl WalkClock {
    /// The clock of the same walk started over from the first page: the pages so far are
    /// dropped, and so is their freshness.
    pub(super) fn restart(self) -> Self {
        Self {
            until: None,
            public: true,
            restarted: true,
            ..self
        }
    }

    /// One more page, received at `now` with `ttl_ms`, `public` if its `cacheScope` said so.
    pub(super) fn page(self, now: Instant, ttl_ms: u64, public: bool) -> Self {
        let expires = crate::later(now, Duration::from_millis(ttl_ms));
        Self {
            until: Some(self.until.map_or(expires, |u| u.min(expires))),
            public: self.public && public,
            ..self
        }
    }
}

/// Whether `tools/list` may be answered from the last listing, and with what.
#[derive(Default)]
pub(super) struct ToolsFreshness {
    /// Invalidations so far.
    epoch: u64,
    /// The last listing, when it stops being fresh, and whether it was public.
    last: Option<(Instant, bool, ListOutcome)>,
}

impl ToolsFreshness {
    /// A clock for a walk in `mode` that starts now.
    pub(super) fn clock(&self, mode: crate::CacheMode) -> WalkClock {
        WalkClock {
            epoch: self.epoch,
            bypass: mode == crate::CacheMode::Bypass,
            stale_ok: mode == crate::CacheMode::Use,
            until: None,
            public: true,
            restarted: false,
        }
    }

    /// The server said the list changed (or a call's headers no longer match): the last
    /// listing is stale however fresh its pages said it was.
    pub(super) fn invalidate(&mut self) {
        self.epoch += 1;
        self.last = None;
    }

    /// The client now speaks as another identity (a new bearer token): a listing that was not
    /// public was fetched for the one before and no longer counts, fresh or stale, and a walk
    /// asked before now does not make one.
    pub(super) fn identity_changed(&mut self) {
        self.epoch += 1;
        if self.last.as_ref().is_some_and(|(_, public, _)| !public) {
            self.last = None;
        }
    }

    /// A walk ended with `outcome`: it is the fresh listing until its earliest page expires,
    /// unless an invalidation came after the walk started.
    pub(super) fn record(&mut self, clock: WalkClock, outcome: &ListOutcome) {
        if clock.epoch != self.epoch || clock.bypass {
            return;
        }
        if let Some(until) = clock.until {
            self.last = Some((until, clock.public, outcome.clone()));
        }
    }

    /// The last listing if it is fresh at `now` (`now < received + ttlMs` for every page),
    /// as an outcome whose commit changes nothing (generation `generation`, empty diff).
    pub(super) fn fresh(&self, now: Instant, generation: u64) -> Option<ListOutcome> {
        let (until, _, _) = self.last.as_ref()?;
        if now >= *until {
            return None;
        }
        self.stale(generation)
    }

    /// The last listing, fresh or not, unless something invalidated it (for a walk that
    /// failed), as [`ToolsFreshness::fresh`] gives it.
    pub(super) fn stale(&self, generation: u64) -> Option<ListOutcome> {
        let (_, _, outcome) = self.last.as_ref()?;
        let mut outcome = outcome.clone();
        outcome.commit = Commit {
            generation,
            diff: SnapshotDiff {
                from: generation,
                to: generation,
                ..SnapshotDiff::default()
            },
        };
        Some(outcome)
    }
}

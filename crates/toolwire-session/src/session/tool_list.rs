//! The `tools/list` walk: pages requested one by one into a cache [`Listing`] and committed in
//! one swap; the session's own refreshes after list changes ([`super::refresh::Refresh`]).

use std::collections::HashSet;
use web_time::Instant;

use serde_json::value::RawValue;
use toolwire_cache::{ListOutcome, Listing};
use toolwire_types::methods::method;
use toolwire_types::{
    DecodeError, ErrorObject, JsonObject, ListParams, ListToolsResult, Outcome, RequestMethod,
};

use super::freshness::WalkClock;
use super::refresh::Wanted;
use super::{PendingKind, Session};
use crate::{CacheMode, Event, OpId, RequestError};

/// Decodes one `tools/list` page. A page the strict decoder refuses is decoded again tool by
/// tool, so that one malformed definition is rejected alone (and warned about at commit) rather
/// than hiding every other tool of the server; a page whose own shape is wrong fails with the
/// strict decoder's error.
fn decode_tool_page(
    raw: &RawValue,
) -> Result<(ListToolsResult, Vec<toolwire_types::MalformedTool>), RequestError> {
    match method::ListTools::decode_result(raw) {
        Ok(Outcome::Complete(page)) => Ok((page, Vec::new())),
        // decode_result only yields Complete for tools/list; kept total anyway.
        Ok(Outcome::InputRequired(_)) => {
            Err(RequestError::Decode(DecodeError::UnexpectedInputRequired {
                method: "tools/list".into(),
            }))
        }
        Err(strict) => {
            ListToolsResult::decode_lenient(raw).map_err(|_| RequestError::Decode(strict))
        }
    }
}

impl Session {
    /// Walks every page of `tools/list` and commits the listing to the cache in one swap; the
    /// result arrives as [`Event::ToolsListed`]. ([`CacheMode::Refresh`].)
    pub fn list_tools(&mut self, now: Instant) -> Result<OpId, RequestError> {
        self.list_tools_with(CacheMode::Refresh, now)
    }

    /// `tools/list` in cache mode `mode`: with [`CacheMode::Use`] and a fresh last listing
    /// (every page's `ttlMs` not yet passed, no list change or header mismatch since) the
    /// result is that listing, at once, with no round trip and a commit that changes
    /// nothing; otherwise a walk as [`Session::list_tools`]. [`CacheMode::Bypass`] walks
    /// without making the listing fresh (the tool cache still takes it: headers need it).
    pub fn list_tools_with(&mut self, mode: CacheMode, now: Instant) -> Result<OpId, RequestError> {
        if !self.is_ready() {
            return self.hold(super::Ask::List(mode), self.config.request_timeout, now);
        }
        let op = self.allocate_op();
        self.list_tools_as(op, mode, now)?;
        Ok(op)
    }

    /// [`Session::list_tools_with`] as operation `op`.
    pub(super) fn list_tools_as(
        &mut self,
        op: OpId,
        mode: CacheMode,
        now: Instant,
    ) -> Result<(), RequestError> {
        self.version_for(method::ListTools::CAPABILITY)?;
        if mode == CacheMode::Use {
            let generation = self.cache.snapshot().generation();
            if let Some(outcome) = self.tools_fresh.fresh(now, generation) {
                self.events.push_back(Event::ToolsListed {
                    op,
                    result: Ok(outcome),
                });
                return Ok(());
            }
        }
        let clock = self.tools_fresh.clock(mode);
        let listing = self.cache.begin_listing();
        self.send_list_page(op, listing, None, (1, HashSet::new(), clock), now)
    }

    /// Asks for one page; `walk` is how many pages so far, the cursors seen and the clock.
    pub(super) fn send_list_page(
        &mut self,
        op: OpId,
        listing: Listing,
        cursor: Option<String>,
        walk: (usize, HashSet<String>, WalkClock),
        now: Instant,
    ) -> Result<(), RequestError> {
        let (pages, cursors, clock) = walk;
        let version = self.version_for(method::ListTools::CAPABILITY)?;
        let mut params = ListParams {
            cursor,
            meta: None,
            extra: JsonObject::new(),
        };
        self.envelope(&version, &mut params);
        let headers = self.sep2243_headers(&version, "tools/list");
        let kind = PendingKind::ListPage {
            op,
            listing,
            pages,
            cursors,
            clock,
        };
        let timeout = self.config.request_timeout;
        self.queue_request(
            &version,
            "tools/list",
            &params,
            headers,
            true,
            kind,
            timeout,
            now,
        )
        .map_err(RequestError::Encode)?;
        Ok(())
    }

    /// Asks for a refresh walk; returns the number of the refresh whose end shows a list
    /// fetched after now (`None` if none can be sent).
    pub(super) fn request_refresh(&mut self, now: Instant) -> Option<u64> {
        match self.refresh.request() {
            Wanted::Queued(seq) => Some(seq),
            Wanted::Start => match self.start_refresh(now) {
                Ok(seq) => Some(seq),
                Err(e) => {
                    tracing::warn!(error = %e, "could not refresh the tool list");
                    None
                }
            },
        }
    }

    /// Sends the first page of a refresh walk; returns its number.
    pub(super) fn start_refresh(&mut self, now: Instant) -> Result<u64, RequestError> {
        let op = self.allocate_op();
        let listing = self.cache.begin_listing();
        let clock = self.tools_fresh.clock(CacheMode::Refresh);
        self.send_list_page(op, listing, None, (1, HashSet::new(), clock), now)?;
        Ok(self.refresh.started(op))
    }

    /// A `tools/list` walk ended: the caller's ([`Event::ToolsListed`]) or the session's own
    /// refresh ([`Event::ToolsRefreshed`], then the next one if list changes came meanwhile).
    /// Either way held results and re-list waiters are looked at again.
    pub(super) fn finish_listing(
        &mut self,
        op: OpId,
        result: Result<ListOutcome, RequestError>,
        now: Instant,
    ) {
        self.listed |= result.is_ok();
        if self.refresh.is_current(op) {
            let again = self.refresh.finished(result.is_ok());
            if let Err(e) = &result {
                tracing::warn!(error = %e, "refreshing the tool list failed");
            }
            self.events.push_back(Event::ToolsRefreshed(result));
            if again && let Err(e) = self.start_refresh(now) {
                tracing::warn!(error = %e, "could not refresh the tool list");
            }
        } else {
            self.events.push_back(Event::ToolsListed { op, result });
        }
        self.recheck(now);
    }

    /// A list change arrived: the cache is stale; refresh it (bursts coalesce into one more
    /// walk) when auto-refresh is on or a result is waiting for it.
    pub(super) fn list_changed(&mut self, now: Instant) {
        self.cache.mark_stale();
        self.tools_fresh.invalidate();
        if self.negotiated().is_some() && (self.config.auto_refresh || self.barrier.is_holding()) {
            self.request_refresh(now);
        }
    }

    /// One page of a `tools/list` walk answered: the next page is asked for, or the listing
    /// is committed in one swap (or the walk fails: an error answer, a page that does not
    /// decode, a repeated cursor, too many pages).
    pub(super) fn page_answered(
        &mut self,
        op: OpId,
        mut listing: Listing,
        walk: (usize, HashSet<String>, WalkClock),
        payload: Result<Box<RawValue>, ErrorObject>,
        now: Instant,
    ) {
        let (pages, mut cursors, clock) = walk;
        // A cursor the server no longer takes (`-32602` on a later page): the pages so far
        // are dropped and the walk starts over, once.
        if let Err(error) = &payload
            && error.code == toolwire_types::error::code::INVALID_PARAMS
            && pages > 1
            && !clock.restarted
        {
            tracing::info!("tools/list refused a cursor; listing again from the first page");
            let listing = self.cache.begin_listing();
            let walk = (1, HashSet::new(), clock.restart());
            if let Err(e) = self.send_list_page(op, listing, None, walk, now) {
                self.finish_listing(op, Err(e), now);
            }
            return;
        }
        let page = payload
            .map_err(|error| RequestError::Server { error })
            .and_then(|raw| decode_tool_page(&raw));
        let (page, malformed) = match page {
            Ok(decoded) => decoded,
            Err(e) => {
                self.finish_listing(op, Err(e), now);
                return;
            }
        };
        // Each page on its own clock, from when it arrived.
        let clock = clock.page(
            now,
            toolwire_types::Cacheable::ttl_ms(&page),
            toolwire_types::Cacheable::is_public(&page),
        );
        if malformed.is_empty() {
            listing.add_page(page.tools);
        } else {
            listing.add_lenient_page(page.tools, malformed);
        }
        let Some(cursor) = page.next_cursor else {
            let outcome = self.cache.commit_listing(listing);
            for rejected in &outcome.rejected {
                tracing::warn!(tool = %rejected.name, "tool excluded from the tool list: {}", rejected.reason);
            }
            self.tools_fresh.record(clock, &outcome);
            self.finish_listing(op, Ok(outcome), now);
            return;
        };
        let error = if !cursors.insert(cursor.clone()) {
            Some(RequestError::RepeatedCursor(cursor.clone()))
        } else if pages >= self.config.max_list_pages {
            Some(RequestError::TooManyPages(self.config.max_list_pages))
        } else {
            None
        };
        let sent = match error {
            Some(e) => Err(e),
            None => {
                self.send_list_page(op, listing, Some(cursor), (pages + 1, cursors, clock), now)
            }
        };
        if let Err(e) = sent {
            self.finish_listing(op, Err(e), now);
        }
    }
}

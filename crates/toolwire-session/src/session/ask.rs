//! A caller's request by its method marker ([`Session::request`], and through the response
//! cache [`Session::request_cached`]): held until the session is ready, sent with a copy of
//! its params kept to ask it again on the next connection.

use web_time::Instant;

use toolwire_types::{HasMeta, RequestMethod};

use super::held::{Again, Ask};
use super::{PendingKind, Session};
use crate::{CacheMode, Event, OpId, RequestError};

impl Session {
    /// Sends any request by its method marker; the result arrives as [`Event::Completed`]. The
    /// method says which capability a legacy server must have declared, whether a transport
    /// may resend it, and which member `Mcp-Name` mirrors. Before the session is ready it is
    /// held ([`Session::is_ready`]).
    pub fn request<M>(&mut self, params: M::Params, now: Instant) -> Result<OpId, RequestError>
    where
        M: RequestMethod,
        M::Params: HasMeta,
    {
        self.ask::<M>(params, None, now)
    }

    /// [`Session::request`] through the response cache (SEP-2549) for the methods whose
    /// results carry caching hints (the prompt, resource, template and skill lists,
    /// `resources/read`, `skills/get`); any other goes as [`Session::request`]. With
    /// [`CacheMode::Use`] a fresh kept answer completes the operation at once, with no round
    /// trip; `Refresh` asks and keeps the answer; `Bypass` asks and keeps nothing. Off
    /// ([`SessionConfig::response_cache`](crate::SessionConfig::response_cache)), every mode
    /// asks.
    pub fn request_cached<M>(
        &mut self,
        params: M::Params,
        mode: CacheMode,
        now: Instant,
    ) -> Result<OpId, RequestError>
    where
        M: RequestMethod,
        M::Params: HasMeta,
    {
        self.ask::<M>(params, Some(mode), now)
    }

    /// A caller's request: held until the session is ready, else sent now.
    fn ask<M>(
        &mut self,
        params: M::Params,
        mode: Option<CacheMode>,
        now: Instant,
    ) -> Result<OpId, RequestError>
    where
        M: RequestMethod,
        M::Params: HasMeta,
    {
        if !self.is_ready() {
            let again = Again::new(move |s, op, now| s.ask_as::<M>(op, params, mode, now));
            return self.hold(Ask::Request(again), self.config.request_timeout, now);
        }
        let op = self.allocate_op();
        self.ask_as::<M>(op, params, mode, now)?;
        Ok(op)
    }

    /// Sends a caller's request as operation `op`, through the response cache in `mode`
    /// (when the cache is on), keeping a copy of its params to ask it again on the next
    /// connection ([`Interrupted::Reissue`]).
    fn ask_as<M>(
        &mut self,
        op: OpId,
        mut params: M::Params,
        mode: Option<CacheMode>,
        now: Instant,
    ) -> Result<(), RequestError>
    where
        M: RequestMethod,
        M::Params: HasMeta,
    {
        // Made only where the request goes out (not for an answer the cache serves).
        let again = |params: &M::Params| {
            let params = params.clone();
            Again::new(move |s, op, now| s.ask_as::<M>(op, params, mode, now))
        };
        let Some(mode) = mode.filter(|_| self.config.response_cache) else {
            let again = again(&params);
            return self.request_as::<M>(params, now, PendingKind::Request { op, again });
        };
        self.check_request::<M>(&mut params)?;
        match self.responses.lookup::<M>(&params, mode, now) {
            Ok(raw) => {
                self.events.push_back(Event::Completed {
                    op,
                    result: Ok(raw),
                });
                Ok(())
            }
            Err(None) => {
                let again = again(&params);
                self.request_as::<M>(params, now, PendingKind::Request { op, again })
            }
            Err(Some(cache)) => {
                let kind = PendingKind::Cached {
                    op,
                    cache: Box::new(cache),
                    again: again(&params),
                };
                self.request_as::<M>(params, now, kind)
            }
        }
    }
}

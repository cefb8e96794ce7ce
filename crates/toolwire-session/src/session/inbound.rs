//! What arrives, routed to what waits for it: bytes decoded (`handle_inbound`), each answer
//! completing its pending request (`complete`), requests that got no answer
//! (`handle_undelivered`) or none in time (`expire`), progress and notifications.

use super::*;

impl Session {
    pub(super) fn expire(&mut self, id: &RequestId, p: Pending, now: Instant) {
        match p.kind {
            PendingKind::Probe if self.config.mode == ProtocolMode::Auto => {
                self.probe_timed_out(id, p, now)
            }
            PendingKind::Probe => self.fail(SessionError::Timeout {
                method: "server/discover",
            }),
            PendingKind::LateProbe { .. } => self.late_probe_expired(),
            PendingKind::Initialize => self.fail(SessionError::Timeout {
                method: "initialize",
            }),
            PendingKind::Cached { op, cache, .. } => {
                self.refetch_failed(op, &cache, RequestError::Timeout(p.timeout))
            }
            PendingKind::Request { op, .. } | PendingKind::ToolCall { op, .. } => {
                self.events.push_back(Event::Completed {
                    op,
                    result: Err(RequestError::Timeout(p.timeout)),
                })
            }
            PendingKind::Listen => self.listen_dropped(id, None, now),
            PendingKind::Subscription { op, uri, subscribe } => self.subscription_answered(
                op,
                uri,
                subscribe,
                Err(RequestError::Timeout(p.timeout)),
            ),
            PendingKind::ListPage { op, clock, .. } => {
                self.walk_failed(op, clock, RequestError::Timeout(p.timeout), now)
            }
            PendingKind::LogLevel { op, level } => {
                self.level_answered(op, level, Err(RequestError::Timeout(p.timeout)), now)
            }
            PendingKind::KeepAlive => self.ping_answered(Err(RequestError::Timeout(p.timeout))),
        }
    }

    /// Feeds bytes received from the transport (one message or a batch).
    pub fn handle_inbound(&mut self, bytes: &[u8], now: Instant) {
        self.handle_inbound_on(bytes, None, now);
    }

    /// [`Session::handle_inbound`] for bytes that came on the response stream of request
    /// `related` (the transport's [`Inbound::related`](toolwire_wire::Inbound::related)): a
    /// server request among them is reported with the operation that request belongs to
    /// ([`Event::ServerRequest`]), so its answer can come from whoever made that call.
    pub fn handle_inbound_on(&mut self, bytes: &[u8], related: Option<&RequestId>, now: Instant) {
        self.arrived_on = related.and_then(|id| self.pending.op_of(id));
        self.handle_bytes(bytes, now);
        self.arrived_on = None;
    }

    fn handle_bytes(&mut self, bytes: &[u8], now: Instant) {
        self.upkeep.traffic(now);
        match Frame::decode(bytes) {
            Ok(Frame::Single(message)) => self.handle_message(message, now),
            Ok(Frame::Batch(items)) => {
                for item in items {
                    match item {
                        Ok(message) => self.handle_message(message, now),
                        Err(e) => self.events.push_back(Event::Malformed(e)),
                    }
                }
            }
            Err(e) => self.malformed(bytes, e, now),
        }
    }

    /// Bytes that do not decode: when they still name a pending request's id (an answer with
    /// invalid UTF-8 inside, say), that request fails now with the decode error as its cause
    /// rather than waiting out its deadline; otherwise they are reported as they are.
    fn malformed(&mut self, bytes: &[u8], error: toolwire_types::DecodeError, now: Instant) {
        match Message::answered_id(bytes).filter(|id| self.pending.contains(id)) {
            Some(id) => {
                tracing::warn!(%id, %error, "an answer that cannot be decoded: its request fails");
                self.handle_undelivered(
                    RequestFailure {
                        id,
                        status: None,
                        body: Bytes::new(),
                        cause: Arc::new(error),
                        session_gone: false,
                    },
                    now,
                );
            }
            None => self.events.push_back(Event::Malformed(error)),
        }
    }

    /// Tells the session that the request `id` got no JSON-RPC answer through the transport.
    ///
    /// An HTTP error body that holds a JSON-RPC error (with this id or none) is that request's
    /// answer. Otherwise, during the `server/discover` probe in [`ProtocolMode::Auto`], a 400,
    /// 404 or 405 marks a legacy server and the session falls back to `initialize`; any other
    /// failure of a negotiation request fails negotiation (401, 403, 5xx and broken connections
    /// say nothing about the era). A failed operation completes with
    /// [`RequestError::Undelivered`]. An unknown id is ignored.
    ///
    /// A request that found the legacy session gone ([`RequestFailure::session_gone`]) stays
    /// pending, as never read: the session says [`Event::SessionGone`] (once), and the caller
    /// opens a new one ([`Session::successor`]) and sends again what [`Session::interrupt`]
    /// hands back.
    pub fn handle_undelivered(&mut self, failure: RequestFailure, now: Instant) {
        let id = &failure.id;
        if failure.session_gone && self.pending.contains(id) {
            tracing::debug!(%id, "the server no longer knows the session");
            self.gone.push(id.clone());
            if self.gone.len() == 1 {
                self.events.push_back(Event::SessionGone);
            }
            return;
        }
        let Some(pending) = self.pending.remove(id) else {
            tracing::debug!(%id, "transport failure for no pending request; ignored");
            return;
        };
        if self.negotiation.is_unconfirmed() && matches!(failure.status, Some(400 | 404 | 405)) {
            if matches!(pending.kind, PendingKind::Initialize) {
                // `initialize` at a prior legacy version, refused as a modern server would.
                self.negotiation.restart();
                return self.send_probe(ProtocolVersion::LATEST, false, now);
            }
            self.prior_refused(now);
        }
        if let Ok(Message::Response(response)) = Message::decode(&failure.body)
            && response.id.as_ref().is_none_or(|r| r == id)
            && let Err(error) = response.payload
        {
            return self.complete(id.clone(), pending, Err(error), now);
        }
        let status = failure.status;
        match pending.kind {
            PendingKind::Probe
                if self.config.mode == ProtocolMode::Auto
                    && matches!(status, Some(400 | 404 | 405)) =>
            {
                tracing::debug!(
                    status,
                    "server/discover refused over HTTP; falling back to initialize"
                );
                self.negotiation.restart();
                self.send_initialize(ProtocolVersion::LATEST_LEGACY, now);
            }
            PendingKind::LateProbe { .. } => self.late_probe_expired(),
            PendingKind::Probe | PendingKind::Initialize => {
                let method = if matches!(pending.kind, PendingKind::Probe) {
                    "server/discover"
                } else {
                    "initialize"
                };
                self.fail(SessionError::Unreachable { method, failure });
            }
            PendingKind::Cached { op, cache, .. } => {
                self.refetch_failed(op, &cache, RequestError::Undelivered(failure))
            }
            PendingKind::Request { op, .. } | PendingKind::ToolCall { op, .. } => {
                self.events.push_back(Event::Completed {
                    op,
                    result: Err(RequestError::Undelivered(failure)),
                })
            }
            PendingKind::Listen => self.listen_dropped(&failure.id, None, now),
            PendingKind::Subscription { op, uri, subscribe } => self.subscription_answered(
                op,
                uri,
                subscribe,
                Err(RequestError::Undelivered(failure)),
            ),
            PendingKind::ListPage { op, clock, .. } => {
                self.walk_failed(op, clock, RequestError::Undelivered(failure), now)
            }
            PendingKind::LogLevel { op, level } => {
                self.level_answered(op, level, Err(RequestError::Undelivered(failure)), now)
            }
            PendingKind::KeepAlive => self.ping_answered(Err(RequestError::Undelivered(failure))),
        }
    }

    /// A cached request got no answer (no JSON-RPC answer, or none in time): with
    /// [`SessionConfig::serve_stale_on_error`] and [`CacheMode::Use`], the answer kept for it,
    /// even stale, stands in; else the failure.
    fn refetch_failed(&mut self, op: OpId, cache: &responses::Pending, error: RequestError) {
        let stale = (self.config.serve_stale_on_error && cache.stale_ok)
            .then(|| self.responses.stale(&cache.key))
            .flatten();
        let result = match stale {
            Some(raw) => {
                tracing::warn!(error = %error, "serving a kept answer past its freshness: asking again failed");
                Ok(raw)
            }
            None => Err(error),
        };
        self.events.push_back(Event::Completed { op, result });
    }

    /// A `tools/list` walk got no answer: as [`Session::refetch_failed`], the last listing
    /// may stand in for a caller's walk in [`CacheMode::Use`].
    fn walk_failed(&mut self, op: OpId, clock: WalkClock, error: RequestError, now: Instant) {
        let stale =
            (self.config.serve_stale_on_error && clock.stale_ok && !self.refresh.is_current(op))
                .then(|| {
                    let generation = self.cache.snapshot().generation();
                    self.tools_fresh.stale(generation)
                })
                .flatten();
        match stale {
            Some(outcome) => {
                tracing::warn!(error = %error, "serving the last tool listing past its freshness: asking again failed");
                self.finish_listing(op, Ok(outcome), now);
            }
            None => self.finish_listing(op, Err(error), now),
        }
    }

    fn handle_message(&mut self, message: Message, now: Instant) {
        match message {
            Message::Response(response) => {
                let Some(id) = response.id else {
                    tracing::debug!(error = ?response.payload.err(), "error response without an id");
                    return;
                };
                match self.pending.remove(&id) {
                    Some(pending) => self.complete(id, pending, response.payload, now),
                    None => {
                        tracing::debug!(%id, "response to no pending request (late or unknown); dropped")
                    }
                }
            }
            Message::Request(request) => self.server_request(request),
            Message::Notification(notification)
                if notification.method == "notifications/progress" =>
            {
                self.progress_notified(notification, now);
            }
            Message::Notification(notification) => {
                // Listen-stream notifications are told apart by their subscription id: one
                // of a stream this session closed (or never opened) is not for the caller.
                if self.foreign_subscription(&notification) {
                    tracing::debug!(method = %notification.method, "notification of another subscription; ignored");
                    return;
                }
                match notification.method.as_str() {
                    "notifications/tools/list_changed" => self.list_changed(now),
                    "notifications/resources/updated" => {
                        let updated: Result<toolwire_types::ResourceUriParams, _> =
                            notification.params();
                        let uri = updated.as_ref().ok().map(|p| p.uri.as_str());
                        self.responses.notified(&notification.method, Some(uri));
                    }
                    "notifications/subscriptions/acknowledged" => {
                        self.acknowledged(&notification, now)
                    }
                    "notifications/message" if let Some(op) = self.arrived_on_call() => {
                        return self.events.push_back(Event::CallLog { op, notification });
                    }
                    // A list change evicts the answers its methods' cache policies name.
                    method => self.responses.notified(method, None),
                }
                self.events.push_back(Event::Notification(notification));
            }
        }
    }

    /// The `tools/call` whose response stream the bytes being handled came on, if they did.
    fn arrived_on_call(&self) -> Option<OpId> {
        let op = self.arrived_on?;
        self.pending.is_tool_call(op).then_some(op)
    }

    /// Routes a progress notification to its operation and pushes the deadline forward.
    fn progress_notified(&mut self, notification: toolwire_types::Notification, now: Instant) {
        let params: toolwire_types::ProgressParams = match notification.params() {
            Ok(p) => p,
            Err(e) => return self.events.push_back(Event::Malformed(e)),
        };
        match self.pending.progressed(&params.progress_token, now) {
            Some(Some(op)) => self.events.push_back(Event::Progress { op, params }),
            Some(None) => {}
            None => self.events.push_back(Event::Notification(notification)),
        }
    }

    fn complete(
        &mut self,
        id: RequestId,
        pending: Pending,
        payload: Result<Box<RawValue>, ErrorObject>,
        now: Instant,
    ) {
        if self.negotiation.is_unconfirmed() {
            match &payload {
                Ok(_) => self.negotiation.confirmed(),
                Err(e) if e.code == toolwire_types::error::code::UNSUPPORTED_PROTOCOL_VERSION => {
                    self.prior_refused(now)
                }
                Err(_) => {}
            }
        }
        match pending.kind {
            PendingKind::Probe => self.probe_answered(payload, now),
            PendingKind::LateProbe { version } => self.late_probe_answered(version, payload, now),
            PendingKind::Initialize => self.initialize_answered(payload, now),
            PendingKind::Request { op, .. } => self.events.push_back(Event::Completed {
                op,
                result: payload.map_err(|error| RequestError::Server { error }),
            }),
            PendingKind::Cached { op, cache, .. } => {
                match &payload {
                    Ok(raw) => self.responses.answered(*cache, raw, now),
                    Err(e) if e.code == toolwire_types::error::code::INVALID_PARAMS => {
                        self.responses.cursor_refused(&cache)
                    }
                    Err(_) => {}
                }
                self.events.push_back(Event::Completed {
                    op,
                    result: payload.map_err(|error| RequestError::Server { error }),
                })
            }
            PendingKind::ToolCall {
                op,
                call,
                reissue,
                settle,
                ..
            } => match payload {
                Err(error)
                    if reissue
                        && matches!(
                            error.code,
                            toolwire_types::error::code::HEADER_MISMATCH
                                | toolwire_types::error::code::HEADER_MISMATCH_PRE_RENAME
                        ) =>
                {
                    self.relist_and_retry(op, call, error, pending.trace, now);
                }
                Err(error) => self.events.push_back(Event::Completed {
                    op,
                    result: Err(RequestError::Server { error }),
                }),
                Ok(raw) if settle => self.settle(op, raw, now),
                Ok(raw) => self.events.push_back(Event::Completed {
                    op,
                    result: Ok(raw),
                }),
            },
            PendingKind::Listen => {
                match &payload {
                    Err(e) => tracing::debug!(code = e.code, "the listen stream was refused"),
                    Ok(_) => tracing::debug!("the server ended the listen stream"),
                }
                self.listen_dropped(&id, payload.as_ref().err(), now);
            }
            PendingKind::Subscription { op, uri, subscribe } => self.subscription_answered(
                op,
                uri,
                subscribe,
                payload.map_err(|error| RequestError::Server { error }),
            ),
            PendingKind::ListPage {
                op,
                listing,
                pages,
                cursors,
                clock,
            } => {
                // The walk's later pages carry its first page's trace context.
                self.traced(pending.trace, |s| {
                    s.page_answered(op, listing, (pages, cursors, clock), payload, now);
                });
            }
            PendingKind::LogLevel { op, level } => self.level_answered(
                op,
                level,
                payload.map_err(|error| RequestError::Server { error }),
                now,
            ),
            PendingKind::KeepAlive => self.ping_answered(
                payload
                    .map(drop)
                    .map_err(|error| RequestError::Server { error }),
            ),
        }
    }
}

//! SEP-2549 response caching for the results other than `tools/list` that carry hints: the
//! lists of prompts, resources, resource templates and skills and directory reads (each page
//! on its own, its cursor in the key), `resources/read` and `skills/get`. Kept while fresh (`now < received +
//! ttlMs`; an absent or negative `ttlMs` is 0, so nothing is kept), keyed by method and
//! params without `_meta`; evicted by the notifications that say the data changed and by a
//! refused cursor; an answer to a request asked before an eviction is not kept. A request
//! that carries `inputResponses` or `requestState` (an MRTR retry), and an `input_required`
//! answer, are never cached. An answer not marked `cacheScope: public` belongs to the
//! authorization context that fetched it: a change of identity drops it.

use std::collections::HashMap;
use std::time::Duration;

use web_time::Instant;

use serde::Serialize;
use serde_json::value::RawValue;
use toolwire_types::{CacheHints, CachePolicy, Cacheable, RequestMethod, ResultType};

use crate::CacheMode;

/// What a cached request needs to store its answer.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) key: String,
    method: &'static str,
    policy: CachePolicy,
    uri: Option<String>,
    epoch: u64,
    store: bool,
    /// Asked in [`CacheMode::Use`]: a kept answer, even stale, may stand in if this fails.
    pub(super) stale_ok: bool,
}

struct Entry {
    method: &'static str,
    policy: CachePolicy,
    /// `cacheScope: public`: it survives a change of identity.
    public: bool,
    uri: Option<String>,
    until: Instant,
    raw: Box<RawValue>,
}

/// The kept answers.
#[derive(Default)]
pub(super) struct ResponseCache {
    entries: HashMap<String, Entry>,
    /// Evictions so far: an answer to a request asked before one is not kept.
    epoch: u64,
}

/// A request's key (method and params without `_meta`), the URI it names, and whether it
/// may be cached at all (`None`: an MRTR retry, or params that do not serialise).
fn key_of<P: Serialize>(method: &str, params: &P) -> Option<(String, Option<String>)> {
    let mut value = serde_json::to_value(params).ok()?;
    if let Some(object) = value.as_object_mut() {
        if object.contains_key("inputResponses") || object.contains_key("requestState") {
            return None;
        }
        object.remove("_meta");
    }
    let uri = value.get("uri").and_then(|u| u.as_str()).map(str::to_owned);
    Some((format!("{method} {value}"), uri))
}

/// `raw` with its `ttlMs` set to `left` (whole milliseconds, rounded down); as it is when it
/// is not an object.
fn with_ttl(raw: &RawValue, left: Duration) -> Box<RawValue> {
    let Ok(serde_json::Value::Object(mut object)) = serde_json::from_str(raw.get()) else {
        return raw.to_owned();
    };
    let millis = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
    object.insert("ttlMs".to_owned(), millis.into());
    serde_json::value::to_raw_value(&object).unwrap_or_else(|_| raw.to_owned())
}

impl ResponseCache {
    /// For a request of method `M` with `params` in `mode`: the kept answer if it may serve
    /// (`Ok`), else what the request needs to store its answer (`Err`, `None` if it must not
    /// be cached: the method's [`RequestMethod::CACHE`] says whether it may be).
    pub(super) fn lookup<M: RequestMethod>(
        &self,
        params: &M::Params,
        mode: CacheMode,
        now: Instant,
    ) -> Result<Box<RawValue>, Option<Pending>> {
        let Some(policy) = M::CACHE else {
            return Err(None);
        };
        let method = M::NAME;
        let Some((key, uri)) = key_of(method, params) else {
            return Err(None);
        };
        if mode == CacheMode::Use
            && let Some(entry) = self.entries.get(&key)
            && now < entry.until
        {
            // What is left of its freshness, not what it had when it arrived: whoever keeps
            // it next (a gateway's client) must not keep it longer than the server allowed.
            return Ok(with_ttl(
                &entry.raw,
                entry.until.saturating_duration_since(now),
            ));
        }
        Err(Some(Pending {
            key,
            method,
            policy,
            uri,
            epoch: self.epoch,
            store: mode != CacheMode::Bypass,
            stale_ok: mode == CacheMode::Use,
        }))
    }

    /// An answer arrived at `now` for `pending`: kept while its `ttlMs` says, unless an
    /// eviction came after it was asked, it is an `input_required` round, or it has no
    /// freshness at all.
    pub(super) fn answered(&mut self, pending: Pending, raw: &RawValue, now: Instant) {
        if !pending.store || pending.epoch != self.epoch {
            return;
        }
        let Some(hints) = CacheHints::of(raw) else {
            return;
        };
        if hints.result_type == Some(ResultType::InputRequired) {
            return;
        }
        let ttl = hints.ttl_ms();
        if ttl == 0 {
            // Stale at once: whatever was kept under this key is older still.
            self.entries.remove(&pending.key);
            return;
        }
        self.entries.insert(
            pending.key,
            Entry {
                method: pending.method,
                policy: pending.policy,
                public: hints.is_public(),
                uri: pending.uri,
                until: crate::later(now, Duration::from_millis(ttl)),
                raw: raw.to_owned(),
            },
        );
    }

    /// The answer kept under `key`, fresh or not (for a re-fetch that failed; evicted
    /// answers are gone).
    pub(super) fn stale(&self, key: &str) -> Option<Box<RawValue>> {
        self.entries
            .get(key)
            .map(|e| with_ttl(&e.raw, Duration::ZERO))
    }

    /// The client now speaks as another identity (a new bearer token): the answers that were
    /// not public go, and no answer to a request asked before now is kept.
    pub(super) fn identity_changed(&mut self) {
        self.epoch += 1;
        self.entries.retain(|_, e| e.public);
    }

    /// A notification arrived: the kept answers it makes stale go (each method's
    /// [`CachePolicy`]). `updated` is the URI of a `notifications/resources/updated`, parsed by
    /// the caller: `Some(None)` for one that names none it can read.
    pub(super) fn notified(&mut self, method: &str, updated: Option<Option<&str>>) {
        match updated {
            Some(Some(uri)) => self.evict(|e| e.uri.as_deref() == Some(uri)),
            // Which resource is unknown: none of the answers kept by URI can be trusted.
            Some(None) => self.evict(|e| e.policy.by_uri),
            None if CachePolicy::evicts(method) => {
                self.evict(|e| e.policy.evicted_by == Some(method));
            }
            None => {}
        }
    }

    /// Evicts the kept answers `stale` picks; no answer to a request asked before now is kept.
    fn evict(&mut self, stale: impl Fn(&Entry) -> bool) {
        self.epoch += 1;
        self.entries.retain(|_, e| !stale(e));
    }

    /// A request of `pending` was refused with `-32602`: if it followed a cursor, every page
    /// of that list goes (the caching spec: drop all pages and start over).
    pub(super) fn cursor_refused(&mut self, pending: &Pending) {
        if pending.key.contains("\"cursor\"") {
            let method = pending.method;
            self.evict(|e| e.method == method);
        }
    }
}

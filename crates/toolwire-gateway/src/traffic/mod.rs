//! Traffic control per upstream, from the `traffic` member of the file's `gateway` section:
//! a cap on its calls in flight with a bounded, timed queue ([`cap`]), and a circuit breaker
//! that fails its calls at once while it is failing ([`breaker`]). Every refusal says which
//! upstream and why and is counted in `/metrics`. The upstream's tools stay listed, unless
//! `hideWhileOpen` holds them out of `tools/list` while its breaker is open (clients hear
//! `list_changed` when it opens, and again when its delay ends and the tools come back).
//!
//! Rate limits ([`bucket`]) come first: calls a second to the upstream from all callers, and
//! from each caller (by principal) on its own, so that one noisy agent runs out of its own
//! budget, not everyone's; a call past either is refused with HTTP 429 and `Retry-After`.
//! Daily quotas ([`quota`]) count each caller's calls a day (UTC), refused past the quota
//! until midnight UTC. A tool may have its own rates and quota ([`tool`]), beside its
//! upstream's.
//!
//! ```json
//! "gateway": {"traffic": {
//!   "*":     {"maxConcurrent": 32, "queue": 64, "queueTimeoutSecs": 10, "callerCallsPerSecond": 5},
//!   "files": {"maxConcurrent": 4, "breakerFailures": 5, "breakerOpenSecs": 30, "callsPerSecond": 50,
//!             "callerCallsPerDay": 1000, "tools": {"write_file": {"callerCallsPerDay": 100}}}
//! }}
//! ```
//!
//! An entry's own settings replace those of `"*"` one by one.

mod breaker;
mod bucket;
mod cap;
mod quota;
mod tool;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::broadcast;
use toolwire_server::{Change, RpcError};
use toolwire_types::error::code;

use breaker::{Admitted, Breaker, Ended, Refused};
use bucket::Buckets;
use cap::{Cap, Full};
use quota::DayQuota;
use tool::ToolLane;
pub use tool::ToolTrafficConfig;

/// One upstream's traffic settings (or every upstream's, under `"*"`).
// tidy: not an MCP shape
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficConfig {
    /// Calls in flight to the upstream at once; past it, calls wait in its queue. Absent: no
    /// cap.
    #[serde(default)]
    pub max_concurrent: Option<usize>,
    /// Calls that may wait for a slot; past it, a call is refused at once (default 64).
    #[serde(default)]
    pub queue: Option<usize>,
    /// Seconds a call may wait for a slot before it is refused (default 10).
    #[serde(default)]
    pub queue_timeout_secs: Option<f64>,
    /// Consecutive failures (no answer: a timeout, a lost connection, not running) that open
    /// the upstream's circuit breaker. Absent: no breaker.
    #[serde(default)]
    pub breaker_failures: Option<u32>,
    /// Seconds an open breaker fails calls at once before it lets one trial call through
    /// (default 30).
    #[serde(default)]
    pub breaker_open_secs: Option<f64>,
    /// Calls a second to the upstream from every caller together (a token bucket); past it,
    /// a call is refused with 429 and `Retry-After`. Absent: no limit.
    #[serde(default)]
    pub calls_per_second: Option<f64>,
    /// Calls at once above `callsPerSecond` (default: one second's worth, at least 1).
    #[serde(default)]
    pub burst: Option<u32>,
    /// Calls a second to the upstream from each caller (its principal) on its own.
    #[serde(default)]
    pub caller_calls_per_second: Option<f64>,
    /// Calls at once above `callerCallsPerSecond` (default: one second's worth, at least 1).
    #[serde(default)]
    pub caller_burst: Option<u32>,
    /// Hold the upstream's tools out of `tools/list` while its breaker is open, so that a
    /// model stops choosing them (default: they stay listed, and calls are refused).
    #[serde(default)]
    pub hide_while_open: Option<bool>,
    /// Calls a day (UTC) to the upstream from each caller; past it, a call is refused with 429
    /// and `Retry-After` until midnight UTC. Absent: no quota.
    #[serde(default)]
    pub caller_calls_per_day: Option<u64>,
    /// Limits of the upstream's tools, each by the upstream's own name for it.
    #[serde(default)]
    pub tools: Option<BTreeMap<String, ToolTrafficConfig>>,
}

impl TrafficConfig {
    /// These settings over `defaults`: each one given here wins.
    fn over(&self, defaults: &Self) -> Self {
        Self {
            max_concurrent: self.max_concurrent.or(defaults.max_concurrent),
            queue: self.queue.or(defaults.queue),
            queue_timeout_secs: self.queue_timeout_secs.or(defaults.queue_timeout_secs),
            breaker_failures: self.breaker_failures.or(defaults.breaker_failures),
            breaker_open_secs: self.breaker_open_secs.or(defaults.breaker_open_secs),
            calls_per_second: self.calls_per_second.or(defaults.calls_per_second),
            burst: self.burst.or(defaults.burst),
            caller_calls_per_second: self
                .caller_calls_per_second
                .or(defaults.caller_calls_per_second),
            caller_burst: self.caller_burst.or(defaults.caller_burst),
            hide_while_open: self.hide_while_open.or(defaults.hide_while_open),
            caller_calls_per_day: self.caller_calls_per_day.or(defaults.caller_calls_per_day),
            tools: self.tools.clone().or_else(|| defaults.tools.clone()),
        }
    }
}

/// The queue's length when none is given.
const DEFAULT_QUEUE: usize = 64;
/// How long a call waits for a slot when no time is given.
const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a breaker stays open when no time is given.
const DEFAULT_OPEN: Duration = Duration::from_secs(30);

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("gateway.traffic.{entry}.{setting}: {why}")]
pub struct TrafficError {
    entry: String,
    setting: &'static str,
    why: &'static str,
}

fn seconds(
    entry: &str,
    setting: &'static str,
    value: Option<f64>,
    default: Duration,
) -> Result<Duration, TrafficError> {
    match value {
        None => Ok(default),
        Some(secs) => Duration::try_from_secs_f64(secs).map_err(|_| TrafficError {
            entry: entry.to_owned(),
            setting,
            why: "expected a number of seconds, 0 or more",
        }),
    }
}

/// One upstream's controls.
#[derive(Debug)]
struct Lane {
    cap: Option<Cap>,
    breaker: Option<Mutex<Breaker>>,
    /// Every caller's calls together.
    rate: Option<Buckets<()>>,
    /// Each caller's own, by principal.
    caller_rate: Option<Buckets<String>>,
    /// Each caller's calls a day.
    per_day: Option<DayQuota<String>>,
    /// Each limited tool's own, by the upstream's name for it.
    tools: HashMap<String, ToolLane>,
    /// Its tools are not listed while its breaker is open.
    hide: bool,
    /// Where a change of what is listed is said ([`Traffic::tell_changes`]).
    changes: Option<broadcast::Sender<Change>>,
}

/// A rate's buckets, checked: a positive, finite number of calls a second.
fn buckets<K: std::hash::Hash + Eq + Clone>(
    entry: &str,
    setting: &'static str,
    per_second: Option<f64>,
    burst: Option<u32>,
) -> Result<Option<Buckets<K>>, TrafficError> {
    let Some(per_second) = per_second else {
        return Ok(None);
    };
    if !(per_second.is_finite() && per_second > 0.0) {
        return Err(TrafficError {
            entry: entry.to_owned(),
            setting,
            why: "a number of calls a second above 0",
        });
    }
    // One second's worth by default, whole calls, at least one.
    let burst = burst.unwrap_or_else(|| {
        let second = per_second.ceil().clamp(1.0, f64::from(u32::MAX));
        // In range by the clamp.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "clamped to u32's range above"
        )]
        let whole = second as u32;
        whole
    });
    Ok(Some(Buckets::new(per_second, burst)))
}

/// A daily quota, checked: at least one call.
fn per_day<K: std::hash::Hash + Eq + Clone>(
    entry: &str,
    calls: Option<u64>,
) -> Result<Option<DayQuota<K>>, TrafficError> {
    match calls {
        None => Ok(None),
        Some(0) => Err(TrafficError {
            entry: entry.to_owned(),
            setting: "callerCallsPerDay",
            why: "at least 1 call a day",
        }),
        Some(calls) => Ok(Some(DayQuota::new(calls))),
    }
}

impl Lane {
    fn new(
        entry: &str,
        config: &TrafficConfig,
        changes: Option<broadcast::Sender<Change>>,
    ) -> Result<Self, TrafficError> {
        let wait = seconds(
            entry,
            "queueTimeoutSecs",
            config.queue_timeout_secs,
            DEFAULT_QUEUE_TIMEOUT,
        )?;
        let open = seconds(
            entry,
            "breakerOpenSecs",
            config.breaker_open_secs,
            DEFAULT_OPEN,
        )?;
        let refuse = |setting, why| TrafficError {
            entry: entry.to_owned(),
            setting,
            why,
        };
        let cap = match config.max_concurrent {
            Some(0) => return Err(refuse("maxConcurrent", "at least 1")),
            Some(max) => Some(Cap::new(max, config.queue.unwrap_or(DEFAULT_QUEUE), wait)),
            None => None,
        };
        let breaker = match config.breaker_failures {
            Some(0) => return Err(refuse("breakerFailures", "at least 1")),
            Some(failures) => Some(Mutex::new(Breaker::new(failures, open))),
            None => None,
        };
        let rate = buckets(
            entry,
            "callsPerSecond",
            config.calls_per_second,
            config.burst,
        )?;
        let caller_rate = buckets(
            entry,
            "callerCallsPerSecond",
            config.caller_calls_per_second,
            config.caller_burst,
        )?;
        let hide = config.hide_while_open == Some(true) && breaker.is_some();
        let tools = config
            .tools
            .iter()
            .flatten()
            .filter(|(_, limits)| limits.limits())
            .map(|(tool, limits)| Ok((tool.clone(), ToolLane::new(entry, tool, limits)?)))
            .collect::<Result<_, TrafficError>>()?;
        Ok(Self {
            cap,
            breaker,
            rate,
            caller_rate,
            per_day: per_day(entry, config.caller_calls_per_day)?,
            tools,
            hide,
            changes: changes.filter(|_| hide),
        })
    }

    /// Its breaker opened until `until`: its hidden tools leave the listing now and come
    /// back when the delay ends (the breaker half-opens, and a call may try it again).
    fn opened(&self, until: Instant) {
        let Some(changes) = &self.changes else {
            return;
        };
        let _ = changes.send(Change::Tools);
        let later = changes.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tokio::time::sleep_until(until.into()).await;
                let _ = later.send(Change::Tools);
            });
        }
    }
}

/// A controlled upstream as `/metrics` shows it: its name, its breaker's state, and its calls
/// in flight and waiting under its cap.
pub(crate) type LaneState = (String, Option<&'static str>, Option<(usize, usize)>);

/// The traffic controls of every upstream, each made when the upstream is first called.
#[derive(Debug, Default)]
pub struct Traffic {
    defaults: TrafficConfig,
    entries: BTreeMap<String, TrafficConfig>,
    lanes: Mutex<HashMap<Arc<str>, Option<Arc<Lane>>>>,
    /// Whether anything is set at all (nothing to look up on a call otherwise).
    configured: bool,
    /// Whether any upstream has a rate limit.
    limits_rates: bool,
    /// Whether any upstream's tools are hidden while its breaker is open.
    hides: bool,
    /// Where a change of what is listed is said.
    changes: Option<broadcast::Sender<Change>>,
}

impl Traffic {
    /// The controls the `traffic` member `config` sets, checked: each entry's (and the
    /// defaults under `"*"`) must be usable.
    pub fn new(config: &BTreeMap<String, TrafficConfig>) -> Result<Self, TrafficError> {
        let defaults = config.get("*").cloned().unwrap_or_default();
        for (entry, settings) in config {
            Lane::new(entry, &settings.over(&defaults), None)?;
        }
        let hides = config.values().any(|c| c.hide_while_open == Some(true));
        let limits_rates = config.values().any(|c| {
            c.calls_per_second.is_some()
                || c.caller_calls_per_second.is_some()
                || c.caller_calls_per_day.is_some()
                || c.tools.iter().flatten().any(|(_, t)| t.limits())
        });
        Ok(Self {
            configured: config.values().any(|c| *c != TrafficConfig::default()),
            limits_rates,
            entries: config
                .iter()
                .filter(|(entry, _)| *entry != "*")
                .map(|(entry, settings)| (entry.clone(), settings.over(&defaults)))
                .collect(),
            defaults,
            lanes: Mutex::default(),
            hides,
            changes: None,
        })
    }

    /// Changes of what is listed (an upstream's tools held out or back) go to `changes`.
    pub(crate) fn tell_changes(&mut self, changes: broadcast::Sender<Change>) {
        self.changes = Some(changes);
    }

    /// Whether any upstream's tools may be held out of listings (`hideWhileOpen`).
    pub(crate) fn hides_any(&self) -> bool {
        self.hides
    }

    /// Whether `server`'s tools are held out of listings now: its breaker is open and its
    /// settings say to hide them.
    pub(crate) fn hidden(&self, server: &str) -> bool {
        if !self.hides {
            return false;
        }
        let lanes = crate::lock(&self.lanes);
        let Some(Some(lane)) = lanes.get(server) else {
            return false;
        };
        lane.hide
            && lane
                .breaker
                .as_ref()
                .is_some_and(|b| crate::lock(b).word(Instant::now()) == "open")
    }

    /// The controls of `server`, if any apply.
    fn lane(&self, server: &Arc<str>) -> Option<Arc<Lane>> {
        let mut lanes = crate::lock(&self.lanes);
        lanes
            .entry(server.clone())
            .or_insert_with(|| {
                let settings = self.entries.get(&**server).unwrap_or(&self.defaults);
                // Checked in `new`: a lane of checked settings is made.
                Lane::new(server, settings, self.changes.clone())
                    .ok()
                    .map(Arc::new)
            })
            .clone()
    }

    /// Lets `caller`'s call to `server`'s `tool` (the upstream's own name for it) through, or
    /// refuses it with an error that says why: past a rate limit (the caller's own, or the
    /// upstream's; the tool's, or the upstream's) or a daily quota, its breaker is open, or
    /// its queue is full or was waited in too long. A refused call counts for no quota.
    pub(crate) async fn admit(
        &self,
        server: &Arc<str>,
        tool: &str,
        caller: &str,
    ) -> Result<Pass, RpcError> {
        // Nothing configured: no table to look in on every call.
        if !self.configured {
            return Ok(Pass::default());
        }
        let Some(lane) = self.lane(server) else {
            return Ok(Pass::default());
        };
        // The caller's own budget first: a caller past it takes nothing from the others'.
        let now = Instant::now();
        let tool_lane = lane.tools.get(tool);
        if let Some(rate) = tool_lane.and_then(|t| t.caller_rate.as_ref())
            && let Err(wait) = rate.take(caller, now)
        {
            let whose = format!("your calls to its tool `{tool}`");
            return Err(rate_limited(server, &whose, wait));
        }
        if let Some(rate) = &lane.caller_rate
            && let Err(wait) = rate.take(caller, now)
        {
            return Err(rate_limited(server, "your calls to it", wait));
        }
        if let Some(rate) = tool_lane.and_then(|t| t.rate.as_ref())
            && let Err(wait) = rate.take(&(), now)
        {
            let whose = format!("calls to its tool `{tool}`");
            return Err(rate_limited(server, &whose, wait));
        }
        if let Some(rate) = &lane.rate
            && let Err(wait) = rate.take(&(), now)
        {
            return Err(rate_limited(server, "calls to it", wait));
        }
        // The quotas last of the limits, and given back when a later check refuses the call.
        let quotas = Quotas::take(&lane, tool_lane, server, tool, caller)?;
        let admitted = match &lane.breaker {
            Some(breaker) => {
                let mut breaker = crate::lock(breaker);
                match breaker.admit(now) {
                    Ok(admitted) => Some(admitted),
                    Err(refused) => {
                        quotas.give_back();
                        return Err(breaker_open(server, breaker.threshold(), refused));
                    }
                }
            }
            None => None,
        };
        // From here the pass is held: a refusal by the cap gives a trial back.
        let mut pass = Pass {
            lane: Some(lane.clone()),
            admitted,
            slot: None,
            ended: false,
        };
        if let Some(cap) = &lane.cap {
            match cap.enter().await {
                Ok(slot) => pass.slot = Some(slot),
                Err(full) => {
                    quotas.give_back();
                    return Err(no_slot(server, cap, full));
                }
            }
        }
        Ok(pass)
    }

    /// Whether any upstream has a rate limit (its refusals are HTTP 429s, so an SSE answer to
    /// a call waits for its first event).
    pub(crate) fn limits_rates(&self) -> bool {
        self.limits_rates
    }

    /// Each controlled upstream's breaker state (`closed`, `open`, `half-open`), calls in
    /// flight under its cap, and calls waiting, for `/metrics`.
    pub(crate) fn states(&self) -> Vec<LaneState> {
        let now = Instant::now();
        crate::lock(&self.lanes)
            .iter()
            .filter_map(|(server, lane)| {
                let lane = lane.as_ref()?;
                Some((
                    server.to_string(),
                    lane.breaker.as_ref().map(|b| crate::lock(b).word(now)),
                    lane.cap.as_ref().map(|c| (c.in_flight(), c.waiting())),
                ))
            })
            .collect()
    }
}

/// `wait` in whole seconds, rounded up and at least one: a client told to wait 59 of 59.9 s
/// would be early.
fn whole_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

fn breaker_open(server: &str, threshold: u32, refused: Refused) -> RpcError {
    let (message, retry) = match refused {
        Refused::Open(left) => {
            let secs = whole_seconds(left);
            (
                format!(
                    "upstream `{server}` is failing: its circuit breaker opened after {threshold} consecutive failures, and calls to it are refused for another {secs} s"
                ),
                secs,
            )
        }
        Refused::Trying => (
            format!(
                "upstream `{server}` is failing: its circuit breaker is letting one trial call through, and refuses the others until it answers"
            ),
            1,
        ),
    };
    RpcError::new(code::INTERNAL_ERROR, message).with_data(serde_json::json!({
        "upstream": server, "reason": "circuit_open", "retryAfterSecs": retry
    }))
}

/// The daily quotas one call took (the tool's and the upstream's), to give back if it is
/// refused after all.
struct Quotas<'a> {
    taken: [Option<&'a DayQuota<String>>; 2],
    caller: &'a str,
    day: u64,
}

impl<'a> Quotas<'a> {
    /// Takes the call from the tool's quota and the upstream's, or refuses it naming the one
    /// that is used up (nothing is kept taken then).
    fn take(
        lane: &'a Lane,
        tool_lane: Option<&'a ToolLane>,
        server: &str,
        tool: &str,
        caller: &'a str,
    ) -> Result<Self, RpcError> {
        let each = [
            (tool_lane.and_then(|t| t.per_day.as_ref()), Some(tool)),
            (lane.per_day.as_ref(), None),
        ];
        let mut quotas = Self {
            taken: [None, None],
            caller,
            // The clock is read only where a quota is kept.
            day: if each.iter().any(|(q, _)| q.is_some()) {
                quota::unix_now()
            } else {
                0
            },
        };
        for (slot, (quota, of_tool)) in each.into_iter().enumerate() {
            let Some(quota) = quota else { continue };
            if let Err(wait) = quota.take(caller, quotas.day) {
                quotas.give_back();
                return Err(quota_used(server, of_tool, quota.limit(), wait));
            }
            quotas.taken[slot] = Some(quota);
        }
        Ok(quotas)
    }

    fn give_back(&self) {
        for quota in self.taken.iter().flatten() {
            quota.give_back(self.caller, self.day);
        }
    }
}

/// A call past a daily quota (of `tool`, else of the upstream), refused until it renews.
fn quota_used(server: &str, tool: Option<&str>, limit: u64, wait: Duration) -> RpcError {
    let secs = whole_seconds(wait);
    let to = tool.map_or_else(|| "it".to_owned(), |tool| format!("its tool `{tool}`"));
    let message = format!(
        "upstream `{server}`: your {limit} calls a day to {to} are used up; the quota renews at 00:00 UTC, in {} h {} min",
        secs / 3600,
        secs % 3600 / 60
    );
    RpcError::new(code::INTERNAL_ERROR, message.clone())
        .with_data(serde_json::json!({
            "upstream": server, "reason": "quota_used", "retryAfterSecs": secs
        }))
        .with_challenge(toolwire_server::Denial::too_many_requests(secs, message))
}

/// A call past a rate limit (`what`: whose calls), refused until `wait` has passed: 429 with
/// `Retry-After` over HTTP, the JSON-RPC error with `retryAfterSecs` elsewhere.
fn rate_limited(server: &str, what: &str, wait: Duration) -> RpcError {
    let secs = whole_seconds(wait);
    let message =
        format!("upstream `{server}`: {what} are past their rate limit; try again in {secs} s");
    RpcError::new(code::INTERNAL_ERROR, message.clone())
        .with_data(serde_json::json!({
            "upstream": server, "reason": "rate_limited", "retryAfterSecs": secs
        }))
        .with_challenge(toolwire_server::Denial::too_many_requests(secs, message))
}

fn no_slot(server: &str, cap: &Cap, full: Full) -> RpcError {
    let message = match full {
        Full::QueueFull => format!(
            "upstream `{server}` is busy: {} calls in flight (its limit) and {} waiting (its queue's limit); try again shortly",
            cap.max(),
            cap.queue()
        ),
        Full::Waited(waited) => format!(
            "upstream `{server}` is busy: no slot among its {} calls in flight within {} s; try again shortly",
            cap.max(),
            waited.as_secs_f64()
        ),
    };
    let reason = match full {
        Full::QueueFull => "queue_full",
        Full::Waited(_) => "queue_timeout",
    };
    RpcError::new(code::INTERNAL_ERROR, message)
        .with_data(serde_json::json!({"upstream": server, "reason": reason}))
}

/// A call let through: holds its slot under the cap, and tells the breaker how it ended
/// ([`Pass::ended`]; dropped without it, the call was abandoned).
#[derive(Debug, Default)]
pub(crate) struct Pass {
    lane: Option<Arc<Lane>>,
    admitted: Option<Admitted>,
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ended: bool,
}

impl Pass {
    /// The call ended: the upstream answered, or (`failed`) it did not.
    pub(crate) fn ended(mut self, failed: bool) {
        self.record(if failed {
            Ended::Failed
        } else {
            Ended::Answered
        });
    }

    fn record(&mut self, ended: Ended) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        if let (Some(lane), Some(admitted)) = (&self.lane, self.admitted)
            && let Some(breaker) = &lane.breaker
        {
            let opened = crate::lock(breaker).record(admitted, ended, Instant::now());
            if let Some(until) = opened {
                lane.opened(until);
            }
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.record(Ended::Abandoned);
    }
}

#[cfg(test)]
mod tests;

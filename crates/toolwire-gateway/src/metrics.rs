//! What `/metrics` shows, in Prometheus' text format: calls by upstream, tool and outcome,
//! their latency, and each upstream's state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// How a call ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    /// A result.
    Ok,
    /// A result with `isError`: the tool failed.
    ToolError,
    /// No result: a JSON-RPC error, a timeout, a broken connection.
    Error,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Error => "error",
        }
    }
}

/// The side a call that got no result failed on (as a proxy tags its errors): the upstream
/// (it did not answer, answered with an error, or is not running), the downstream caller (its
/// request: arguments the tool refuses, a tool it may not call), or the gateway itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Upstream,
    Downstream,
    Internal,
}

impl Side {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Upstream => "upstream",
            Self::Downstream => "downstream",
            Self::Internal => "internal",
        }
    }

    /// The side `error` (a call's) failed on.
    pub(crate) fn of(error: &toolwire_host::HostError) -> Self {
        use toolwire_host::HostError;
        match error {
            HostError::NotRunning { .. } | HostError::Connect(_) => Self::Upstream,
            HostError::UnknownTool(..)
            | HostError::UnknownServer(_)
            | HostError::Quarantined { .. } => Self::Downstream,
            HostError::Call { error, .. } => match error {
                toolwire::Error::Input(_) | toolwire::Error::Usage(_) => Self::Downstream,
                toolwire::Error::Server(e)
                    if e.code == toolwire_types::error::code::INVALID_PARAMS =>
                {
                    Self::Downstream
                }
                toolwire::Error::Closed => Self::Internal,
                _ => Self::Upstream,
            },
            _ => Self::Internal,
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Call {
    upstream: String,
    tool: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Tool {
    upstream: String,
    tool: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Repaired {
    kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Refusal {
    upstream: String,
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Failed {
    upstream: String,
    side: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Ended {
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Upstream {
    upstream: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Requested {
    method: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Build {
    version: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct State {
    upstream: String,
    state: String,
}

fn latency_histogram() -> Histogram {
    // 0.25 ms to about 4 minutes: a tool call can take that long, and one that does must not
    // be counted only as "above the last bucket".
    Histogram::new(exponential_buckets(0.000_25, 2.0, 21))
}

/// One tool's series, taken from the families on the first call that needs each: later calls
/// count and time themselves without building labels (three strings) or hashing them. Each
/// is the family's own (a counter and a histogram share their values with their clones).
#[derive(Default)]
struct Series {
    /// By [`Outcome`], in its order.
    outcomes: [Option<Counter>; 3],
    latency: Option<Histogram>,
}

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The series of each tool called, by upstream and tool.
type SeriesByTool = FastMap<Arc<str>, FastMap<Box<str>, Series>>;

/// A tool call counted in flight until dropped.
pub(crate) struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The gateway's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<Call, Counter>,
    latency: Family<Tool, Histogram, fn() -> Histogram>,
    states: Family<State, Gauge>,
    repairs: Family<Repaired, Counter>,
    /// Tool calls being answered now.
    in_flight: Gauge,
    /// 1 once the gateway drains.
    draining: Gauge,
    /// Calls traffic control refused, by upstream and reason.
    refusals: Family<Refusal, Counter>,
    /// 1 for each controlled upstream's breaker state.
    breakers: Family<State, Gauge>,
    /// Calls in flight under each capped upstream's limit, and calls waiting in its queue.
    capped: Family<Upstream, Gauge>,
    waiting: Family<Upstream, Gauge>,
    /// Tools held out because their definitions changed since pinned, by upstream.
    quarantined: Family<Upstream, Gauge>,
    /// Calls that ended with no result, by upstream and the side that failed.
    failures: Family<Failed, Counter>,
    /// Reloads of the configuration, applied or refused.
    reloads: Family<Ended, Counter>,
    /// Entries a reload added, removed or changed.
    reloaded: Family<Ended, Counter>,
    /// Requests served, by MCP method (`other` for one the protocol does not name).
    requests: Family<Requested, Counter>,
    /// Legacy sessions this replica holds now.
    sessions: Gauge,
    /// The series of the tools called so far, by upstream and tool.
    series: Mutex<SeriesByTool>,
    /// Encoding reads the registry whole; one at a time.
    encoding: Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("toolwire_gateway");
        let calls = Family::<Call, Counter>::default();
        let latency =
            Family::<Tool, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        let states = Family::<State, Gauge>::default();
        let repairs = Family::<Repaired, Counter>::default();
        registry.register(
            "era_repairs",
            "Requests served although a client quirk made them wrong (--era-repair), by kind",
            repairs.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls routed to an upstream, by outcome",
            calls.clone(),
        );
        registry.register(
            "tool_call_duration_seconds",
            "Time from a call's arrival to its answer, upstream included",
            latency.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "calls_in_flight",
            "Tool calls being answered now",
            in_flight.clone(),
        );
        let draining = Gauge::default();
        registry.register(
            "draining",
            "1 once the gateway stopped taking calls (SIGTERM) and waits for those in flight",
            draining.clone(),
        );
        let refusals = Family::<Refusal, Counter>::default();
        registry.register(
            "traffic_refusals",
            "Calls refused by traffic control, by upstream and reason (circuit_open, queue_full, queue_timeout)",
            refusals.clone(),
        );
        let breakers = Family::<State, Gauge>::default();
        registry.register(
            "breaker_state",
            "1 for each upstream's circuit breaker state (closed, open, half-open), where one is configured",
            breakers.clone(),
        );
        let capped = Family::<Upstream, Gauge>::default();
        registry.register(
            "upstream_calls_in_flight",
            "Calls in flight to each upstream with a concurrency cap",
            capped.clone(),
        );
        let waiting = Family::<Upstream, Gauge>::default();
        registry.register(
            "upstream_calls_waiting",
            "Calls waiting in each capped upstream's queue",
            waiting.clone(),
        );
        let quarantined = Family::<Upstream, Gauge>::default();
        registry.register(
            "quarantined_tools",
            "Tools held out because their definitions changed since they were pinned, by upstream",
            quarantined.clone(),
        );
        let failures = Family::<Failed, Counter>::default();
        registry.register(
            "tool_call_failures",
            "Calls that ended with no result, by upstream and the side that failed: upstream (no answer, an error answer, not running), downstream (the caller's request: its arguments, a tool it may not call), internal (the gateway itself)",
            failures.clone(),
        );
        let reloads = Family::<Ended, Counter>::default();
        registry.register(
            "reloads",
            "Reloads of the configuration, by outcome (applied, refused: the running one stays)",
            reloads.clone(),
        );
        let reloaded = Family::<Ended, Counter>::default();
        registry.register(
            "reloaded_entries",
            "Entries applied reloads added, removed or changed (outcome: added, removed, changed)",
            reloaded.clone(),
        );
        // Every series at 0 from the start: a family with none is not exported, and a series
        // that appears at 1 is an increase `increase()` does not see.
        for word in ["applied", "refused"] {
            reloads
                .get_or_create(&Ended {
                    outcome: word.to_owned(),
                })
                .inc_by(0);
        }
        for word in ["added", "removed", "changed"] {
            reloaded
                .get_or_create(&Ended {
                    outcome: word.to_owned(),
                })
                .inc_by(0);
        }
        let requests = Family::<Requested, Counter>::default();
        registry.register(
            "requests",
            "Requests from callers, by MCP method (other: a method the protocol does not name), tool calls included",
            requests.clone(),
        );
        let sessions = Gauge::default();
        registry.register(
            "legacy_sessions",
            "Legacy (Mcp-Session-Id) sessions this replica holds now",
            sessions.clone(),
        );
        let build = Family::<Build, Gauge>::default();
        build
            .get_or_create(&Build {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register(
            "build_info",
            "1, labelled with the gateway's version",
            build,
        );
        registry.register(
            "upstream_state",
            "1 for each upstream's current state (ready, idle, starting, reconnecting, failed, needs-login, disabled)",
            states.clone(),
        );
        Self {
            registry,
            calls,
            latency,
            states,
            repairs,
            in_flight,
            draining,
            refusals,
            breakers,
            capped,
            waiting,
            quarantined,
            failures,
            reloads,
            reloaded,
            requests,
            sessions,
            series: Mutex::default(),
            encoding: Mutex::new(()),
        }
    }

    /// A tool call being answered, counted in flight until the guard is dropped.
    pub(crate) fn calling(&self) -> InFlight {
        self.in_flight.inc();
        InFlight(self.in_flight.clone())
    }

    /// A call to `upstream` refused by traffic control for `reason`.
    pub(crate) fn refused(&self, upstream: &str, reason: &str) {
        self.refusals
            .get_or_create(&Refusal {
                upstream: upstream.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// The traffic controls as they are now: each controlled upstream's breaker state, and
    /// its calls in flight and waiting under its cap.
    pub(crate) fn traffic(&self, states: &[crate::traffic::LaneState]) {
        let _one = crate::lock(&self.encoding);
        self.breakers.clear();
        for (upstream, breaker, cap) in states {
            let of = || Upstream {
                upstream: upstream.clone(),
            };
            if let Some(word) = breaker {
                self.breakers
                    .get_or_create(&State {
                        upstream: upstream.clone(),
                        state: (*word).to_owned(),
                    })
                    .set(1);
            }
            if let Some((in_flight, waiting)) = cap {
                self.capped
                    .get_or_create(&of())
                    .set(i64::try_from(*in_flight).unwrap_or(i64::MAX));
                self.waiting
                    .get_or_create(&of())
                    .set(i64::try_from(*waiting).unwrap_or(i64::MAX));
            }
        }
    }

    /// The tools quarantined now, by upstream (each upstream's count).
    pub(crate) fn quarantine(&self, upstreams: &[Arc<str>]) {
        let _one = crate::lock(&self.encoding);
        self.quarantined.clear();
        for upstream in upstreams {
            self.quarantined
                .get_or_create(&Upstream {
                    upstream: upstream.to_string(),
                })
                .inc();
        }
    }

    /// A call to `upstream` that ended with no result, failed on `side`.
    pub(crate) fn failed(&self, upstream: &str, side: Side) {
        self.failures
            .get_or_create(&Failed {
                upstream: upstream.to_owned(),
                side: side.as_str().to_owned(),
            })
            .inc();
    }

    /// A reload: applied, with what it did, or refused (None).
    pub(crate) fn reload(&self, done: Option<&toolwire_host::Reloaded>) {
        let outcome = |word: &str| Ended {
            outcome: word.to_owned(),
        };
        let Some(done) = done else {
            self.reloads.get_or_create(&outcome("refused")).inc();
            return;
        };
        self.reloads.get_or_create(&outcome("applied")).inc();
        for (word, entries) in [
            ("added", &done.added),
            ("removed", &done.removed),
            ("changed", &done.changed),
        ] {
            let n = u64::try_from(entries.len()).unwrap_or(u64::MAX);
            self.reloaded.get_or_create(&outcome(word)).inc_by(n);
        }
    }

    /// The gateway drains.
    pub(crate) fn draining(&self) {
        self.draining.set(1);
    }

    /// One request of `method` from a caller.
    pub(crate) fn request(&self, method: toolwire_types::ClientMethod) {
        self.requests
            .get_or_create(&Requested {
                method: method.name().unwrap_or("other"),
            })
            .inc();
    }

    /// This replica holds `open` legacy sessions now.
    pub(crate) fn legacy_sessions(&self, open: usize) {
        self.sessions.set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// One request served by an era repair of `kind`.
    pub(crate) fn repaired(&self, kind: &str) {
        self.repairs
            .get_or_create(&Repaired {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// One call to `upstream`'s `tool` (as the gateway names it), how it ended and how long it
    /// took.
    pub(crate) fn call(&self, upstream: &Arc<str>, tool: &str, outcome: Outcome, took: Duration) {
        let mut series = crate::lock(&self.series);
        let of_upstream = match series.get_mut(&**upstream) {
            Some(found) => found,
            None => series.entry(upstream.clone()).or_default(),
        };
        let of_tool = match of_upstream.get_mut(tool) {
            Some(found) => found,
            None => of_upstream.entry(tool.into()).or_default(),
        };
        of_tool.outcomes[outcome as usize]
            .get_or_insert_with(|| {
                self.calls
                    .get_or_create(&Call {
                        upstream: upstream.to_string(),
                        tool: tool.to_owned(),
                        outcome: outcome.as_str().to_owned(),
                    })
                    .clone()
            })
            .inc();
        of_tool
            .latency
            .get_or_insert_with(|| {
                self.latency
                    .get_or_create(&Tool {
                        upstream: upstream.to_string(),
                        tool: tool.to_owned(),
                    })
                    .clone()
            })
            .observe(took.as_secs_f64());
    }

    /// The text exposition, with `states` (upstream, state) as they are now.
    pub(crate) fn render(&self, states: &[(String, &'static str)]) -> String {
        let _one = crate::lock(&self.encoding);
        self.states.clear();
        for (upstream, state) in states {
            self.states
                .get_or_create(&State {
                    upstream: upstream.clone(),
                    state: (*state).to_owned(),
                })
                .set(1);
        }
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding the metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_put_on_the_side_it_came_from() {
        use toolwire_host::HostError;
        let call = |error| HostError::Call {
            server: "a".into(),
            error,
        };
        let refused =
            toolwire::ErrorObject::new(toolwire_types::error::code::INVALID_PARAMS, "bad");
        let broken = toolwire::ErrorObject::new(toolwire_types::error::code::INTERNAL_ERROR, "bad");
        for (error, side) in [
            (
                call(toolwire::Error::Timeout(Duration::from_secs(1))),
                Side::Upstream,
            ),
            (call(toolwire::Error::Server(broken)), Side::Upstream),
            (call(toolwire::Error::Server(refused)), Side::Downstream),
            (
                HostError::UnknownTool("x".into(), "__".into()),
                Side::Downstream,
            ),
            (
                HostError::NotRunning {
                    server: "a".into(),
                    state: "failed".into(),
                },
                Side::Upstream,
            ),
            (call(toolwire::Error::Closed), Side::Internal),
        ] {
            assert_eq!(Side::of(&error), side, "{error}");
        }
    }

    #[test]
    fn requests_are_counted_by_method_sessions_by_replica_and_the_version_is_named() {
        use toolwire_types::ClientMethod;
        let metrics = Metrics::new();
        metrics.request(ClientMethod::ListTools);
        metrics.request(ClientMethod::ListTools);
        metrics.request(ClientMethod::of("vendor/thing"));
        metrics.legacy_sessions(3);
        metrics.legacy_sessions(2);
        let text = metrics.render(&[]);
        for line in [
            r#"toolwire_gateway_requests_total{method="tools/list"} 2"#,
            r#"toolwire_gateway_requests_total{method="other"} 1"#,
            "toolwire_gateway_legacy_sessions 2",
            &format!(
                "toolwire_gateway_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            ),
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        assert!(!text.contains(r#"method="tools/call""#), "{text}");
    }

    #[test]
    fn a_call_of_minutes_is_timed_in_a_bucket_of_its_own() {
        let metrics = Metrics::new();
        let a: Arc<str> = "a".into();
        metrics.call(&a, "a__slow", Outcome::Ok, Duration::from_secs(180));
        let text = metrics.render(&[]);
        let bucket = |le: &str| {
            text.lines()
                .find(|l| {
                    l.contains("duration_seconds_bucket") && l.contains(&format!("le=\"{le}\""))
                })
                .and_then(|l| l.rsplit(' ').next())
                .map(str::to_owned)
        };
        assert_eq!(bucket("131.072").as_deref(), Some("0"), "{text}");
        assert_eq!(bucket("262.144").as_deref(), Some("1"), "{text}");
    }

    #[test]
    fn calls_are_counted_by_outcome_and_timed_and_only_outcomes_seen_are_shown() {
        let metrics = Metrics::new();
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let ms = Duration::from_millis(1);
        for _ in 0..3 {
            metrics.call(&a, "a__echo", Outcome::Ok, ms);
        }
        metrics.call(&a, "a__echo", Outcome::ToolError, ms);
        metrics.call(&b, "b__echo", Outcome::Error, ms);
        let text = metrics.render(&[]);
        for line in [
            r#"toolwire_gateway_tool_calls_total{upstream="a",tool="a__echo",outcome="ok"} 3"#,
            r#"toolwire_gateway_tool_calls_total{upstream="a",tool="a__echo",outcome="tool_error"} 1"#,
            r#"toolwire_gateway_tool_calls_total{upstream="b",tool="b__echo",outcome="error"} 1"#,
            r#"toolwire_gateway_tool_call_duration_seconds_count{upstream="a",tool="a__echo"} 4"#,
            r#"toolwire_gateway_tool_call_duration_seconds_count{upstream="b",tool="b__echo"} 1"#,
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        assert!(
            !text.contains(r#"tool="a__echo",outcome="error""#),
            "an outcome never seen has no series:\n{text}"
        );
    }
}

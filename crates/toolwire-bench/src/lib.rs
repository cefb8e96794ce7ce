//! The measuring side of `cargo xtask bench` (the clients live in `benches/compare.rs`, where
//! the rmcp dev-dependency is in reach): per-call latency statistics, the process's CPU time
//! and peak memory, and the report table with its ratios; and the tool search measurement on
//! real servers' tools ([`search`]), shared by the report and the recall test.
//!
//! Each (case, client) pair runs in its own process, so CPU time and peak RSS belong to that
//! client alone; the servers run in processes of their own too.

use std::time::Duration;

mod gateway;
pub mod search;

pub use gateway::{gateway_table, targets};

use serde_json::{Value, json};

/// CPU time (user + system) and peak resident memory of this process so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// User plus system CPU time.
    pub cpu: Duration,
    /// Peak resident set size, in KiB (Linux reports `ru_maxrss` in KiB).
    pub peak_rss_kib: u64,
}

/// The resident set and its peak of process `pid`, in KiB, read from `/proc` (Linux; `None`
/// elsewhere, or for a process that is gone).
pub fn resident(pid: u32) -> (Option<u64>, Option<u64>) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse().ok())
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The suffix of a case run on one core: the client, and the servers it talks to, confined to
/// the first CPU this process may use. On a shared virtual machine a wake-up that crosses
/// cores costs tens of microseconds and lands on one side of a call or the other by chance;
/// on one core a call's latency is the work of both sides, and runs agree to a microsecond.
pub const ONE_CPU: &str = "-1cpu";

/// The case without its [`ONE_CPU`] suffix.
pub fn base_case(case: &str) -> &str {
    case.strip_suffix(ONE_CPU).unwrap_or(case)
}

/// Runs `f` with this thread (and so the processes it starts, which inherit it) confined to
/// the first CPU it may use, then restores what it had (Linux).
#[cfg(target_os = "linux")]
pub fn on_one_cpu<T, E: From<std::io::Error>>(f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;
    let all = sched_getaffinity(Pid::from_raw(0)).map_err(std::io::Error::from)?;
    let first = (0..CpuSet::count())
        .find(|&cpu| all.is_set(cpu).unwrap_or(false))
        .ok_or_else(|| std::io::Error::other("no CPU to run on"))?;
    let mut one = CpuSet::new();
    one.set(first).map_err(std::io::Error::from)?;
    sched_setaffinity(Pid::from_raw(0), &one).map_err(std::io::Error::from)?;
    let outcome = f();
    sched_setaffinity(Pid::from_raw(0), &all).map_err(std::io::Error::from)?;
    outcome
}

/// Elsewhere the cases on one core are not run.
#[cfg(not(target_os = "linux"))]
pub fn on_one_cpu<T, E: From<std::io::Error>>(_: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    Err(std::io::Error::other("cases on one core are run on Linux only").into())
}

/// Reads [`Usage`] with `getrusage(RUSAGE_SELF)` (Unix: the benchmarks run there).
#[cfg(unix)]
pub fn usage() -> Result<Usage, std::io::Error> {
    usage_of_self().map_err(std::io::Error::from)
}

/// [`Usage`] needs `getrusage`, which this platform does not have.
#[cfg(not(unix))]
pub fn usage() -> Result<Usage, std::io::Error> {
    Err(std::io::Error::other(
        "CPU time and peak memory are measured on Unix only",
    ))
}

#[cfg(unix)]
fn usage_of_self() -> Result<Usage, nix::Error> {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)?;
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    Ok(Usage {
        cpu: tv(r.user_time()) + tv(r.system_time()),
        peak_rss_kib: u64::try_from(r.max_rss()).unwrap_or(0),
    })
}

/// What one (case, client) run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The case (`http-legacy-seq`, …).
    pub case: String,
    /// The client (`floor`, `toolwire`, `rmcp-default`, `rmcp-keepalive`).
    pub client: String,
    /// Calls measured (after the warm-up).
    pub calls: usize,
    /// Wall time of the measured calls.
    pub wall: Duration,
    /// Mean per call.
    pub mean: Duration,
    /// Median per call.
    pub p50: Duration,
    /// 99th percentile per call.
    pub p99: Duration,
    /// Slowest call.
    pub max: Duration,
    /// The client process's CPU time during the measured calls.
    pub cpu: Duration,
    /// The client process's peak RSS (KiB), setup included.
    pub peak_rss_kib: u64,
}

impl Measurement {
    /// Builds a measurement from per-call latencies (any order).
    pub fn new(
        case: &str,
        client: &str,
        mut latencies: Vec<Duration>,
        wall: Duration,
        cpu: Duration,
        peak_rss_kib: u64,
    ) -> Self {
        latencies.sort_unstable();
        let calls = latencies.len();
        let total: Duration = latencies.iter().sum();
        let mean = u32::try_from(calls)
            .ok()
            .filter(|n| *n > 0)
            .map_or(Duration::ZERO, |n| total / n);
        Self {
            case: case.to_owned(),
            client: client.to_owned(),
            calls,
            wall,
            mean,
            p50: percentile(&latencies, 50.0),
            p99: percentile(&latencies, 99.0),
            max: latencies.last().copied().unwrap_or_default(),
            cpu,
            peak_rss_kib,
        }
    }

    /// Calls per second of wall time.
    pub fn calls_per_s(&self) -> f64 {
        let secs = self.wall.as_secs_f64();
        if secs > 0.0 {
            self.calls as f64 / secs
        } else {
            0.0
        }
    }

    /// CPU time per call.
    pub fn cpu_per_call(&self) -> Duration {
        u32::try_from(self.calls)
            .ok()
            .filter(|n| *n > 0)
            .map_or(Duration::ZERO, |n| self.cpu / n)
    }

    /// The JSON line a client process prints.
    pub fn to_json(&self) -> Value {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        json!({
            "case": self.case,
            "client": self.client,
            "calls": self.calls,
            "wall_s": self.wall.as_secs_f64(),
            "mean_us": us(self.mean),
            "p50_us": us(self.p50),
            "p99_us": us(self.p99),
            "max_us": us(self.max),
            "cpu_us": us(self.cpu),
            "peak_rss_kib": self.peak_rss_kib,
        })
    }

    /// Reads a line printed by [`Measurement::to_json`].
    pub fn from_json(v: &Value) -> Option<Self> {
        let d = |k: &str| v[k].as_f64().map(|us| Duration::from_secs_f64(us / 1e6));
        Some(Self {
            case: v["case"].as_str()?.to_owned(),
            client: v["client"].as_str()?.to_owned(),
            calls: usize::try_from(v["calls"].as_u64()?).ok()?,
            wall: Duration::from_secs_f64(v["wall_s"].as_f64()?),
            mean: d("mean_us")?,
            p50: d("p50_us")?,
            p99: d("p99_us")?,
            max: d("max_us")?,
            cpu: d("cpu_us")?,
            peak_rss_kib: v["peak_rss_kib"].as_u64()?,
        })
    }
}

/// The `pct` percentile of sorted latencies (nearest rank).
pub fn percentile(sorted: &[Duration], pct: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((pct / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Of several runs of the same (case, client), the one with the lowest mean: on a shared,
/// noisy machine the fastest run is the one least disturbed.
pub fn best_runs(runs: &[Measurement]) -> Vec<Measurement> {
    let mut best: Vec<Measurement> = Vec::new();
    for m in runs {
        match best
            .iter_mut()
            .find(|b| b.case == m.case && b.client == m.client)
        {
            Some(b) if m.mean < b.mean => *b = m.clone(),
            Some(_) => {}
            None => best.push(m.clone()),
        }
    }
    best
}

fn find<'a>(runs: &'a [Measurement], case: &str, client: &str) -> Option<&'a Measurement> {
    runs.iter().find(|m| m.case == case && m.client == client)
}

/// `a / b` of mean latency, as `1.07×`, or `—` when either is missing.
fn ratio(a: Option<&Measurement>, b: Option<&Measurement>, by: fn(&Measurement) -> f64) -> String {
    match (a, b) {
        (Some(a), Some(b)) if by(b) > 0.0 => format!("{:.2}×", by(a) / by(b)),
        _ => "—".to_owned(),
    }
}

/// The table of every measurement, with Toolwire's ratios to the floor and to rmcp.
///
/// For sequential and stdio cases the ratio is of mean latency (lower is better, so
/// Toolwire/floor ≥ 1); for the concurrent case it is of throughput (Toolwire/rmcp > 1 means
/// Toolwire is faster).
pub fn table(runs: &[Measurement]) -> String {
    let mut t = String::from(
        "| case | client | calls/s | mean µs | p50 µs | p99 µs | max µs | CPU µs/call | peak RSS MiB |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for m in runs {
        t.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |\n",
            m.case,
            m.client,
            m.calls_per_s(),
            m.mean.as_secs_f64() * 1e6,
            m.p50.as_secs_f64() * 1e6,
            m.p99.as_secs_f64() * 1e6,
            m.max.as_secs_f64() * 1e6,
            m.cpu_per_call().as_secs_f64() * 1e6,
            m.peak_rss_kib as f64 / 1024.0,
        ));
    }
    t
}

/// The ratios table: per case, Toolwire against the floor and each rmcp client.
pub fn ratios(runs: &[Measurement]) -> String {
    let mut cases: Vec<&str> = Vec::new();
    // The cases through a gateway have their own table (`gateway_table`).
    for m in runs.iter().filter(|m| !through_a_gateway(&m.case)) {
        if !cases.contains(&m.case.as_str()) {
            cases.push(&m.case);
        }
    }
    let mut t = String::from(
        "| case | measure | Toolwire/floor | Toolwire/rmcp-default | Toolwire/rmcp-keepalive | Toolwire/rmcp (stdio) | peak RSS Toolwire/rmcp-keepalive |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for case in cases {
        let tw = find(runs, case, "toolwire");
        let concurrent = case.contains("concurrent");
        let (measure, by): (&str, fn(&Measurement) -> f64) = if concurrent {
            ("throughput (higher is better)", Measurement::calls_per_s)
        } else if case.contains("stall") {
            ("max latency (lower is better)", |m| m.max.as_secs_f64())
        } else {
            ("mean latency (lower is better)", |m| m.mean.as_secs_f64())
        };
        let rss = |m: &Measurement| m.peak_rss_kib as f64;
        t.push_str(&format!(
            "| {case} | {measure} | {} | {} | {} | {} | {} |\n",
            ratio(tw, find(runs, case, "floor"), by),
            ratio(tw, find(runs, case, "rmcp-default"), by),
            ratio(tw, find(runs, case, "rmcp-keepalive"), by),
            ratio(tw, find(runs, case, "rmcp"), by),
            ratio(
                tw,
                find(runs, case, "rmcp-keepalive").or_else(|| find(runs, case, "rmcp")),
                rss
            ),
        ));
    }
    t
}

/// Whether `case` runs through a gateway (Toolwire's, or `mcp-proxy`) rather than on the
/// server itself.
pub fn through_a_gateway(case: &str) -> bool {
    ["gateway", "mcp-proxy", "contextforge", "nginx", FLOOR_PROXY]
        .iter()
        .any(|prefix| case.starts_with(prefix))
}

/// The prefix of the cases through the floor proxy: a reverse proxy that reads nothing of MCP
/// and forwards bytes, the least any gateway can add on the machine.
pub const FLOOR_PROXY: &str = "floor-proxy";

/// Where `cargo xtask bench` writes in `docs/benchmarks.md`: between these two lines, leaving
/// the rest of the file (the criterion figures) as it is.
pub const SECTION_BEGIN: &str =
    "<!-- compare:begin (written by `cargo xtask bench`; edit compare.rs, not this) -->";
/// The end of the section.
pub const SECTION_END: &str = "<!-- compare:end -->";

/// `doc` with the bench's section replaced by `section` (appended when the markers are missing).
pub fn splice(doc: &str, section: &str) -> String {
    match (doc.find(SECTION_BEGIN), doc.find(SECTION_END)) {
        (Some(b), Some(e)) if b < e => format!(
            "{}{SECTION_BEGIN}\n{}\n{}",
            &doc[..b],
            section.trim_end(),
            &doc[e..]
        ),
        _ => format!(
            "{}\n\n{SECTION_BEGIN}\n{}\n{SECTION_END}\n",
            doc.trim_end(),
            section.trim_end()
        ),
    }
}

/// The known-item query the search benchmark asks for a tool: the first sentence of its
/// description, without the words of its own name and of its server's (so that the name cannot
/// find itself), at most 10 words. `None` when fewer than 3 words remain: nothing to search by.
pub fn known_item_query(server: &str, name: &str, description: &str) -> Option<String> {
    let split = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    // camelCase names are split too: `listPullRequests` gives list, pull, requests.
    let spaced: String = name
        .chars()
        .flat_map(|c| {
            let space = c.is_uppercase().then_some(' ');
            space.into_iter().chain(std::iter::once(c))
        })
        .collect();
    let mut own = split(&spaced);
    own.extend(split(server));
    let first = description
        .split(". ")
        .next()
        .unwrap_or(description)
        .lines()
        .next()
        .unwrap_or("");
    let words: Vec<String> = split(first)
        .into_iter()
        .filter(|w| !own.contains(w))
        .take(10)
        .collect();
    (words.len() >= 3).then(|| words.join(" "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::gateway::times;
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let sorted: Vec<Duration> = (1..=100).map(us).collect();
        assert_eq!(percentile(&sorted, 50.0), us(50));
        assert_eq!(percentile(&sorted, 99.0), us(99));
        assert_eq!(percentile(&sorted, 100.0), us(100));
        assert_eq!(percentile(&[us(7)], 99.0), us(7));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn a_measurement_sorts_and_round_trips_through_json() {
        let m = Measurement::new(
            "c",
            "toolwire",
            vec![us(300), us(100), us(200)],
            Duration::from_millis(1),
            us(450),
            2048,
        );
        assert_eq!((m.mean, m.p50, m.max), (us(200), us(200), us(300)));
        assert_eq!(m.calls_per_s().round(), 3000.0);
        assert_eq!(m.cpu_per_call(), us(150));
        assert_eq!(Measurement::from_json(&m.to_json()).unwrap(), m);
    }

    #[test]
    fn the_best_run_is_the_lowest_mean_and_ratios_compare_like_with_like() {
        let m = |client: &str, mean: u64| {
            Measurement::new("seq", client, vec![us(mean)], us(mean), us(1), 1024)
        };
        let best = best_runs(&[m("floor", 100), m("toolwire", 130), m("toolwire", 110)]);
        assert_eq!(best.len(), 2);
        assert_eq!(best[1].mean, us(110));
        let r = ratios(&[m("floor", 100), m("toolwire", 110), m("rmcp-default", 220)]);
        assert!(
            r.contains("| seq | mean latency (lower is better) | 1.10× | 0.50× | — | — | — |"),
            "{r}"
        );
    }

    #[test]
    fn the_gateway_table_subtracts_the_direct_run_of_the_same_client() {
        let m = |case: &str, client: &str, lat: u64, wall: u64| {
            Measurement::new(case, client, vec![us(lat); 4], us(wall), us(1), 1024)
        };
        let t = gateway_table(&[
            m("http-legacy-seq", "toolwire", 200, 800),
            m("http-legacy-seq", "floor", 100, 400),
            m("gateway-legacy-seq", "toolwire", 250, 1000),
            m("http-concurrent-64", "toolwire", 300, 1000),
            m("gateway-concurrent-64", "toolwire", 400, 2000),
        ]);
        assert!(
            t.contains("| gateway-legacy-seq | 200 µs | 250 µs | +50 µs | 200 µs | 250 µs | +50 µs | 0.80× | — | — |"),
            "{t}"
        );
        assert!(
            t.contains("| gateway-concurrent-64 |") && t.contains("| 0.50× |"),
            "{t}"
        );
        // No modern runs: no modern row.
        assert!(!t.contains("gateway-modern-seq"), "{t}");
    }

    #[test]
    fn small_ratios_keep_two_significant_digits() {
        assert_eq!(times(0.37), "0.37×");
        assert_eq!(times(1.5), "1.50×");
        assert_eq!(times(0.0025), "0.0025×");
        assert_eq!(times(0.000_55), "0.00055×");
        assert_eq!(times(0.05), "0.050×");
        assert_eq!(times(0.0), "0.00×");
    }

    #[test]
    fn the_gateway_table_sets_each_gateway_beside_the_floor_proxy_of_its_era_and_load() {
        let m = |case: &str, lat: u64, wall: u64| {
            Measurement::new(case, "toolwire", vec![us(lat); 4], us(wall), us(1), 1024)
        };
        let t = gateway_table(&[
            m("http-legacy-seq", 200, 800),
            m("floor-proxy-legacy-seq", 230, 920),
            m("gateway-legacy-seq", 250, 1000),
            m("http-modern-seq", 100, 400),
            m("floor-proxy-modern-seq", 180, 720),
            m("gateway-modern-seq", 300, 1200),
        ]);
        // The floor proxy's own row, against the direct call.
        assert!(
            t.contains("| floor-proxy-legacy-seq | 200 µs | 230 µs | +30 µs | 200 µs | 230 µs | +30 µs | 0.87× | — | — |"),
            "{t}"
        );
        // A gateway against the floor proxy of its own era: +20 µs legacy, +120 µs modern.
        assert!(t.contains("| 0.80× | +20 µs | 0.92× |"), "{t}");
        assert!(t.contains("| 0.33× | +120 µs | 0.60× |"), "{t}");
    }

    #[test]
    fn the_section_is_replaced_and_the_rest_kept() {
        let doc =
            format!("# B\n\nintro\n\n{SECTION_BEGIN}\nold\n{SECTION_END}\n\n## criterion\nkept\n");
        let new = splice(&doc, "## Results\nnew\n");
        assert_eq!(
            new,
            format!(
                "# B\n\nintro\n\n{SECTION_BEGIN}\n## Results\nnew\n{SECTION_END}\n\n## criterion\nkept\n"
            )
        );
        assert_eq!(splice(&new, "## Results\nnew\n"), new, "idempotent");
        let bare = splice("# B\n", "x");
        assert!(bare.ends_with(&format!("{SECTION_BEGIN}\nx\n{SECTION_END}\n")));
    }

    #[test]
    fn a_known_item_query_is_the_first_sentence_without_the_tools_own_words() {
        assert_eq!(
            known_item_query(
                "github",
                "create_issue",
                "Create a new issue in a GitHub repository. Needs a token."
            )
            .as_deref(),
            Some("a new in a repository")
        );
        assert_eq!(
            known_item_query("s", "listPullRequests", "List the pull requests of a repo")
                .as_deref(),
            Some("the of a repo")
        );
        assert_eq!(
            known_item_query("s", "echo", "Echoes back"),
            None,
            "too few words"
        );
        let long = known_item_query("s", "t", &"word ".repeat(30)).unwrap_or_default();
        assert_eq!(long.split(' ').count(), 10);
    }
}

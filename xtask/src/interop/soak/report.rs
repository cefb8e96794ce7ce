//! What the soak proves from what it saw, and the report that shows it: [`judge`] checks the
//! callers' outcomes against the upstreams' tallies, the faults and the replicas' samples;
//! [`markdown`] and [`svg`] write them down.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::{CONNECTIONS_PER_CALLER, FLAT, KILL_SLACK_MS, Plan, Sample};

/// What the run found, as the report and its checks.
pub(super) struct Report {
    pub(super) markdown: String,
    pub(super) svg: String,
    pub(super) summary: String,
    pub(super) failures: Vec<String>,
}

/// What the driver saw while the callers ran.
pub(super) struct Seen {
    /// When replica 1 was killed, in ms from the start.
    pub(super) kills: Vec<u128>,
    pub(super) samples: Vec<Sample>,
    /// The callers' progress marks: calls done, when.
    pub(super) marks: Vec<(usize, u128)>,
    /// nginx's access log.
    pub(super) access: String,
    /// The stdio upstream's exits the replicas logged.
    pub(super) exits: usize,
    /// stdio upstreams left running after the fleet stopped.
    pub(super) stray: usize,
    /// When Redis went down and came back, in ms from the start.
    pub(super) redis: Option<(u128, u128)>,
    /// How often the replicas logged that they lost Redis.
    pub(super) redis_lost: usize,
}

/// What explained the failed calls.
#[derive(Default)]
struct Attributed {
    /// In flight when replica 1 was killed.
    at_kill: usize,
    /// Calls to the stdio upstream as its server exited.
    at_exit: usize,
    /// Calls to the per-user upstream while Redis was down.
    at_redis: usize,
    /// Failed calls the upstream had run.
    ran_anyway: usize,
}

/// The checks, and the report that shows them.
pub(super) fn judge(
    plan: &Plan,
    report: &Value,
    routes: &[(&str, usize)],
    tallies: &[String; 2],
    seen: &Seen,
) -> (Report, bool) {
    let Seen {
        kills,
        samples,
        marks,
        access,
        exits,
        stray,
        redis,
        redis_lost,
    } = seen;
    let (exits, stray) = (*exits, *stray);
    let mut failures = Vec::new();
    let calls = report["calls"].as_u64().unwrap_or(0) as usize;
    if calls != plan.calls {
        failures.push(format!("{calls} of {} calls have an outcome", plan.calls));
    }
    // What each upstream ran, by id.
    let mut ran: [HashMap<&str, usize>; 2] = [HashMap::new(), HashMap::new()];
    for (n, tally) in tallies.iter().enumerate() {
        for id in tally.lines() {
            *ran[n].entry(id).or_default() += 1;
        }
    }
    let twice: Vec<&str> = ran
        .iter()
        .flat_map(|r| r.iter().filter(|(_, n)| **n > 1).map(|(id, _)| *id))
        .collect();
    if !twice.is_empty() {
        failures.push(format!(
            "{} calls ran twice: {:?}",
            twice.len(),
            &twice[..twice.len().min(5)]
        ));
    }
    let upstream = |tool: &str| {
        routes
            .iter()
            .find(|(t, _)| *t == tool)
            .map(|(_, tally)| *tally)
    };
    let ok = report["ok"].as_array().cloned().unwrap_or_default();
    let mut answered = std::collections::HashSet::new();
    let mut unrecorded = Vec::new();
    for pair in &ok {
        let (Some(id), Some(tool)) = (pair[0].as_str(), pair[1].as_str()) else {
            continue;
        };
        answered.insert(id.to_owned());
        if upstream(tool).is_none_or(|u| !ran[u].contains_key(id)) {
            unrecorded.push(id.to_owned());
        }
    }
    if !unrecorded.is_empty() {
        failures.push(format!(
            "{} answered calls were never recorded as run: {:?}",
            unrecorded.len(),
            &unrecorded[..unrecorded.len().min(5)]
        ));
    }
    // The failures, by class, and whether each is explained by a fault.
    let failed = report["failed"].as_array().cloned().unwrap_or_default();
    let mut classes: BTreeMap<String, usize> = BTreeMap::new();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    let mut why = Attributed::default();
    for f in &failed {
        let class = f["class"].as_str().unwrap_or("?");
        let id = f["id"].as_str().unwrap_or("");
        let tool = f["tool"].as_str().unwrap_or("");
        *classes.entry(class.to_owned()).or_default() += 1;
        *errors
            .entry(short_error(f["error"].as_str().unwrap_or("")))
            .or_default() += 1;
        let recorded = upstream(tool).is_some_and(|u| ran[u].contains_key(id));
        if recorded {
            why.ran_anyway += 1;
        }
        if matches!(class, "hung" | "wrong-answer") {
            failures.push(format!("call {id}: {class}: {}", f["error"]));
            continue;
        }
        if class == "never-sent" && recorded {
            failures.push(format!("call {id} was said never sent, and ran"));
        }
        let (from, to) = (
            f["started_ms"].as_u64().unwrap_or(0) as u128,
            f["ended_ms"].as_u64().unwrap_or(0) as u128,
        );
        let during = |down: u128, up: u128| {
            from <= up + KILL_SLACK_MS && down.saturating_sub(KILL_SLACK_MS) <= to
        };
        if kills.iter().any(|k| during(*k, *k)) {
            why.at_kill += 1;
        } else if upstream(tool) == Some(1) {
            why.at_exit += 1;
        } else if routes.last().is_some_and(|(t, _)| *t == tool)
            && redis.is_some_and(|(down, up)| during(down, up))
        {
            why.at_redis += 1;
        } else {
            failures.push(format!(
                "call {id} to {tool} failed ({class}: {}) with no fault in its span {from}-{to} ms",
                f["error"]
            ));
        }
    }
    // Never-killed replicas: flat from the quarter mark to the end.
    let quarter = plan.calls / 4;
    let quarter_ms = marks
        .iter()
        .find(|(n, _)| *n >= quarter)
        .map_or(0, |(_, ms)| *ms);
    let mut flat_rows = Vec::new();
    for replica in 1..3 {
        let mine: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.replica == replica && s.ms >= quarter_ms)
            .collect();
        // The mean of the first and of the last fifth of the window: a leak shows as a
        // rise, a momentary peak of calls in flight does not.
        let fifth = (mine.len() / 5).max(1);
        if mine.len() < 2 * fifth {
            failures.push(format!("replica {} was never measured", replica + 1));
            continue;
        }
        let mean = |part: &[&Sample], of: fn(&Sample) -> u64| {
            part.iter().map(|s| of(s) as f64).sum::<f64>() / part.len() as f64
        };
        let (head, tail) = (&mine[..fifth], &mine[mine.len() - fifth..]);
        let (rss_first, rss_last) = (mean(head, |s| s.rss_kb), mean(tail, |s| s.rss_kb));
        let (fds_first, fds_last) = (mean(head, |s| s.fds), mean(tail, |s| s.fds));
        let rss_max = mine.iter().map(|s| s.rss_kb).max().unwrap_or(0);
        let connections_max = mine.iter().map(|s| s.connections).max().unwrap_or(0);
        if connections_max > CONNECTIONS_PER_CALLER * plan.callers as u64 {
            failures.push(format!(
                "replica {} held {connections_max} connections, more than {CONNECTIONS_PER_CALLER} a caller",
                replica + 1
            ));
        }
        let rss_ratio = rss_last / rss_first.max(1.0);
        let fds_ratio = fds_last / fds_first.max(1.0);
        if rss_ratio > FLAT || fds_ratio > FLAT {
            failures.push(format!(
                "replica {} grew: RSS {rss_first:.0} → {rss_last:.0} KiB ({rss_ratio:.2}×), fds {fds_first:.1} → {fds_last:.1} ({fds_ratio:.2}×)",
                replica + 1,
            ));
        }
        flat_rows.push(format!(
            "| {} | {:.1} MB | {:.1} MB | {:.1} MB | {rss_ratio:.2}× | {fds_first:.1} | {fds_last:.1} | {fds_ratio:.2}× | {connections_max} |",
            replica + 1,
            rss_first / 1024.0,
            rss_last / 1024.0,
            rss_max as f64 / 1024.0,
        ));
    }
    if stray > 0 {
        failures.push(format!("{stray} stdio upstreams outlived the fleet"));
    }
    if exits == 0 || kills.is_empty() || redis.is_none() || *redis_lost == 0 {
        failures.push(format!(
            "the faults did not happen: {} kills, {exits} stdio exits, Redis down {redis:?} and lost by the replicas {redis_lost} times",
            kills.len()
        ));
    }
    let nginx_5xx = access
        .lines()
        .filter(|l| l.split('|').nth(3).is_some_and(|s| s.starts_with('5')))
        .count();
    let answered_n = ok.len();
    let summary = format!(
        "soak: {calls} calls, {answered_n} answered, {} failed ({} in flight at a kill, {} at a stdio exit, {} while Redis was down, {} of them ran); latency {}; {} kills; {exits} stdio exits; {} ids recorded; {} failures of the checks",
        failed.len(),
        why.at_kill,
        why.at_exit,
        why.at_redis,
        why.ran_anyway,
        report["latency"],
        kills.len(),
        ran[0].len() + ran[1].len(),
        failures.len()
    );
    let ok_run = failures.is_empty();
    let markdown = markdown(
        plan,
        calls,
        answered_n,
        &classes,
        &errors,
        &why,
        (*redis, *redis_lost),
        report,
        kills,
        exits,
        nginx_5xx,
        &flat_rows,
        &failures,
    );
    let svg = svg(samples, kills);
    (
        Report {
            markdown,
            svg,
            summary,
            failures,
        },
        ok_run,
    )
}

/// An error's text without the parts that differ per call (request ids, counts); an HTTP
/// status stays.
fn short_error(error: &str) -> String {
    let mut previous = "";
    let mut words = Vec::new();
    for word in error.split_whitespace() {
        let numeric = word.bytes().any(|b| b.is_ascii_digit());
        words.push(if numeric && !matches!(previous, "HTTP" | "(HTTP") {
            "#"
        } else {
            word
        });
        previous = word;
    }
    words.join(" ").chars().take(200).collect()
}

#[allow(clippy::too_many_arguments, reason = "one run's every figure")]
fn markdown(
    plan: &Plan,
    calls: usize,
    answered: usize,
    classes: &BTreeMap<String, usize>,
    errors: &BTreeMap<String, usize>,
    why: &Attributed,
    (redis, redis_lost): (Option<(u128, u128)>, usize),
    report: &Value,
    kills: &[u128],
    exits: usize,
    nginx_5xx: usize,
    flat_rows: &[String],
    failures: &[String],
) -> String {
    let mut md = String::from("# The fleet soak\n\n");
    md.push_str(&format!(
        "Written by `cargo xtask soak` (`xtask/src/interop/soak/`, which says what it starts and \
         checks). Three `toolwire gateway` replicas behind nginx (round-robin, no affinity), \
         {} callers of the library (half legacy, half 2026-07-28, four API keys), {} calls at \
         {} a second to two counting upstreams (the reference server over HTTP, waiting {} ms \
         before it runs each call, and over stdio exiting after every {} calls) and to the first \
         again behind an upstream each caller signed in to (per-user logins, kept in Redis), \
         replica 1 killed with SIGKILL and started again every {} s, Redis killed with the \
         middle kill and started again 2 s later from its append-only file. The figures are one \
         run's, on the project's 2-core machine.\n\n",
        plan.callers,
        plan.calls,
        plan.rate,
        plan.latency_ms,
        plan.exit_after,
        plan.kill_every.as_secs()
    ));
    md.push_str("## Outcomes\n\n| outcome | calls |\n|---|---:|\n");
    md.push_str(&format!(
        "| answered, with the call's own id | {answered} |\n"
    ));
    for (class, n) in classes {
        md.push_str(&format!("| failed: {class} | {n} |\n"));
    }
    md.push_str(&format!(
        "| **all** | **{calls}** |\n\nFailed calls in flight at a kill: {}; calls to the \
         stdio upstream failed as its server exited: {}; calls to the per-user upstream failed \
         while Redis was down: {}; failed calls the upstream had run (each told it may have \
         run): {}. Kills: {} (at {} s); Redis down {} (the replicas logged losing it {} times). The stdio servers exited {exits} times \
         (as the replicas logged). nginx answered 5xx {nginx_5xx} times.\n\n",
        why.at_kill,
        why.at_exit,
        why.at_redis,
        why.ran_anyway,
        kills.len(),
        kills
            .iter()
            .map(|k| format!("{:.1}", *k as f64 / 1000.0))
            .collect::<Vec<_>>()
            .join(", "),
        redis.map_or("never".to_owned(), |(down, up)| format!(
            "from {:.1} s to {:.1} s",
            down as f64 / 1000.0,
            up as f64 / 1000.0
        )),
        redis_lost,
    ));
    md.push_str("Answered calls' latency:\n\n| tool | p50 | p99 | max |\n|---|---:|---:|---:|\n");
    if let Some(latency) = report["latency"].as_object() {
        for (tool, l) in latency {
            md.push_str(&format!(
                "| `{tool}` | {:.1} ms | {:.1} ms | {:.1} ms |\n",
                l["p50_us"].as_f64().unwrap_or(0.0) / 1000.0,
                l["p99_us"].as_f64().unwrap_or(0.0) / 1000.0,
                l["max_us"].as_f64().unwrap_or(0.0) / 1000.0
            ));
        }
    }
    md.push('\n');
    if errors.is_empty() {
        md.push_str("No call failed.\n");
    } else {
        md.push_str("What the failed calls were told:\n\n| error | calls |\n|---|---:|\n");
        for (error, n) in errors {
            md.push_str(&format!("| {} | {n} |\n", error.replace('|', "\\|")));
        }
    }
    md.push_str(
        "\n## Memory and descriptors of the replicas never killed\n\nFrom the quarter mark \
         to the end: the mean of the window's first fifth against its last fifth, sampled \
         every 250 ms (limit: 10 % growth). The descriptors counted are all but TCP \
         sockets (the stdio upstream's pipes, files, the runtime's); the TCP sockets (the \
         listener; from nginx: its pool, the calls in flight, the legacy callers' streams; \
         to the HTTP upstream: a pool as deep as the calls in flight have been) follow the \
         load, which moves to the others at each kill, and are bounded at four a caller. Over time, with the kills marked: \
         [`soak.svg`](soak.svg).\n\n| replica | RSS, first fifth | RSS, last fifth | RSS max | \
         growth | fds, first fifth | fds, last fifth | growth | connections, max |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in flat_rows {
        md.push_str(row);
        md.push('\n');
    }
    md.push_str("\n## Checks\n\n");
    if failures.is_empty() {
        md.push_str(
            "All held: every call answered or failed, none hung; no id recorded twice; every \
             answered id recorded once by its upstream; no call said never sent was run; every \
             failure in flight at a kill, at a stdio exit or while Redis was down; the never-killed replicas flat; no \
             stdio child left.\n",
        );
    } else {
        for f in failures {
            md.push_str(&format!("- FAILED: {f}\n"));
        }
    }
    md
}

/// Resident memory (top) and open descriptors (bottom) of each replica over time, the kills
/// as vertical lines.
fn svg(samples: &[Sample], kills: &[u128]) -> String {
    const W: f64 = 800.0;
    const H: f64 = 200.0;
    const COLORS: [&str; 3] = ["#c0392b", "#2471a3", "#229954"];
    let end = samples.iter().map(|s| s.ms).max().unwrap_or(1).max(1) as f64;
    let rss_max = samples.iter().map(|s| s.rss_kb).max().unwrap_or(1).max(1) as f64 * 1.1;
    let fds_max = samples.iter().map(|s| s.fds).max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        2.0 * H + 60.0
    );
    for (panel, (label, max)) in [
        (
            format!("resident MB (max {:.0})", rss_max / 1024.0),
            rss_max,
        ),
        (
            format!("open fds but TCP connections (max {:.0})", fds_max),
            fds_max,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let top = 20.0 + panel as f64 * (H + 30.0);
        out.push_str(&format!(
            "<rect x=\"0\" y=\"{top}\" width=\"{W}\" height=\"{H}\" fill=\"none\" stroke=\"#999\"/>\n<text x=\"4\" y=\"{}\">{label}</text>\n",
            top - 4.0
        ));
        for k in kills {
            let x = *k as f64 / end * W;
            out.push_str(&format!(
                "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#bbb\" stroke-dasharray=\"4\"/>\n",
                top + H
            ));
        }
        for (replica, color) in COLORS.iter().enumerate() {
            let points: Vec<String> = samples
                .iter()
                .filter(|s| s.replica == replica)
                .map(|s| {
                    let v = if panel == 0 { s.rss_kb } else { s.fds } as f64;
                    format!("{:.1},{:.1}", s.ms as f64 / end * W, top + H - v / max * H)
                })
                .collect();
            out.push_str(&format!(
                "<polyline fill=\"none\" stroke=\"{color}\" points=\"{}\"/>\n",
                points.join(" ")
            ));
        }
    }
    out.push_str(&format!(
        "<text x=\"4\" y=\"{}\">replica 1 (killed at the dashed lines) red, 2 blue, 3 green; {:.0} s</text>\n</svg>\n",
        2.0 * H + 55.0,
        end / 1000.0
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::super::SHORT;
    use super::*;

    /// Samples of the two never-killed replicas, flat, every 250 ms over 10 s.
    fn flat_samples() -> Vec<Sample> {
        (0..40u128)
            .flat_map(|t| {
                (1..3).map(move |replica| Sample {
                    ms: t * 250,
                    replica,
                    rss_kb: 20_000,
                    fds: 15,
                    connections: 40,
                })
            })
            .collect()
    }

    fn seen(kills: Vec<u128>) -> Seen {
        Seen {
            kills,
            samples: flat_samples(),
            marks: vec![(1_000, 2_500), (4_000, 10_000)],
            access: String::new(),
            exits: 2,
            stray: 0,
            redis: Some((5_000, 7_000)),
            redis_lost: 3,
        }
    }

    const TOOLS: &[(&str, usize)] = &[("counter__tally", 0), ("stdio__tally", 1)];

    fn plan() -> Plan {
        Plan { calls: 4, ..SHORT }
    }

    #[test]
    fn a_clean_run_passes_every_check() {
        let report = serde_json::json!({
            "calls": 4,
            "ok": [["0-1", "counter__tally"], ["0-2", "stdio__tally"], ["1-1", "counter__tally"]],
            "failed": [{"id": "1-2", "tool": "counter__tally", "class": "undelivered",
                "error": "request 9 failed with HTTP 502", "started_ms": 4_900, "ended_ms": 5_100}],
            "latency": {},
        });
        let tallies = ["0-1\n1-1\n".to_owned(), "0-2\n".to_owned()];
        let (report, ok) = judge(&plan(), &report, TOOLS, &tallies, &seen(vec![5_000]));
        assert!(ok, "{:?}", report.failures);
        assert!(report.markdown.contains("All held"));
    }

    #[test]
    fn a_call_run_twice_an_unrecorded_answer_and_an_unexplained_failure_are_each_caught() {
        let report = serde_json::json!({
            "calls": 4,
            "ok": [["0-1", "counter__tally"], ["0-2", "stdio__tally"]],
            "failed": [
                {"id": "1-1", "tool": "counter__tally", "class": "never-sent",
                    "error": "never sent", "started_ms": 100, "ended_ms": 120},
                {"id": "1-2", "tool": "counter__tally", "class": "server-error",
                    "error": "boom", "started_ms": 200, "ended_ms": 220},
            ],
            "latency": {},
        });
        // 0-1 ran twice, 0-2 was answered but never recorded, 1-1 was said never sent and ran.
        let tallies = ["0-1\n0-1\n1-1\n".to_owned(), String::new()];
        let (report, ok) = judge(&plan(), &report, TOOLS, &tallies, &seen(vec![5_000]));
        assert!(!ok);
        let all = report.failures.join("\n");
        assert!(all.contains("ran twice"), "{all}");
        assert!(all.contains("never recorded as run"), "{all}");
        assert!(all.contains("said never sent, and ran"), "{all}");
        assert!(all.contains("with no fault in its span"), "{all}");
        assert!(report.markdown.contains("FAILED"));
    }

    #[test]
    fn a_replica_whose_descriptors_climb_fails_the_flatness_check() {
        let mut seen = seen(vec![5_000]);
        for s in &mut seen.samples {
            if s.replica == 2 {
                s.fds = 15 + (s.ms / 1_000) as u64;
            }
        }
        let report = serde_json::json!({"calls": 4, "ok": [], "failed": [], "latency": {}});
        let (report, ok) = judge(
            &plan(),
            &report,
            TOOLS,
            &[String::new(), String::new()],
            &seen,
        );
        assert!(!ok);
        assert!(
            report
                .failures
                .iter()
                .any(|f| f.starts_with("replica 3 grew")),
            "{:?}",
            report.failures
        );
    }

    #[test]
    fn a_per_user_call_failing_while_redis_is_down_is_explained_and_one_after_is_not() {
        let routes: &[(&str, usize)] = &[
            ("counter__tally", 0),
            ("stdio__tally", 1),
            ("user__counter__tally", 0),
        ];
        let failed = |id: &str, from: u64| {
            serde_json::json!({"id": id, "tool": "user__counter__tally", "class": "server-error",
                "error": "vault", "started_ms": from, "ended_ms": from + 10})
        };
        let report = serde_json::json!({"calls": 4, "ok": [], "latency": {},
            "failed": [failed("0-1", 6_000), failed("0-2", 9_000)]});
        let (report, ok) = judge(
            &plan(),
            &report,
            routes,
            &[String::new(), String::new()],
            &seen(vec![1_000]),
        );
        assert!(!ok);
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        assert!(
            report.failures[0].starts_with("call 0-2 "),
            "{:?}",
            report.failures
        );
        assert!(report.markdown.contains("while Redis was down: 1"));
    }

    #[test]
    fn an_error_is_grouped_without_its_request_id_and_keeps_its_status() {
        assert_eq!(
            short_error("request 502 failed with HTTP 502"),
            "request # failed with HTTP 502"
        );
    }
}

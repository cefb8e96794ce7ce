//! The gateway's tables of a run: what it adds over the direct call and over the floor
//! proxy, and its targets, each checked.

use std::time::Duration;

use crate::{Measurement, find};

/// What the gateway adds: for each case through a gateway, Toolwire's client through it
/// against the same client on the server directly (`http-*`): p50 and p99 added per
/// sequential call, the throughput ratio with 64 callers; and beside them, the same against
/// the floor proxy of the same era and load (`floor-proxy-*`), when the run has it.
pub fn gateway_table(runs: &[Measurement]) -> String {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut t = String::from(
        "| case | direct p50 | through p50 | added p50 | direct p99 | through p99 | added p99 | throughput through/direct | p50 over the floor proxy's | throughput / the floor proxy's |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (gateway, direct, floor) in [
        ("floor-proxy-legacy-seq", "http-legacy-seq", None),
        ("nginx-legacy-seq", "http-legacy-seq", None),
        (
            "gateway-legacy-seq",
            "http-legacy-seq",
            Some("floor-proxy-legacy-seq"),
        ),
        (
            "mcp-proxy-legacy-seq",
            "http-legacy-seq",
            Some("floor-proxy-legacy-seq"),
        ),
        (
            "contextforge-legacy-seq",
            "http-legacy-seq",
            Some("floor-proxy-legacy-seq"),
        ),
        ("floor-proxy-modern-seq", "http-modern-seq", None),
        ("nginx-modern-seq", "http-modern-seq", None),
        (
            "gateway-modern-seq",
            "http-modern-seq",
            Some("floor-proxy-modern-seq"),
        ),
        (
            "floor-proxy-legacy-concurrent-64",
            "http-legacy-concurrent-64",
            None,
        ),
        (
            "gateway-legacy-concurrent-64",
            "http-legacy-concurrent-64",
            Some("floor-proxy-legacy-concurrent-64"),
        ),
        (
            "mcp-proxy-legacy-concurrent-64",
            "http-legacy-concurrent-64",
            Some("floor-proxy-legacy-concurrent-64"),
        ),
        (
            "contextforge-legacy-concurrent-64",
            "http-legacy-concurrent-64",
            Some("floor-proxy-legacy-concurrent-64"),
        ),
        ("floor-proxy-concurrent-64", "http-concurrent-64", None),
        ("nginx-concurrent-64", "http-concurrent-64", None),
        (
            "nginx-legacy-concurrent-64",
            "http-legacy-concurrent-64",
            None,
        ),
        (
            "gateway-concurrent-64",
            "http-concurrent-64",
            Some("floor-proxy-concurrent-64"),
        ),
        // In front of rmcp's server, against nginx in front of it.
        ("nginx-rmcp-legacy-seq", "rmcp-server-legacy-seq", None),
        (
            "gateway-rmcp-legacy-seq",
            "rmcp-server-legacy-seq",
            Some("nginx-rmcp-legacy-seq"),
        ),
        ("nginx-rmcp-modern-seq", "rmcp-server-modern-seq", None),
        (
            "gateway-rmcp-modern-seq",
            "rmcp-server-modern-seq",
            Some("nginx-rmcp-modern-seq"),
        ),
        (
            "nginx-rmcp-concurrent-64",
            "rmcp-server-concurrent-64",
            None,
        ),
        (
            "gateway-rmcp-concurrent-64",
            "rmcp-server-concurrent-64",
            Some("nginx-rmcp-concurrent-64"),
        ),
        // Traffic control set and not tripping: against the same gateway without it.
        ("gateway-controlled-modern-seq", "gateway-modern-seq", None),
        (
            "gateway-controlled-modern-seq-1cpu",
            "gateway-modern-seq-1cpu",
            None,
        ),
        // Checking a JWT access token: against the same gateway without authentication.
        ("gateway-jwt-modern-seq", "gateway-modern-seq", None),
        // Client, proxy or gateway and server on one core: each one's work, without the
        // machine's wake-ups between cores.
        ("floor-proxy-legacy-seq-1cpu", "http-legacy-seq-1cpu", None),
        (
            "gateway-legacy-seq-1cpu",
            "http-legacy-seq-1cpu",
            Some("floor-proxy-legacy-seq-1cpu"),
        ),
        ("floor-proxy-modern-seq-1cpu", "http-modern-seq-1cpu", None),
        (
            "gateway-modern-seq-1cpu",
            "http-modern-seq-1cpu",
            Some("floor-proxy-modern-seq-1cpu"),
        ),
    ] {
        let (Some(g), Some(d)) = (
            find(runs, gateway, "toolwire"),
            find(runs, direct, "toolwire"),
        ) else {
            continue;
        };
        let (over_floor, against_floor) = match floor.and_then(|f| find(runs, f, "toolwire")) {
            Some(f) => (
                format!("{:+.0} µs", us(g.p50) - us(f.p50)),
                times(g.calls_per_s() / f.calls_per_s()),
            ),
            None => ("—".to_owned(), "—".to_owned()),
        };
        t.push_str(&format!(
            "| {gateway} | {:.0} µs | {:.0} µs | {:+.0} µs | {:.0} µs | {:.0} µs | {:+.0} µs | {} | {over_floor} | {against_floor} |\n",
            us(d.p50),
            us(g.p50),
            us(g.p50) - us(d.p50),
            us(d.p99),
            us(g.p99),
            us(g.p99) - us(d.p99),
            times(g.calls_per_s() / d.calls_per_s()),
        ));
    }
    t
}

/// The gateway's targets, each checked in this run: with 64 callers, its throughput against
/// nginx's in front of the same server (at least 0.8×); one call at a time, the p50 it adds
/// over the direct call against the p50 nginx adds (at most 2×), with either upstream; and on
/// one core, its added p50 against the floor proxy's (at most 2×); with traffic control set
/// (not tripping), its added p50 against the same gateway's without (at most 1.05×). A row whose runs are
/// missing (nginx not installed) says so.
pub fn targets(runs: &[Measurement]) -> String {
    let p50 = |case: &str| find(runs, case, "toolwire").map(|m| m.p50.as_secs_f64() * 1e6);
    let rate = |case: &str| find(runs, case, "toolwire").map(Measurement::calls_per_s);
    let mut t = String::from(
        "| target | gateway | reference | gateway's | reference's | ratio | holds |\n\
         |---|---|---|---:|---:|---:|---|\n",
    );
    let mut row = |what: &str,
                   g: &str,
                   r: &str,
                   figures: Option<(f64, f64)>,
                   at_least: Option<f64>,
                   at_most: Option<f64>,
                   unit: &str| {
        let (cells, holds) = match figures {
            Some((gv, rv)) if rv > 0.0 => {
                let q = gv / rv;
                let holds =
                    at_least.is_none_or(|min| q >= min) && at_most.is_none_or(|max| q <= max);
                (
                    format!("{gv:.0}{unit} | {rv:.0}{unit} | {}", times(q)),
                    if holds { "yes" } else { "no" },
                )
            }
            _ => ("— | — | —".to_owned(), "not measured"),
        };
        t.push_str(&format!("| {what} | `{g}` | `{r}` | {cells} | {holds} |\n"));
    };
    let both = |a: Option<f64>, b: Option<f64>| a.zip(b);
    for (upstream, gateway, nginx) in [
        ("", "gateway-concurrent-64", "nginx-concurrent-64"),
        (
            "",
            "gateway-legacy-concurrent-64",
            "nginx-legacy-concurrent-64",
        ),
        (
            "rmcp ",
            "gateway-rmcp-concurrent-64",
            "nginx-rmcp-concurrent-64",
        ),
    ] {
        let what = format!("{upstream}64 callers: throughput ≥ 0.8× nginx's");
        row(
            &what,
            gateway,
            nginx,
            both(rate(gateway), rate(nginx)),
            Some(0.8),
            None,
            " calls/s",
        );
    }
    for (upstream, gateway, nginx, direct) in [
        (
            "",
            "gateway-legacy-seq",
            "nginx-legacy-seq",
            "http-legacy-seq",
        ),
        (
            "",
            "gateway-modern-seq",
            "nginx-modern-seq",
            "http-modern-seq",
        ),
        (
            "rmcp ",
            "gateway-rmcp-legacy-seq",
            "nginx-rmcp-legacy-seq",
            "rmcp-server-legacy-seq",
        ),
        (
            "rmcp ",
            "gateway-rmcp-modern-seq",
            "nginx-rmcp-modern-seq",
            "rmcp-server-modern-seq",
        ),
    ] {
        let added = |case: &str| p50(case).zip(p50(direct)).map(|(c, d)| c - d);
        let what = format!("{upstream}sequential: added p50 ≤ 2× nginx's");
        row(
            &what,
            gateway,
            nginx,
            both(added(gateway), added(nginx)),
            None,
            Some(2.0),
            " µs",
        );
    }
    for (gateway, floor, direct) in [
        (
            "gateway-legacy-seq-1cpu",
            "floor-proxy-legacy-seq-1cpu",
            "http-legacy-seq-1cpu",
        ),
        (
            "gateway-modern-seq-1cpu",
            "floor-proxy-modern-seq-1cpu",
            "http-modern-seq-1cpu",
        ),
    ] {
        let added = |case: &str| p50(case).zip(p50(direct)).map(|(c, d)| c - d);
        let what = "one core: added p50 ≤ 2× the floor proxy's";
        row(
            what,
            gateway,
            floor,
            both(added(gateway), added(floor)),
            None,
            Some(2.0),
            " µs",
        );
    }
    // Traffic control set and never tripping costs at most 5 % of what the gateway adds: on
    // one core, where runs agree to a microsecond (on two, they move by more than that).
    let added = |case: &str| {
        p50(case)
            .zip(p50("http-modern-seq-1cpu"))
            .map(|(c, d)| c - d)
    };
    row(
        "one core, traffic control on: added p50 ≤ 1.05× without it",
        "gateway-controlled-modern-seq-1cpu",
        "gateway-modern-seq-1cpu",
        both(
            added("gateway-controlled-modern-seq-1cpu"),
            added("gateway-modern-seq-1cpu"),
        ),
        None,
        Some(1.05),
        " µs",
    );
    t
}

/// A ratio as `0.37×`; below 0.1 with two significant digits (`0.0025×`), so that a peer a
/// thousand times slower does not read as `0.00×`.
pub(crate) fn times(ratio: f64) -> String {
    if !(ratio > 0.0 && ratio < 0.1) {
        return format!("{ratio:.2}×");
    }
    let decimals = (-ratio.log10()).ceil() as usize + 1;
    format!("{ratio:.decimals$}×")
}

//! `cargo xtask soak [--short]`: a gateway fleet under faults, proved to lose nothing.
//!
//! Three `toolwire gateway` replicas (one session key) behind Debian's nginx (round-robin, no
//! affinity, a keep-alive pool), two counting upstreams — the reference server over HTTP (taking
//! 100 ms before it runs a call, so that some are in flight on a replica when it dies), and
//! the reference server over stdio exiting after every 500 calls it answers (each replica
//! starts its own and starts it again) — both recording every call's id in a tally file
//! (`toolwire serve --tally`). 32 callers of the library (`toolwire-soak-client`), half in the
//! legacy era and half in 2026-07-28, make 20,000 calls at 200 a second, each with its own
//! id, while replica 1 is killed (SIGKILL) and started again every 20 s. `--short` (CI's) makes
//! 4,000 calls and kills every 5 s.
//!
//! It then proves:
//! - every call was answered or failed; none hung, none was answered with another's id;
//! - no id was recorded twice (no call ran twice), every answered call's id was recorded
//!   once by the upstream it named, and no call the client was told never left it was
//!   recorded;
//! - every failure is explained by a fault: it was in flight when the replica was killed
//!   (a call to either upstream), or it was a call to the stdio upstream, whose server exits;
//! - the two replicas never killed keep their resident memory and open descriptors (all but
//!   TCP connections, whose number follows the load) flat: within 10 % between the quarter
//!   mark (the 5,000th call) and the end, and hold at most four connections a caller;
//! - no stdio child outlives the fleet.
//!
//! The long run writes `docs/soak.md` (counts by outcome, latency, memory and descriptors)
//! and `docs/soak.svg` (both over time, the kills marked); the short one writes the same to
//! the target folder.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead as _;
use std::sync::{Arc, Mutex};

use super::*;

/// The shape of one run.
struct Plan {
    calls: usize,
    callers: usize,
    /// Calls a second, all callers together.
    rate: u32,
    /// Between two kills of replica 1.
    kill_every: Duration,
    /// The stdio upstream exits after answering this many calls.
    exit_after: u32,
    /// The HTTP upstream waits this long before it runs a call, so that calls are in flight
    /// on the replica that is killed.
    latency_ms: u32,
}

const LONG: Plan = Plan {
    calls: 20_000,
    callers: 32,
    rate: 200,
    kill_every: Duration::from_secs(20),
    exit_after: 500,
    latency_ms: 100,
};

const SHORT: Plan = Plan {
    calls: 4_000,
    callers: 32,
    rate: 200,
    kill_every: Duration::from_secs(5),
    exit_after: 500,
    latency_ms: 100,
};

/// The most a never-killed replica's memory or descriptors may grow between the quarter
/// mark and the end.
const FLAT: f64 = 1.10;
/// The most TCP connections a replica may hold, per caller of the soak (a call in flight
/// and a stream from nginx, the call relayed to the upstream, nginx's idle pool).
const CONNECTIONS_PER_CALLER: u64 = 4;
/// How far from a kill a failed call's span may be and still be the kill's.
const KILL_SLACK_MS: u128 = 1_000;

/// One sample of a replica.
#[derive(Clone, Copy)]
struct Sample {
    ms: u128,
    replica: usize,
    rss_kb: u64,
    /// Open descriptors but TCP sockets: pipes to the stdio upstream, files, the runtime's.
    fds: u64,
    /// TCP sockets: the listener, connections accepted from nginx (its keep-alive pool, the calls in flight, the
    /// legacy callers' streams) and made to the HTTP upstream (a pool as deep as the calls
    /// in flight to it have been). How many is the load's choice, and at each kill the
    /// killed replica's load moves to the others; they are checked against a bound.
    connections: u64,
}

pub(crate) fn run(root: &Path, short: bool) -> Result<(), String> {
    let plan = if short { SHORT } else { LONG };
    let release = crate::release_bins(root, &["toolwire", "toolwire-soak-client"])?;
    let bin = release.join("toolwire");
    let nginx = debian("nginx")?;
    let dir = release.join("soak");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tmp")).map_err(|e| e.to_string())?;
    let fleet = Fleet::start(&bin, &nginx, &dir, &plan)?;
    let outcome = soak(&release, &dir, &plan, fleet);
    let (report, ok) = outcome?;
    let (md, svg) = if short {
        (dir.join("soak.md"), dir.join("soak.svg"))
    } else {
        (root.join("docs/soak.md"), root.join("docs/soak.svg"))
    };
    std::fs::write(&md, &report.markdown).map_err(|e| e.to_string())?;
    std::fs::write(&svg, &report.svg).map_err(|e| e.to_string())?;
    eprintln!("{}", report.summary);
    eprintln!("==> the soak's report: {}", md.display());
    if ok {
        Ok(())
    } else {
        Err(format!("the soak failed: {}", report.failures.join("; ")))
    }
}

/// The processes of the fleet; stopped when dropped.
struct Fleet {
    /// The reference server (HTTP) and nginx.
    fixed: Processes,
    /// The replicas, in order, and how each is started again.
    replicas: Vec<Child>,
    replica_commands: Vec<(Vec<String>, PathBuf)>,
    ports: Vec<u16>,
    url: String,
    bin: PathBuf,
    tallies: [PathBuf; 2],
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.replicas {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
        }
        for child in &mut self.replicas {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Fleet {
    fn start(bin: &Path, nginx: &Path, dir: &Path, plan: &Plan) -> Result<Self, String> {
        let key_file = session_key_file(dir)?;
        let tallies = [dir.join("tally-http.txt"), dir.join("tally-stdio.txt")];
        let mut fixed = Processes::default();
        let ref_port = free_port()?;
        let ref_log = dir.join("refserver.log");
        fixed.spawn(
            Command::new(bin)
                .args(["serve", "--http", &format!("127.0.0.1:{ref_port}")])
                .args(["--latency-ms", &plan.latency_ms.to_string()])
                .arg("--tally")
                .arg(&tallies[0]),
            &ref_log,
        )?;
        wait_for_port(ref_port, "the reference server", &ref_log)?;
        let file = dir.join("fleet.json");
        let config = serde_json::json!({"mcpServers": {
            "counter": {"type": "http", "url": format!("http://127.0.0.1:{ref_port}/mcp")},
            "stdio": {"command": bin.display().to_string(), "args": [
                "serve", "--stdio", "--exit-after-calls", plan.exit_after.to_string(),
                "--tally", tallies[1].display().to_string()]},
        }});
        std::fs::write(&file, config.to_string()).map_err(|e| e.to_string())?;
        let mut fleet = Self {
            fixed,
            replicas: Vec::new(),
            replica_commands: Vec::new(),
            ports: Vec::new(),
            url: String::new(),
            bin: bin.to_path_buf(),
            tallies,
        };
        for n in 1..=3 {
            let port = free_port()?;
            let args = vec![
                "gateway".to_owned(),
                "--config".to_owned(),
                file.display().to_string(),
                "--http".to_owned(),
                format!("127.0.0.1:{port}"),
                "--session-key-file".to_owned(),
                key_file.display().to_string(),
            ];
            let log = dir.join(format!("replica-{n}.log"));
            fleet.replica_commands.push((args, log));
            fleet.ports.push(port);
            let child = fleet.spawn_replica(n - 1)?;
            fleet.replicas.push(child);
        }
        let nginx_port = free_port()?;
        std::fs::write(
            dir.join("fleet.conf"),
            super::gateway::fleet_conf(nginx_port, &fleet.ports),
        )
        .map_err(|e| e.to_string())?;
        let log = dir.join("nginx.log");
        fleet.fixed.spawn(
            Command::new(nginx)
                .arg("-p")
                .arg(format!("{}/", dir.display()))
                .args(["-c", "fleet.conf"]),
            &log,
        )?;
        wait_for_port(nginx_port, "nginx", &log)?;
        fleet.url = format!("http://127.0.0.1:{nginx_port}/mcp");
        Ok(fleet)
    }

    /// Starts replica `n` (from 0) and waits until it listens.
    fn spawn_replica(&self, n: usize) -> Result<Child, String> {
        let (args, log) = &self.replica_commands[n];
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&self.bin)
            .args(args)
            .env("TOOLWIRE_TRUST", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("a gateway replica: {e}"))?;
        wait_for_port(self.ports[n], "a gateway replica", log)?;
        Ok(child)
    }

    /// Kills replica `n` (SIGKILL: no chance to finish what it holds) and starts it again.
    fn kill_and_restart(&mut self, n: usize) -> Result<(), String> {
        let child = &mut self.replicas[n];
        child.kill().map_err(|e| e.to_string())?;
        child.wait().map_err(|e| e.to_string())?;
        self.replicas[n] = self.spawn_replica(n)?;
        Ok(())
    }
}

/// The inodes of every TCP socket (from `/proc/net/tcp`), with its local port.
fn tcp_sockets() -> HashMap<u64, u16> {
    let mut ports = HashMap::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(inode)) = (fields.get(1), fields.get(9)) else {
                continue;
            };
            let port = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if let (Some(port), Ok(inode)) = (port, inode.parse()) {
                ports.insert(inode, port);
            }
        }
    }
    ports
}

/// The resident set (KiB) of process `pid`, its open descriptors but TCP connections, and its
/// TCP connections (accepted from nginx, made to the upstream).
fn measure(pid: u32, tcp: &HashMap<u64, u16>) -> Option<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let (mut fds, mut connections) = (0, 0);
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        let target = std::fs::read_link(fd.path()).unwrap_or_default();
        let inode = target
            .to_str()
            .and_then(|t| t.strip_prefix("socket:["))
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|t| t.parse::<u64>().ok());
        if inode.is_some_and(|i| tcp.contains_key(&i)) {
            connections += 1;
        } else {
            fds += 1;
        }
    }
    Some((rss, fds, connections))
}

/// What the run found, as the report and its checks.
struct Report {
    markdown: String,
    svg: String,
    summary: String,
    failures: Vec<String>,
}

/// Runs the callers against the fleet while killing replica 1, then checks what they were
/// told against the tallies.
fn soak(
    release: &Path,
    dir: &Path,
    plan: &Plan,
    mut fleet: Fleet,
) -> Result<(Report, bool), String> {
    let tools = ["counter__tally", "stdio__tally"];
    let mut client = Command::new(release.join("toolwire-soak-client"))
        .arg(&fleet.url)
        .args([
            plan.callers.to_string(),
            plan.calls.to_string(),
            plan.rate.to_string(),
        ])
        .args(tools)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("toolwire-soak-client: {e}"))?;
    let start = Instant::now();
    // The progress marks (calls done, when), read as the client prints them.
    let marks: Arc<Mutex<Vec<(usize, u128)>>> = Arc::default();
    let stderr = client.stderr.take().ok_or("no stderr")?;
    let said = {
        let marks = marks.clone();
        std::thread::spawn(move || {
            let mut other = String::new();
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                match line.strip_prefix("progress ").and_then(|n| n.parse().ok()) {
                    Some(n) => marks
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((n, start.elapsed().as_millis())),
                    None => {
                        other.push_str(&line);
                        other.push('\n');
                    }
                }
            }
            other
        })
    };
    let mut stdout = client.stdout.take().ok_or("no stdout")?;
    let printed = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let mut samples = Vec::new();
    let mut kills = Vec::new();
    let mut last_kill = Instant::now();
    let limit =
        Duration::from_secs(60) + Duration::from_secs(plan.calls as u64 / plan.rate as u64 * 3);
    while matches!(client.try_wait(), Ok(None)) {
        if start.elapsed() > limit {
            let _ = client.kill();
            return Err(format!("the callers did not finish in {limit:?}"));
        }
        let ms = start.elapsed().as_millis();
        let tcp = tcp_sockets();
        for (replica, child) in fleet.replicas.iter().enumerate() {
            if let Some((rss_kb, fds, connections)) = measure(child.id(), &tcp) {
                samples.push(Sample {
                    ms,
                    replica,
                    rss_kb,
                    fds,
                    connections,
                });
            }
        }
        if last_kill.elapsed() >= plan.kill_every {
            kills.push(start.elapsed().as_millis());
            fleet.kill_and_restart(0)?;
            last_kill = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let other = said.join().unwrap_or_default();
    let report: Value = serde_json::from_str(&printed.join().unwrap_or_default())
        .map_err(|e| format!("toolwire-soak-client printed no report ({e}): {other}"))?;
    let marks = marks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let tallies = [
        std::fs::read_to_string(&fleet.tallies[0]).unwrap_or_default(),
        std::fs::read_to_string(&fleet.tallies[1]).unwrap_or_default(),
    ];
    let access = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
    // Each replica logs each end of its stdio upstream's process.
    let exits = (1..=3)
        .map(|n| {
            std::fs::read_to_string(dir.join(format!("replica-{n}.log")))
                .unwrap_or_default()
                .matches("the server process ended")
                .count()
        })
        .sum();
    drop(fleet);
    std::thread::sleep(Duration::from_millis(500));
    let stray = stray_children(dir);
    let seen = Seen {
        kills,
        samples,
        marks,
        access,
        exits,
        stray,
    };
    Ok(judge(plan, &report, &tools, &tallies, &seen))
}

/// How many stdio upstreams of this soak still run (each names the soak's tally file).
fn stray_children(dir: &Path) -> usize {
    let tally = dir.join("tally-stdio.txt").display().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .filter_map(Result::ok)
        .filter(|p| {
            p.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|p| std::fs::read(p.path().join("cmdline")).ok())
        .filter(|cmd| {
            String::from_utf8_lossy(cmd)
                .split('\0')
                .any(|arg| arg == tally)
        })
        .count()
}

/// What the driver saw while the callers ran.
struct Seen {
    /// When replica 1 was killed, in ms from the start.
    kills: Vec<u128>,
    samples: Vec<Sample>,
    /// The callers' progress marks: calls done, when.
    marks: Vec<(usize, u128)>,
    /// nginx's access log.
    access: String,
    /// The stdio upstream's exits the replicas logged.
    exits: usize,
    /// stdio upstreams left running after the fleet stopped.
    stray: usize,
}

/// The checks, and the report that shows them.
fn judge(
    plan: &Plan,
    report: &Value,
    tools: &[&str; 2],
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
    let upstream = |tool: &str| tools.iter().position(|t| *t == tool);
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
    let (mut at_kill, mut at_exit, mut ran_anyway) = (0, 0, 0);
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
            ran_anyway += 1;
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
        if kills
            .iter()
            .any(|k| from <= k + KILL_SLACK_MS && k.saturating_sub(KILL_SLACK_MS) <= to)
        {
            at_kill += 1;
        } else if tool == tools[1] {
            at_exit += 1;
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
    if exits == 0 || kills.is_empty() {
        failures.push(format!(
            "the faults did not happen: {} kills, {exits} stdio exits",
            kills.len()
        ));
    }
    let nginx_5xx = access
        .lines()
        .filter(|l| l.split('|').nth(3).is_some_and(|s| s.starts_with('5')))
        .count();
    let answered_n = ok.len();
    let summary = format!(
        "soak: {calls} calls, {answered_n} answered, {} failed ({at_kill} in flight at a kill, {at_exit} at a stdio exit, {ran_anyway} of them ran); latency {}; {} kills; {exits} stdio exits; {} ids recorded; {} failures of the checks",
        failed.len(),
        report["latency"],
        kills.len(),
        ran[0].len() + ran[1].len(),
        failures.len()
    );
    let ok_run = failures.is_empty();
    let markdown = markdown(
        plan, calls, answered_n, &classes, &errors, at_kill, at_exit, ran_anyway, report, kills,
        exits, nginx_5xx, &flat_rows, &failures,
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
        words.push(if numeric && previous != "(HTTP" {
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
    at_kill: usize,
    at_exit: usize,
    ran_anyway: usize,
    report: &Value,
    kills: &[u128],
    exits: usize,
    nginx_5xx: usize,
    flat_rows: &[String],
    failures: &[String],
) -> String {
    let mut md = String::from("# The fleet soak\n\n");
    md.push_str(&format!(
        "Written by `cargo xtask soak` (`xtask/src/interop/soak.rs`, which says what it starts and \
         checks). Three `toolwire gateway` replicas behind nginx (round-robin, no affinity), \
         {} callers of the library (half legacy, half 2026-07-28), {} calls at {} a second to \
         two counting upstreams (the reference server over HTTP, waiting {} ms before it runs \
         each call, and over stdio exiting after every {} calls), replica 1 killed with SIGKILL and started again every {} s. The \
         figures are one run's, on the project's 2-core machine.\n\n",
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
        "| **all** | **{calls}** |\n\nFailed calls in flight at a kill: {at_kill}; calls to the \
         stdio upstream failed as its server exited: {at_exit}; failed calls the upstream had \
         run (each told it may have run): {ran_anyway}. Kills: {} (at {} s). The stdio \
         servers exited {exits} times (as the replicas logged). nginx answered 5xx {nginx_5xx} times.\n\n",
        kills.len(),
        kills
            .iter()
            .map(|k| format!("{:.1}", *k as f64 / 1000.0))
            .collect::<Vec<_>>()
            .join(", "),
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
             failure in flight at a kill or at a stdio exit; the never-killed replicas flat; no \
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
        }
    }

    const TOOLS: [&str; 2] = ["counter__tally", "stdio__tally"];

    fn plan() -> Plan {
        Plan { calls: 4, ..SHORT }
    }

    #[test]
    fn a_clean_run_passes_every_check() {
        let report = serde_json::json!({
            "calls": 4,
            "ok": [["0-1", "counter__tally"], ["0-2", "stdio__tally"], ["1-1", "counter__tally"]],
            "failed": [{"id": "1-2", "tool": "counter__tally", "class": "undelivered",
                "error": "request 9 got no answer (HTTP 502)", "started_ms": 4_900, "ended_ms": 5_100}],
            "latency": {},
        });
        let tallies = ["0-1\n1-1\n".to_owned(), "0-2\n".to_owned()];
        let (report, ok) = judge(&plan(), &report, &TOOLS, &tallies, &seen(vec![5_000]));
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
        let (report, ok) = judge(&plan(), &report, &TOOLS, &tallies, &seen(vec![5_000]));
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
            &TOOLS,
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
    fn an_error_is_grouped_without_its_request_id_and_keeps_its_status() {
        assert_eq!(
            short_error("request 502 got no answer (HTTP 502)"),
            "request # got no answer (HTTP 502)"
        );
    }
}

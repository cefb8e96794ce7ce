//! `cargo xtask soak [--short]`: a gateway fleet under faults, proved to lose nothing.
//!
//! Three `toolwire gateway` replicas (one session key) behind Debian's nginx (round-robin, no
//! affinity, a keep-alive pool), with three routes to two counting upstreams that record
//! every call's id in a tally file (`toolwire serve --tally`):
//! - the reference server over HTTP, taking 100 ms before it runs a call (so that some are in
//!   flight on a replica when it dies);
//! - the reference server over stdio, exiting after every 500 calls it answers (each replica
//!   starts its own, and starts it again);
//! - the first again behind an upstream each caller signed in to: a `toolwire gateway` taking
//!   the tokens of the TypeScript SDK's example authorization server, which the fleet calls
//!   with each caller's own login (`perUser`), the logins kept in Redis (append-only file).
//!
//! 32 callers of the library (`toolwire-soak-client`), half in the legacy era and half in
//! 2026-07-28, as four OAuth clients of that authorization server, each signed in to the
//! per-user upstream through the fleet's sign-in page first, make 20,000 calls at 200 a second
//! (each with its own id) while replica 1 is killed (SIGKILL) and started again every 20 s, and
//! Redis is killed with the middle kill and started again 2 s later. `--short` (CI's) makes
//! 4,000 calls, kills every 5 s, and its stdio upstream exits every 200 calls.
//!
//! It then proves:
//! - every call was answered or failed; none hung, none was answered with another's id;
//! - no id was recorded twice (no call ran twice), every answered call's id was recorded
//!   once by the upstream it named, and no call the client was told never left it was
//!   recorded;
//! - every failure is explained by a fault: in flight when the replica was killed, a call to
//!   the stdio upstream (whose server exits), or a per-user call while Redis was down;
//! - the faults happened: kills, stdio exits (as the replicas logged them);
//! - the two replicas never killed keep their resident memory and open descriptors (all but
//!   TCP sockets, whose number follows the load) flat: within 10 % between the quarter mark
//!   (the 5,000th call) and the end, and hold at most four connections a caller;
//! - no stdio child outlives the fleet.
//!
//! The long run writes `docs/soak.md` (counts by outcome, latency, memory and descriptors)
//! and `docs/soak.svg` (both over time, the kills marked); the short one writes the same to
//! the target folder.

use std::collections::HashMap;
use std::io::BufRead as _;
use std::sync::{Arc, Mutex};

use super::*;

mod report;

use report::{Report, Seen, judge};

/// The shape of one run.
pub(super) struct Plan {
    pub(super) calls: usize,
    pub(super) callers: usize,
    /// Calls a second, all callers together.
    pub(super) rate: u32,
    /// Between two kills of replica 1.
    pub(super) kill_every: Duration,
    /// The stdio upstream exits after answering this many calls.
    pub(super) exit_after: u32,
    /// The HTTP upstream waits this long before it runs a call, so that calls are in flight
    /// on the replica that is killed.
    pub(super) latency_ms: u32,
}

const LONG: Plan = Plan {
    calls: 20_000,
    callers: 32,
    rate: 200,
    kill_every: Duration::from_secs(20),
    exit_after: 500,
    latency_ms: 100,
};

pub(super) const SHORT: Plan = Plan {
    calls: 4_000,
    callers: 32,
    rate: 200,
    kill_every: Duration::from_secs(5),
    exit_after: 200,
    latency_ms: 100,
};

/// The tools the callers call in turn, and the tally (0: the HTTP upstream's, 1: the stdio
/// upstream's) that records each call: the HTTP upstream directly, the stdio upstream, and the
/// HTTP upstream again behind the per-user upstream, with each caller's own login.
pub(super) const ROUTES: &[(&str, usize)] = &[
    ("counter__tally", 0),
    ("stdio__tally", 1),
    ("user__counter__tally", 0),
];

/// The callers' principals (OAuth clients), each signed in to the per-user upstream.
const PRINCIPALS: usize = 4;

/// The key the fleet lists the per-user upstream's tools with.
const FLEET_KEY: &str = "soak-fleet-key";

/// How long Redis stays down.
const REDIS_DOWN_MS: u128 = 2_000;

/// Locks a mutex whose data stays consistent if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The most a never-killed replica's memory or descriptors may grow between the quarter
/// mark and the end.
pub(super) const FLAT: f64 = 1.10;
/// The most TCP connections a replica may hold, per caller of the soak (a call in flight
/// and a stream from nginx, the call relayed to the upstream, nginx's idle pool).
pub(super) const CONNECTIONS_PER_CALLER: u64 = 4;
/// How far from a kill a failed call's span may be and still be the kill's.
pub(super) const KILL_SLACK_MS: u128 = 1_000;

/// One sample of a replica.
#[derive(Clone, Copy)]
pub(super) struct Sample {
    pub(super) ms: u128,
    pub(super) replica: usize,
    pub(super) rss_kb: u64,
    /// Open descriptors but TCP sockets: pipes to the stdio upstream, files, the runtime's.
    pub(super) fds: u64,
    /// TCP sockets: the listener, connections accepted from nginx (its keep-alive pool, the
    /// calls in flight, the legacy callers' streams) and made to the HTTP upstream (a pool as
    /// deep as the calls in flight to it have been). How many is the load's choice, and at
    /// each kill the killed replica's load moves to the others; they are checked against a
    /// bound.
    pub(super) connections: u64,
}

pub(crate) fn run(root: &Path, short: bool) -> Result<(), String> {
    let plan = if short { SHORT } else { LONG };
    // The long run measures (its memory and latency go to docs): the release build. The short
    // one, in the gate, checks: the dev build the gate already has.
    let bins = if short {
        crate::gate_bins(root, &["toolwire", "toolwire-soak-client"])?
    } else {
        crate::release_bins(root, &["toolwire", "toolwire-soak-client"])?
    };
    let bin = bins.join("toolwire");
    let peers = install(root)?;
    let redis = debian_package("redis-server", "redis-server")?;
    let dir = bins.join("soak");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tmp")).map_err(|e| e.to_string())?;
    let fleet = Fleet::start(&bin, &peers, &redis, &dir, &plan)?;
    let outcome = soak(&bins, &dir, &plan, fleet);
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
    /// The reference server (HTTP), the authorization server, the per-user upstream, nginx.
    fixed: Processes,
    /// Redis, and how it is started again (on the same port, with its append-only file).
    redis: Child,
    redis_command: (PathBuf, Vec<String>, PathBuf),
    redis_port: u16,
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
        let _ = self.redis.kill();
        let _ = self.redis.wait();
        stop(&mut self.replicas);
    }
}

impl Fleet {
    fn start(
        bin: &Path,
        peers: &Peers,
        redis: &Path,
        dir: &Path,
        plan: &Plan,
    ) -> Result<Self, String> {
        let key_file = session_key_file(dir)?;
        let vault_dir = dir.join("vault");
        std::fs::create_dir_all(&vault_dir).map_err(|e| e.to_string())?;
        let vault_key = session_key_file(&vault_dir)?;
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
        let (user_url, introspection) = per_user_upstream(bin, peers, dir, ref_port, &mut fixed)?;
        let redis_port = free_port()?;
        let redis_command = (
            redis.to_path_buf(),
            ["--port", &redis_port.to_string(), "--bind", "127.0.0.1"]
                .into_iter()
                .chain([
                    "--save",
                    "",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                ])
                .map(str::to_owned)
                .chain(["--dir".to_owned(), vault_dir.display().to_string()])
                .collect(),
            dir.join("redis.log"),
        );
        let redis = spawn_logged(
            Command::new(&redis_command.0).args(&redis_command.1),
            &redis_command.2,
        )?;
        wait_for_port(redis_port, "redis-server", &redis_command.2)?;
        let nginx_port = free_port()?;
        let file = dir.join("fleet.json");
        let config = serde_json::json!({
            "mcpServers": {
                "counter": {"type": "http", "url": format!("http://127.0.0.1:{ref_port}/mcp")},
                "stdio": {"command": bin.display().to_string(), "args": [
                    "serve", "--stdio", "--exit-after-calls", plan.exit_after.to_string(),
                    "--tally", tallies[1].display().to_string()]},
                "user": {"type": "http", "url": user_url,
                    "headers": {"Authorization": format!("Bearer {FLEET_KEY}")}},
            },
            "gateway": {
                "resource": format!("http://127.0.0.1:{nginx_port}/mcp"),
                "introspection": introspection,
                "upstreams": {"user": {"credentials": {"perUser": {}}}},
                "vault": {"redis": format!("redis://127.0.0.1:{redis_port}/0"),
                    "keyFile": vault_key.display().to_string()},
            },
        });
        std::fs::write(&file, config.to_string()).map_err(|e| e.to_string())?;
        let mut fleet = Self {
            fixed,
            redis,
            redis_command,
            redis_port,
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
        fleet.url = super::gateway::start_fleet_nginx(
            &mut fleet.fixed,
            &peers.nginx,
            dir,
            nginx_port,
            &fleet.ports,
        )?;
        Ok(fleet)
    }

    /// Kills Redis (SIGKILL: what it had not written to its append-only file is lost).
    fn kill_redis(&mut self) -> Result<(), String> {
        self.redis.kill().map_err(|e| e.to_string())?;
        self.redis.wait().map(drop).map_err(|e| e.to_string())
    }

    /// Starts Redis again, from its append-only file.
    fn restart_redis(&mut self) -> Result<(), String> {
        let (program, args, log) = &self.redis_command;
        self.redis = spawn_logged(Command::new(program).args(args), log)?;
        wait_for_port(self.redis_port, "redis-server", &self.redis_command.2)
    }

    /// Starts replica `n` (from 0) and waits until it listens.
    fn spawn_replica(&self, n: usize) -> Result<Child, String> {
        let (args, log) = &self.replica_commands[n];
        let child = spawn_logged(
            Command::new(&self.bin)
                .args(args)
                .env("TOOLWIRE_TRUST", "1")
                .env("GATEWAY_INTROSPECTION_SECRET", "unused-by-this-server"),
            log,
        )?;
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

/// The upstream whose callers sign in: a `toolwire gateway` in front of the reference server,
/// taking the tokens of the TypeScript SDK's example authorization server (which approves
/// every sign-in at once) and checking each at its introspection endpoint. Its URL, and the
/// `introspection` member that names that server (the fleet checks its own callers there).
fn per_user_upstream(
    bin: &Path,
    peers: &Peers,
    dir: &Path,
    ref_port: u16,
    processes: &mut Processes,
) -> Result<(String, Value), String> {
    let port = free_port()?;
    let issuer = super::gateway_auth::ts_authorization_server(
        peers,
        processes,
        &dir.join("authorization-server.log"),
    )?;
    let file = dir.join("per-user.json");
    let introspection = serde_json::json!({"issuer": issuer,
        "endpoint": format!("{issuer}introspect"),
        "clientId": "toolwire-gateway", "clientSecretEnv": "GATEWAY_INTROSPECTION_SECRET"});
    // The fleet lists the upstream's tools with a key of its own; its callers call with
    // their own logins.
    let (ok, digest, err) = run_limited(Command::new("sh").args([
        "-c",
        "printf %s \"$1\" | sha256sum",
        "sh",
        FLEET_KEY,
    ]));
    let digest = digest.split_whitespace().next().unwrap_or("").to_owned();
    if !ok || digest.len() != 64 {
        return Err(format!("sha256sum: {err}"));
    }
    let config = serde_json::json!({
        "mcpServers": {"counter": {"type": "http", "url": format!("http://127.0.0.1:{ref_port}/mcp")}},
        "gateway": {"introspection": introspection,
            "apiKeys": [{"name": "fleet", "sha256": digest}]},
    });
    std::fs::write(&file, config.to_string()).map_err(|e| e.to_string())?;
    let log = dir.join("per-user.log");
    processes.spawn(
        Command::new(bin)
            .args(["gateway", "--config", &file.display().to_string()])
            .args(["--http", &format!("127.0.0.1:{port}")])
            .env("GATEWAY_INTROSPECTION_SECRET", "unused-by-this-server")
            .env("TOOLWIRE_TRUST", "1"),
        &log,
    )?;
    wait_for_port(port, "the per-user upstream", &log)?;
    Ok((format!("http://127.0.0.1:{port}/mcp"), introspection))
}

/// Starts `command`, its output appended to `log` (a process started again writes on).
fn spawn_logged(command: &mut Command, log: &Path) -> Result<Child, String> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("{command:?}: {e}"))
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

/// Runs the callers against the fleet while killing replica 1, then checks what they were
/// told against the tallies.
fn soak(bins: &Path, dir: &Path, plan: &Plan, mut fleet: Fleet) -> Result<(Report, bool), String> {
    let tools: Vec<&str> = ROUTES.iter().map(|(tool, _)| *tool).collect();
    let mut client = Command::new(bins.join("toolwire-soak-client"))
        .arg(&fleet.url)
        .args([
            plan.callers.to_string(),
            plan.calls.to_string(),
            plan.rate.to_string(),
        ])
        .args(&tools)
        .env("SOAK_PRINCIPALS", PRINCIPALS.to_string())
        .env("SOAK_LOGIN", ROUTES[2].0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("toolwire-soak-client: {e}"))?;
    // When the callers began (after signing in), and their progress marks (calls done, ms
    // since), read as the client prints them.
    let begun: Arc<Mutex<Option<Instant>>> = Arc::default();
    let marks: Arc<Mutex<Vec<(usize, u128)>>> = Arc::default();
    let stderr = client.stderr.take().ok_or("no stderr")?;
    let said = {
        let (begun, marks) = (begun.clone(), marks.clone());
        std::thread::spawn(move || {
            let mut other = String::new();
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let since = lock(&begun).map_or(0, |b| b.elapsed().as_millis());
                match line.strip_prefix("progress ").and_then(|n| n.parse().ok()) {
                    Some(n) => lock(&marks).push((n, since)),
                    None if line == "start" => *lock(&begun) = Some(Instant::now()),
                    None => {
                        other.push_str(&line);
                        other.push('\n');
                    }
                }
            }
            other
        })
    };
    let signing_in = Instant::now();
    let start = loop {
        if let Some(begun) = *lock(&begun) {
            break begun;
        }
        if signing_in.elapsed() > Duration::from_secs(120) || !matches!(client.try_wait(), Ok(None))
        {
            let _ = client.kill();
            let _ = client.wait();
            return Err(format!(
                "the callers never began: {}",
                said.join().unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
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
    // Redis goes down with the middle kill, and comes back 2 s later.
    let redis_kill = (plan.calls as u64 / u64::from(plan.rate) / plan.kill_every.as_secs())
        .div_ceil(2)
        .max(1) as usize;
    let mut redis_down: Option<(u128, Option<u128>)> = None;
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
            if kills.len() == redis_kill {
                fleet.kill_redis()?;
                redis_down = Some((start.elapsed().as_millis(), None));
            }
            fleet.kill_and_restart(0)?;
            last_kill = Instant::now();
        }
        if let Some((down, None)) = redis_down
            && start.elapsed().as_millis() >= down + REDIS_DOWN_MS
        {
            fleet.restart_redis()?;
            redis_down = Some((down, Some(start.elapsed().as_millis())));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let other = said.join().unwrap_or_default();
    let report: Value = serde_json::from_str(&printed.join().unwrap_or_default())
        .map_err(|e| format!("toolwire-soak-client printed no report ({e}): {other}"))?;
    let marks = lock(&marks).clone();
    let tallies = [
        std::fs::read_to_string(&fleet.tallies[0]).unwrap_or_default(),
        std::fs::read_to_string(&fleet.tallies[1]).unwrap_or_default(),
    ];
    let access = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
    // Each replica logs each end of its stdio upstream's process, and each time it lost Redis.
    let logged = |what: &str| -> usize {
        (1..=3)
            .map(|n| {
                std::fs::read_to_string(dir.join(format!("replica-{n}.log")))
                    .unwrap_or_default()
                    .matches(what)
                    .count()
            })
            .sum()
    };
    let exits = logged("the server process ended");
    let redis_lost = logged("the vault's Redis");
    drop(fleet);
    std::thread::sleep(Duration::from_millis(500));
    let stray = stray_children(dir);
    let seen = Seen {
        redis: redis_down.map(|(down, up)| (down, up.unwrap_or(down))),
        redis_lost,
        kills,
        samples,
        marks,
        access,
        exits,
        stray,
    };
    Ok(judge(plan, &report, ROUTES, &tallies, &seen))
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

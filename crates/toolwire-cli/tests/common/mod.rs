//! What the test files here share.

#![allow(dead_code, unused_imports, reason = "each test file uses its own part")]

pub(crate) use std::io::{BufRead, BufReader};
pub(crate) use std::process::{Child, Command, Output, Stdio};

pub(crate) use serde_json::Value;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// Runs the CLI. The configuration files these tests write stand for the user's own, so
/// they are trusted for the run (`TOOLWIRE_TRUST=1`); trust itself is tested on its own.
pub(crate) fn toolwire(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("TOOLWIRE_TRUST", "1")
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", stdout(o)))
}

/// `toolwire serve --http 127.0.0.1:0 ...` as a child; its URL from the first stderr line.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve(extra: &[&str]) -> Served {
    let mut args = vec!["--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let (child, line) = serve_with(&args);
    let url = line.trim().rsplit(' ').next().expect("the URL").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    Served { child, url }
}

/// `toolwire serve ARGS...` as a child, once it said where it listens: the child and that first
/// stderr line.
pub(crate) fn serve_with(args: &[&str]) -> (Child, String) {
    spawn_listening("serve", args)
}

/// `toolwire COMMAND ARGS...` (a command that listens: `serve`, `gateway`) as a child, once it
/// said where it listens: the child and the stderr line that says so.
pub(crate) fn spawn_listening(command: &str, args: &[&str]) -> (Child, String) {
    spawn_listening_with(command, args, &[])
}

/// [`spawn_listening`] with variables `env` set for the child.
pub(crate) fn spawn_listening_with(
    command: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Child, String) {
    let mut child = Command::new(BIN)
        .arg(command)
        .args(args)
        .envs(env.iter().copied())
        .env("TOOLWIRE_TRUST", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The CLI's own lines start with its name; a gateway's log lines (its upstreams coming up)
    // may come first.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.starts_with("toolwire") {
        line.clear();
    }
    (child, line)
}

/// The names in a `--json tools list` document.
pub(crate) fn tool_names(list: &Value) -> Vec<&str> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

pub(crate) fn stdio_server(extra: &str) -> String {
    format!("'{BIN}' serve --stdio {extra}")
}

/// A configuration file naming the binary's own server over stdio and over HTTP, one that
/// cannot start and one disabled; removed when dropped.
pub(crate) struct ConfigFile {
    pub(crate) path: std::path::PathBuf,
    pub(crate) _served: Served,
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

pub(crate) fn config_file(tag: &str) -> ConfigFile {
    let served = serve(&[]);
    let text = serde_json::json!({"mcpServers": {
        "local": {"command": BIN, "args": ["serve", "--stdio"]},
        "remote": {"type": "http", "url": served.url, "excludeTools": ["fail", "protocol_*"]},
        "broken": {"command": "/nonexistent/toolwire-cli-test"},
        "off": {"command": BIN, "args": ["serve", "--stdio"], "disabled": true},
    }});
    let path = std::env::temp_dir().join(format!("toolwire-cli-{tag}-{}.json", std::process::id()));
    std::fs::write(&path, text.to_string()).unwrap();
    ConfigFile {
        path,
        _served: served,
    }
}

/// Every line `child` writes to stderr from now on, as it comes (read on a thread of its own).
pub(crate) fn collect_stderr(child: &mut Child) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let heard = said.clone();
    let pipe = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            heard.lock().unwrap().push(line);
        }
    });
    said
}

/// Waits up to `limit` for `check`, every 100 ms; `what` names it when it never holds.
pub(crate) fn until(limit: std::time::Duration, what: &str, check: impl Fn() -> bool) {
    let started = std::time::Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A `toolwire gateway --http 127.0.0.1:0` child, once it said where it listens: its URL and
/// every stderr line it writes; killed when dropped.
pub(crate) struct Listening {
    pub(crate) child: Child,
    pub(crate) url: String,
    pub(crate) said: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Listening {
    /// Starts `command` (a `gateway` command line, its environment set) with stderr piped.
    pub(crate) fn start(command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let said = collect_stderr(&mut child);
        let url = || {
            said.lock().unwrap().iter().find_map(|l| {
                l.strip_prefix("toolwire gateway on ")
                    .map(|u| u.trim().to_owned())
            })
        };
        until(
            std::time::Duration::from_secs(30),
            "the gateway listens",
            || url().is_some(),
        );
        let url = url().unwrap();
        Self { child, url, said }
    }

    /// Whether a line it wrote holds every one of `needles`.
    pub(crate) fn logged(&self, needles: &[&str]) -> bool {
        self.said
            .lock()
            .unwrap()
            .iter()
            .any(|l| needles.iter().all(|n| l.contains(n)))
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 exchange with the server of the endpoint `url` (`http://127.0.0.1:PORT/mcp`): the
/// response's head and body as text.
pub(crate) fn exchange(url: &str, request: &str) -> String {
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap();
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    std::io::Write::write_all(&mut stream, request.replace("{host}", authority).as_bytes())
        .unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
    answer
}

/// A GET of `path` on the server of the endpoint `url`: the response's head and body.
pub(crate) fn get(url: &str, path: &str) -> String {
    exchange(
        url,
        &format!("GET {path} HTTP/1.1\r\nHost: {{host}}\r\nConnection: close\r\n\r\n"),
    )
}

/// For the gateway's tests: an mcpServers file in a fresh directory: `ref` (both eras) and `old` (legacy only), each
/// the reference server over stdio. Removed when dropped.
pub(crate) struct Config {
    pub(crate) dir: std::path::PathBuf,
    pub(crate) path: std::path::PathBuf,
}

impl Drop for Config {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn config(label: &str) -> Config {
    let dir = std::env::temp_dir().join(format!(
        "toolwire-cli-gateway-{label}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mcp.json");
    let text = serde_json::json!({"mcpServers": {
        "ref": {"command": BIN, "args": ["serve", "--stdio"]},
        "old": {"command": BIN, "args": ["serve", "--stdio", "--eras", "legacy"]},
    }});
    std::fs::write(&path, text.to_string()).unwrap();
    Config { dir, path }
}

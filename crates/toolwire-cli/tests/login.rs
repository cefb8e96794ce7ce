//! `toolwire login`, `logout`, `auth status` and the stored credentials, against a scripted MCP
//! server behind OAuth on loopback (its authorization server approves at once; the "browser"
//! is a Python one-liner that follows the redirect into the CLI's loopback listener).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use toolwire_test_support::oauth::protected_server;

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// A browser that fetches the URL and follows its redirects.
const BROWSER: &str = "python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=30).read()'";

struct Credentials(PathBuf);

impl Credentials {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("toolwire-cli-login-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir.join("state").join("credentials.json"))
    }
}

impl Drop for Credentials {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent().and_then(Path::parent) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Runs the CLI with no terminal (stdin closed), the given credentials file and browser.
fn toolwire(credentials: &Credentials, args: &[&str]) -> Output {
    toolwire_at(&credentials.0, args)
}

/// The same, with the credentials file given by its path.
fn toolwire_at(credentials: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("TOOLWIRE_CREDENTIALS", credentials)
        .env("BROWSER", BROWSER)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the server received, one line per request (HTTP method, path, JSON-RPC method and
/// id, whether it carried credentials): for a failure's message.
fn received(peer: &toolwire_test_support::http::HttpPeer) -> String {
    peer.requests()
        .iter()
        .map(|r| {
            format!(
                "{} {} {:?} {:?} authorized={}",
                r.method,
                r.path,
                r.rpc_method(),
                r.rpc_id(),
                !r.header("authorization").is_empty()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_and_without_a_terminal_the_cli_names_the_login_command() {
    let (peer, state) = protected_server(|_| {}).await;
    let creds = Credentials::new("none");
    let url = peer.url();
    let out = tokio::task::spawn_blocking({
        let url = url.clone();
        move || toolwire(&creds, &["--url", &url, "tools", "list"])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("run `toolwire --url {url} login`")),
        "{err}"
    );
    assert!(err.contains("or give `--bearer TOKEN`"), "{err}");
    let s = state.lock().unwrap();
    assert_eq!(
        (s.registrations, s.authorizations),
        (0, 0),
        "no flow without a person"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_keeps_tokens_that_later_commands_use_and_logout_forgets_them() {
    let (peer, state) = protected_server(|_| {}).await;
    let creds = Credentials::new("flow");
    let url = peer.url();
    let (login, modes, list, status, logout, after) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            let login = toolwire(&creds, &["--url", &url, "--json", "login"]);
            let modes = file_modes(&creds.0);
            let list = toolwire(&creds, &["--url", &url, "--json", "tools", "list"]);
            let status = toolwire(&creds, &["auth", "status", "--json"]);
            let logout = toolwire(&creds, &["--url", &url, "logout"]);
            let after = toolwire(&creds, &["auth", "status", "--json"]);
            (login, modes, list, status, logout, after)
        }
    })
    .await
    .unwrap();
    assert!(login.status.success(), "{}", text(&login.stderr));
    let logged: Value = serde_json::from_slice(&login.stdout).unwrap();
    // The authorization server grants what was asked: the PRM's scope, and offline_access
    // because it lists it.
    assert_eq!(logged["scope"], "mcp:read offline_access");
    assert_eq!(logged["client_id"], "cid");
    assert!(
        text(&login.stderr).contains("/authorize?"),
        "the URL is always printed"
    );

    assert!(list.status.success(), "{}", text(&list.stderr));
    let tools: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert!(!tools["tools"].as_array().unwrap().is_empty());

    let shown = text(&status.stdout);
    let entries: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(entries["credentials"][0]["server"], url.as_str());
    assert!(!shown.contains("access-token"), "never a token: {shown}");

    assert!(logout.status.success());
    let none: Value = serde_json::from_slice(&after.stdout).unwrap();
    assert_eq!(none["credentials"], serde_json::json!([]));

    let s = state.lock().unwrap();
    assert_eq!(s.authorizations, 1, "tools list used the stored token");
    assert_eq!(s.registrations, 1);
    #[cfg(not(unix))]
    let _ = modes;
    #[cfg(unix)]
    assert_eq!(
        modes,
        Some((0o600, 0o700)),
        "the file and its folder are private"
    );
}

/// The permission bits of the credentials file and of its folder (Unix only: elsewhere
/// there are none to check, and nothing is claimed).
#[cfg(unix)]
fn file_modes(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777);
    Some((mode(path).ok()?, mode(path.parent()?).ok()?))
}

#[cfg(not(unix))]
fn file_modes(_: &Path) -> Option<(u32, u32)> {
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_wins_over_oauth() {
    let (peer, state) = protected_server(|_| {}).await;
    let creds = Credentials::new("bearer");
    let url = peer.url();
    let out = tokio::task::spawn_blocking(move || {
        toolwire(
            &creds,
            &["--url", &url, "--bearer", "not-a-token", "tools", "list"],
        )
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("401"), "{}", text(&out.stderr));
    assert!(
        !peer
            .requests()
            .iter()
            .any(|r| r.path.starts_with("/.well-known")),
        "no discovery with --bearer"
    );
    assert_eq!(state.lock().unwrap().registrations, 0);
}

/// A `--config` entry logs in as `--url` does, with its own `oauth` settings: its
/// pre-registered client id (no registration) and its fixed loopback redirect URI, bound
/// exactly. The entry's commands and those over every entry then use the stored login; an
/// entry with an `Authorization` header of its own has no login. Without credentials, the
/// hint names the entry the way the command line did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_entry_logs_in_with_its_oauth_settings_and_later_commands_use_the_login() {
    let (peer, state) = protected_server(|_| {}).await;
    let creds = Credentials::new("config");
    let folder = creds.0.parent().unwrap().parent().unwrap().to_owned();
    std::fs::create_dir_all(&folder).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redirect = format!("http://127.0.0.1:{port}/oauth/back");
    let file = folder.join("mcp.json");
    std::fs::write(
        &file,
        serde_json::json!({"mcpServers": {
            "remote": {"url": peer.url(), "oauth": {"clientId": "cli-client", "redirectUri": redirect}},
            "keyed": {"url": peer.url(), "headers": {"Authorization": "Bearer static-token"}},
        }})
        .to_string(),
    )
    .unwrap();
    let f = file.to_str().unwrap().to_owned();
    let (before, routed, unattended, login, one, all, keyed, logout) =
        tokio::task::spawn_blocking({
            let f = f.clone();
            move || {
                let run = |args: &[&str]| {
                    let mut all = vec!["--config", f.as_str()];
                    all.extend_from_slice(args);
                    toolwire(&creds, &all)
                };
                (
                    run(&["--server", "remote", "tools", "list"]),
                    run(&["tools", "call", "remote__echo"]),
                    run(&["tools", "list"]),
                    run(&["--server", "remote", "--json", "login"]),
                    run(&["--server", "remote", "--json", "tools", "list"]),
                    run(&["--json", "servers"]),
                    run(&["--server", "keyed", "login"]),
                    run(&["--server", "remote", "logout"]),
                )
            }
        })
        .await
        .unwrap();

    for out in [&before, &routed] {
        assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(&format!(
                "run `toolwire --config {f} --server remote login`"
            )),
            "{}",
            text(&out.stderr)
        );
    }
    // Over every entry: no flow, and the entry that needs a login says which command.
    assert!(
        text(&unattended.stderr).contains(&format!(
            "server `remote` needs a login: run `toolwire --config {f} --server remote login`"
        )),
        "{}",
        text(&unattended.stderr)
    );
    assert!(login.status.success(), "{}", text(&login.stderr));
    {
        let s = state.lock().unwrap();
        let asked = |name: &str| {
            s.authorize_query
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(asked("client_id").as_deref(), Some("cli-client"));
        assert_eq!(asked("redirect_uri"), Some(redirect.clone()));
        assert_eq!(
            s.registrations, 0,
            "the entry's client id is pre-registered"
        );
        assert_eq!(s.authorizations, 1);
    }

    assert!(
        one.status.success(),
        "{}\nthe server received:\n{}",
        text(&one.stderr),
        received(&peer)
    );
    let tools: Value = serde_json::from_slice(&one.stdout).unwrap();
    assert!(!tools["tools"].as_array().unwrap().is_empty());

    let servers: Value = serde_json::from_slice(&all.stdout).unwrap();
    let state_of = |name: &str| {
        servers["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| (s["state"].clone(), s["reason"].clone()))
            .unwrap()
    };
    assert_eq!(state_of("remote").0, "ready", "{servers}");
    let (keyed_state, keyed_reason) = state_of("keyed");
    assert_eq!(keyed_state, "failed");
    assert!(keyed_reason.as_str().unwrap().contains("401"), "{servers}");
    assert!(!servers.to_string().contains("static-token"));

    assert_eq!(keyed.status.code(), Some(2));
    assert!(
        text(&keyed.stderr).contains("Authorization header"),
        "{}",
        text(&keyed.stderr)
    );
    assert!(logout.status.success(), "{}", text(&logout.stderr));
    assert_eq!(
        state.lock().unwrap().authorizations,
        1,
        "every later command used the stored login"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_refreshing_one_rotating_token_at_once_both_keep_working() {
    // Tokens that always need refreshing, refresh tokens that rotate, and a server that
    // revokes the whole grant when a rotated refresh token is spent again.
    let (peer, state) = protected_server(|s| {
        s.expires_in = 0;
        s.reuse_detection = true;
    })
    .await;
    let creds = Credentials::new("rotate");
    let url = peer.url();
    let login = tokio::task::spawn_blocking({
        let (creds, url) = (creds.0.clone(), url.clone());
        move || toolwire_at(&creds, &["--url", &url, "login"])
    });
    let login = login.await.unwrap();
    assert!(login.status.success(), "{}", text(&login.stderr));
    // Both processes start from the same stored refresh token, and each refreshes before
    // each of its requests: three rounds of two at once.
    for round in 0..3 {
        let both: Vec<_> = (0..2)
            .map(|_| {
                let (creds, url) = (creds.0.clone(), url.clone());
                std::thread::spawn(move || {
                    toolwire_at(&creds, &["--url", &url, "--json", "tools", "list"])
                })
            })
            .collect();
        for out in both {
            let out = out.join().unwrap();
            assert!(out.status.success(), "round {round}: {}", text(&out.stderr));
        }
    }
    let s = state.lock().unwrap();
    assert_eq!(s.reused, 0, "no process spent a rotated refresh token");
    assert_eq!(s.authorizations, 1, "nobody had to log in again");
    let refreshes = s
        .token_forms
        .iter()
        .filter(|f| f.contains("grant_type=refresh_token"))
        .count();
    assert!(refreshes >= 2, "the processes did refresh ({refreshes})");
}

/// A server that answers every request 401 and names no OAuth metadata: a login fails, and
/// says a token of its own may be what it takes.
#[test]
fn a_login_to_a_server_that_names_no_oauth_metadata_suggests_a_bearer_token() {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 8192];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let creds = Credentials::new("plain-401");
    let out = toolwire(&creds, &["--url", &url, "login", "--no-browser"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("login failed"), "{err}");
    assert!(
        err.contains("names no OAuth metadata") && err.contains("--bearer TOKEN"),
        "{err}"
    );
}

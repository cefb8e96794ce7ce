//! Debian's `redis-server` as a child process on a loopback port, for tests of what replicas
//! share through it. Nothing is saved to disk; the server ends with the value.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedisServer {
    /// Starts one on a free loopback port, answering `PING` once this returns. `None` when
    /// `redis-server` is not installed (`apt-get install redis-server`); CI installs it, so
    /// with `CI` set its absence fails the test instead.
    #[allow(
        clippy::panic,
        clippy::print_stderr,
        reason = "test support: a test that needs it cannot run without it, and says why it skipped"
    )]
    pub async fn start() -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("no loopback port: {e}"));
        let spawned = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if std::env::var_os("CI").is_some() {
                    panic!("redis-server is not installed, and CI runs every test");
                }
                eprintln!("redis-server is not installed (apt-get install redis-server): skipped");
                return None;
            }
            Err(e) => panic!("redis-server did not start: {e}"),
        };
        let server = Self { child, port };
        for _ in 0..200 {
            if server.pong().await {
                return Some(server);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server never answered PING on port {port}");
    }

    /// Its URL (`redis://127.0.0.1:PORT/0`).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    async fn pong(&self) -> bool {
        let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await else {
            return false;
        };
        if stream.write_all(b"PING\r\n").await.is_err() {
            return false;
        }
        let mut answer = [0u8; 7];
        stream.read_exact(&mut answer).await.is_ok() && &answer == b"+PONG\r\n"
    }

    /// Every key it holds and its value, as text, for tests that check what a replica wrote.
    pub fn dump(&self) -> Vec<(String, String)> {
        let Ok(mut connection) =
            redis::Client::open(self.url()).and_then(|client| client.get_connection())
        else {
            return Vec::new();
        };
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut connection)
            .unwrap_or_default();
        keys.into_iter()
            .map(|key| {
                let value: Option<String> = redis::cmd("GET")
                    .arg(&key)
                    .query(&mut connection)
                    .unwrap_or(None);
                (key, value.unwrap_or_default())
            })
            .collect()
    }
}

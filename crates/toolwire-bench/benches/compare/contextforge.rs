//! IBM's ContextForge (`mcp-contextforge-gateway` from PyPI, installed by `cargo xtask bench`
//! into a venv of its own) in front of the reference server, for the `contextforge-*` cases.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::gateways::http;
use super::{Error, Server};

/// A started ContextForge: the server (killed when dropped) and the access token its MCP
/// endpoint asks of the bench's client.
pub(super) struct ContextForge {
    pub(super) server: Server,
    pub(super) token: String,
}

/// 32 random bytes as hex, from the kernel (the bench runs on Linux).
fn random_hex() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Starts `mcpgateway` (from the venv's `bin`) on a free loopback port in front of
/// `upstream`, its gateway named `ref` (so the tool is `ref-execute-sql`): a fresh SQLite
/// database in cargo's scratch folder, the admin UI off, logging at warnings, its rate limiter
/// off, loopback upstreams allowed (its SSRF guard refuses them by default), and every secret
/// it needs made up for the run and given through the environment only. The upstream is
/// registered through its admin API with an admin token it signs; the bench's client presents
/// the same token.
pub(super) fn start(bin: &Path, upstream: &str) -> Result<ContextForge, Error> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let db = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-contextforge.db");
    let _ = std::fs::remove_file(&db);
    let secret = random_hex()?;
    let env = [
        ("JWT_SECRET_KEY", secret.clone()),
        ("AUTH_ENCRYPTION_SECRET", random_hex()?),
        ("PLATFORM_ADMIN_PASSWORD", random_hex()?),
        ("BASIC_AUTH_PASSWORD", random_hex()?),
        ("DATABASE_URL", format!("sqlite:///{}", db.display())),
        ("SSRF_ALLOW_LOCALHOST", "true".to_owned()),
        ("MCPGATEWAY_UI_ENABLED", "false".to_owned()),
        ("MCPGATEWAY_ADMIN_API_ENABLED", "true".to_owned()),
        ("LOG_LEVEL", "WARNING".to_owned()),
        // Its limiter allows 100 MCP requests a minute per client: a measurement's thousands
        // would be refused with 429 after the first seconds.
        ("RATE_LIMITING_ENABLED", "false".to_owned()),
        ("TOOL_RATE_LIMIT", "1000000".to_owned()),
        // Its lock files (the migration's, the leader election's) go to Python's temporary
        // directory: cargo's scratch folder, not the machine's shared `/tmp`.
        ("TMPDIR", env!("CARGO_TARGET_TMPDIR").to_owned()),
    ];
    let child = Command::new(bin.join("mcpgateway"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .envs(env.iter().map(|(k, v)| (k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(180);
    while !matches!(http(&addr, "GET", "/health", "", ""), Ok((200, _))) {
        if Instant::now() > deadline {
            return Err("ContextForge was not healthy within 180 s".into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // An admin token signed with the run's secret, by ContextForge's own tool.
    let made = Command::new(bin.join("python"))
        .args([
            "-m",
            "mcpgateway.utils.create_jwt_token",
            "--username",
            "admin@example.com",
            "--admin",
            "--exp",
            "600",
        ])
        .env("JWT_SECRET_KEY", &secret)
        .stderr(Stdio::null())
        .output()?;
    let token = String::from_utf8_lossy(&made.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_owned();
    if !made.status.success() || token.is_empty() {
        return Err("ContextForge made no token".into());
    }
    let headers = format!("authorization: Bearer {token}\r\ncontent-type: application/json\r\n");
    let register = json!({"name": "ref", "url": upstream, "transport": "STREAMABLEHTTP"});
    let (status, body) = http(&addr, "POST", "/gateways", &headers, &register.to_string())?;
    if !(200..300).contains(&status) {
        return Err(format!("ContextForge refused the upstream: {status} {body}").into());
    }
    Ok(ContextForge { server, token })
}

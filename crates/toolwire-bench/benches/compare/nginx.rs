//! nginx as the hop users put in front of MCP servers: Debian's nginx, one worker, a
//! keep-alive pool to its upstream, buffering off (SSE answers pass as they come), no access
//! log. What a call through it adds is what a production reverse proxy adds on this machine:
//! the `nginx-*` cases, against which the gateway's targets are set.
//!
//! Also the cases that put the gateway and nginx in front of rmcp's server, so that each
//! target holds with either upstream.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Error, Planned, Server, Sizes, TASKS};

/// Starts nginx (the binary at `bin`) on a free loopback port in front of `upstream` (an
/// endpoint URL on loopback), its files in `name` under cargo's scratch folder.
pub(super) fn start(bin: &Path, upstream: &str, name: &str) -> Result<Server, Error> {
    let target: http::Uri = upstream.parse()?;
    let authority = target
        .authority()
        .ok_or_else(|| format!("no host and port in {upstream}"))?
        .to_string();
    let path = target.path().to_owned();
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    for temp in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        std::fs::create_dir_all(dir.join("tmp").join(temp))?;
    }
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config(port, &authority))?;
    let child = Command::new(bin)
        .arg("-p")
        .arg(format!("{}/", dir.display()))
        .arg("-c")
        .arg(&conf)
        .arg("-e")
        .arg("stderr")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}{path}"),
    };
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let began = Instant::now();
    while TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_err() {
        if began.elapsed() > Duration::from_secs(10) {
            return Err(format!("nginx did not listen on {address} within 10 s").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(server)
}

/// One worker (the gateway and the floor proxy each run on one thread), a pool of idle
/// upstream connections as large as the callers, `Host` passed on (the servers check it
/// against DNS rebinding).
fn config(port: u16, upstream: &str) -> String {
    format!(
        r#"worker_processes 1;
daemon off;
pid nginx.pid;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi;
    access_log off;
    upstream mcp {{ server {upstream}; keepalive 128; keepalive_requests 100000; }}
    server {{
        listen 127.0.0.1:{port};
        keepalive_requests 100000;
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
        }}
    }}
}}
"#
    )
}

/// The URLs the nginx and rmcp-upstream cases reach.
pub(super) struct Hops<'a> {
    /// nginx in front of the reference server.
    pub nginx: Option<&'a str>,
    /// nginx in front of rmcp's server.
    pub nginx_rmcp: Option<&'a str>,
    /// The gateway in front of rmcp's server.
    pub gateway_rmcp: &'a str,
    /// rmcp's server itself.
    pub rmcp: &'a str,
}

/// The jobs of those cases (Toolwire's client each): sequential in both eras and 64 callers,
/// through nginx and through the gateway, with rmcp's server directly as their base.
pub(super) fn jobs(hops: &Hops<'_>, sizes: Sizes) -> Vec<Planned> {
    let seq = |case, url: &str| (case, "toolwire", url.to_owned(), sizes.sequential, 1);
    let many = |case, url: &str| {
        (
            case,
            "toolwire",
            url.to_owned(),
            sizes.concurrent_per_task,
            TASKS,
        )
    };
    let mut jobs = vec![
        many("rmcp-server-concurrent-64", hops.rmcp),
        seq("gateway-rmcp-legacy-seq", hops.gateway_rmcp),
        seq("gateway-rmcp-modern-seq", hops.gateway_rmcp),
        many("gateway-rmcp-concurrent-64", hops.gateway_rmcp),
    ];
    if let Some(url) = hops.nginx {
        jobs.extend([
            seq("nginx-legacy-seq", url),
            seq("nginx-modern-seq", url),
            many("nginx-concurrent-64", url),
            many("nginx-legacy-concurrent-64", url),
        ]);
    }
    if let Some(url) = hops.nginx_rmcp {
        jobs.extend([
            seq("nginx-rmcp-legacy-seq", url),
            seq("nginx-rmcp-modern-seq", url),
            many("nginx-rmcp-concurrent-64", url),
        ]);
    }
    jobs
}

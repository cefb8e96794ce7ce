//! `toolwire doctor`: an `mcpServers` file and this machine checked the way a host would meet
//! them, with what to do for each problem found.
//!
//! In order: the file reads and loads (every problem with its place); it may act for the user
//! (approved, or one of the user's own); its variables are set; each remote entry's stored
//! login has not expired past refreshing; a Node server (`npx`, `node`, …) started where a
//! certificate authority is added through `SSL_CERT_FILE` is given `NODE_EXTRA_CA_CERTS` too
//! (Node reads only that); each entry comes up (its era and tool count, or why not); and the
//! tools are checked against what hosts do with them: names past what LLM providers accept
//! (`^[A-Za-z0-9_-]{1,64}$`), descriptions past 2,048 characters (Claude Code cuts the rest
//! without saying so), more than 128 tools (OpenAI's limit for one request). Nothing is
//! started when the file needs approval.
//!
//! Exit 0 when nothing needs doing, 3 when something does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};
use toolwire::auth::CredentialStore as _;
use toolwire_host::trust::{self, TrustStore, Verdict};
use toolwire_host::{Host, ProblemKind, ServerState, ServerTransport, ServersConfig};

use crate::{Cli, Failure};

/// Claude Code shows a tool's description up to this many characters.
const DESCRIPTION_SHOWN: usize = 2048;
/// OpenAI takes at most this many tools in one request.
const TOOLS_PER_REQUEST: usize = 128;

/// One thing checked.
#[derive(Debug)]
struct Finding {
    /// What it is about: `file`, `machine`, or a server's name.
    subject: String,
    /// What was found.
    what: String,
    /// What to do, when something needs doing.
    fix: Option<String>,
}

impl Finding {
    fn ok(subject: impl Into<String>, what: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            what: what.into(),
            fix: None,
        }
    }

    fn problem(
        subject: impl Into<String>,
        what: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            subject: subject.into(),
            what: what.into(),
            fix: Some(fix.into()),
        }
    }
}

pub(crate) async fn run(cli: &Cli, builder: toolwire::ClientBuilder) -> Result<ExitCode, Failure> {
    let places = crate::import::Places::from_env();
    let file = match &cli.config {
        Some(file) => file.clone(),
        None => crate::import::default_out(&places).ok_or_else(|| {
            Failure::Usage("no home directory for the default file: give --config FILE".into())
        })?,
    };
    let mut findings = Vec::new();
    if let Some(config) = static_checks(&file, &mut findings).await {
        servers(cli, &config, builder, &mut findings).await?;
    }
    report(cli.json, &file, &findings);
    Ok(if findings.iter().any(|f| f.fix.is_some()) {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

/// The checks that start nothing; the loaded file when its servers may be started.
async fn static_checks(
    file: &std::path::Path,
    findings: &mut Vec<Finding>,
) -> Option<ServersConfig> {
    let shown = file.display().to_string();
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            findings.push(Finding::problem(
                "file",
                format!("cannot read {shown}: {e}"),
                "write one from your hosts' servers with `toolwire import`, or give --config FILE",
            ));
            return None;
        }
    };
    let verdict = match trust::check(file, &text, TrustStore::default_location().as_ref()) {
        Ok(verdict) => verdict,
        Err(e) => {
            problems(&e, findings);
            return None;
        }
    };
    if let Verdict::NeedsApproval(_) = verdict {
        findings.push(Finding::problem(
            "file",
            format!("{shown} is not one of your own files and was not approved: its servers were not started"),
            format!("read what it starts with `toolwire trust {shown}`, which approves it"),
        ));
        return None;
    }
    let config = match ServersConfig::from_text(file, &text) {
        Ok(config) => config,
        Err(e) => {
            problems(&e, findings);
            return None;
        }
    };
    findings.push(Finding::ok(
        "file",
        format!("{shown}: {} servers", config.servers.len()),
    ));
    for (server, key, suggestion) in config.likely_typos() {
        findings.push(Finding::problem(
            server,
            format!("`{key}` is not a member Toolwire reads"),
            format!("did you mean `{suggestion}`?"),
        ));
    }
    logins(&config, findings).await;
    node_certificates(&config, findings);
    Some(config)
}

/// A file that does not load: each problem, with what to do.
fn problems(error: &toolwire_host::ConfigError, findings: &mut Vec<Finding>) {
    if error.problems().is_empty() {
        findings.push(Finding::problem(
            "file",
            crate::one_line(error),
            "give --config FILE, or write one with `toolwire import`",
        ));
    }
    for problem in error.problems() {
        let fix = match &problem.kind {
            ProblemKind::UnsetVariable(var) => format!("set {var} in the environment"),
            ProblemKind::UnsupportedScheme(_) => {
                "write the value as ${VAR} and set VAR in the environment".to_owned()
            }
            _ => "edit the file".to_owned(),
        };
        findings.push(Finding::problem(
            problem.server.clone().unwrap_or_else(|| "file".to_owned()),
            problem.to_string(),
            fix,
        ));
    }
}

/// Stored logins of the remote entries: one that has expired with nothing to refresh it is a
/// login to do again.
async fn logins(config: &ServersConfig, findings: &mut Vec<Finding>) {
    let Ok(store) = toolwire::auth::FileStore::default_location() else {
        return;
    };
    let Ok(stored) = store.list().await else {
        findings.push(Finding::problem(
            "machine",
            "the stored logins cannot be read",
            "check the credentials file (TOOLWIRE_CREDENTIALS, else $XDG_STATE_HOME/toolwire)",
        ));
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for entry in &config.servers {
        let Some(url) = entry.url() else { continue };
        for login in stored.iter().filter(|s| s.server == url) {
            let status = toolwire::auth::AuthStatus::of(login);
            match status.expires_at {
                Some(at) if at <= now && !status.refreshable => findings.push(Finding::problem(
                    entry.name.clone(),
                    format!("the login with {} has expired", status.issuer),
                    format!(
                        "log in again: toolwire {} login",
                        crate::entry_named(config.file.as_deref(), &entry.name)
                    ),
                )),
                _ => findings.push(Finding::ok(
                    entry.name.clone(),
                    format!("logged in with {}", status.issuer),
                )),
            }
        }
    }
}

/// Node reads its extra certificate authorities from `NODE_EXTRA_CA_CERTS` only: where
/// `SSL_CERT_FILE` adds one for Toolwire, a Node server needs it named again.
fn node_certificates(config: &ServersConfig, findings: &mut Vec<Finding>) {
    let Some(bundle) = std::env::var_os("SSL_CERT_FILE").filter(|v| !v.is_empty()) else {
        return;
    };
    if std::env::var_os("NODE_EXTRA_CA_CERTS").is_some() {
        return;
    }
    for entry in &config.servers {
        let ServerTransport::Stdio { command, env, .. } = &entry.transport else {
            continue;
        };
        let program = std::path::Path::new(command)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let node = ["npx", "node", "npm", "pnpm", "bunx", "yarn"].contains(&program.as_str());
        if node && !env.iter().any(|(k, _)| k == "NODE_EXTRA_CA_CERTS") {
            findings.push(Finding::problem(
                entry.name.clone(),
                format!(
                    "a Node server, and SSL_CERT_FILE ({}) adds a certificate authority Node does not read",
                    PathBuf::from(&bundle).display()
                ),
                "add \"NODE_EXTRA_CA_CERTS\": \"${SSL_CERT_FILE}\" to its env",
            ));
        }
    }
}

/// Every entry started as a host would, then what hosts do with their tools.
async fn servers(
    cli: &Cli,
    config: &ServersConfig,
    builder: toolwire::ClientBuilder,
    findings: &mut Vec<Finding>,
) -> Result<(), Failure> {
    let host = crate::login::stored_logins(Host::builder(builder).naming(cli.names))
        .start(config)
        .map_err(|e| Failure::Usage(crate::one_line(&e)))?;
    let limit = cli
        .timeout
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .unwrap_or(Duration::from_secs(30));
    host.settled(limit).await;
    for entry in &config.servers {
        let name = entry.name.clone();
        findings.push(match host.state(&entry.name) {
            Some(ServerState::Ready { version, tools }) => {
                let s = if tools == 1 { "" } else { "s" };
                Finding::ok(name, format!("ready: {version}, {tools} tool{s}"))
            }
            Some(ServerState::Disabled) => Finding::ok(name, "disabled"),
            Some(ServerState::NeedsLogin { reason }) => Finding::problem(
                name,
                format!("needs a login: {reason}"),
                format!(
                    "toolwire {} login",
                    crate::entry_named(config.file.as_deref(), &entry.name)
                ),
            ),
            Some(ServerState::Failed { reason }) => {
                let fix = match crate::hints::tls_hint(&reason) {
                    Some(hint) => hint.to_owned(),
                    None if reason.contains("could not start") => {
                        "install it, or give its full path in `command`".to_owned()
                    }
                    None if reason.contains("Connection refused") => format!(
                        "nothing listens at {}: start the server, or correct `url`",
                        entry.url().unwrap_or_default()
                    ),
                    None => format!(
                        "see what it says with `toolwire -v {} info`",
                        crate::entry_named(config.file.as_deref(), &entry.name)
                    ),
                };
                Finding::problem(name, format!("failed: {reason}"), fix)
            }
            _ => Finding::problem(
                name,
                format!("not up after {} s", limit.as_secs()),
                "give it longer with --timeout SECS, or see why with -v",
            ),
        });
    }
    let tools = host.tools();
    let mut unsafe_names: Vec<&str> = Vec::new();
    for (name, tool) in tools.iter() {
        if !toolwire_host::is_provider_safe(name) {
            unsafe_names.push(name);
        }
        let length = tool
            .tool
            .description
            .as_deref()
            .map_or(0, |d| d.chars().count());
        if length > DESCRIPTION_SHOWN {
            findings.push(Finding::problem(
                tool.server.to_string(),
                format!("{name}'s description is {length} characters: Claude Code shows the first {DESCRIPTION_SHOWN}"),
                "put what the model needs first, or ask the server's authors for a shorter one",
            ));
        }
    }
    unsafe_names.sort_unstable();
    if !unsafe_names.is_empty() {
        findings.push(Finding::problem(
            "tools",
            format!(
                "{} names LLM providers refuse (more than 64 characters, or outside A-Z a-z 0-9 _ -), such as {}",
                unsafe_names.len(),
                unsafe_names[0]
            ),
            "serve them with `--names provider-safe`, or give them `aliases` in the file",
        ));
    }
    if tools.len() > TOOLS_PER_REQUEST {
        findings.push(Finding::problem(
            "tools",
            format!(
                "{} tools: OpenAI takes {TOOLS_PER_REQUEST} in one request",
                tools.len()
            ),
            "turn some off with `excludeTools`, or let the model find them with `tools search`",
        ));
    }
    host.shutdown().await;
    Ok(())
}

fn report(json_out: bool, file: &std::path::Path, findings: &[Finding]) {
    if json_out {
        let checks: Vec<Value> = findings
            .iter()
            .map(|f| {
                json!({"subject": f.subject, "found": f.what, "fix": f.fix,
                            "ok": f.fix.is_none()})
            })
            .collect();
        let problems = findings.iter().filter(|f| f.fix.is_some()).count();
        crate::render::print_json(&json!({"file": file, "checks": checks, "problems": problems}));
        return;
    }
    for f in findings {
        match &f.fix {
            None => say!("ok   {}: {}", f.subject, f.what),
            Some(fix) => {
                say!("fix  {}: {}", f.subject, f.what);
                say!("       → {fix}");
            }
        }
    }
    let problems = findings.iter().filter(|f| f.fix.is_some()).count();
    if problems == 0 {
        say!("nothing to fix");
    } else {
        say!("{problems} to fix");
    }
}

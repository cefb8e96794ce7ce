//! `toolwire pins`: the tool definitions a gateway (or host) pinned, and the changes waiting
//! for someone to approve or reject them (`toolwire_host::pins` has the rule). And
//! `--pin-tools` for the commands of a `--config` file: every server at once goes through a
//! pinning `Host`; one entry's client is checked here ([`check`]) before its command runs.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::OnceLock;

use serde_json::{Value, json};
use toolwire_host::pins::{Verdict, members_differing};
use toolwire_host::{HostError, PinFile};

use crate::Failure;
use crate::args::{Cli, PinsCommand};

/// The pin file of `--pin-tools`: its FILE, else the default one; `None` without the flag.
pub(crate) fn of_cli(cli: &Cli) -> Result<Option<PinFile>, Failure> {
    match &cli.pin_tools {
        None => Ok(None),
        Some(path) if path.as_os_str().is_empty() => pin_file(None).map(Some),
        Some(path) => pin_file(Some(path)).map(Some),
    }
}

/// The one entry's tools held back by `--pin-tools` ([`check`]): the server, and each tool's
/// changed members.
struct Held {
    server: String,
    tools: BTreeMap<String, Vec<String>>,
}

static HELD: OnceLock<Held> = OnceLock::new();

/// Lists `client`'s tools and checks each against `server`'s pins: a tool seen for the first
/// time is pinned; one whose definition changed is held back (said on stderr, out of `tools
/// list`, its call refused) until approved. A pin file that cannot be used stops the command:
/// a check that cannot be made lets nothing through.
pub(crate) async fn check(
    client: &toolwire::Client,
    server: &str,
    pins: &PinFile,
) -> Result<(), Failure> {
    let tools = client.list_all_tools().await?;
    let definitions: Vec<(&str, Value)> = tools
        .iter()
        .map(|tool| {
            let definition = serde_json::to_value(&**tool).unwrap_or_default();
            (tool.name.as_str(), definition)
        })
        .collect();
    let verdicts = pins
        .check(server, &definitions)
        .map_err(|e| Failure::Usage(format!("--pin-tools: {e}")))?;
    let mut held = BTreeMap::new();
    for ((name, _), verdict) in definitions.iter().zip(verdicts) {
        if let Verdict::Changed { members } = verdict {
            say_err!("toolwire: {}", quarantined(server, name, &members));
            held.insert((*name).to_owned(), members);
        }
    }
    let _ = HELD.set(Held {
        server: server.to_owned(),
        tools: held,
    });
    Ok(())
}

fn quarantined(server: &str, tool: &str, members: &[String]) -> HostError {
    HostError::Quarantined {
        server: server.to_owned(),
        tool: tool.to_owned(),
        members: members.join(", "),
    }
}

/// Whether `tool` (the one entry's own name for it) is held back by its pin.
pub(crate) fn is_held(tool: &str) -> bool {
    HELD.get().is_some_and(|held| held.tools.contains_key(tool))
}

/// Why a call to `tool` is refused, when it is held back: the change and how to approve it.
pub(crate) fn held(tool: &str) -> Option<HostError> {
    let held = HELD.get()?;
    let members = held.tools.get(tool)?;
    Some(quarantined(&held.server, tool, members))
}

/// A call to `tool` refused when it is held back ([`held`]).
pub(crate) fn refuse_held(tool: &str) -> Result<(), Failure> {
    held(tool).map_or(Ok(()), |refusal| Err(Failure::Remote(refusal.to_string())))
}

/// The pin file of `--file`, else the default one.
fn pin_file(file: Option<&std::path::Path>) -> Result<PinFile, Failure> {
    match file {
        Some(file) => Ok(PinFile::new(file)),
        None => PinFile::default_location().ok_or_else(|| {
            Failure::Usage("no home directory for the default pin file: give --file".into())
        }),
    }
}

pub(crate) fn run(
    json_out: bool,
    file: Option<&std::path::Path>,
    command: &PinsCommand,
) -> Result<ExitCode, Failure> {
    let pins = pin_file(file)?;
    let failed = |e: toolwire_host::pins::PinError| Failure::Usage(e.to_string());
    match command {
        PinsCommand::List => {
            let held = pins.read().map_err(failed)?;
            let pinned_now = &held.pinned;
            let changes: Vec<(String, String, Vec<String>)> = held
                .pending
                .iter()
                .flat_map(|(server, tools)| {
                    tools.iter().map(move |(tool, pending)| {
                        let was = pinned_now
                            .get(server)
                            .and_then(|t| t.get(tool))
                            .map_or(Value::Null, |p| p.definition.clone());
                        (
                            server.clone(),
                            tool.clone(),
                            members_differing(&was, &pending.definition),
                        )
                    })
                })
                .collect();
            if json_out {
                let pinned: serde_json::Map<String, Value> = held
                    .pinned
                    .iter()
                    .map(|(server, tools)| {
                        let tools = tools
                            .iter()
                            .map(|(tool, pin)| (tool.clone(), json!(pin.sha256)))
                            .collect();
                        (server.clone(), Value::Object(tools))
                    })
                    .collect();
                let pending: Vec<Value> = changes
                    .iter()
                    .map(|(server, tool, members)| {
                        json!({"server": server, "tool": tool, "changed": members})
                    })
                    .collect();
                say!(
                    "{}",
                    json!({"file": pins.path(), "pinned": pinned, "pending": pending})
                );
                return Ok(ExitCode::SUCCESS);
            }
            say!("{}", pins.path().display());
            for (server, tools) in &held.pinned {
                say!("{server}: {} tool(s) pinned", tools.len());
            }
            if changes.is_empty() {
                say!("no change waiting");
            }
            for (server, tool, members) in &changes {
                say!(
                    "changed, quarantined: {server} {tool} ({}); `toolwire pins approve {server} {tool}` or `reject`",
                    members.join(", ")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PinsCommand::Approve { server, tool } | PinsCommand::Reject { server, tool } => {
            let approve = matches!(command, PinsCommand::Approve { .. });
            let settled = if approve {
                pins.approve(server, tool)
            } else {
                pins.reject(server, tool)
            }
            .map_err(failed)?;
            if !settled {
                return Err(Failure::Usage(format!(
                    "no change of {server} {tool} is waiting in {}",
                    pins.path().display()
                )));
            }
            say_err!(
                "toolwire: {server} {tool}: {} (a running gateway reads it within 2 s)",
                if approve {
                    "the new definition is pinned"
                } else {
                    "the change is rejected; the tool stays quarantined while its server offers it"
                }
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

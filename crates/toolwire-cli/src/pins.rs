//! `toolwire pins`: the tool definitions a gateway (or host) pinned, and the changes waiting
//! for someone to approve or reject them (`toolwire_host::pins` has the rule).

use std::process::ExitCode;

use serde_json::{Value, json};
use toolwire_host::PinFile;
use toolwire_host::pins::members_differing;

use crate::Failure;
use crate::args::PinsCommand;

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

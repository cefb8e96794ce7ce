//! With `--config` and no `--server`, the read-only views of every server at once, as the
//! gateway merges them: `resources list`, `resources templates`, `prompts list`, `info` and
//! `ping` over each server that came up, each item saying its server.

use super::*;
use toolwire_host::Host;

/// Whether `command` is one of the views this answers over every server.
pub(crate) fn spans_every_server(command: &Command) -> bool {
    matches!(
        command,
        Command::Info
            | Command::Ping
            | Command::Resources {
                command: ResourcesCommand::List | ResourcesCommand::Templates
            }
            | Command::Prompts {
                command: PromptsCommand::List
            }
    )
}

/// Answers the view of `cli.command` from every server of `host` that is running; a server
/// that fails the request is said on stderr, and the exit code is 3 when none answered.
pub(crate) async fn run(cli: &Cli, host: &Host) -> Result<ExitCode, Failure> {
    let mut items: Vec<Value> = Vec::new();
    let mut answered = 0;
    for server in host.servers() {
        let Ok(client) = host.client(&server) else {
            continue;
        };
        let got = view(&cli.command, &client).await;
        match got {
            Ok(found) => {
                answered += 1;
                items.extend(found.into_iter().map(|mut item| {
                    item["server"] = json!(&*server);
                    item
                }));
            }
            Err(e) => say_err!("toolwire: server `{server}`: {}", toolwire::ErrorChain(&e)),
        }
    }
    let key = match &cli.command {
        Command::Resources {
            command: ResourcesCommand::Templates,
        } => "resourceTemplates",
        Command::Resources { .. } => "resources",
        Command::Prompts { .. } => "prompts",
        Command::Ping => "pings",
        _ => "servers",
    };
    if cli.json {
        print_json(&json!({ key: items }));
    } else {
        for item in &items {
            say!("{}", line(key, item));
        }
    }
    Ok(if answered == 0 {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

/// One server's part of the view.
async fn view(command: &Command, client: &toolwire::Client) -> Result<Vec<Value>, toolwire::Error> {
    use crate::browse::to_values;
    Ok(match command {
        Command::Resources {
            command: ResourcesCommand::Templates,
        } => to_values(&client.list_all_resource_templates().await?),
        Command::Resources { .. } => to_values(&client.list_all_resources().await?),
        Command::Prompts { .. } => to_values(&client.list_all_prompts().await?),
        Command::Ping => {
            let started = Instant::now();
            client.ping().await?;
            vec![json!({"ms": started.elapsed().as_secs_f64() * 1000.0})]
        }
        _ => {
            let n = client.ready().await?;
            vec![
                json!({"protocolVersion": n.version, "serverInfo": n.server_info,
                "capabilities": n.capabilities}),
            ]
        }
    })
}

/// One item for people: its server first.
fn line(key: &str, item: &Value) -> String {
    let server = item["server"].as_str().unwrap_or("?");
    let text = |k: &str| item[k].as_str().unwrap_or("").to_owned();
    match key {
        "resources" => format!("{server}  {}  {}", text("uri"), text("name")),
        "resourceTemplates" => format!("{server}  {}  {}", text("uriTemplate"), text("name")),
        "prompts" => format!("{server}  {}  {}", text("name"), text("description")),
        "pings" => format!(
            "{server}  pong in {:.1} ms",
            item["ms"].as_f64().unwrap_or(0.0)
        ),
        _ => format!(
            "{server}  {}  {} {}",
            item["protocolVersion"].as_str().unwrap_or("?"),
            item["serverInfo"]["name"].as_str().unwrap_or("?"),
            item["serverInfo"]["version"].as_str().unwrap_or("")
        ),
    }
}

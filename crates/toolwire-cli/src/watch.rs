//! `watch`: the server's notifications as they come, one line each (one JSON line each with
//! `--json`), after the resources asked for are subscribed to.

use super::*;

/// `watch`: every notification, as it comes, until the server goes or `for_secs` pass,
/// after subscribing to `resources`.
pub(crate) async fn watch(
    cli: &Cli,
    client: &Client,
    for_secs: Option<f64>,
    resources: &[String],
) -> Result<ExitCode, Failure> {
    let limit = match for_secs {
        Some(s) if s.is_finite() && s > 0.0 => {
            Some(Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX))
        }
        Some(s) => {
            return Err(Failure::Usage(format!(
                "--for {s}: must be a positive number"
            )));
        }
        None => None,
    };
    let mut notifications = client.notifications();
    client.ready().await?;
    for uri in resources {
        client.subscribe_resource(uri).await?;
        // On stderr, so stdout stays the notifications alone; a script waits for it.
        say_err!("subscribed to {uri}");
    }
    // From here on nothing the server announces is missed: a script that waits for this
    // line may then cause the changes it watches for.
    match client.listening().await {
        Ok(()) => say_err!("watching"),
        // A server that never acknowledges its listen stream: watch what does come.
        Err(Error::Timeout(_)) => say_err!(
            "watching (the server never acknowledged its listen stream: changes may be missed)"
        ),
        Err(e) => return Err(e.into()),
    }
    // A limit past what the clock holds is no limit.
    let until = limit.and_then(|l| tokio::time::Instant::now().checked_add(l));
    loop {
        let notice = tokio::select! {
            notice = notifications.recv() => notice,
            () = async {
                match until {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => None,
        };
        let Some(notice) = notice else { break };
        // The listen stream's own bookkeeping, which `watching` above already said.
        if matches!(
            notice.notification,
            ServerNotification::SubscriptionsAcknowledged(..)
        ) {
            continue;
        }
        let params: Value = notice
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        if cli.json {
            say!("{}", json!({"method": notice.method, "params": params}));
        } else if let ServerNotification::LoggingMessage(log) = &notice.notification {
            let level = serde_json::to_value(log.level).unwrap_or(Value::Null);
            let data = match &log.data {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            say!(
                "[{}] {}{data}",
                level.as_str().unwrap_or("?"),
                log.logger
                    .as_deref()
                    .map(|l| format!("{l}: "))
                    .unwrap_or_default()
            );
        } else {
            say!("{} {params}", notice.method);
        }
    }
    Ok(ExitCode::SUCCESS)
}

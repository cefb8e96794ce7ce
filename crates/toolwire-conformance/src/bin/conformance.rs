//! `toolwire-conformance-client URL`: what the official conformance suite's client scenarios
//! expect, done with the public `toolwire` API only (no special cases inside the library).
//!
//! The suite passes the server URL as the last argument and the scenario in
//! `MCP_CONFORMANCE_SCENARIO`, with data in `MCP_CONFORMANCE_CONTEXT` and (alpha versions) the
//! protocol version in `MCP_CONFORMANCE_PROTOCOL_VERSION`. Exit 0 when everything the scenario
//! asked went through; 1 with the reason on stderr otherwise.

#![allow(
    clippy::print_stderr,
    reason = "the suite reads the reason from stderr"
)]

use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolwire::auth::{
    Assertion, FetchRedirect, Grant, OAuthConfig, Secret, SigningKey, StaticClient,
};
use toolwire::{
    BoxFuture, ClientCapabilities, ElicitAction, ElicitResult, ErrorObject, HttpTransport,
    ProtocolMode, ProtocolVersion, ServerRequest,
};

/// Answers `elicitation/create` by accepting with the schema's defaults (SEP-1034).
fn handler(request: ServerRequest) -> BoxFuture<'static, Result<Value, ErrorObject>> {
    Box::pin(async move {
        tracing::info!(method = request.method(), "server request");
        match request {
            ServerRequest::Elicit(params) => {
                let content = toolwire_conformance::schema_defaults(&params);
                let result = ElicitResult {
                    action: ElicitAction::Accept,
                    content: Some(content),
                    meta: None,
                    extra: Map::new(),
                };
                serde_json::to_value(result).map_err(|e| ErrorObject::new(-32603, e.to_string()))
            }
            other => Err(ErrorObject::new(
                -32601,
                format!("this client does not handle {}", other.method()),
            )),
        }
    })
}

/// OAuth for an `auth/*` scenario: a headless handler (the suite's authorization server
/// approves at once), the suite's client metadata document URL, and whatever the scenario's
/// context configures (a pre-registered client, a signing key, a machine grant).
fn oauth(scenario: &str, context: &Value) -> Result<OAuthConfig, toolwire::Error> {
    let text = |key: &str| context[key].as_str().map(str::to_owned);
    let mut config = OAuthConfig::new()
        .client_name("toolwire-conformance")
        .handler(Arc::new(FetchRedirect::new(
            "http://localhost:3000/callback",
        )))
        .client_metadata_url("https://conformance-test.local/client-metadata.json");
    if let Some(id) = text("client_id") {
        let mut client = StaticClient::new(id);
        if let Some(secret) = text("client_secret") {
            client = client.secret(secret);
        }
        if let Some(issuer) = text("issuer") {
            client = client.issuer(issuer);
        }
        if let Some(pem) = text("private_key_pem") {
            let key = SigningKey::from_pem(&pem)
                .map_err(|e| toolwire::Error::Authorization(Arc::new(e)))?;
            client = client.signing_key(key);
        }
        config = config.static_client(client);
    }
    let grant = if scenario.starts_with("auth/client-credentials") {
        Grant::ClientCredentials
    } else if let Some(jwt) = text("valid_jwt") {
        Grant::JwtBearer {
            assertion: Assertion::Value(Secret::new(jwt)),
        }
    } else if let (Some(endpoint), Some(idp_client_id), Some(id_token)) = (
        text("idp_token_endpoint"),
        text("idp_client_id"),
        text("idp_id_token"),
    ) {
        Grant::EnterpriseManaged {
            idp_token_endpoint: endpoint,
            idp_client_id,
            id_token: Secret::new(id_token),
        }
    } else {
        Grant::AuthorizationCode
    };
    Ok(config.grant(grant))
}

async fn run() -> Result<(), toolwire::Error> {
    let url = std::env::args().next_back().unwrap_or_default();
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    // Without a version, or with a legacy one, speak the legacy era; with 2026-07-28, probe.
    let mode = match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION") {
        Ok(v) if v.as_str() >= "2026" => ProtocolMode::Auto,
        Ok(v) => match ProtocolVersion::new(&v) {
            Ok(v) if v.is_supported() => ProtocolMode::Pinned(v),
            _ => ProtocolMode::Pinned(ProtocolVersion::LATEST_LEGACY),
        },
        Err(_) => ProtocolMode::Pinned(ProtocolVersion::LATEST_LEGACY),
    };
    let capabilities: ClientCapabilities = serde_json::from_value(json!({
        "elicitation": {"form": {}},
        "extensions": {toolwire::types::SKILLS_EXTENSION: {}}
    }))
    .unwrap_or_default();
    let mut builder = toolwire::Client::builder("toolwire-conformance", env!("CARGO_PKG_VERSION"))
        .mode(mode)
        .handler(capabilities, handler);
    if scenario.starts_with("auth/") {
        builder = builder.oauth(oauth(&scenario, &context)?);
    }
    let client = builder.connect_http(
        // The sse-retry mock hands a pending answer to whichever GET comes first; a
        // standalone GET stream opened late (on a loaded machine) would take it and the
        // resumption it measures would never happen. That scenario is about resumption.
        HttpTransport::builder(url).get_stream(scenario != "sse-retry"),
    )?;
    let negotiated = client.ready().await?;
    // A legacy server is asked only for what it declared.
    let modern = negotiated.version.is_modern();
    let caps = &negotiated.capabilities;
    if modern || caps.tools.is_some() {
        client.list_tools().await?;
    }
    let (resources, prompts) = (
        modern || caps.resources.is_some(),
        modern || caps.prompts.is_some(),
    );
    let tools: Vec<String> = client
        .tools()
        .iter()
        .filter(|(_, t)| t.is_discovered())
        .map(|(n, _)| n.to_owned())
        .collect();
    let outcome = match scenario.as_str() {
        "initialize" => Ok(()),
        "tools_call" => client
            .call_tool("add_numbers", json!({"a": 2, "b": 3}))
            .await
            .map(drop),
        "http-custom-headers" => {
            let calls = context["toolCalls"].as_array().cloned().unwrap_or_default();
            let mut result = Ok(());
            for call in calls {
                let name = call["name"].as_str().unwrap_or("");
                if let Err(e) = client.call_tool(name, call["arguments"].clone()).await {
                    result = Err(e);
                }
            }
            result
        }
        "json-schema-2020-12-preservation" => {
            // Echo every other tool's input schema, verbatim, through the tool that takes a
            // `schema` object: every keyword must have survived the client's parsing.
            let snapshot = client.tools();
            let takes_schema = |name: &str| {
                snapshot
                    .get(name)
                    .and_then(|t| t.tool().input_schema.decode().ok())
                    .is_some_and(|s| s["properties"].get("schema").is_some())
            };
            let mut result = Ok(());
            for echo in tools.iter().filter(|n| takes_schema(n)) {
                for focal in tools.iter().filter(|n| !takes_schema(n)) {
                    let schema = snapshot
                        .get(focal)
                        .and_then(|t| t.tool().input_schema.decode().ok())
                        .unwrap_or(Value::Null);
                    if let Err(e) = client.call_tool(echo, json!({ "schema": schema })).await {
                        result = Err(e);
                    }
                }
            }
            result
        }
        // Skills: listing reads no file; loading reads SKILL.md and checks it, and only a
        // skill that passed has its other files read.
        "sep-2640-client-no-prefetch" => client.list_all_skills().await.map(drop),
        s if s.starts_with("sep-2640-client-verify") => {
            let mut result = Ok(());
            for skill in client.list_all_skills().await? {
                match client.load_skill(&skill).await {
                    Ok(loaded) => {
                        for file in &loaded.skill.resources {
                            if file.uri != skill.uri
                                && let Err(e) = client.read_skill_file(&skill, &file.uri).await
                            {
                                result = Err(e);
                            }
                        }
                    }
                    Err(e) => result = Err(e),
                }
            }
            result
        }
        "http-invalid-tool-headers" => {
            // Tools with invalid annotations never reached the cache.
            let mut result = Ok(());
            for name in &tools {
                if let Err(e) = client.call_tool(name, json!({"region": "us-west1"})).await {
                    result = Err(e);
                }
            }
            result
        }
        _ => {
            // Exercise everything the server offers: every tool, resource and prompt.
            let mut result = Ok(());
            for name in &tools {
                if let Err(e) = client.call_tool(name, json!({})).await {
                    tracing::info!(tool = %name, error = %e, "call failed");
                    if !matches!(e, toolwire::Error::Server(_)) {
                        result = Err(e);
                    }
                }
            }
            if let Some(Ok(resources)) = match resources {
                true => Some(client.list_resources(None).await),
                false => None,
            } {
                for r in resources.resources {
                    let _ = client.read_resource(&r.uri).await;
                }
            }
            if let Some(Ok(prompts)) = match prompts {
                true => Some(client.list_prompts(None).await),
                false => None,
            } {
                for p in prompts.prompts {
                    let _ = client.get_prompt(&p.name, []).await;
                }
            }
            result
        }
    };
    client.close().await;
    outcome
}

fn main() -> ExitCode {
    toolwire_conformance::init_tracing();
    let runtime = match toolwire_conformance::runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("toolwire-conformance-client: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "toolwire-conformance-client: {}",
                toolwire_conformance::error_chain(&e)
            );
            ExitCode::FAILURE
        }
    }
}

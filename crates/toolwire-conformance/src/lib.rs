//! What the two peer-facing binaries share: `toolwire-conformance-client` (driven by the
//! official conformance suite) and `toolwire-interop-client` (driven by `cargo xtask interop`
//! against real servers). Both use the public `toolwire` API only.

/// `error: its cause: its cause …` on one line, for the one line a driver reads from stderr
/// ([`toolwire::ErrorChain`]).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    toolwire::ErrorChain(error).to_string()
}

/// The `default` of every property of an `elicitation/create` request's schema (SEP-1034):
/// the content a client accepts with when nobody fills the form in.
pub fn schema_defaults(
    params: &toolwire::ElicitParams,
) -> serde_json::Map<String, serde_json::Value> {
    let params = serde_json::to_value(params).unwrap_or_default();
    let mut content = serde_json::Map::new();
    if let Some(props) = params["requestedSchema"]["properties"].as_object() {
        for (name, prop) in props {
            if let Some(default) = prop.get("default") {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    content
}

/// Logs to stderr at the level `TOOLWIRE_LOG` names (`debug`, `trace`; `info` otherwise).
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(match std::env::var("TOOLWIRE_LOG").as_deref() {
            Ok("debug") => tracing::Level::DEBUG,
            Ok("trace") => tracing::Level::TRACE,
            _ => tracing::Level::INFO,
        })
        .init();
}

/// A two-worker runtime (the machines these run on have two cores).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

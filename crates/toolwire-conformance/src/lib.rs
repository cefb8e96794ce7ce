//! What the two peer-facing binaries share: `toolwire-conformance-client` (driven by the
//! official conformance suite) and `toolwire-interop-client` (driven by `cargo xtask interop`
//! against real servers). Both use the public `toolwire` API only.

/// `error: its cause: its cause …` on one line, for the one line a driver reads from stderr.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        line.push_str(": ");
        line.push_str(&s.to_string());
        source = s.source();
    }
    line
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("call failed")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_chain_is_one_line_outermost_first() {
        let e = Outer(std::io::Error::other("connection reset"));
        assert_eq!(error_chain(&e), "call failed: connection reset");
    }
}

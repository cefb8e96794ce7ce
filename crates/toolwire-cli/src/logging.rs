//! Where log lines and spans go: stderr, filtered by `-v` (or `RUST_LOG`), and the collector
//! of `--otlp-endpoint` when one is given.

use tracing_subscriber::Layer;
use tracing_subscriber::Registry;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Layered, SubscriberExt as _};

/// The stderr layer, filtered.
pub(crate) type Logs = Box<dyn Layer<Registry> + Send + Sync>;

/// What stderr shows without `RUST_LOG`: `level`, the gateway's audit lines at `audit`, a
/// gateway's upstream events at info at least, and never the MCP spans (they are for the
/// collector, not the log lines' prefixes).
pub(crate) fn filter(level: tracing::Level, audit: tracing::Level, gateway: bool) -> Targets {
    let filter = Targets::new()
        .with_default(level)
        .with_target("toolwire_gateway::audit", audit)
        .with_target(toolwire_telemetry::TARGET, LevelFilter::OFF);
    if gateway {
        filter.with_target("toolwire_host", level.max(tracing::Level::INFO))
    } else {
        filter
    }
}

/// `logs`, and the collector's layer where there is one. Without a collector there is no
/// layer in its place: an absent layer (`None::<L>` as a layer) counts as one that wants every
/// span, and then every request's spans are made, recorded and dropped unread — a fifth of
/// the gateway's instructions a call.
pub(crate) fn dispatch<C>(logs: Logs, collector: Option<C>) -> tracing::Dispatch
where
    C: Layer<Layered<Logs, Registry>> + Send + Sync + 'static,
{
    let registry = tracing_subscriber::registry().with(logs);
    match collector {
        Some(layer) => tracing::Dispatch::new(registry.with(layer)),
        None => tracing::Dispatch::new(registry),
    }
}

/// No collector: the type of [`dispatch`]'s `None` in a build without OTLP.
#[cfg(any(test, not(feature = "otlp")))]
pub(crate) struct NoCollector;

#[cfg(any(test, not(feature = "otlp")))]
impl<S: tracing::Subscriber> Layer<S> for NoCollector {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether an MCP request's span is made under `dispatch`.
    fn spans_made(dispatch: &tracing::Dispatch) -> bool {
        tracing::dispatcher::with_default(dispatch, || {
            !toolwire_telemetry::client("tools/call", toolwire_telemetry::Subject::Tool("echo"))
                .is_disabled()
        })
    }

    fn logs(gateway: bool) -> Logs {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(filter(tracing::Level::WARN, tracing::Level::INFO, gateway))
            .boxed()
    }

    #[test]
    fn without_a_collector_no_mcp_span_is_made_and_with_one_every_one_is() {
        for gateway in [false, true] {
            assert!(!spans_made(&dispatch(logs(gateway), None::<NoCollector>)));
            // A layer with no filter of its own wants every span: the same request's span is
            // made then, so the check above can fail.
            assert!(spans_made(&dispatch(logs(gateway), Some(NoCollector))));
        }
    }
}

//! Traces of MCP calls: spans named and attributed as the OpenTelemetry semantic conventions
//! for MCP ask, the W3C trace context each request carries in `_meta`, and OTLP export.
//!
//! The spans are ordinary [`tracing`] spans under the target [`TARGET`], at `INFO`: with no
//! subscriber, or one that filters them out, a span costs one relaxed atomic load and nothing
//! is formatted (its name and attributes are filled in only when it is enabled). With the
//! `otel` feature and a [`tracing_opentelemetry`] layer, they become OpenTelemetry spans:
//! [`current`] gives the context a client puts in a request's `_meta`, and
//! [`server`] makes a server's span a child of the context its request carried, so one trace
//! follows a call from the agent through every gateway to the server that runs it. With the
//! `otlp` feature, [`Otlp`] exports them over OTLP/HTTP.
//!
//! Span names are `{mcp.method.name} {target}` (the tool or prompt name; never a resource URI,
//! which would make names unbounded). Attributes: `mcp.method.name`, `gen_ai.tool.name` and
//! `gen_ai.operation.name = execute_tool` for calls, `gen_ai.prompt.name`, `mcp.resource.uri`,
//! `jsonrpc.request.id`, `mcp.session.id`, `mcp.protocol.version`, `network.transport`, and
//! `error.type` on failure (a JSON-RPC error code, or the kind of local failure). Never
//! arguments, results or credentials.
//!
//! Dependencies: `tracing-opentelemetry` (the maintained bridge from `tracing` spans to
//! OpenTelemetry ones), `opentelemetry` and `opentelemetry_sdk` (the W3C `traceparent` and
//! `baggage` propagators, the tracer provider), `opentelemetry-otlp` and `opentelemetry-http`
//! (OTLP/HTTP in protobuf, the form every collector takes, over hyper with rustls as the rest
//! of Toolwire; its gRPC form would add tonic).

use tracing::Span;
use tracing::field::Empty;

use toolwire_types::JsonObject;
pub use toolwire_types::TraceContext;

#[cfg(feature = "otlp")]
mod otlp;
#[cfg(feature = "otlp")]
pub use otlp::{Otlp, OtlpError};

/// The `tracing` target of every span this crate makes (`toolwire::mcp=info` in a filter).
pub const TARGET: &str = "toolwire::mcp";

/// What a request is about, for the span's name and attributes.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// Nothing low in cardinality: the span is named by the method alone.
    None,
    /// `tools/call`: the tool's name.
    Tool(&'a str),
    /// `prompts/get`: the prompt's name.
    Prompt(&'a str),
    /// A request about one resource: its URI (an attribute, never in the name).
    Resource(&'a str),
}

/// An MCP span at `INFO` under [`TARGET`]: `$name` its `tracing` name, `$kind` its
/// OpenTelemetry kind, every attribute of the conventions declared and empty.
macro_rules! mcp_span {
    ($name:literal, $kind:literal, $method:expr) => {
        tracing::info_span!(
            target: TARGET,
            $name,
            otel.name = Empty,
            otel.kind = $kind,
            otel.status_code = Empty,
            mcp.method.name = $method,
            gen_ai.operation.name = Empty,
            gen_ai.tool.name = Empty,
            gen_ai.prompt.name = Empty,
            mcp.resource.uri = Empty,
            jsonrpc.request.id = Empty,
            mcp.session.id = Empty,
            mcp.protocol.version = Empty,
            network.transport = Empty,
            error.type = Empty,
        )
    };
}

/// The span of a request a client sends (`SpanKind::Client`), not entered. Its parent is the
/// span current where it is made.
pub fn client(method: &str, subject: Subject<'_>) -> Span {
    let span = mcp_span!("mcp.client", "client", method);
    name(&span, method, subject);
    span
}

/// The span of a request a server handles (`SpanKind::Server`), not entered: with the `otel`
/// feature, a child of the trace context the request's `meta` carries, when it carries one
/// (read only when the span is enabled: a server without tracing pays nothing for it).
pub fn server(method: &str, subject: Subject<'_>, meta: Option<&JsonObject>) -> Span {
    let span = mcp_span!("mcp.server", "server", method);
    name(&span, method, subject);
    #[cfg(feature = "otel")]
    if !span.is_disabled()
        && let Some(parent) = meta.and_then(TraceContext::from_meta)
    {
        otel::adopt(&span, &parent);
    }
    #[cfg(not(feature = "otel"))]
    let _ = meta;
    span
}

/// A span of an application's own work around MCP requests (`SpanKind::Internal`), not
/// entered: a command line's run, an agent's step. The requests made inside it are its
/// children, so they share its trace.
pub fn internal(name: &str) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "toolwire",
        otel.name = Empty,
        otel.kind = "internal",
    );
    if !span.is_disabled() {
        span.record("otel.name", name);
    }
    span
}

/// Names `span` and records what its request is about (only when the span is enabled).
fn name(span: &Span, method: &str, subject: Subject<'_>) {
    if span.is_disabled() {
        return;
    }
    match subject {
        Subject::None => {
            span.record("otel.name", method);
        }
        Subject::Tool(tool) => {
            span.record("otel.name", format!("{method} {tool}"));
            span.record("gen_ai.tool.name", tool);
            span.record("gen_ai.operation.name", "execute_tool");
        }
        Subject::Prompt(prompt) => {
            span.record("otel.name", format!("{method} {prompt}"));
            span.record("gen_ai.prompt.name", prompt);
        }
        Subject::Resource(uri) => {
            span.record("otel.name", method);
            span.record("mcp.resource.uri", uri);
        }
    }
}

/// Records the session a span's request belongs to: the protocol version (when known), the
/// transport (`pipe` for stdio, `tcp` for HTTP) and the legacy `Mcp-Session-Id` as
/// `mcp.session.id`, digested ([`session_digest`]): the client's and the server's spans of one
/// session carry the same value, and no exported span holds an id that would let its reader
/// speak in the session.
pub fn record_session(
    span: &Span,
    version: Option<&str>,
    transport: &str,
    session_id: Option<&str>,
) {
    if span.is_disabled() {
        return;
    }
    if let Some(version) = version {
        span.record("mcp.protocol.version", version);
    }
    span.record("network.transport", transport);
    if let Some(id) = session_id {
        span.record("mcp.session.id", session_digest(id));
    }
}

/// What `mcp.session.id` holds for session `id`: the first 16 bytes of its SHA-256, in hex.
pub fn session_digest(id: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Records the JSON-RPC id of a span's request.
pub fn record_request_id(span: &Span, id: &dyn std::fmt::Display) {
    if !span.is_disabled() {
        span.record("jsonrpc.request.id", tracing::field::display(id));
    }
}

/// Marks a span's request as failed: `error_type` is the JSON-RPC error code of an error
/// answer, or a short name of the local failure (`timeout`, `transport`, `tool_error` for a
/// result with `isError`).
pub fn record_error(span: &Span, error_type: &dyn std::fmt::Display) {
    if !span.is_disabled() {
        span.record("error.type", tracing::field::display(error_type));
        span.record("otel.status_code", "ERROR");
    }
}

/// The W3C trace context of the current span, to put in the `_meta` of a request made in it:
/// `None` without the `otel` feature, or when the current span is not an OpenTelemetry one
/// (no layer, or filtered out).
pub fn current() -> Option<TraceContext> {
    #[cfg(feature = "otel")]
    {
        otel::context_of(&Span::current())
    }
    #[cfg(not(feature = "otel"))]
    None
}

/// The W3C trace context of `span` (see [`current`]).
pub fn context_of(span: &Span) -> Option<TraceContext> {
    #[cfg(feature = "otel")]
    {
        otel::context_of(span)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = span;
        None
    }
}

/// Whether this build makes OpenTelemetry spans and carries their context (the `otel`
/// feature). Without it, a gateway relays the context its caller sent as it came.
pub const PROPAGATES: bool = cfg!(feature = "otel");

#[cfg(feature = "otel")]
mod otel {
    use std::collections::HashMap;

    use opentelemetry::propagation::{TextMapCompositePropagator, TextMapPropagator};
    use opentelemetry::trace::TraceContextExt as _;
    use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    use super::TraceContext;

    /// The W3C propagators: `traceparent`/`tracestate`, then `baggage`. Their own, not the
    /// process's global one: MCP's `_meta` carries W3C members whatever an application
    /// propagates in its HTTP headers.
    fn propagator() -> TextMapCompositePropagator {
        TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ])
    }

    pub(super) fn context_of(span: &Span) -> Option<TraceContext> {
        if span.is_disabled() {
            return None;
        }
        let cx = span.context();
        if !cx.span().span_context().is_valid() {
            return None;
        }
        let mut carrier = HashMap::new();
        propagator().inject_context(&cx, &mut carrier);
        TraceContext::new(
            carrier.get("traceparent")?,
            carrier.get("tracestate").map(String::as_str),
            carrier.get("baggage").map(String::as_str),
        )
    }

    pub(super) fn adopt(span: &Span, parent: &TraceContext) {
        let mut carrier = HashMap::new();
        carrier.insert("traceparent".to_owned(), parent.traceparent().to_owned());
        if let Some(state) = parent.tracestate() {
            carrier.insert("tracestate".to_owned(), state.to_owned());
        }
        if let Some(baggage) = parent.baggage() {
            carrier.insert("baggage".to_owned(), baggage.to_owned());
        }
        let cx = propagator().extract(&carrier);
        if let Err(e) = span.set_parent(cx) {
            tracing::debug!(error = %e, "the request's trace context could not be adopted");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    // One test, not two: `tracing` caches each callsite's interest process-wide, and a test
    // without a subscriber running beside one with a scoped subscriber races that cache.
    #[test]
    fn spans_are_traced_only_with_a_layer_and_adopt_the_request_context() {
        // Without a subscriber: disabled, and no context.
        let span = client("tools/call", Subject::Tool("echo"));
        assert!(span.is_disabled());
        assert_eq!(context_of(&span), None);
        assert_eq!(span.in_scope(current), None);
        #[cfg(feature = "otel")]
        with_a_layer();
    }

    #[cfg(feature = "otel")]
    fn with_a_layer() {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt as _;

        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let inbound = TraceContext::new(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                None,
                Some("user=alice"),
            )
            .unwrap();
            let mut meta = JsonObject::new();
            inbound.write_into(&mut meta);
            let span = server("tools/call", Subject::Tool("echo"), Some(&meta));
            let own = context_of(&span).unwrap();
            assert_eq!(own.trace_id(), inbound.trace_id());
            assert_ne!(
                own.parent_id(),
                inbound.parent_id(),
                "the span's own id goes on"
            );
            assert_eq!(own.baggage(), Some("user=alice"));
            // A client span made inside it is its child: same trace, its own id.
            let child = span.in_scope(|| client("tools/call", Subject::Tool("echo")));
            let outbound = context_of(&child).unwrap();
            assert_eq!(outbound.trace_id(), inbound.trace_id());
            assert_ne!(outbound.parent_id(), own.parent_id());
        });
    }
}

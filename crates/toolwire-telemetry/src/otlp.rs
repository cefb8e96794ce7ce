//! Export over OTLP/HTTP (protobuf), batched off the calling threads.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why export could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The endpoint is not an `http` or `https` URL (shown without its credentials).
    #[error("the OTLP endpoint {0} is not an http:// or https:// URL")]
    Endpoint(String),
    /// Export needs a tokio runtime to send from.
    #[error("OTLP export must be set up inside a tokio runtime")]
    NoRuntime,
    /// The exporter refused its settings.
    #[error("the OTLP exporter could not be built: {0}")]
    Build(String),
}

/// Spans exported over OTLP/HTTP to a collector: [`Otlp::layer`] goes into the application's
/// `tracing` subscriber; [`Otlp::shutdown`] (or dropping the last handle) sends what is left.
#[derive(Debug, Clone)]
pub struct Otlp {
    provider: SdkTracerProvider,
}

impl Otlp {
    /// Exports to `endpoint` as `service_name`. The endpoint is a collector's base URL
    /// (`http://localhost:4318`, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it; `/v1/traces` is
    /// added) or the traces URL itself (ending in `/v1/traces`). Must be called inside a tokio
    /// runtime, which sends the batches; the batching itself runs on a thread of its own.
    pub fn new(endpoint: &str, service_name: &str) -> Result<Otlp, OtlpError> {
        let shown = toolwire_types::redacted_url(endpoint).into_owned();
        let url = match endpoint.split_once("://") {
            Some(("http" | "https", rest)) if !rest.is_empty() => {
                if endpoint.trim_end_matches('/').ends_with("/v1/traces") {
                    endpoint.to_owned()
                } else {
                    format!("{}/v1/traces", endpoint.trim_end_matches('/'))
                }
            }
            _ => return Err(OtlpError::Endpoint(shown)),
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(EXPORT_TIMEOUT)
            .with_http_client(OnRuntime::new(runtime))
            .build()
            .map_err(|e| OtlpError::Build(e.to_string()))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name(service_name.to_owned())
                    .build(),
            )
            .build();
        Ok(Otlp { provider })
    }

    /// The `tracing` layer that turns Toolwire's MCP spans ([`crate::TARGET`], `INFO`) into
    /// exported OpenTelemetry spans; other spans are left to the application's own layers.
    pub fn layer<S>(&self) -> impl Layer<S> + 'static
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        // The conventions' attributes only: no source locations, threads, busy/idle times.
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("toolwire"))
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_filter(Targets::new().with_target(crate::TARGET, tracing::Level::INFO))
    }

    /// Sends every span ended so far (a test, or a process about to exit).
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!(error = %e, "OTLP export: spans could not be sent");
        }
    }

    /// Sends what is left and stops exporting.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "OTLP export: spans could not be sent");
        }
    }
}

/// The HTTP client the exporter sends with: hyper with rustls (webpki roots), each request run
/// on the tokio runtime the export was set up in (the batching thread has no runtime of its
/// own, and hyper needs one).
#[derive(Debug)]
struct OnRuntime {
    runtime: tokio::runtime::Handle,
    client: Arc<opentelemetry_http::hyper::HyperClient<Connector>>,
}

type Connector = hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;

impl OnRuntime {
    fn new(runtime: tokio::runtime::Handle) -> OnRuntime {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .build();
        OnRuntime {
            runtime,
            client: Arc::new(opentelemetry_http::hyper::HyperClient::new(
                connector,
                EXPORT_TIMEOUT,
                None,
            )),
        }
    }
}

impl HttpClient for OnRuntime {
    fn send_bytes<'a, 'b>(
        &'a self,
        request: Request<Bytes>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        let client = Arc::clone(&self.client);
        let sent = self
            .runtime
            .spawn(async move { client.send_bytes(request).await });
        Box::pin(async move {
            match sent.await {
                Ok(answer) => answer,
                Err(e) => Err(Box::new(e) as HttpError),
            }
        })
    }
}

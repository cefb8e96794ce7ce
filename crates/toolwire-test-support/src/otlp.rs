//! An OpenTelemetry collector for tests: OTLP/HTTP in protobuf on a loopback port, keeping
//! every span it is sent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message as _;

use crate::http::{HttpPeer, Reply};

/// One span as a collector received it (ids in lowercase hex, as `traceparent` writes them).
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// `service.name` of the process that sent it.
    pub service: String,
    /// Its name.
    pub name: String,
    /// `client`, `server`, `internal`, `producer` or `consumer`.
    pub kind: &'static str,
    /// The trace it belongs to (32 hex digits).
    pub trace_id: String,
    /// Its own id (16 hex digits).
    pub span_id: String,
    /// Its parent's id (empty for a root span).
    pub parent_span_id: String,
    /// Its attributes, each as text.
    pub attributes: BTreeMap<String, String>,
}

impl ReceivedSpan {
    /// An attribute's text, `""` when absent.
    pub fn attribute(&self, key: &str) -> &str {
        self.attributes.get(key).map_or("", String::as_str)
    }
}

/// The collector: `url()` is what an exporter is given.
#[derive(Debug)]
pub struct Collector {
    peer: HttpPeer,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

impl Collector {
    /// Starts it on a loopback port. Every `POST /v1/traces` is decoded and answered `200`
    /// (an empty `ExportTraceServiceResponse`); a body that does not decode is answered `400`.
    pub async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        let peer = HttpPeer::start(move |req| {
            if req.path != "/v1/traces" {
                return Reply::status(404);
            }
            let Ok(export) = ExportTraceServiceRequest::decode(req.body.clone()) else {
                return Reply::status(400);
            };
            let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            for resource in export.resource_spans {
                let service = resource
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|a| a.key == "service.name")
                    .map(|a| text(a.value.as_ref()))
                    .unwrap_or_default();
                for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
                    kept.push(ReceivedSpan {
                        service: service.clone(),
                        kind: match span.kind {
                            1 => "internal",
                            2 => "server",
                            3 => "client",
                            4 => "producer",
                            5 => "consumer",
                            _ => "unspecified",
                        },
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        attributes: span
                            .attributes
                            .iter()
                            .map(|a| (a.key.clone(), text(a.value.as_ref())))
                            .collect(),
                    });
                }
            }
            Reply::json(200, "").header("content-type", "application/x-protobuf")
        })
        .await;
        Self { peer, spans }
    }

    /// Its base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.peer.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

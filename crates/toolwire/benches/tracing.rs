//! Criterion bench for what tracing costs on the client's per-call path: the same
//! `Client::call_tool` over an in-memory server with tracing off (no subscriber: the state of
//! a program that never set one up), with an OpenTelemetry layer on (every call a span, its
//! W3C context written into the request's `_meta`; no exporter), and the instrumentation alone
//! while off (the span, its context, the instrumented future), to set beside the call.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "bench harness"
)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolwire::{BoxFuture, Client, Inbound, Outbound, Transport, TransportError};
use tracing::Instrument as _;

/// A 2026-07-28 server in memory: discovery, one tool, and an echo of each call's `_meta`
/// trace context (so the bench can check it was sent when, and only when, tracing is on).
struct Echo {
    to_client: mpsc::UnboundedSender<Inbound>,
    from_server: tokio::sync::Mutex<mpsc::UnboundedReceiver<Inbound>>,
    traced: Arc<AtomicU64>,
}

impl Echo {
    fn new(traced: Arc<AtomicU64>) -> Self {
        let (to_client, from_server) = mpsc::unbounded_channel();
        Self {
            to_client,
            from_server: tokio::sync::Mutex::new(from_server),
            traced,
        }
    }
}

impl Transport for Echo {
    fn carries_headers(&self) -> bool {
        false
    }
    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        let request: Value = serde_json::from_slice(&message.body).unwrap();
        if let (Some(id), Some(method)) = (request.get("id"), request["method"].as_str()) {
            if request["params"]["_meta"]["traceparent"].is_string() {
                self.traced.fetch_add(1, Ordering::Relaxed);
            }
            let result = match method {
                "server/discover" => json!({"resultType": "complete",
                    "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "echo", "version": "1"}}}),
                "tools/list" => {
                    json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                    "tools": [{"name": "job", "inputSchema": {"type": "object"}}]})
                }
                _ => {
                    json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]})
                }
            };
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            self.to_client
                .send(Inbound::new(serde_json::to_vec(&answer).unwrap()))
                .unwrap();
        }
        Box::pin(async { Ok(()) })
    }
    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
        Box::pin(async { self.from_server.lock().await.recv().await.map(Ok) })
    }
    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async { Ok(()) })
    }
}

/// A client of its own server, and the count of requests that server saw with a trace
/// context.
fn client(runtime: &tokio::runtime::Runtime) -> (Client, Arc<AtomicU64>) {
    let traced = Arc::new(AtomicU64::new(0));
    let client = runtime.block_on(async {
        let client = Client::builder("toolwire-bench", "0.1.0")
            .connect(Echo::new(traced.clone()))
            .unwrap();
        client.list_tools().await.unwrap();
        client
    });
    (client, traced)
}

fn call(runtime: &tokio::runtime::Runtime, client: &Client) {
    let result = runtime
        .block_on(client.call_tool("job", json!({"n": 1})))
        .unwrap();
    black_box(result);
}

/// Polls a future that is ready at once.
fn poll_once<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the future was not ready"),
    }
}

fn tracing_cost(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("tracing");

    let (off, untraced) = client(&runtime);
    group.bench_function("call, tracing off", |b| b.iter(|| call(&runtime, &off)));
    assert_eq!(
        untraced.load(Ordering::Relaxed),
        0,
        "tracing off sent a context"
    );

    // What a call adds for tracing while it is off: its span, that span's context, the future
    // run inside it, against the same future run bare.
    group.bench_function("instrumentation alone, tracing off", |b| {
        b.iter(|| {
            let span = toolwire::telemetry::client(
                "tools/call",
                toolwire::telemetry::Subject::Tool(black_box("job")),
            );
            let context = toolwire::telemetry::context_of(&span);
            assert!(context.is_none());
            poll_once(std::future::ready(black_box(1)).instrument(span))
        });
    });
    group.bench_function("calibration: the same future, bare", |b| {
        b.iter(|| poll_once(std::future::ready(black_box(1))));
    });

    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let subscriber = {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")))
    };
    tracing::subscriber::with_default(subscriber, || {
        let (on, traced) = client(&runtime);
        group.bench_function("call, OpenTelemetry spans on", |b| {
            b.iter(|| call(&runtime, &on));
        });
        // Every request (the handshake and the listing among them) carried a context.
        assert!(
            traced.load(Ordering::Relaxed) >= 3,
            "tracing on sent no context"
        );
    });
    group.finish();
}

criterion_group!(benches, tracing_cost);
criterion_main!(benches);

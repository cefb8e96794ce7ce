//! The scripted server behind the 2024-11-05 HTTP+SSE transport: `GET /sse` opens the stream
//! (first event `endpoint`), `POST /messages?session_id=…` hands a message to the server and
//! answers 202; everything the server says (answers, notifications, its own requests such as
//! the `ask` tool's `elicitation/create`) goes down the stream as `message` events.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::channel::Channel;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::mpsc;

use crate::{Eras, ScriptedServer};

type Body = Channel<Bytes, std::io::Error>;

/// One stream's session: its own scripted server, and where its events go.
struct Session {
    server: ScriptedServer,
    events: mpsc::UnboundedSender<Vec<u8>>,
}

/// A running legacy SSE server; stops (with its streams) when dropped.
#[derive(Debug)]
pub struct SsePeer {
    /// Its address.
    pub addr: SocketAddr,
    posts: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SsePeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SsePeer {
    /// Starts on 127.0.0.1, speaking `eras` (give a legacy one).
    pub async fn start(eras: Eras) -> Self {
        let (listener, addr) = crate::http::bind_loopback().await;
        let sessions: Arc<Mutex<HashMap<String, Session>>> = Arc::default();
        let posts = Arc::new(AtomicU64::new(0));
        let counter = posts.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            let minted = Arc::new(AtomicU64::new(0));
            while let Ok((stream, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                let (sessions, minted, posts) = (sessions.clone(), minted.clone(), counter.clone());
                connections.spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (sessions, minted, posts) =
                            (sessions.clone(), minted.clone(), posts.clone());
                        async move {
                            Ok::<_, Infallible>(answer(req, eras, &sessions, &minted, &posts).await)
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, posts, task }
    }

    /// The SSE URL.
    pub fn url(&self) -> String {
        format!("http://{}/sse", self.addr)
    }

    /// How many messages were POSTed.
    pub fn posts(&self) -> u64 {
        self.posts.load(Ordering::SeqCst)
    }
}

fn status(status: StatusCode) -> Response<Body> {
    let (_, body) = Channel::new(1);
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r
}

async fn answer(
    req: Request<Incoming>,
    eras: Eras,
    sessions: &Mutex<HashMap<String, Session>>,
    minted: &AtomicU64,
    posts: &AtomicU64,
) -> Response<Body> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/sse") => {
            let id = format!("s{}", minted.fetch_add(1, Ordering::SeqCst));
            let (events, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
            let session = Session {
                server: ScriptedServer::new(eras),
                events,
            };
            if let Ok(mut sessions) = sessions.lock() {
                sessions.insert(id.clone(), session);
            }
            let (mut tx, body) = Channel::new(16);
            tokio::spawn(async move {
                let endpoint = format!("event: endpoint\ndata: /messages?session_id={id}\n\n");
                if tx.send_data(Bytes::from(endpoint)).await.is_err() {
                    return;
                }
                while let Some(line) = outgoing.recv().await {
                    let mut event = b"event: message\ndata: ".to_vec();
                    event.extend_from_slice(&line);
                    event.extend_from_slice(b"\n\n");
                    if tx.send_data(Bytes::from(event)).await.is_err() {
                        return;
                    }
                }
            });
            let mut r = Response::new(body);
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/event-stream"),
            );
            r
        }
        (&Method::POST, "/messages") => {
            posts.fetch_add(1, Ordering::SeqCst);
            let id = req
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("session_id="))
                .map(str::to_owned)
                .unwrap_or_default();
            let body = req
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let Ok(mut sessions) = sessions.lock() else {
                return status(StatusCode::INTERNAL_SERVER_ERROR);
            };
            let Some(session) = sessions.get_mut(&id) else {
                return status(StatusCode::NOT_FOUND);
            };
            for line in session.server.handle_line(&body) {
                let _ = session.events.send(line);
            }
            status(StatusCode::ACCEPTED)
        }
        (_, "/sse") => status(StatusCode::METHOD_NOT_ALLOWED),
        _ => status(StatusCode::NOT_FOUND),
    }
}

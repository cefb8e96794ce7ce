//! The stdio front end: one JSON-RPC message per line on stdin and stdout.

use std::sync::Arc;
use toolwire_types::{ClientMethod, ClientNotice};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::core::{Core, Handled, Interest, error};
use crate::{Change, Service};

/// The longest line read; a longer one is answered with a parse error and skipped.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// The process's stdin and stdout. On Unix a pipe (what a client that starts the server gives
/// it) goes through the runtime's reactor: tokio's `stdin()` and `stdout()` work on its blocking
/// pool, a hand-over between threads for every read and write (about twenty `futex` calls a
/// message, measured here). Anything else (a terminal, a file, a socket, Windows) keeps them.
fn standard_streams() -> (
    Box<dyn AsyncRead + Send + Unpin>,
    Box<dyn AsyncWrite + Send + Unpin>,
) {
    #[cfg(unix)]
    {
        use tokio::net::unix::pipe;
        let input: Box<dyn AsyncRead + Send + Unpin> = match pipe_fd(&std::io::stdin())
            .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok())
        {
            Some(pipe) => Box::new(pipe),
            None => Box::new(tokio::io::stdin()),
        };
        let output: Box<dyn AsyncWrite + Send + Unpin> =
            match pipe_fd(&std::io::stdout()).and_then(|fd| pipe::Sender::from_owned_fd(fd).ok()) {
                Some(pipe) => Box::new(pipe),
                None => Box::new(tokio::io::stdout()),
            };
        (input, output)
    }
    #[cfg(not(unix))]
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

/// A descriptor of `stream` when it is a pipe (a FIFO), to hand to the reactor (which makes it
/// non-blocking); None for anything else.
#[cfg(unix)]
fn pipe_fd(stream: &impl std::os::fd::AsFd) -> Option<std::os::fd::OwnedFd> {
    use std::os::unix::fs::FileTypeExt as _;
    let fd = stream.as_fd().try_clone_to_owned().ok()?;
    let file = std::fs::File::from(fd);
    let is_pipe = file.metadata().is_ok_and(|m| m.file_type().is_fifo());
    is_pipe.then(|| file.into())
}

/// A message's task: its request slot (none for a notification or an answer), given back
/// first, then word that it ended.
struct Ended(
    Option<tokio::sync::OwnedSemaphorePermit>,
    Arc<tokio::sync::Notify>,
);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.take();
        self.1.notify_one();
    }
}

/// Serves on stdin/stdout until stdin ends. Requests run concurrently (a slow tool does not
/// hold up a ping); list changes go out as they happen: always in the legacy era, on the
/// listen stream in the modern one.
pub(crate) async fn serve<S: Service>(
    core: Arc<Core<S>>,
    stop: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let (input, output) = standard_streams();
    serve_on(core, input, output, stop).await
}

/// [`serve`] on any pair of streams.
async fn serve_on<S: Service>(
    core: Arc<Core<S>>,
    input: impl AsyncRead + Send + Unpin + 'static,
    mut stdout: impl AsyncWrite + Send + Unpin + 'static,
    stop: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let (out, mut lines) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        while let Some(message) = lines.recv().await {
            let mut line = crate::respond::json_bytes(&message);
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });
    let mut changes = core.subscribe();
    let mut legacy = false;
    let mut listening: Vec<(Value, Interest)> = Vec::new();
    let (listen_tx, mut listen_rx) = mpsc::unbounded_channel::<(Value, Interest)>();
    let mut stop = std::pin::pin!(stop);
    // Once `stop` resolved: new requests are refused, answers and notifications still taken
    // (a call in flight may be waiting for its elicitation's answer), and the loop ends when
    // nothing is in flight.
    let mut stopping = false;
    // Requests in flight at once: past the limit, a request is refused at once rather than
    // read later, so that the answers and cancellations behind it on stdin still arrive.
    let most = core.options.limits.stdio_in_flight.max(1);
    let slots = Arc::new(tokio::sync::Semaphore::new(most));
    // Woken each time a message's task ends, for a stop to see when nothing is in flight (one
    // stored wake-up at most, however many tasks end meanwhile).
    let ended_now = Arc::new(tokio::sync::Notify::new());
    // Lines are read on a task of their own: `read_until` is not cancel-safe in a select.
    let (line_tx, mut line_rx) = mpsc::channel::<std::io::Result<Option<Vec<u8>>>>(16);
    tokio::spawn(async move {
        let mut stdin = BufReader::new(input);
        loop {
            let mut buf = Vec::new();
            let read = (&mut stdin)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut buf)
                .await;
            let item = match read {
                Ok(0) => {
                    let _ = line_tx.send(Ok(None)).await;
                    return;
                }
                Ok(_) if buf.len() > MAX_LINE && buf.last() != Some(&b'\n') => {
                    // Skip the rest of the oversized line.
                    let mut rest = Vec::new();
                    if stdin.read_until(b'\n', &mut rest).await.is_err() {
                        return;
                    }
                    Ok(Some(Vec::new()))
                }
                Ok(_) => Ok(Some(buf)),
                Err(e) => Err(e),
            };
            if line_tx.send(item).await.is_err() {
                return;
            }
        }
    });
    loop {
        tokio::select! {
            line = line_rx.recv() => {
                let buf = match line {
                    None | Some(Ok(None)) => break,
                    Some(Err(e)) => return Err(e),
                    Some(Ok(Some(buf))) => buf,
                };
                if buf.is_empty() {
                    let _ = out.send(error(&Value::Null, -32700, "message too large", None));
                    continue;
                }
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let incoming = match core.read(&buf) {
                    Ok(incoming) => incoming,
                    Err(e) => {
                        let _ = out.send(error(&Value::Null, -32700, format!("Parse error: {e}"), None));
                        continue;
                    }
                };
                if incoming.method == ClientMethod::Initialize {
                    legacy = true;
                }
                if incoming.value["method"].as_str().map(ClientNotice::of) == Some(ClientNotice::Cancelled) {
                    let id = &incoming.value["params"]["requestId"];
                    listening.retain(|(l, interest)| {
                        let ends = l == id;
                        if ends {
                            let (core, resources) = (core.clone(), interest.resources().clone());
                            tokio::spawn(async move { core.service.watch(&resources, false, None).await });
                        }
                        !ends
                    });
                }
                let is_request = incoming.value["method"].is_string()
                    && incoming.value.get("id").is_some_and(|id| !id.is_null());
                if stopping && is_request {
                    let _ = out.send(error(
                        &incoming.value["id"],
                        crate::respond::SHUTTING_DOWN,
                        "the server is shutting down: it takes no new requests",
                        None,
                    ));
                    continue;
                }
                let slot = match slots.clone().try_acquire_owned() {
                    Ok(slot) => Some(slot),
                    Err(_) if is_request => {
                        let _ = out.send(error(
                            &incoming.value["id"],
                            toolwire_types::error::code::INTERNAL_ERROR,
                            format!(
                                "the server has {} requests in flight already; try again when one ends",
                                core.options.limits.stdio_in_flight
                            ),
                            None,
                        ));
                        continue;
                    }
                    // A notification or a response takes no slot.
                    Err(_) => None,
                };
                let core = core.clone();
                // What the handler sends on the way (progress, log messages, requests) goes
                // straight to the writer, in order, before its answer.
                let out = out.clone();
                let listens = listen_tx.clone();
                let ended = Ended(slot, ended_now.clone());
                tokio::spawn(async move {
                    let _ended = ended;
                    // One client on the other end: the whole connection is one scope.
                    let answer = match core.handle(&incoming, &out, Some("stdio"), true, None).await {
                        Handled::Answer(answer) => answer.into_value(),
                        Handled::Refused(answer, _) => answer,
                        Handled::Listen(id, interest) => {
                            // Acknowledged (by the loop) once the service watches.
                            let watched = core.service.watch(interest.resources(), true, None).await;
                            let _ = listens.send((id, interest.narrowed(watched)));
                            return;
                        }
                        Handled::Nothing => return,
                    };
                    let _ = out.send(answer);
                });
            }
            // New requests are refused from now on; the loop ends once those in flight are
            // answered (they hold the writer open until their answers are out).
            () = &mut stop, if !stopping => {
                stopping = true;
                if slots.available_permits() == most {
                    break;
                }
            }
            () = ended_now.notified(), if stopping => {
                if slots.available_permits() == most {
                    break;
                }
            }
            Some((id, interest)) = listen_rx.recv() => {
                let _ = out.send(interest.acknowledged(&id));
                listening.push((id, interest));
            }
            change = changes.recv() => {
                let change = match change {
                    Ok(change) => change,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Change::Tools,
                    Err(_) => continue,
                };
                // Nobody is authenticated over stdio: what is for one caller is for none here.
                if legacy
                    && !matches!(change, Change::ForCaller { .. })
                    && let Some(note) =
                        core.legacy_notification(&change, &crate::Listener::new(None, "stdio"))
                {
                    let _ = out.send(note);
                }
                for (id, interest) in &listening {
                    if let Some(note) = interest.notification(&change, id) {
                        let _ = out.send(note);
                    }
                }
            }
        }
    }
    // The client went away: its listen streams with it, and its session.
    for (_, interest) in &listening {
        core.service.watch(interest.resources(), false, None).await;
    }
    core.forget("stdio");
    drop(out);
    let _ = writer.await;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail by panicking")]

    use std::sync::Arc;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

    use super::pipe_fd;
    use crate::service::{Notifier, Reply, Request, RpcError, ServerInfo, Service};

    /// A 2026-07-28 `tools/call` with this id, as a line.
    fn call_line(id: u64) -> Vec<u8> {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "any", "arguments": {}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}}});
        format!("{call}\n").into_bytes()
    }

    /// A tool that reports progress `STEPS` times, without yielding, before it answers.
    struct Chatty;

    const STEPS: u64 = 20;

    impl Service for Chatty {
        fn info(&self) -> ServerInfo {
            ServerInfo::new("chatty", "0", json!({"tools": {}}))
        }

        async fn handle<'a>(
            &'a self,
            request: Request<'a>,
            notifier: &'a Notifier,
        ) -> Result<Reply, RpcError> {
            for step in 1..=STEPS {
                notifier.send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "t", "progress": step}}));
            }
            // Written as text: it goes out as it is.
            let text = format!(
                r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
                request.method_name
            );
            serde_json::value::RawValue::from_string(text)
                .map(Reply::Text)
                .map_err(|e| RpcError::new(-32603, e.to_string()))
        }
    }

    /// The service's contract: what a request sends on the way reaches the client before its
    /// answer. (A forwarding task between the two, as there once was, let the answer overtake
    /// them: on one thread, always.)
    #[tokio::test]
    async fn notifications_a_request_makes_reach_the_client_before_its_answer() {
        let core = crate::core::Core::new(crate::Options::default(), Arc::new(Chatty));
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (server_in, server_out) = tokio::io::split(server);
        let serving = tokio::spawn(super::serve_on(
            core,
            server_in,
            server_out,
            std::future::pending(),
        ));
        let (client_in, mut client_out) = tokio::io::split(client);
        client_out.write_all(&call_line(7)).await.unwrap();
        let mut lines = tokio::io::BufReader::new(client_in).lines();
        let mut seen = Vec::new();
        loop {
            let line = lines.next_line().await.unwrap().unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            let answered = message["id"] == 7;
            seen.push(message);
            if answered {
                break;
            }
        }
        let progress: Vec<u64> = seen
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .filter_map(|m| m["params"]["progress"].as_u64())
            .collect();
        assert_eq!(
            progress,
            (1..=STEPS).collect::<Vec<_>>(),
            "every notification, in order, before the answer: {seen:?}"
        );
        assert!(
            seen.last().unwrap()["result"]["content"].is_array(),
            "the answer: {seen:?}"
        );
        drop(client_out);
        drop(lines);
        serving.await.unwrap().unwrap();
    }

    /// A tool that says it began, then answers 100 ms later.
    struct Slow(Arc<tokio::sync::Notify>);

    impl Service for Slow {
        fn info(&self) -> ServerInfo {
            ServerInfo::new("slow", "0", json!({"tools": {}}))
        }

        async fn handle<'a>(&'a self, _: Request<'a>, _: &'a Notifier) -> Result<Reply, RpcError> {
            self.0.notify_one();
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            Ok(Reply::Json(json!({"content": []})))
        }
    }

    #[tokio::test]
    async fn a_stop_while_a_request_runs_refuses_new_ones_writes_its_answer_then_ends() {
        let began = Arc::new(tokio::sync::Notify::new());
        let core = crate::core::Core::new(crate::Options::default(), Arc::new(Slow(began.clone())));
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (server_in, server_out) = tokio::io::split(server);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(super::serve_on(core, server_in, server_out, async {
            let _ = stopped.await;
        }));
        let (client_in, mut client_out) = tokio::io::split(client);
        client_out.write_all(&call_line(1)).await.unwrap();
        began.notified().await;
        stop.send(()).unwrap();
        // Read while it drains, and refused.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        client_out.write_all(&call_line(2)).await.unwrap();
        // Ends although stdin is still open: the stop, not the end of input.
        tokio::time::timeout(std::time::Duration::from_secs(5), serving)
            .await
            .expect("serving ended after the stop")
            .unwrap()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(client_in).lines();
        let mut seen = Vec::new();
        for _ in 0..2 {
            let line = lines.next_line().await.unwrap().unwrap();
            seen.push(serde_json::from_str::<Value>(&line).unwrap());
        }
        let of = |id: u64| {
            seen.iter()
                .find(|m| m["id"] == id)
                .cloned()
                .unwrap_or_default()
        };
        assert!(of(1)["result"]["content"].is_array(), "{seen:?}");
        assert_eq!(of(2)["error"]["code"], -32000, "{seen:?}");
        drop(client_out);
    }

    #[test]
    fn a_pipe_goes_to_the_reactor_and_a_file_does_not() {
        let (reader, writer) = std::io::pipe().unwrap();
        assert!(pipe_fd(&reader).is_some(), "the read end of a pipe");
        assert!(pipe_fd(&writer).is_some(), "the write end of a pipe");
        let file = std::fs::File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
        assert!(pipe_fd(&file).is_none(), "a regular file");
    }

    /// A pipe's descriptor, given to the reactor, reads what was written up to the pipe's end.
    #[tokio::test]
    async fn lines_written_to_the_pipe_are_read_through_the_reactor() {
        use std::io::Write as _;
        let (reader, mut writer) = std::io::pipe().unwrap();
        let fd = pipe_fd(&reader).unwrap();
        let pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(fd).unwrap();
        writer.write_all(b"{\"jsonrpc\":\"2.0\"}\n").unwrap();
        drop(writer);
        let mut lines = tokio::io::BufReader::new(pipe).lines();
        assert_eq!(
            lines.next_line().await.unwrap().as_deref(),
            Some("{\"jsonrpc\":\"2.0\"}")
        );
        assert_eq!(
            lines.next_line().await.unwrap(),
            None,
            "the end of the pipe"
        );
    }
}

//! The stdio transport of the Toolwire MCP client ([`StdioTransport`]): the server is a child
//! process; messages are lines of compact JSON on its stdin and stdout. How it is started is
//! `config.rs` ([`StdioConfig`], the environment allow-lists); how its output is read,
//! `read.rs`; the platform's process groups and trees, `group.rs`; here, the transport and
//! the child's end.
//!
//! # Dependencies
//! - `toolwire-transport`: the [`Transport`] trait it implements, its errors and read-ahead
//!   budget.
//! - `tokio` (process, io-util, sync, time): the child process and its pipes.
//! - `bytes`: message bodies are serialised once and shared, never copied.
//! - `memchr` (already under `serde_json`): the end of each line on stdout, and a newline in a
//!   message about to be written, found with SIMD rather than a word or a byte at a time.
//! - `nix` (signal, Unix): SIGTERM for graceful shutdown without `unsafe` (tokio only offers
//!   SIGKILL).
//! - `rustix` (Linux): `FIONREAD` on the stdin pipe: the bytes a dead child never read.
//! - `tracing`: the child's stderr, by default.

use std::collections::VecDeque;
use std::fmt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin};
use tokio::sync::{Mutex, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use toolwire_transport::{
    BoxFuture, Inbound, Outbound, ReadAhead, RequestFailure, RequestId, Transport, TransportError,
};

use crate::group::{Ending, Group};

mod config;
mod group;
mod read;

pub use config::*;
use read::{Counted, read_stderr, read_stdout};

enum ReaderEvent {
    /// A message, holding its share of the read budget until it is handed out.
    Message(Bytes, tokio::sync::OwnedSemaphorePermit),
    /// A message over the limit, with the id read from its head when it had one.
    TooLarge(Option<RequestId>),
    ReadError(std::io::Error),
    Eof,
}

struct Inbox {
    rx: mpsc::Receiver<ReaderEvent>,
    finished: bool,
}

type Tail = Arc<StdMutex<VecDeque<String>>>;

/// The child as its reaper task sees it.
#[derive(Debug, Clone, Copy)]
enum ChildState {
    Running,
    Exited(ExitStatus),
    /// Waiting for it failed; it is not known to run.
    Lost,
}

/// An MCP server running as a child process, spoken to over its stdin and stdout.
///
/// The child gets only the allow-listed environment, its stderr is captured line by line, and
/// it leads a process group of its own, so that what it starts (the server behind an `npx`,
/// `uvx` or shell wrapper) ends with it: [`Transport::close`] closes its stdin, waits, sends
/// SIGTERM to the group, waits, and finally SIGKILLs the group, each step bounded; processes
/// of the group that outlive the child get the same SIGTERM-then-SIGKILL. If the child dies on
/// its own, what is left of its group is killed at once (nothing can talk to it, and it would
/// hold stdout open); dropping the transport kills the whole group.
pub struct StdioTransport {
    /// The child's stdin, with where each request written to it lies.
    stdin: Mutex<Stdin>,
    inbox: Mutex<Inbox>,
    /// Set by the task that reaps the child.
    exit: watch::Receiver<ChildState>,
    stderr_task: Mutex<Option<JoinHandle<()>>>,
    tail: Tail,
    closing: Arc<AtomicBool>,
    pid: Option<u32>,
    /// The child's process group (its own pid: it leads it).
    group: Option<Group>,
    /// Set once no process of the group is left, so that nothing is signalled afterwards: a
    /// group id is free for reuse once the group is empty.
    group_ended: Arc<AtomicBool>,
    limit: usize,
    exit_wait: Duration,
    term_wait: Duration,
    /// Bytes the child wrote to stdout so far.
    stdout_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// The requests whose bytes the child never read, known once it died.
    unread: StdMutex<Vec<RequestId>>,
    /// Asks the reaper to kill the child itself: the last resort when ending its group or
    /// tree did not (a `taskkill` without `/T`, as Wine's is).
    kill: StdMutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

/// The child's stdin (`None` once closed) and what was written to it.
struct Stdin {
    pipe: Option<ChildStdin>,
    written: Written,
}

/// Where the last requests written to the child's stdin lie in the byte stream.
#[derive(Default)]
struct Written {
    /// Bytes written so far.
    total: u64,
    /// The last requests written, each with the offset of its first byte.
    requests: VecDeque<(RequestId, u64)>,
}

impl Written {
    /// More than a pipe holds (64 KiB on Linux by default, at most 1 MiB) in any realistic
    /// mix of message sizes.
    const KEPT: usize = 1024;

    fn wrote(&mut self, id: Option<RequestId>, len: u64) {
        let start = self.total;
        self.total += len;
        if let Some(id) = id {
            if self.requests.len() == Self::KEPT {
                self.requests.pop_front();
            }
            self.requests.push_back((id, start));
        }
    }

    /// The requests none of whose bytes were read, when the last `unread` bytes were not.
    #[cfg_attr(
        not(target_os = "linux"),
        allow(dead_code, reason = "FIONREAD is read on Linux")
    )]
    fn unread(&self, unread: u64) -> Vec<RequestId> {
        let read_up_to = self.total.saturating_sub(unread);
        self.requests
            .iter()
            .filter(|(_, start)| *start >= read_up_to)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

impl fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioTransport")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

fn lock_tail(tail: &Tail) -> std::sync::MutexGuard<'_, VecDeque<String>> {
    // Only whole lines are pushed, so a panicked holder left nothing half-written.
    tail.lock().unwrap_or_else(PoisonError::into_inner)
}

impl StdioTransport {
    /// Starts the child. Must be called inside a tokio runtime.
    pub fn spawn(config: StdioConfig) -> Result<Self, TransportError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| TransportError::Spawn {
            program: config.program.clone(),
            source: std::io::Error::other(e),
        })?;
        // A group (Unix) or tree (Windows) of its own, so that its descendants can be ended
        // with it; the program found as a shell would (`npx` is `npx.cmd` on Windows);
        // kill-on-drop covers a runtime that ends before the reaper.
        let path = config.child_path();
        let mut command = crate::group::new_command(&config.program, path.as_deref());
        command.args(&config.args).env_clear().kill_on_drop(true);
        for name in &config.inherit_env {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(config.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &config.cwd {
            // The OS says a missing working directory as a missing program: say which it is.
            if !cwd.is_dir() {
                return Err(TransportError::Spawn {
                    program: config.program,
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!(
                            "its working directory `{}` is not a directory",
                            cwd.display()
                        ),
                    ),
                });
            }
            command.current_dir(cwd);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(match config.stderr {
                StderrMode::Inherit => Stdio::inherit(),
                _ => Stdio::piped(),
            });
        let mut child = command.spawn().map_err(|source| TransportError::Spawn {
            program: config.program.clone(),
            source,
        })?;
        let pid = child.id();
        let group = pid.map(Group::of);
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            // Both were configured as pipes, so tokio always provides them.
            return Err(TransportError::Spawn {
                program: config.program,
                source: std::io::Error::other("the child's pipes were not created"),
            });
        };
        let (tx, rx) = mpsc::channel(64);
        let stdout_bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        runtime.spawn(read_stdout(
            Counted(stdout, stdout_bytes.clone()),
            tx,
            config.max_message_size,
            ReadAhead::new(config.max_message_size),
        ));
        let tail: Tail = Arc::new(StdMutex::new(VecDeque::new()));
        let stderr_task = stderr.map(|stderr| {
            // In the span it was started in: a host's names the server each line is from.
            runtime.spawn(tracing::Instrument::in_current_span(read_stderr(
                stderr,
                config.stderr.clone(),
                tail.clone(),
                config.stderr_tail_lines,
                config.max_stderr_line,
            )))
        });
        let closing = Arc::new(AtomicBool::new(false));
        let group_ended = Arc::new(AtomicBool::new(false));
        let (exit_tx, exit) = watch::channel(ChildState::Running);
        let (kill, killed) = tokio::sync::oneshot::channel();
        runtime.spawn(reap(
            child,
            exit_tx,
            group,
            closing.clone(),
            group_ended.clone(),
            killed,
        ));
        tracing::debug!(program = %config.program, pid, "started MCP server process");
        Ok(Self {
            stdin: Mutex::new(Stdin {
                pipe: Some(stdin),
                written: Written::default(),
            }),
            inbox: Mutex::new(Inbox {
                rx,
                finished: false,
            }),
            exit,
            stderr_task: Mutex::new(stderr_task),
            tail,
            closing,
            pid,
            group,
            group_ended,
            limit: config.max_message_size,
            exit_wait: config.exit_wait,
            term_wait: config.term_wait,
            stdout_bytes,
            unread: StdMutex::new(Vec::new()),
            kill: StdMutex::new(Some(kill)),
        })
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The last lines the child wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        lock_tail(&self.tail).iter().cloned().collect()
    }

    /// Waits (briefly) for the stderr reader to drain, so errors quote the last lines.
    async fn drain_stderr(&self) {
        if let Some(task) = self.stderr_task.lock().await.take() {
            let _ = timeout(Duration::from_millis(500), task).await;
        }
    }

    /// Waits up to `limit` for the child to have exited; `true` once it has (or can no longer
    /// be waited for).
    async fn exited_within(&self, limit: Duration) -> bool {
        let mut exit = self.exit.clone();
        let exited = exit.wait_for(|state| !matches!(state, ChildState::Running));
        // An error means the reaper is gone (the runtime is ending): nothing left to wait for.
        timeout(limit, exited).await.is_ok()
    }

    /// Ends the child's process group while it may have members, else the child while it
    /// runs.
    fn signal(&self, how: Ending) {
        if let Some(group) = self.group
            && !self.group_ended.load(Ordering::SeqCst)
        {
            group.end_all(how);
        } else if let (Some(group), ChildState::Running) = (self.group, &*self.exit.borrow()) {
            group.end_leader(how);
        }
    }

    /// Kills the child's group (or tree); if the child still runs a second later, the child
    /// itself, from the task that owns it.
    async fn force(&self) {
        self.signal(Ending::Force);
        if self.exited_within(Duration::from_secs(1)).await {
            return;
        }
        let kill = self
            .kill
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(kill) = kill {
            tracing::debug!(
                pid = self.pid,
                "the MCP server outlived its group; killing it"
            );
            let _ = kill.send(());
            self.exited_within(Duration::from_secs(1)).await;
        }
    }

    /// Ends what is left of the child's process group once the child has exited: SIGTERM,
    /// then SIGKILL after the term wait.
    async fn end_group(&self) {
        let Some(group) = self.group else { return };
        if self.group_ended.load(Ordering::SeqCst) {
            return;
        }
        if group.runs() && group.end_all(Ending::Ask) {
            tracing::debug!(
                pgid = group.id(),
                "processes the MCP server started outlived it; asking its group to end"
            );
            if !group.emptied(self.term_wait).await {
                tracing::debug!(pgid = group.id(), "killing the rest of its group");
                group.end_all(Ending::Force);
                group.emptied(Duration::from_secs(1)).await;
            }
        }
        self.group_ended.store(true, Ordering::SeqCst);
    }

    /// Notes which requests the child never read: the bytes still in its stdin pipe
    /// (`FIONREAD` on the write end, Linux) never reached it.
    async fn note_unread(&self) {
        #[cfg(target_os = "linux")]
        {
            let stdin = self.stdin.lock().await;
            let Some(pipe) = stdin.pipe.as_ref() else {
                return;
            };
            let Ok(unread) = rustix::io::ioctl_fionread(pipe) else {
                return;
            };
            let ids = stdin.written.unread(unread);
            if !ids.is_empty() {
                tracing::debug!(
                    unread,
                    requests = ids.len(),
                    "requests the MCP server never read"
                );
            }
            *self.unread.lock().unwrap_or_else(PoisonError::into_inner) = ids;
        }
    }

    /// Stdout ended: report how the child ended, stopping it if it is still running.
    async fn stdout_closed(&self) -> TransportError {
        if self.exited_within(self.exit_wait).await {
            self.note_unread().await;
            self.drain_stderr().await;
            return match *self.exit.borrow() {
                ChildState::Exited(status) => TransportError::ChildExited {
                    status: status.into(),
                    stderr_tail: self.stderr_tail(),
                },
                ChildState::Running | ChildState::Lost => TransportError::Closed,
            };
        }
        // Still running without a stdout: it cannot answer any more; stop it and its group.
        self.force().await;
        self.drain_stderr().await;
        TransportError::StdoutClosed {
            stderr_tail: self.stderr_tail(),
        }
    }

    async fn shutdown(&self) -> Result<(), TransportError> {
        self.closing.store(true, Ordering::SeqCst);
        drop(self.stdin.lock().await.pipe.take());
        if self.pid.is_none() {
            return Ok(());
        }
        if !self.exited_within(self.exit_wait).await {
            tracing::debug!(
                pid = self.pid,
                "MCP server did not exit after stdin closed; sending SIGTERM to its group"
            );
            self.signal(Ending::Ask);
            if !self.exited_within(self.term_wait).await {
                tracing::debug!(
                    pid = self.pid,
                    "MCP server ignored SIGTERM; killing its group"
                );
                self.force().await;
            }
        }
        self.end_group().await;
        self.drain_stderr().await;
        Ok(())
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // Not closed (or not to the end): the whole group goes, not only the child.
        if let Some(group) = self.group
            && !self.group_ended.load(Ordering::SeqCst)
        {
            group.end_all(Ending::Force);
        }
    }
}

/// Waits for the child, publishes how it ended, and, when it died on its own (not closed),
/// kills what is left of its process group: nothing can talk to those processes any more,
/// and one of them holding stdout would hide the death from the reader.
async fn reap(
    mut child: Child,
    exit: watch::Sender<ChildState>,
    group: Option<Group>,
    closing: Arc<AtomicBool>,
    group_ended: Arc<AtomicBool>,
    killed: tokio::sync::oneshot::Receiver<()>,
) {
    let waited = tokio::select! {
        status = child.wait() => status,
        // Asked to, or the transport is gone: the child goes (its group was ended first).
        _ = killed => {
            if let Err(e) = child.start_kill() {
                tracing::debug!(error = %e, "could not kill the MCP server process");
            }
            child.wait().await
        }
    };
    let state = match waited {
        Ok(status) => ChildState::Exited(status),
        Err(e) => {
            tracing::debug!(error = %e, "could not wait for the MCP server process");
            ChildState::Lost
        }
    };
    if let Some(group) = group
        && !closing.load(Ordering::SeqCst)
    {
        // SIGKILL cannot be ignored, and the group id stays taken until its last member is
        // reaped: nothing needs signalling after this.
        if group.end_all(Ending::Force) {
            tracing::debug!(
                pgid = group.id(),
                "the MCP server process ended; killed the rest of its process group"
            );
        }
        group_ended.store(true, Ordering::SeqCst);
    }
    exit.send_replace(state);
}

impl Transport for StdioTransport {
    fn carries_headers(&self) -> bool {
        false
    }

    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            if memchr::memchr(b'\n', &message.body).is_some() {
                return Err(TransportError::EmbeddedNewline);
            }
            let mut stdin = self.stdin.lock().await;
            let Stdin { pipe, written } = &mut *stdin;
            let pipe = pipe.as_mut().ok_or(TransportError::Closed)?;
            let len = message.body.len() as u64 + 1;
            let id = match &message.kind {
                toolwire_transport::MessageKind::Request { id, .. } => Some(id.clone()),
                _ => None,
            };
            // The message and its newline go out in one `writev`: written apart, a server
            // that reads as soon as bytes arrive wakes twice per message, the first time for
            // half a line (strace of the reference server: two reads per message).
            let mut line = message.body.chain(&b"\n"[..]);
            pipe.write_all_buf(&mut line)
                .await
                .map_err(TransportError::Io)?;
            pipe.flush().await.map_err(TransportError::Io)?;
            written.wrote(id, len);
            Ok(())
        })
    }

    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
        Box::pin(async move {
            let mut inbox = self.inbox.lock().await;
            if inbox.finished {
                return None;
            }
            match inbox.rx.recv().await {
                Some(ReaderEvent::Message(body, _budget)) => Some(Ok(Inbound::new(body))),
                Some(ReaderEvent::TooLarge(None)) => {
                    Some(Err(TransportError::MessageTooLarge { limit: self.limit }))
                }
                // The answer to a request that will never be read whole: that request fails
                // now, rather than at its deadline.
                Some(ReaderEvent::TooLarge(Some(id))) => {
                    Some(Err(TransportError::Request(RequestFailure {
                        id,
                        status: None,
                        body: Bytes::new(),
                        cause: Arc::new(TransportError::MessageTooLarge { limit: self.limit }),
                        session_gone: false,
                    })))
                }
                Some(ReaderEvent::ReadError(e)) => {
                    inbox.finished = true;
                    Some(Err(TransportError::Io(e)))
                }
                Some(ReaderEvent::Eof) | None => {
                    if self.closing.load(Ordering::SeqCst) {
                        inbox.finished = true;
                        return None;
                    }
                    // Marked finished only once the error is known: if this future is dropped
                    // while waiting for the child (a `select!` elsewhere won), the next call
                    // sees the closed channel and asks again, so the exit status is not lost.
                    let error = self.stdout_closed().await;
                    inbox.finished = true;
                    Some(Err(error))
                }
            }
        })
    }

    fn unread(&self) -> Vec<RequestId> {
        self.unread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn peer_state(&self) -> Option<String> {
        let running = match &*self.exit.borrow() {
            ChildState::Running => "is still running".to_owned(),
            ChildState::Exited(status) => format!("exited ({status})"),
            ChildState::Lost => "is in an unknown state".to_owned(),
        };
        let written = self.stdout_bytes.load(Ordering::Relaxed);
        let stdout = if written == 0 {
            "has written nothing to stdout".to_owned()
        } else {
            format!("has written {written} bytes to stdout, none of them the answer")
        };
        let tail: Vec<String> = lock_tail(&self.tail)
            .iter()
            .rev()
            .take(5)
            .rev()
            .cloned()
            .collect();
        let stderr = if tail.is_empty() {
            "and nothing to stderr".to_owned()
        } else {
            format!("and its last stderr lines are:\n  {}", tail.join("\n  "))
        };
        let pid = self.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        Some(format!(
            "the server process{pid} {running}, {stdout}, {stderr}"
        ))
    }

    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.shutdown())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_child_writing_faster_than_the_client_reads_waits_on_its_pipe() {
        const LINE: usize = 256 * 1024;
        let limit = 1024 * 1024;
        let (child_end, client_end) = tokio::io::duplex(64 * 1024);
        let (tx, mut rx) = mpsc::channel(64);
        tokio::spawn(read_stdout(client_end, tx, limit, ReadAhead::new(limit)));
        let written = Arc::new(AtomicUsize::new(0));
        let progress = written.clone();
        tokio::spawn(async move {
            let mut child_end = child_end;
            let mut line = vec![b'a'; LINE];
            line.push(b'\n');
            for _ in 0..100 {
                if child_end.write_all(&line).await.is_err() {
                    return;
                }
                progress.fetch_add(line.len(), Ordering::SeqCst);
            }
        });
        // On a paused clock this returns once every task is idle: the writer is blocked.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stalled = written.load(Ordering::SeqCst);
        // What may be held: the budget (twice the limit), one message being read, the
        // reader's buffer and the pipe's.
        let bound = 2 * limit + LINE + 64 * 1024 + 64 * 1024 + LINE;
        assert!(
            stalled <= bound,
            "{stalled} bytes written past a {bound}-byte bound"
        );
        assert!(
            stalled >= 2 * limit,
            "the budget itself was used: {stalled}"
        );
        // Reading goes on as messages are taken.
        let mut taken = 0;
        while let Some(event) = rx.recv().await {
            if let ReaderEvent::Message(body, _) = event {
                assert_eq!(body.len(), LINE);
                taken += 1;
            }
            if taken == 100 {
                break;
            }
        }
        assert_eq!(written.load(Ordering::SeqCst), 100 * (LINE + 1));
    }
}

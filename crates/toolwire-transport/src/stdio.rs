//! The stdio transport: the server is a child process; messages are lines of compact JSON on
//! its stdin and stdout.

use std::collections::VecDeque;
use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::{BoxFuture, Inbound, Outbound, Transport, TransportError};

/// Environment variables a child inherits by default (the same list as the TypeScript SDK's,
/// plus the locale and the temporary directory). Everything else must be passed explicitly:
/// a server should not see the client's secrets by accident.
pub const DEFAULT_INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR",
];

/// Where the child's stderr goes. The spec says stderr is for logs and must not be taken as
/// an error signal.
#[derive(Clone, Default)]
pub enum StderrMode {
    /// Each line becomes a `tracing` event (target `toolwire::stdio::stderr`, level INFO).
    #[default]
    Tracing,
    /// Each line is passed to this function.
    Callback(Arc<dyn Fn(&str) + Send + Sync>),
    /// Lines are read (for the error tail) and otherwise dropped.
    Discard,
    /// The child writes to this process's stderr directly (no tail in errors).
    Inherit,
}

impl fmt::Debug for StderrMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tracing => "Tracing",
            Self::Callback(_) => "Callback(..)",
            Self::Discard => "Discard",
            Self::Inherit => "Inherit",
        })
    }
}

/// How to start and stop an MCP server as a child process. `Debug` shows the names of the
/// variables in `env`, never their values (they are often tokens).
#[derive(Clone)]
#[non_exhaustive]
pub struct StdioConfig {
    /// The program to run.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working directory (default: this process's).
    pub cwd: Option<PathBuf>,
    /// Variables passed through from this process's environment, by name.
    pub inherit_env: Vec<String>,
    /// Variables set for the child, after the inherited ones.
    pub env: Vec<(String, String)>,
    /// The largest message accepted from the child, in bytes (default 16 MiB); a larger one is
    /// dropped with [`TransportError::MessageTooLarge`] and reading goes on.
    pub max_message_size: usize,
    /// Where stderr goes.
    pub stderr: StderrMode,
    /// How many stderr lines errors quote (default 20).
    pub stderr_tail_lines: usize,
    /// The longest stderr line kept, in bytes (default 8 KiB; longer lines are split).
    pub max_stderr_line: usize,
    /// How long to wait for the child to exit after its stdin is closed (default 2 s).
    pub exit_wait: Duration,
    /// How long to wait after SIGTERM before SIGKILL (default 2 s).
    pub term_wait: Duration,
}

impl std::fmt::Debug for StdioConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<String> = self
            .env
            .iter()
            .map(|(name, _)| format!("{name}=…"))
            .collect();
        f.debug_struct("StdioConfig")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("inherit_env", &self.inherit_env)
            .field("env", &env)
            .field("max_message_size", &self.max_message_size)
            .field("stderr", &self.stderr)
            .finish_non_exhaustive()
    }
}

impl StdioConfig {
    /// Runs `program` with `args`, with the defaults above.
    pub fn new(
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: None,
            inherit_env: DEFAULT_INHERITED_ENV
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            env: Vec::new(),
            max_message_size: 16 * 1024 * 1024,
            stderr: StderrMode::default(),
            stderr_tail_lines: 20,
            max_stderr_line: 8 * 1024,
            exit_wait: Duration::from_secs(2),
            term_wait: Duration::from_secs(2),
        }
    }

    /// Sets the working directory.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets a variable for the child.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Replaces the list of inherited variables.
    pub fn with_inherited_env(
        mut self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.inherit_env = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the largest message accepted from the child.
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// Sets where stderr goes.
    pub fn with_stderr(mut self, mode: StderrMode) -> Self {
        self.stderr = mode;
        self
    }

    /// Sets the shutdown waits: after closing stdin, and after SIGTERM.
    pub fn with_shutdown_waits(mut self, exit_wait: Duration, term_wait: Duration) -> Self {
        self.exit_wait = exit_wait;
        self.term_wait = term_wait;
        self
    }
}

enum ReaderEvent {
    Message(Bytes),
    TooLarge,
    ReadError(std::io::Error),
    Eof,
}

struct Inbox {
    rx: mpsc::Receiver<ReaderEvent>,
    finished: bool,
}

type Tail = Arc<StdMutex<VecDeque<String>>>;

/// An MCP server running as a child process, spoken to over its stdin and stdout.
///
/// The child gets only the allow-listed environment, its stderr is captured line by line, and
/// it is killed if the transport is dropped. [`Transport::close`] closes its stdin, waits,
/// sends SIGTERM, waits, and finally SIGKILLs it, each step bounded.
pub struct StdioTransport {
    stdin: Mutex<Option<ChildStdin>>,
    inbox: Mutex<Inbox>,
    child: Mutex<Option<Child>>,
    stderr_task: Mutex<Option<JoinHandle<()>>>,
    tail: Tail,
    closing: AtomicBool,
    pid: Option<u32>,
    limit: usize,
    exit_wait: Duration,
    term_wait: Duration,
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
        let mut command = Command::new(&config.program);
        command.args(&config.args).env_clear().kill_on_drop(true);
        for name in &config.inherit_env {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(config.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &config.cwd {
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
        runtime.spawn(read_stdout(stdout, tx, config.max_message_size));
        let tail: Tail = Arc::new(StdMutex::new(VecDeque::new()));
        let stderr_task = stderr.map(|stderr| {
            runtime.spawn(read_stderr(
                stderr,
                config.stderr.clone(),
                tail.clone(),
                config.stderr_tail_lines,
                config.max_stderr_line,
            ))
        });
        tracing::debug!(program = %config.program, pid, "started MCP server process");
        Ok(Self {
            stdin: Mutex::new(Some(stdin)),
            inbox: Mutex::new(Inbox {
                rx,
                finished: false,
            }),
            child: Mutex::new(Some(child)),
            stderr_task: Mutex::new(stderr_task),
            tail,
            closing: AtomicBool::new(false),
            pid,
            limit: config.max_message_size,
            exit_wait: config.exit_wait,
            term_wait: config.term_wait,
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

    /// Stdout ended: report how the child ended, stopping it if it is still running.
    async fn stdout_closed(&self) -> TransportError {
        let mut guard = self.child.lock().await;
        let Some(child) = guard.as_mut() else {
            return TransportError::Closed;
        };
        let error = match timeout(self.exit_wait, child.wait()).await {
            Ok(Ok(status)) => {
                // The child stays: `wait` keeps answering with this status, so a later call
                // (this future dropped below, or `close`) gets the same answer at once.
                drop(guard);
                self.drain_stderr().await;
                return TransportError::ChildExited {
                    status: status.into(),
                    stderr_tail: self.stderr_tail(),
                };
            }
            Ok(Err(e)) => TransportError::Io(e),
            Err(_) => {
                // Still running without a stdout: it cannot answer any more; stop and reap it.
                let _ = child.kill().await;
                self.drain_stderr().await;
                TransportError::StdoutClosed {
                    stderr_tail: self.stderr_tail(),
                }
            }
        };
        drop(guard.take());
        error
    }

    async fn shutdown(&self) -> Result<(), TransportError> {
        self.closing.store(true, Ordering::SeqCst);
        drop(self.stdin.lock().await.take());
        let Some(mut child) = self.child.lock().await.take() else {
            return Ok(());
        };
        if timeout(self.exit_wait, child.wait()).await.is_err() {
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                tracing::debug!(
                    pid,
                    "MCP server did not exit after stdin closed; sending SIGTERM"
                );
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            if timeout(self.term_wait, child.wait()).await.is_err() {
                tracing::debug!(pid = self.pid, "MCP server ignored SIGTERM; killing it");
                // `kill` sends SIGKILL and waits, which reaps the child.
                child.kill().await.map_err(TransportError::Io)?;
            }
        }
        self.drain_stderr().await;
        Ok(())
    }
}

impl Transport for StdioTransport {
    fn carries_headers(&self) -> bool {
        false
    }

    fn send(&self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            if message.body.contains(&b'\n') {
                return Err(TransportError::EmbeddedNewline);
            }
            let mut guard = self.stdin.lock().await;
            let stdin = guard.as_mut().ok_or(TransportError::Closed)?;
            // The message and its newline go out in one `writev`: written apart, a server
            // that reads as soon as bytes arrive wakes twice per message, the first time for
            // half a line (strace of the reference server: two reads per message).
            let mut line = message.body.chain(&b"\n"[..]);
            stdin
                .write_all_buf(&mut line)
                .await
                .map_err(TransportError::Io)?;
            stdin.flush().await.map_err(TransportError::Io)
        })
    }

    fn recv(&self) -> BoxFuture<'_, Option<Result<Inbound, TransportError>>> {
        Box::pin(async move {
            let mut inbox = self.inbox.lock().await;
            if inbox.finished {
                return None;
            }
            match inbox.rx.recv().await {
                Some(ReaderEvent::Message(body)) => Some(Ok(Inbound::new(body))),
                Some(ReaderEvent::TooLarge) => {
                    Some(Err(TransportError::MessageTooLarge { limit: self.limit }))
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

    fn close(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(self.shutdown())
    }
}

/// Reads newline-delimited messages from the child's stdout, each at most `limit` bytes. A
/// longer one is skipped up to its newline and reported; a last line without a newline is
/// delivered at EOF; empty lines are skipped.
async fn read_stdout(stdout: ChildStdout, tx: mpsc::Sender<ReaderEvent>, limit: usize) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line: Vec<u8> = Vec::new();
    let mut skipping = false;
    loop {
        let (consumed, complete) = match reader.fill_buf().await {
            Err(e) => {
                let _ = tx.send(ReaderEvent::ReadError(e)).await;
                return;
            }
            Ok([]) => {
                if !skipping && !line.is_empty() && !deliver(&tx, &mut line).await {
                    return;
                }
                let _ = tx.send(ReaderEvent::Eof).await;
                return;
            }
            Ok(buf) => {
                let newline = buf.iter().position(|&b| b == b'\n');
                let take = newline.unwrap_or(buf.len());
                if !skipping {
                    if line.len() + take > limit {
                        skipping = true;
                        line = Vec::new();
                        if tx.send(ReaderEvent::TooLarge).await.is_err() {
                            return;
                        }
                    } else {
                        line.extend_from_slice(&buf[..take]);
                    }
                }
                (newline.map_or(take, |i| i + 1), newline.is_some())
            }
        };
        reader.consume(consumed);
        if complete {
            if !skipping && !deliver(&tx, &mut line).await {
                return;
            }
            line.clear();
            skipping = false;
        }
    }
}

/// Sends one line (without a trailing `\r`) unless it is blank; `false` once nobody listens.
async fn deliver(tx: &mpsc::Sender<ReaderEvent>, line: &mut Vec<u8>) -> bool {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        line.clear();
        return true;
    }
    tx.send(ReaderEvent::Message(Bytes::from(std::mem::take(line))))
        .await
        .is_ok()
}

/// Reads the child's stderr line by line (each at most `max_line` bytes), keeps the last
/// `keep` lines, and hands each to the configured sink.
async fn read_stderr(
    stderr: ChildStderr,
    mode: StderrMode,
    tail: Tail,
    keep: usize,
    max_line: usize,
) {
    let mut reader = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let limit = u64::try_from(max_line).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end_matches(['\n', '\r']);
        {
            let mut tail = lock_tail(&tail);
            if tail.len() == keep {
                tail.pop_front();
            }
            if keep > 0 {
                tail.push_back(text.to_owned());
            }
        }
        match &mode {
            StderrMode::Tracing => tracing::info!(target: "toolwire::stdio::stderr", "{text}"),
            StderrMode::Callback(f) => f(text),
            StderrMode::Discard | StderrMode::Inherit => {}
        }
    }
}

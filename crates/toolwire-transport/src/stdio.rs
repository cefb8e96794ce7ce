//! The stdio transport: the server is a child process; messages are lines of compact JSON on
//! its stdin and stdout.

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

use crate::group::{Ending, Group};
use crate::read_ahead::ReadAhead;
use crate::{BoxFuture, Inbound, Outbound, RequestFailure, RequestId, Transport, TransportError};

/// The variables a child inherits on Unix: the TypeScript SDK's list, plus the locale and the
/// temporary directory.
pub const UNIX_INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR",
];

/// The variables a child inherits on Windows: without `PATHEXT` and `COMSPEC` a `.cmd` wrapper
/// such as `npx` is not found or cannot run, without `SYSTEMROOT` sockets fail to initialise,
/// and Node and Python look for their caches and settings under the profile folders.
pub const WINDOWS_INHERITED_ENV: &[&str] = &[
    "APPDATA",
    "COMSPEC",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMDATA",
    "PROGRAMFILES",
    "PROGRAMFILES(X86)",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERDOMAIN",
    "USERNAME",
    "USERPROFILE",
    "WINDIR",
];

/// The network configuration a child inherits on every platform, so that a server that
/// installs or fetches on start (`npx -y …`, `uvx …`) reaches the network the way a shell on
/// this machine does: proxies (upper and lower case, as tools read either), the CA bundles
/// Node, Python, curl and OpenSSL read, and the registry settings of npm and pip. Cloud keys,
/// tokens and everything else stay out: pass them in the entry's `env`. A proxy URL or index
/// URL may carry credentials; they go to the child as they would to any program started here.
pub const NETWORK_INHERITED_ENV: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_CERT",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "npm_config_registry",
    "npm_config_cafile",
    "npm_config_proxy",
    "npm_config_https_proxy",
    "npm_config_noproxy",
    "npm_config_strict_ssl",
    "NPM_CONFIG_REGISTRY",
    "NPM_CONFIG_CAFILE",
];

/// Environment variables a child inherits by default, for this platform
/// ([`UNIX_INHERITED_ENV`] or [`WINDOWS_INHERITED_ENV`]), with [`NETWORK_INHERITED_ENV`] on
/// top. Everything else must be passed explicitly: a server should not see the client's
/// secrets by accident.
#[cfg(not(windows))]
pub const DEFAULT_INHERITED_ENV: &[&str] = UNIX_INHERITED_ENV;
/// Environment variables a child inherits by default, for this platform
/// ([`UNIX_INHERITED_ENV`] or [`WINDOWS_INHERITED_ENV`]), with [`NETWORK_INHERITED_ENV`] on
/// top. Everything else must be passed explicitly: a server should not see the client's
/// secrets by accident.
#[cfg(windows)]
pub const DEFAULT_INHERITED_ENV: &[&str] = WINDOWS_INHERITED_ENV;

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
            .field("args", &toolwire_types::redacted_args(&self.args))
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
                .chain(NETWORK_INHERITED_ENV)
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
        // The child's own PATH: the entry's `env` first, then the inherited one.
        let path = config
            .env
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("PATH"))
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| {
                config
                    .inherit_env
                    .iter()
                    .any(|n| n.eq_ignore_ascii_case("PATH"))
                    .then(|| std::env::var_os("PATH"))
                    .flatten()
            });
        let mut command = crate::group::new_command(&config.program, path.as_deref());
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
            runtime.spawn(read_stderr(
                stderr,
                config.stderr.clone(),
                tail.clone(),
                config.stderr_tail_lines,
                config.max_stderr_line,
            ))
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
            if message.body.contains(&b'\n') {
                return Err(TransportError::EmbeddedNewline);
            }
            let mut stdin = self.stdin.lock().await;
            let Stdin { pipe, written } = &mut *stdin;
            let pipe = pipe.as_mut().ok_or(TransportError::Closed)?;
            let len = message.body.len() as u64 + 1;
            let id = match &message.kind {
                crate::MessageKind::Request { id, .. } => Some(id.clone()),
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

/// A reader that counts what passes through it.
struct Counted<R>(R, Arc<std::sync::atomic::AtomicU64>);

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.0).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        self.1
            .fetch_add(u64::try_from(read).unwrap_or(u64::MAX), Ordering::Relaxed);
        polled
    }
}

/// Reads newline-delimited messages from the child's stdout, each at most `limit` bytes. A
/// longer one is skipped up to its newline and reported; a last line without a newline is
/// delivered at EOF; empty lines are skipped. Messages wait for their share of `budget`
/// before they are passed on, so reading stops while the consumer lags.
async fn read_stdout(
    stdout: impl tokio::io::AsyncRead + Unpin,
    tx: mpsc::Sender<ReaderEvent>,
    limit: usize,
    budget: ReadAhead,
) {
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
                if !skipping && !line.is_empty() && !deliver(&tx, &mut line, &budget).await {
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
                        if line.is_empty() {
                            line.extend_from_slice(&buf[..take.min(4096)]);
                        }
                        let id = toolwire_types::Message::leading_id(&line);
                        line = Vec::new();
                        if tx.send(ReaderEvent::TooLarge(id)).await.is_err() {
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
            if !skipping && !deliver(&tx, &mut line, &budget).await {
                return;
            }
            line.clear();
            skipping = false;
        }
    }
}

/// Sends one line (without a trailing `\r`) unless it is blank, once the budget has room for
/// it; `false` once nobody listens.
async fn deliver(tx: &mpsc::Sender<ReaderEvent>, line: &mut Vec<u8>, budget: &ReadAhead) -> bool {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        line.clear();
        return true;
    }
    let Some(share) = budget.reserve(line.len()).await else {
        return false;
    };
    tx.send(ReaderEvent::Message(
        Bytes::from(std::mem::take(line)),
        share,
    ))
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
        // Escape sequences a child writes reach logs, errors and terminals only as text.
        let text = toolwire_types::printable(text.trim_end_matches(['\n', '\r']));
        let text = text.as_ref();
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

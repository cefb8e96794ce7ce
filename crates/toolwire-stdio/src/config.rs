//! How a child is started: [`StdioConfig`], where its stderr goes ([`StderrMode`]), and the
//! environment it inherits (the allow-lists).

use super::*;

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

    /// The child's own `PATH`: the one in [`Self::env`] first, then the inherited one (when
    /// `PATH` is inherited).
    pub(crate) fn child_path(&self) -> Option<std::ffi::OsString> {
        self.env
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("PATH"))
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| {
                self.inherit_env
                    .iter()
                    .any(|n| n.eq_ignore_ascii_case("PATH"))
                    .then(|| std::env::var_os("PATH"))
                    .flatten()
            })
    }

    /// What would stop the child from starting, found without starting it: a working directory
    /// that is not one, or a program found neither where it is named nor on the child's `PATH`.
    /// For a check of a configuration (`toolwire gateway --check`); a start says the same.
    pub fn preflight(&self) -> Result<(), String> {
        if let Some(cwd) = &self.cwd
            && !cwd.is_dir()
        {
            return Err(format!(
                "its working directory `{}` is not a directory",
                cwd.display()
            ));
        }
        let named = std::path::Path::new(&self.program);
        let found = if named.components().count() > 1 {
            let named = match &self.cwd {
                Some(cwd) if named.is_relative() => cwd.join(named),
                _ => named.to_path_buf(),
            };
            named.is_file()
        } else {
            let path = self.child_path();
            crate::group::resolve(&self.program, path.as_deref()).is_file()
                || path.is_some_and(|path| {
                    std::env::split_paths(&path).any(|dir| dir.join(&self.program).is_file())
                })
        };
        if found {
            Ok(())
        } else {
            Err(format!(
                "`{}` is found neither as named nor on its PATH",
                self.program
            ))
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

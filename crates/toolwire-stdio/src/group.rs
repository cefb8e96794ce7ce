//! What ends with a child: its process group on Unix, its process tree on Windows; and how a
//! command is found and started on each.
//!
//! Unix: the child leads a group of its own (`process_group(0)`), signalled whole with
//! `killpg` (SIGTERM, then SIGKILL); "the group is empty" is signal 0 plus, on Linux, a
//! `/proc` scan that ignores zombies.
//!
//! Windows: the child starts in a new process group, and its tree is ended with
//! `taskkill /T` (without `/F` first, then with it), which needs no `unsafe` Win32 calls. A
//! tree whose root already exited cannot be found by its parent any more, so what a dead
//! child left running is not ended there. A program named without an extension (`npx`) is
//! looked up in `PATH` with `PATHEXT`, as a shell would, so `.cmd` and `.bat` shims are
//! found; the standard library then quotes their arguments by `cmd.exe`'s rules and refuses
//! one it cannot pass safely (the fix for CVE-2024-24576), and no shell parses the command
//! line otherwise.

use std::time::Duration;

use tokio::process::Command;

/// How to end processes: asked (SIGTERM, `taskkill`) or forced (SIGKILL, `taskkill /F`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Ask,
    Force,
}

/// A child's group (Unix) or tree (Windows), named by the child's pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group(u32);

impl Group {
    pub(crate) fn of(pid: u32) -> Self {
        Self(pid)
    }

    /// For logs.
    pub(crate) fn id(self) -> u32 {
        self.0
    }

    /// Polls until no process of the group runs any more, up to `limit`; whether it emptied.
    pub(crate) async fn emptied(self, limit: Duration) -> bool {
        let poll = async {
            while self.runs() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(limit, poll).await.is_ok()
    }
}

#[cfg(unix)]
mod imp {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;

    use super::{Ending, Group};

    fn pid(group: Group) -> Option<Pid> {
        i32::try_from(group.0).ok().map(Pid::from_raw)
    }

    fn signal(how: Ending) -> Signal {
        match how {
            Ending::Ask => Signal::SIGTERM,
            Ending::Force => Signal::SIGKILL,
        }
    }

    /// The child leads a group of its own.
    pub(crate) fn prepare(command: &mut tokio::process::Command) {
        command.process_group(0);
    }

    impl Group {
        /// Ends every process of the group; whether the group still existed.
        pub(crate) fn end_all(self, how: Ending) -> bool {
            pid(self).is_some_and(|g| killpg(g, signal(how)).is_ok())
        }

        /// Ends the child alone.
        pub(crate) fn end_leader(self, how: Ending) {
            if let Some(p) = pid(self) {
                let _ = kill(p, signal(how));
            }
        }

        /// Whether a process of the group still runs. Signal 0 also reaches zombies, which a
        /// container whose first process never reaps keeps for ever; on Linux a group of
        /// zombies only is ended.
        pub(crate) fn runs(self) -> bool {
            let Some(group) = pid(self) else {
                return false;
            };
            if killpg(group, None).is_err() {
                return false;
            }
            #[cfg(target_os = "linux")]
            if let Ok(entries) = std::fs::read_dir("/proc") {
                return entries.flatten().any(|entry| {
                    let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                        return false;
                    };
                    // `pid (comm) state ppid pgrp …`; `comm` may hold spaces and parentheses.
                    let Some((_, rest)) = stat.rsplit_once(") ") else {
                        return false;
                    };
                    let mut fields = rest.split(' ');
                    let state = fields.next();
                    let pgrp = fields.nth(1).and_then(|f| f.parse::<i32>().ok());
                    pgrp == Some(group.as_raw()) && state != Some("Z")
                });
            }
            true
        }
    }

    /// The program as given: `execvp` searches `PATH` itself.
    pub(crate) fn resolve(program: &str, _: Option<&std::ffi::OsStr>) -> std::path::PathBuf {
        program.into()
    }
}

#[cfg(windows)]
mod imp {
    use std::path::{Path, PathBuf};

    use super::{Ending, Group};

    /// `CREATE_NEW_PROCESS_GROUP`: a console interrupt meant for this process does not reach
    /// the child's tree.
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;

    pub(crate) fn prepare(command: &mut tokio::process::Command) {
        command.creation_flags(CREATE_NEW_PROCESS_GROUP);
    }

    fn taskkill(group: Group, tree: bool, how: Ending) -> bool {
        let mut c = std::process::Command::new("taskkill");
        c.args(["/PID", &group.0.to_string()]);
        if tree {
            c.arg("/T");
        }
        if how == Ending::Force {
            c.arg("/F");
        }
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    impl Group {
        pub(crate) fn end_all(self, how: Ending) -> bool {
            taskkill(self, true, how)
        }

        pub(crate) fn end_leader(self, how: Ending) {
            taskkill(self, false, how);
        }

        /// A tree whose root exited cannot be found again: nothing is known to run.
        pub(crate) fn runs(self) -> bool {
            false
        }
    }

    /// `program` as a shell finds it: one without an extension is looked for in `path` with
    /// each extension of `PATHEXT` (`.COM;.EXE;.BAT;.CMD` by default), so `npx` finds
    /// `npx.cmd`.
    pub(crate) fn resolve(program: &str, path: Option<&std::ffi::OsStr>) -> PathBuf {
        let given = Path::new(program);
        if given.extension().is_some() || given.components().count() > 1 {
            return given.to_path_buf();
        }
        let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
        let path = path
            .map(std::ffi::OsStr::to_os_string)
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_default();
        for dir in std::env::split_paths(&path) {
            for ext in exts.split(';').filter(|e| !e.is_empty()) {
                let candidate = dir.join(format!("{program}{ext}"));
                if candidate.is_file() {
                    return candidate;
                }
            }
        }
        given.to_path_buf()
    }
}

pub(crate) use imp::{prepare, resolve};

/// Starts `command`'s child in a group (or tree) of its own.
pub(crate) fn new_command(program: &str, path: Option<&std::ffi::OsStr>) -> Command {
    let mut command = Command::new(resolve(program, path));
    prepare(&mut command);
    command
}

//! URL elicitation at the terminal, against the reference server's `link_account` (it needs a
//! page completed until `finish_link` is called): without a terminal the URL is shown and
//! never opened; at a terminal (a pseudo-terminal driven by Python's `pty`) it is opened only
//! after the user says yes, and the call is tried again once the server confirms.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

mod common;

#[allow(unused_imports, reason = "the imports the files of these tests share")]
use common::*;

const LINK_URL: &str = "https://example.invalid/link?elicitation=link-account";

/// A file the `$BROWSER` of a test writes the URL it was asked to open into; removed when
/// dropped.
struct Marker(std::path::PathBuf);

impl Marker {
    fn new(test: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("toolwire-cli-elicit-{test}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Self(path)
    }

    /// A `$BROWSER` that records the URL, then runs `then` (a shell command line).
    fn browser(&self, then: &str) -> String {
        format!("sh -c 'printf %s \"$0\" > {}; {then}'", self.0.display())
    }

    fn opened(&self) -> Option<String> {
        std::fs::read_to_string(&self.0).ok()
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn run(args: &[&str], browser: &str) -> Output {
    Command::new(BIN)
        .args(args)
        .env("BROWSER", browser)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

#[test]
fn without_a_terminal_a_url_elicitation_is_shown_and_never_opened_in_either_era() {
    let served = serve(&[]);
    let marker = Marker::new("quiet");
    let browser = marker.browser("true");
    // Legacy: the call's -32042 answer.
    let legacy = run(
        &[
            "--url",
            &served.url,
            "--protocol",
            "2025-11-25",
            "tools",
            "call",
            "link_account",
        ],
        &browser,
    );
    let stderr = String::from_utf8_lossy(&legacy.stderr);
    assert_eq!(legacy.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(LINK_URL), "{stderr}");
    assert!(stderr.contains("(on example.invalid)"), "{stderr}");
    assert!(stderr.contains("run the command again"), "{stderr}");
    // 2026-07-28: the call's input request; nobody to ask, so it is cancelled.
    let modern = run(
        &["--url", &served.url, "tools", "call", "link_account"],
        &browser,
    );
    let stderr = String::from_utf8_lossy(&modern.stderr);
    assert!(stderr.contains(LINK_URL), "{stderr}");
    assert_eq!(modern.status.code(), Some(1), "the tool's error: {stderr}");
    assert_eq!(marker.opened(), None, "opened without the user's consent");
}

/// Drives `argv` on a pseudo-terminal, answering `answer` to the first `[y/N]` question;
/// everything the terminal showed, and the exit code.
fn on_a_terminal(argv: &[&str], answer: &str, browser: &str) -> (String, Option<i32>) {
    const DRIVER: &str = r#"
import os, pty, select, sys, time
answer = sys.argv[1].encode() + b"\n"
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
out, answered, deadline = b"", False, time.time() + 60
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.5)
    if not ready:
        continue
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
    if not answered and b"[y/N]" in out:
        os.write(fd, answer)
        answered = True
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let o = Command::new("python3")
        .args(["-c", DRIVER, answer, BIN])
        .args(argv)
        .env("BROWSER", browser)
        .stdin(Stdio::null())
        .output()
        .expect("python3 runs");
    (stdout(&o), o.status.code())
}

#[test]
fn at_a_terminal_the_url_opens_only_after_a_yes_and_the_call_succeeds_once_confirmed() {
    let served = serve(&[]);
    let call = ["--url", served.url.as_str(), "--protocol", "2025-11-25"];
    // The "browser" is the user completing the page: it calls `finish_link`.
    let finish = format!(
        "{BIN} --url {} tools call finish_link >/dev/null",
        served.url
    );

    let declined = Marker::new("no");
    let argv: Vec<&str> = call
        .iter()
        .copied()
        .chain(["tools", "call", "link_account"])
        .collect();
    let (shown, code) = on_a_terminal(&argv, "n", &declined.browser(&finish));
    assert_eq!(code, Some(3), "{shown}");
    assert!(shown.contains(LINK_URL), "{shown}");
    assert_eq!(declined.opened(), None, "opened after a no");

    let accepted = Marker::new("yes");
    let (shown, code) = on_a_terminal(&argv, "y", &accepted.browser(&finish));
    assert_eq!(code, Some(0), "{shown}");
    assert_eq!(accepted.opened().as_deref(), Some(LINK_URL));
    assert!(shown.contains("account linked"), "{shown}");
}

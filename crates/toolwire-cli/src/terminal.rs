//! What reaches the terminal: text a server or a child wrote (tool output, names, error
//! messages, stderr lines) may hold escape sequences that move the cursor, rewrite what was
//! shown, set the window title or hide text. Every line the CLI prints goes through [`safe`],
//! which writes control characters (other than newline and tab) and bidirectional overrides
//! as `\u` escapes; JSON output stays valid JSON, since such characters can only stand
//! inside its strings.

use std::borrow::Cow;
use std::io::Write;

/// `text` with every character a terminal would act on written as a `\uXXXX` escape.
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
    toolwire::types::printable(text)
}

/// Writes `text` (through [`safe`]) to stdout or stderr. A reader that went away (`| head`)
/// is not an error of the command: what could not be written is dropped, never a panic as
/// `println!`'s.
pub(crate) fn write(to_stderr: bool, text: &str, newline: bool) {
    let text = safe(text);
    let end = if newline { "\n" } else { "" };
    let written = if to_stderr {
        write!(std::io::stderr().lock(), "{text}{end}")
    } else {
        WROTE_STDOUT.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut out = std::io::stdout().lock();
        write!(out, "{text}{end}").and_then(|()| out.flush())
    };
    drop(written);
}

/// Whether anything went to stdout: a failure under `--json` prints its own document only when
/// nothing did (one document on stdout, whatever happens).
static WROTE_STDOUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`write()`] wrote anything to stdout.
pub(crate) fn wrote_stdout() -> bool {
    WROTE_STDOUT.load(std::sync::atomic::Ordering::Relaxed)
}

/// `println!`, through [`safe`].
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::terminal::write(false, &format!($($arg)*), true)
    };
}

/// `print!`, through [`safe`].
macro_rules! say_part {
    ($($arg:tt)*) => {
        $crate::terminal::write(false, &format!($($arg)*), false)
    };
}

/// `eprintln!`, through [`safe`].
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::terminal::write(true, &format!($($arg)*), true)
    };
}

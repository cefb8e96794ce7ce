//! What reaches the terminal: text a server or a child wrote (tool output, names, error
//! messages, stderr lines) may hold escape sequences that move the cursor, rewrite what was
//! shown, set the window title or hide text. Every line the CLI prints goes through [`safe`],
//! which writes control characters (other than newline and tab) and bidirectional overrides
//! as `\u` escapes; JSON output stays valid JSON, since such characters can only stand
//! inside its strings.

use std::borrow::Cow;

/// `text` with every character a terminal would act on written as a `\uXXXX` escape.
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
    toolwire::types::printable(text)
}

/// `println!`, through [`safe`].
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", $crate::terminal::safe(&format!($($arg)*)))
    };
}

/// `print!`, through [`safe`].
macro_rules! say_part {
    ($($arg:tt)*) => {
        print!("{}", $crate::terminal::safe(&format!($($arg)*)))
    };
}

/// `eprintln!`, through [`safe`].
macro_rules! say_err {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::terminal::safe(&format!($($arg)*)))
    };
}

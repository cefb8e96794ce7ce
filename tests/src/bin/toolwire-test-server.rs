//! The scripted MCP server on stdin/stdout:
//! `toolwire-test-server [modern|legacy|both|strict-legacy]`.

use std::process::ExitCode;

use toolwire_test_support::{Eras, serve_stdio};

fn main() -> ExitCode {
    let eras = match std::env::args().nth(1).as_deref() {
        Some("modern") => Eras::Modern,
        Some("legacy") => Eras::Legacy,
        Some("strict-legacy") => Eras::StrictLegacy,
        None | Some("both") => Eras::Both,
        Some(_) => return ExitCode::from(2),
    };
    match serve_stdio(eras) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

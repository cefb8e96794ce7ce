//! The reference server on stdin/stdout: `toolwire-ref-stdio [both|modern|legacy]`.

use std::process::ExitCode;

use toolwire_refserver::{Eras, Options};

fn main() -> ExitCode {
    let mut options = Options::default();
    options.server.eras = match std::env::args().nth(1).as_deref() {
        None | Some("both") => Eras::Both,
        Some("modern") => Eras::Modern,
        Some("legacy") => Eras::Legacy,
        Some(_) => return ExitCode::from(2),
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(toolwire_refserver::serve_stdio(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

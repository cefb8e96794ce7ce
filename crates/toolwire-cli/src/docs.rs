//! `toolwire completions SHELL` and `toolwire man`: generated from the clap definitions the
//! parser itself uses, so every command and option is in them as it is parsed.

use super::*;

/// Writes the completion script for `shell` on stdout.
pub(crate) fn completions(shell: clap_complete::Shell) -> Result<ExitCode, Failure> {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "toolwire", &mut out);
    write_out(&out)
}

/// Writes the man page (roff) on stdout: the command's own page, then a section for each
/// command under it with its options.
pub(crate) fn man() -> Result<ExitCode, Failure> {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    let command = Cli::command();
    clap_mangen::Man::new(command.clone())
        .render(&mut out)
        .map_err(|e| Failure::Usage(format!("the man page: {e}")))?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("toolwire-{}", sub.get_name());
        let sub = sub.clone().name(name);
        let mut page = Vec::new();
        let man = clap_mangen::Man::new(sub);
        man.render_name_section(&mut page)
            .and_then(|()| man.render_synopsis_section(&mut page))
            .and_then(|()| man.render_description_section(&mut page))
            .and_then(|()| man.render_options_section(&mut page))
            .and_then(|()| man.render_subcommands_section(&mut page))
            .map_err(|e| Failure::Usage(format!("the man page: {e}")))?;
        out.extend_from_slice(&page);
    }
    write_out(&out)
}

/// Writes `bytes` on stdout; a reader that stopped early (`| head`) is no failure.
fn write_out(bytes: &[u8]) -> Result<ExitCode, Failure> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::Usage(format!("stdout: {e}")))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

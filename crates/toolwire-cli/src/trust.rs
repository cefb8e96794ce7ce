//! `--config FILE` for a file the user did not write: approved once, at a terminal or with
//! `toolwire trust FILE`, before its commands run or its `${VAR}`s are filled
//! (`toolwire_host::trust` has the rule).

use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::process::ExitCode;

use toolwire_host::ServersConfig;
use toolwire_host::trust::{self, Exposure, TrustStore, Verdict};

use crate::Failure;

/// What approving `file` allows, for a person to read.
fn describe(file: &Path, exposure: &Exposure) -> String {
    let mut text = format!(
        "{} is not one of your own configuration files. Once trusted it will",
        file.display()
    );
    if !exposure.commands.is_empty() {
        text.push_str("\n  start these commands:");
        for c in &exposure.commands {
            text.push_str("\n    ");
            text.push_str(c);
        }
    }
    if !exposure.variables.is_empty() {
        text.push_str("\n  receive these environment variables: ");
        text.push_str(&exposure.variables.join(", "));
    }
    if !exposure.sockets.is_empty() {
        text.push_str("\n  connect to these local Unix sockets:");
        for s in &exposure.sockets {
            text.push_str("\n    ");
            text.push_str(s);
        }
    }
    text
}

fn read(file: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(file)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", file.display())))
}

/// Loads `--config FILE` once it may act for the user; asks at a terminal, else refuses with
/// the command that approves it.
pub(crate) fn load_config(file: &Path) -> Result<ServersConfig, Failure> {
    load_config_asking(file, true)
}

/// [`load_config`] where nobody may be asked (a reload while serving): a file that needs
/// approval is refused with how to give it.
pub(crate) fn load_config_unattended(file: &Path) -> Result<ServersConfig, Failure> {
    load_config_asking(file, false)
}

fn load_config_asking(file: &Path, may_ask: bool) -> Result<ServersConfig, Failure> {
    let text = read(file)?;
    let store = TrustStore::default_location();
    let verdict = trust::check(file, &text, store.as_ref())
        .map_err(|e| Failure::Usage(crate::one_line(&e)))?;
    if let Verdict::NeedsApproval(exposure) = verdict {
        let shown = describe(file, &exposure);
        let person = may_ask && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        if !person {
            return Err(Failure::Usage(format!(
                "{shown}\nApprove it once with `toolwire trust {}`, or set TOOLWIRE_TRUST=1 for one run.",
                file.display()
            )));
        }
        say_err!("{shown}");
        eprint!("Trust this file? [y/N] ");
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err(Failure::Usage(format!(
                "not trusted: {} was not used",
                file.display()
            )));
        }
        remember(store.as_ref(), file, &text)?;
    }
    let config =
        ServersConfig::from_text(file, &text).map_err(|e| Failure::Usage(crate::one_line(&e)))?;
    say_typos(&config);
    Ok(config)
}

/// Says, on stderr, each member of the file that is likely a typo of one the loader reads
/// (it is ignored, so its entry does not do what its author meant).
pub(crate) fn say_typos(config: &ServersConfig) {
    let file = config
        .file
        .as_deref()
        .map_or_else(String::new, |f| format!("{}: ", f.display()));
    for (server, key, meant) in config.likely_typos() {
        say_err!(
            "toolwire: {file}server `{server}`: `{key}` is not a member this reads and is ignored (did you mean `{meant}`?)"
        );
    }
}

fn remember(store: Option<&TrustStore>, file: &Path, text: &str) -> Result<(), Failure> {
    let store = store
        .ok_or_else(|| Failure::Usage("no home directory to remember the approval in".into()))?;
    store.approve(file, text).map_err(|e| {
        Failure::Usage(format!(
            "the approval could not be kept in {}: {e}",
            store.path().display()
        ))
    })
}

/// `toolwire trust FILE`: shows what the file would do and approves its current content.
pub(crate) fn approve(file: &Path) -> Result<ExitCode, Failure> {
    let text = read(file)?;
    let exposure = trust::exposure(&text).map_err(|e| Failure::Usage(crate::one_line(&e)))?;
    if exposure.is_empty() {
        say!(
            "{} starts no command and reads no variable: it needs no approval.",
            file.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    say_err!("{}", describe(file, &exposure));
    remember(TrustStore::default_location().as_ref(), file, &text)?;
    say!("Trusted {} (until it changes).", file.display());
    Ok(ExitCode::SUCCESS)
}

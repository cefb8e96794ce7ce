//! The stdio transport on Windows, against `.cmd` shims run by `cmd.exe` (the `npx` case).
//! `cargo xtask ci` runs these under Wine; on Unix only the allow-list test runs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test by panicking"
)]

use toolwire_stdio::*;

#[cfg(windows)]
mod common;

#[test]
fn the_platform_allow_list_is_the_one_in_use_and_has_what_wrappers_need() {
    for name in [
        "PATHEXT",
        "COMSPEC",
        "SYSTEMROOT",
        "PROGRAMDATA",
        "APPDATA",
        "USERPROFILE",
    ] {
        assert!(WINDOWS_INHERITED_ENV.contains(&name), "{name}");
    }
    let expected = if cfg!(windows) {
        WINDOWS_INHERITED_ENV
    } else {
        UNIX_INHERITED_ENV
    };
    assert_eq!(DEFAULT_INHERITED_ENV, expected);
}

#[cfg(windows)]
mod windows {
    use std::path::PathBuf;
    use std::time::Duration;

    use toolwire_stdio::*;
    use toolwire_transport::*;

    use super::common::recv_text;

    /// A fresh folder holding `name.cmd` with `body` (lines joined with CRLF).
    fn shim(test: &str, name: &str, body: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("toolwire-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = body.join("\r\n");
        text.push_str("\r\n");
        std::fs::write(dir.join(format!("{name}.cmd")), text).unwrap();
        dir
    }

    /// `program` found through `dir` (first in `PATH`), stderr discarded, short waits.
    fn config(program: &str, args: &[&str], dir: &std::path::Path) -> StdioConfig {
        let path = std::env::var("PATH").unwrap_or_default();
        StdioConfig::new(program, args.iter().copied())
            .with_env("PATH", format!("{};{path}", dir.display()))
            .with_stderr(StderrMode::Discard)
            .with_shutdown_waits(Duration::from_millis(200), Duration::from_millis(200))
    }

    #[tokio::test]
    async fn a_cmd_shim_named_without_its_extension_is_found_and_answers() {
        let dir = shim(
            "found",
            "answerer",
            &[
                "@echo off",
                "set /p line=",
                r#"echo {"jsonrpc":"2.0","id":1,"result":{}}"#,
            ],
        );
        let t = StdioTransport::spawn(config("answerer", &[], &dir)).unwrap();
        let request = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let kind = MessageKind::Request {
            id: RequestId::Number(1),
            method: "ping",
        };
        t.send(Outbound::new(request, kind)).await.unwrap();
        assert_eq!(
            recv_text(&t).await,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
        t.close().await.unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The CVE-2024-24576 shape: an argument holding `cmd.exe` metacharacters reaches the
    /// shim as one literal argument (or is refused), never as a second command.
    #[tokio::test]
    async fn a_cmd_shims_arguments_arrive_literally_and_run_nothing() {
        let dir = shim(
            "args",
            "recorder",
            &[
                "@echo off",
                "setlocal EnableDelayedExpansion",
                r#"set "v=%~1""#,
                r#">"%~dp0arg.txt" echo !v!"#,
                r#"echo {"jsonrpc":"2.0","method":"done"}"#,
            ],
        );
        let argument = "a&echo pwned>injected.txt";
        let config = config("recorder", &[argument], &dir).with_cwd(&dir);
        match StdioTransport::spawn(config) {
            Ok(t) => {
                assert_eq!(recv_text(&t).await, r#"{"jsonrpc":"2.0","method":"done"}"#);
                t.close().await.unwrap();
                let recorded = std::fs::read_to_string(dir.join("arg.txt")).unwrap();
                assert_eq!(recorded.trim_end(), argument);
            }
            Err(TransportError::Spawn { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput, "{source}");
            }
            Err(e) => panic!("{e}"),
        }
        assert!(
            !dir.join("injected.txt").exists(),
            "the argument ran as a command"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    /// `ping` ignores stdin's end and would hold its stdout open for about 30 s: close must
    /// end it, which the end of its stdout shows well before that. (Wine's `taskkill` knows
    /// no `/T`; the transport then kills the child itself.)
    #[tokio::test]
    async fn a_child_ignoring_eof_is_ended_by_close() {
        let dir = std::env::temp_dir();
        let t = StdioTransport::spawn(config("ping", &["-n", "30", "127.0.0.1"], &dir)).unwrap();
        // Its lines are not JSON: dropped, nothing arrives. It must still run when closed.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let state = t.peer_state().unwrap_or_default();
        assert!(state.contains("is still running"), "{state}");
        t.close().await.unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(15), t.recv()).await;
        assert!(
            matches!(ended, Ok(None)),
            "the child outlived close, holding its stdout"
        );
    }
}

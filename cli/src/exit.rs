//! Exit codes, and error reports that say what happened and what to do about it.

use std::io;
use std::path::Path;
use std::process::ExitCode;

use cuba_protocol::client::ClientError;
use cuba_protocol::handshake::HandshakeError;
use cuba_protocol::{paths, ErrorKind, ErrorReason};

use crate::ctx::invocation;

/// The operation failed (a message was printed). `2` (usage) comes from clap; `run` exits with
/// its command's own code.
pub const FAILED: u8 = 1;

pub fn failed() -> ExitCode {
    ExitCode::from(FAILED)
}

/// `run`'s code for how a command ended: its exit code, or 128 + the signal number.
pub fn of_process(exit_code: Option<i32>, signal_number: Option<i32>) -> ExitCode {
    match (exit_code, signal_number) {
        (Some(code), _) => ExitCode::from((code & 0xff) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
        (None, None) => failed(),
    }
}

/// Prints `err` (and a hint when one helps) to stderr and gives the exit code. A closed stdout
/// (`cubactl logs 3 | head`) is not an error. `host`: the host the command was aimed at.
pub fn report(err: &anyhow::Error, host: Option<&str>) -> ExitCode {
    if err
        .chain()
        .filter_map(|e| e.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
    {
        return ExitCode::SUCCESS;
    }
    eprintln!("cubactl: {err:#}");
    if let Some(hint) = hint(err, host) {
        eprintln!("hint: {hint}");
    }
    failed()
}

fn hint(err: &anyhow::Error, host: Option<&str>) -> Option<String> {
    client_hint(
        err.chain().find_map(|e| e.downcast_ref::<ClientError>())?,
        host,
    )
}

/// What to do about a failed request or connection to `host`'s daemon (`None`: this
/// machine's), when there is something to say.
pub fn client_hint(client: &ClientError, host: Option<&str>) -> Option<String> {
    let cubactl = invocation(host);
    let socket_hint = || {
        "the socket belongs to another user: set CUBA_EXEC_SOCKET (or --socket) to a path of \
         your own, or unset it for the default"
            .to_string()
    };
    match client {
        ClientError::Connect { source, .. } => match source.kind() {
            io::ErrorKind::PermissionDenied => Some(socket_hint()),
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => Some(
                "cubad is not running: `cubactl daemon start` starts it (every command except \
                 `daemon status` starts it when needed)"
                    .into(),
            ),
            _ => None,
        },
        ClientError::Handshake(HandshakeError::AnotherUser(_)) => Some(socket_hint()),
        ClientError::Remote(e) => match e.kind {
            ErrorKind::NotFound => Some(format!("`{cubactl} ps` lists the ids there are")),
            ErrorKind::Limit => Some(format!(
                "wait for a process to end, or stop one with `{cubactl} kill ID` \
                 (CUBA_EXEC_MAX_PROCS raises the limit when the daemon starts)"
            )),
            ErrorKind::Blocked if e.reason == Some(ErrorReason::SideEffectBlocked) => Some(
                "the daemon blocks that declared side effect (CUBA_EXEC_BLOCKED_SIDE_EFFECTS); \
                 run something else, or ask whoever runs cubad to change the setting"
                    .into(),
            ),
            ErrorKind::Blocked => Some(format!(
                "`{cubactl} policy check 'COMMAND'` shows the rule and every sub-command the \
                 policy saw"
            )),
            ErrorKind::ShuttingDown => {
                Some("cubad is stopping; run the command again to start a new one".into())
            }
            _ => None,
        },
        // The log is on that host, in its state dir.
        ClientError::Closed | ClientError::Gone | ClientError::Io(_) if host.is_some() => {
            Some(format!(
                "the link to the host dropped, or its cubad stopped; `{cubactl} daemon status` \
                 tells which"
            ))
        }
        ClientError::Closed | ClientError::Gone | ClientError::Io(_) => Some(format!(
            "cubad may have stopped; its log is {}",
            log_path().display()
        )),
        _ => None,
    }
}

fn log_path() -> std::path::PathBuf {
    paths::daemon_log(Path::new(&paths::state_dir()))
}

//! Starting `cubad` when no daemon answers: detached, logging to its state directory, and
//! waited for until its socket accepts connections.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::net::UnixStream;

use super::ClientError;
use crate::paths;

/// How long an auto-started daemon may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The connect error says no daemon listens on the socket (none started yet, or a stale
/// socket file): starting one may help.
pub fn daemon_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

/// Starts `cubad` detached (it forks into its own session) with its output in its log file,
/// then waits until the socket accepts connections. Two clients doing this at once get one
/// daemon: the loser of the daemon's start-up lock exits, and both connect to the winner.
pub async fn start_daemon(socket: &Path) -> Result<(), ClientError> {
    let exe = paths::daemon_binary();
    let fail = |reason: String| ClientError::Start {
        exe: exe.clone(),
        reason,
    };
    let state = paths::state_dir();
    // Owner-only: the state holds every process's output.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&state)
        .map_err(|e| fail(format!("cannot create state dir {}: {e}", state.display())))?;
    // The log is opened in it before the daemon checks it: not in a directory a link names.
    if std::fs::symlink_metadata(&state).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(fail(crate::safe_fs::link_error(&state).to_string()));
    }
    let log_path = paths::daemon_log(&state);
    // Not through a link a command planted in the state directory.
    let log = crate::safe_fs::open_append(&log_path)
        .map_err(|e| fail(format!("cannot open {}: {e}", log_path.display())))?;
    let log2 = log.try_clone().map_err(|e| fail(e.to_string()))?;
    // Where this start's lines begin: its error is what it writes after that.
    let from = log.metadata().map_or(0, |m| m.len());
    let mut child = std::process::Command::new(&exe)
        .arg("--daemonize")
        .arg("--socket")
        .arg(socket)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    // `--daemonize` forks; the parent exits once the daemon serves (0) or failed to start (1).
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .map_err(|e| fail(e.to_string()))?
        .map_err(|e| fail(e.to_string()))?;
    if !status.success() {
        return Err(fail(match said_since(&log_path, from) {
            Some(why) => why,
            None => format!("it exited with {status}; see {}", log_path.display()),
        }));
    }
    let deadline = Instant::now() + START_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match UnixStream::connect(socket).await {
            Ok(_) => return Ok(()),
            Err(e) if daemon_absent(&e) && Instant::now() < deadline => {
                // Start-up is a few milliseconds; back off so a slow machine is not hammered.
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(fail(format!(
                    "it did not open {} ({e}); see {}",
                    socket.display(),
                    log_path.display()
                )))
            }
        }
    }
}

/// Bytes of a failed start's log lines quoted in its error.
const SAID_BYTES: u64 = 2048;

/// What a daemon that failed to start wrote to its log after offset `from`: its fatal error
/// (`cubad: …` to the end), without the program's name.
fn said_since(log: &Path, from: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = crate::safe_fs::open_read(log).ok()?;
    let end = file.metadata().ok()?.len();
    let start = from.max(end.saturating_sub(SAID_BYTES));
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut text = String::new();
    file.take(SAID_BYTES).read_to_string(&mut text).ok()?;
    // Its fatal error is `cubad: …`, perhaps over several lines (a config file's line quoted).
    let at = text.rfind("cubad: ").map_or(0, |i| i + "cubad: ".len());
    let said = text[at..].trim();
    (!said.is_empty()).then(|| said.to_string())
}

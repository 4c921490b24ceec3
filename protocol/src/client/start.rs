//! Starting `cubad` when no daemon answers: detached, logging to its state directory, and
//! waited for until its socket accepts connections.

use std::io;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

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
    crate::safe_fs::owner_only_dir()
        .recursive(true)
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
    let mut cmd = Command::new(&exe);
    cmd.arg("--socket")
        .arg(socket)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2);
    let child = detached(cmd).map_err(|e| fail(e.to_string()))?;
    let failed = |status: std::process::ExitStatus| {
        fail(match said_since(&log_path, from) {
            Some(why) => why,
            None => format!("it exited with {status}; see {}", log_path.display()),
        })
    };
    let mut daemon = started(child)
        .await
        .map_err(|e| fail(e.to_string()))?
        .map_err(failed)?;
    let deadline = Instant::now() + START_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match super::transport::connect(socket).await {
            Ok(_) => return Ok(()),
            Err(e) if daemon_absent(&e) && Instant::now() < deadline => {
                // A daemon that ended before it served failed to start: say why at once.
                if let Some(Ok(Some(status))) = daemon.as_mut().map(Child::try_wait) {
                    return Err(failed(status));
                }
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

/// Starts the daemon in the background: `--daemonize`, so it forks into a session of its own
/// and its parent exits once it serves (0) or failed to start (1).
#[cfg(unix)]
fn detached(mut cmd: Command) -> io::Result<Child> {
    cmd.arg("--daemonize").spawn()
}

/// Starts the daemon with no console, in a process group of its own (a Ctrl-C in the
/// starter's console is not its), and out of the starter's job where the job allows it: a
/// terminal or editor that kills its job on close must not take the daemon with it. A job
/// that forbids breaking away keeps it (documented: then it ends with that job).
#[cfg(windows)]
fn detached(mut cmd: Command) -> io::Result<Child> {
    use std::os::windows::process::CommandExt;
    const DETACHED_PROCESS: u32 = 0x0000_0008;
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    const CREATE_BREAKAWAY_FROM_JOB: u32 = 0x0100_0000;
    const ERROR_ACCESS_DENIED: i32 = 5;
    let flags = DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP;
    // Not this client's stdio (an editor's pipe): the daemon outlives it.
    crate::win::no_inherited_stdio();
    match cmd
        .creation_flags(flags | CREATE_BREAKAWAY_FROM_JOB)
        .spawn()
    {
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED) => {
            cmd.creation_flags(flags).spawn()
        }
        other => other,
    }
}

/// What a start left to watch: the daemon process itself while it starts (`None` when it
/// forked away), or the exit status of a start that failed.
type Starting = Result<Option<Child>, std::process::ExitStatus>;

/// Waits for the starting program: Unix's `--daemonize` parent exits with the start's
/// result, and the daemon it forked is not a child to watch.
#[cfg(unix)]
async fn started(mut child: Child) -> io::Result<Starting> {
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .map_err(io::Error::other)??;
    Ok(if status.success() {
        Ok(None)
    } else {
        Err(status)
    })
}

/// Windows has no fork: the started program is the daemon, watched until it serves.
#[cfg(windows)]
async fn started(child: Child) -> io::Result<Starting> {
    Ok(Ok(Some(child)))
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

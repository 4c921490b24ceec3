//! The connection to the local daemon: a Unix socket, or on Windows the user's named pipe.

use std::io;
use std::path::Path;

/// Opens a connection to the daemon at `socket` (a pipe name on Windows). `NotFound` or
/// `ConnectionRefused`: no daemon there ([`super::daemon_absent`]).
#[cfg(unix)]
pub async fn connect(socket: &Path) -> io::Result<crate::quiet::QuietStream> {
    let stream = tokio::net::UnixStream::connect(socket).await?;
    crate::quiet::QuietStream::from_tokio(stream)
}

/// Opens the daemon's pipe, waiting while every instance is busy (the server makes the next
/// one as soon as it accepts), and refuses a server that is not this user's.
#[cfg(windows)]
pub async fn connect(
    socket: &Path,
) -> io::Result<tokio::net::windows::named_pipe::NamedPipeClient> {
    use std::time::{Duration, Instant};
    use tokio::net::windows::named_pipe::ClientOptions;
    const ERROR_PIPE_BUSY: i32 = 231;
    let deadline = Instant::now() + Duration::from_secs(5);
    let pipe = loop {
        match ClientOptions::new().open(socket) {
            Ok(pipe) => break pipe,
            // Windows offers no wait for a free instance that a task can await; the instance
            // comes within microseconds of the previous accept.
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => return Err(e),
        }
    };
    crate::win::check_server(&pipe)?;
    Ok(pipe)
}

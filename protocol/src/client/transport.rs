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

/// Opens the daemon's pipe ([`crate::win::open_pipe`]).
#[cfg(windows)]
pub async fn connect(
    socket: &Path,
) -> io::Result<tokio::net::windows::named_pipe::NamedPipeClient> {
    crate::win::open_pipe(socket).await
}

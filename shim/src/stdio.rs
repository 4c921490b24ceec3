//! stdin and stdout for the MCP transport. Where they are pipes (as an editor starts a server),
//! the runtime reads and writes them itself, non-blocking: tokio's own stdio hands every read
//! and write to a blocking thread, two thread switches on each request's path. Anything else
//! (a terminal, a file, a socket) keeps tokio's stdio.

#[cfg(unix)]
use std::os::fd::{AsFd, OwnedFd};

use tokio::io::{AsyncRead, AsyncWrite};
#[cfg(unix)]
use tokio::net::unix::pipe;

pub type Input = Box<dyn AsyncRead + Unpin + Send>;
pub type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// This process's stdin and stdout. Windows: tokio's (anonymous pipes there cannot be read
/// asynchronously).
#[cfg(not(unix))]
pub fn stdio() -> (Input, Output) {
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

/// This process's stdin and stdout. Must be called inside a Tokio runtime.
#[cfg(unix)]
pub fn stdio() -> (Input, Output) {
    let input: Input = match own(std::io::stdin().as_fd()).and_then(pipe::Receiver::from_owned_fd) {
        Ok(r) => Box::new(r),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let output: Output = match own(std::io::stdout().as_fd()).and_then(pipe::Sender::from_owned_fd)
    {
        Ok(w) => Box::new(w),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

/// A descriptor of our own for `fd` (the standard one stays open, for whatever else uses it).
#[cfg(unix)]
fn own(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    fd.try_clone_to_owned()
}

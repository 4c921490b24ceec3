//! Pipes for children: both ends close-on-exec from the first moment, a larger buffer for fast
//! writers, and the pipe's identity (what a reader's descriptor links to).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pipe, both ends close-on-exec: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills `fds` with two new descriptors on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Asks for a pipe buffer of `size` bytes (capped by the kernel setting), so a fast writer
/// needs fewer wake-ups. Failure only means a smaller buffer.
pub fn grow(fd: &impl AsRawFd, size: i32) {
    // SAFETY: F_SETPIPE_SZ on a pipe fd the caller keeps open.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, size) };
}

pub use super::super::posix::pipe_id as id;

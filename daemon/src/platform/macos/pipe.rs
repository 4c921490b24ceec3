//! Pipes for children: both ends close-on-exec, and the pipe's identity. macOS has no `pipe2`
//! and no way to size a pipe's buffer.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pipe, both ends close-on-exec: (read end, write end). Without `pipe2` the flag is set just
/// after `pipe`, as std does on macOS; a child spawned by another thread in between could
/// inherit the ends (it would then hold the pipe open until it execs or exits).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe fills `fds` with two new descriptors on success.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [&read, &write] {
        // SAFETY: F_SETFD on a descriptor we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((read, write))
}

/// Nothing to do: macOS sizes pipe buffers itself (they grow up to 64 KiB under load).
pub fn grow(_fd: &impl AsRawFd, _size: i32) {}

pub use super::super::posix::pipe_id as id;

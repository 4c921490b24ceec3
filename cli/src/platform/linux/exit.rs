//! A process's exit through a pidfd, which becomes readable when the process exits.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// `Some(true)`: `pid` exited (or is gone), `Some(false)`: still there after `limit`, `None`:
/// kernels before 5.3, which have no pidfd.
pub async fn wait(pid: i32, limit: Duration) -> io::Result<Option<bool>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Ok(match err.raw_os_error() {
            Some(libc::ESRCH) => Some(true),
            _ => None,
        });
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the AsyncFd owns the OwnedFd, so the fd stays open and unchanged for its life.
    let afd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
        .map_err(io::Error::from)?;
    Ok(Some(
        tokio::time::timeout(limit, afd.readable()).await.is_ok(),
    ))
}

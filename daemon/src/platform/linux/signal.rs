//! Signals to one exact process: through a pidfd opened after checking the start time, so a
//! pid the kernel has handed to another process since is never hit.

use std::io;

use super::proc;

/// Sends `signal` to `pid` if it is still the process that started at `start_time`. `Ok(false)`:
/// it is gone (or is another process now).
pub fn signal_exact(
    pid: i32,
    start_time: crate::platform::StartTime,
    signal: i32,
) -> io::Result<bool> {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ESRCH) => Ok(false),
            _ => Err(err),
        };
    }
    let fd = fd as i32;
    // The pidfd pins this process: if the start time still matches now, it is the one we mean.
    let same = proc::stat(pid).is_some_and(|s| s.start_time == start_time);
    let result = if same {
        // SAFETY: fd is a pidfd we own; a null siginfo means "as kill(2) would".
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc == 0 {
            Ok(true)
        } else {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ESRCH) => Ok(false),
                _ => Err(err),
            }
        }
    } else {
        Ok(false)
    };
    // SAFETY: fd was returned by pidfd_open above and is closed once.
    unsafe { libc::close(fd) };
    result
}

pub use super::super::posix::{group_alive, kill_child};

/// Another process's exit as an event: a client that started commands (the orphan check).
/// Through a pidfd, which becomes readable when the process exits.
pub struct ExitWatch(Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>);

impl ExitWatch {
    /// Watches `pid` (one already gone has exited at once); an error if it cannot be watched
    /// (no descriptor left, a kernel without pidfds).
    pub fn of(pid: i32) -> io::Result<ExitWatch> {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags; it returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, libc::O_NONBLOCK) };
        if fd < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::ESRCH) => Ok(ExitWatch(None)),
                _ => Err(err),
            };
        }
        // SAFETY: a new fd nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
        // SAFETY: an OwnedFd moved into the AsyncFd, which keeps it open and unchanged for
        // its whole life.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }?;
        Ok(ExitWatch(Some(fd)))
    }

    /// Resolves once the process has exited.
    pub async fn exited(&self) {
        if let Some(fd) = &self.0 {
            // Readable from its exit on, for good: the guard is not cleared.
            let _ = fd.readable().await;
        }
    }
}

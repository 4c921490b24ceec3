//! Signals to one exact process. macOS has no pidfd: the start time is checked just before
//! `kill`, so a pid the kernel has handed to another process since is not hit, except if it was
//! reused in the microseconds between the check and the signal.

use std::io;

use super::proc;

/// Sends `signal` to `pid` if it is still the process that started at `start_time`. `Ok(false)`:
/// it is gone (or is another process now).
pub fn signal_exact(
    pid: i32,
    start_time: crate::platform::StartTime,
    signal: i32,
) -> io::Result<bool> {
    if !proc::stat(pid).is_some_and(|s| s.start_time == start_time) {
        return Ok(false);
    }
    // SAFETY: kill(2) takes a pid and a signal number.
    if unsafe { libc::kill(pid, signal) } == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ESRCH) => Ok(false),
        _ => Err(err),
    }
}

pub use super::super::posix::{group_alive, kill_child};

/// Another process's exit as an event: a client that started commands (the orphan check).
/// macOS has no pidfd here: whether it is alive is asked every few seconds (this decides a
/// stop half an hour away).
pub struct ExitWatch(i32);

impl ExitWatch {
    pub fn of(pid: i32) -> io::Result<ExitWatch> {
        Ok(ExitWatch(pid))
    }

    /// Resolves once the process has exited.
    pub async fn exited(&self) {
        // SAFETY: kill(2) with signal 0 only checks that the pid exists.
        while unsafe { libc::kill(self.0, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
        {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    }
}

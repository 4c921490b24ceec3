//! Signals to one exact process. macOS has no pidfd: the start time is checked just before
//! `kill`, so a pid the kernel has handed to another process since is not hit, except if it was
//! reused in the microseconds between the check and the signal.

use std::io;

use super::proc;

/// Sends `signal` to `pid` if it is still the process that started at `start_time`. `Ok(false)`:
/// it is gone (or is another process now).
pub fn signal_exact(pid: i32, start_time: u64, signal: i32) -> io::Result<bool> {
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

/// Whether process group `pgrp` still has a member (one we may signal or not).
pub fn group_alive(pgrp: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the group exists and may be signalled.
    let alive = unsafe { libc::kill(-pgrp, 0) } == 0;
    alive || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// SIGKILL to a child that must not run on (its limits could not be applied), and to its
/// group: it is our own child, so its pid cannot have been reused before we reap it.
pub fn kill_child(pid: i32) {
    // SAFETY: kill(2) on our own child's process group and pid; the reaper collects it.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
}

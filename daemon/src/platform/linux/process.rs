//! The daemon's own set-up: becoming the reaper of orphaned descendants, keeping inherited
//! descriptors from its children, and random bytes.

use std::io;

/// Orphaned descendants (double forks, `setsid` escapees) are reparented to the daemon instead
/// of init, so it can reap them and stop them.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes every descriptor above stderr close-on-exec: what the daemon inherited from whoever
/// started it (an editor, a shell) is not for its children. Call before any thread exists.
pub fn close_inherited_fds_on_exec() {
    super::super::posix::close_listed_fds_on_exec("/proc/self/fd");
}

pub use crate::platform::posix::{detach, Started};

/// In a child between fork and exec: SIGKILL when the thread that spawned it ends (for test
/// daemons, which must not outlive their test). Async-signal-safe.
pub fn die_with_parent() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes an integer signal.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    Ok(())
}

/// Fills `buf` from the kernel's random source; false if it could not.
pub fn random_bytes(buf: &mut [u8]) -> bool {
    // SAFETY: getrandom into a buffer of the given length.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    n == buf.len() as isize
}

//! The daemon's own set-up: keeping inherited descriptors from its children, and random bytes.
//! macOS has no subreaper.

use std::io;

/// Nothing to do: macOS cannot make a process the reaper of its orphaned descendants, so a
/// double fork or a `setsid` escapee is reparented to launchd. Such a process is still found
/// (and stopped with its tree) through the marker in its environment
/// (`CUBA_EXEC_PROCESS`), by a scan of every process; one that also cleared its environment
/// is not found.
pub fn become_subreaper() -> io::Result<()> {
    Ok(())
}

/// Makes every descriptor above stderr close-on-exec: what the daemon inherited from whoever
/// started it (an editor, a shell) is not for its children. Call before any thread exists.
pub fn close_inherited_fds_on_exec() {
    super::super::posix::close_listed_fds_on_exec("/dev/fd");
}

pub use crate::platform::posix::{detach, Started};

/// Nothing: macOS has no parent-death signal, so whoever spawns a test daemon must stop it
/// itself (the bench's daemons are killed when dropped).
pub fn die_with_parent() -> io::Result<()> {
    Ok(())
}

/// Fills `buf` from the kernel's random source; false if it could not.
pub fn random_bytes(buf: &mut [u8]) -> bool {
    // getentropy gives at most 256 bytes a call.
    buf.chunks_mut(256).all(|chunk| {
        // SAFETY: getentropy into a buffer of the given length (≤ 256).
        unsafe { libc::getentropy(chunk.as_mut_ptr().cast(), chunk.len()) == 0 }
    })
}

//! What a child needs from the OS to run on a terminal of its own.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// The device path of a terminal end, e.g. `/dev/pts/7` (what a process's descriptors on it
/// link to).
pub fn device_path(fd: &OwnedFd) -> io::Result<String> {
    Ok(
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?
            .to_string_lossy()
            .into_owned(),
    )
}

/// In the child, between fork and exec: a session of its own with the terminal on fd 0 as its
/// controlling terminal. Only async-signal-safe calls.
pub fn take_controlling_terminal() -> io::Result<()> {
    // SAFETY: setsid and ioctl(TIOCSCTTY) take no pointers; both are async-signal-safe.
    if unsafe { libc::setsid() } < 0 || unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

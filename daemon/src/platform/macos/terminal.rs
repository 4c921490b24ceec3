//! What a child needs from the OS to run on a terminal of its own.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// `_IO('t', 97)` from `<sys/ttycom.h>`; the `libc` crate has no apple constant for it.
const TIOCSCTTY: libc::c_ulong = 0x2000_7461;

/// The device path of a terminal end, e.g. `/dev/ttys007`.
pub fn device_path(fd: &OwnedFd) -> io::Result<String> {
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: ttyname_r writes a NUL-terminated name of at most `buf.len()` bytes.
    let rc = unsafe { libc::ttyname_r(fd.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: on success the buffer holds a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// In the child, between fork and exec: a session of its own with the terminal on fd 0 as its
/// controlling terminal. Only async-signal-safe calls.
pub fn take_controlling_terminal() -> io::Result<()> {
    // SAFETY: setsid and ioctl(TIOCSCTTY) take no pointers; both are async-signal-safe.
    if unsafe { libc::setsid() } < 0 || unsafe { libc::ioctl(0, TIOCSCTTY, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

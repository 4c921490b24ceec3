//! Small descriptor operations (POSIX) shared by the pipes, terminals and session command pipes.

use std::io;
use std::os::fd::AsRawFd;

/// read(2) into `buf`, retried on EINTR.
pub fn read(fd: &impl AsRawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: read(2) into `buf`, whose length bounds it, on a descriptor `fd` keeps open.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Makes O_NONBLOCK the only file status flag, in one call: for a descriptor just made by
/// `pipe2` without flags, which has no other.
pub fn set_only_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: F_SETFL on a descriptor the caller keeps open.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on a descriptor the caller keeps open.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

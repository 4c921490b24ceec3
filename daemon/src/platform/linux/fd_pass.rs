//! One descriptor over a socketpair (SCM_RIGHTS): how a child hands the daemon what it made in
//! its own namespace (a seccomp listener, the proxy's listening socket). The sending side runs
//! in a child's hook: raw system calls on buffers made before the spawn, no allocation.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A control-message buffer for one descriptor, aligned for `cmsghdr`; made in the daemon.
pub type Cmsg = Box<[u64; 4]>;

pub fn cmsg() -> Cmsg {
    Box::new([0u64; 4])
}

/// A connected `SOCK_SEQPACKET` pair, close-on-exec and non-blocking: (the daemon's end, the
/// child's end).
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair fills both descriptors, which are owned below.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just made and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sends `fd` over `socket` (in a child: no allocation).
pub fn send_fd(socket: RawFd, fd: RawFd, cmsg: &mut [u64; 4]) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: the buffer holds CMSG_SPACE(4) bytes (32), aligned; the header is written before
    // the data, both inside it.
    unsafe {
        let space = libc::CMSG_SPACE(4) as usize;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        loop {
            if libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }
}

/// The descriptor sent over `socket` ([`send_fd`]), if it has come.
pub fn recv_fd(socket: RawFd) -> io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cmsg = [0u64; 4];
    // SAFETY: the message points at live buffers; the descriptor read is checked to be one
    // SCM_RIGHTS entry before it is owned.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
        let n = libc::recvmsg(
            socket,
            &mut msg,
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
        );
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if n == 0 || c.is_null() {
            return Ok(None);
        }
        if (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Ok(None);
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
        Ok(Some(OwnedFd::from_raw_fd(fd)))
    }
}

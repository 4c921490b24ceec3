//! `network = "proxy"` in the child: in its new network namespace (nothing but `lo`), bring
//! `lo` up, listen on 127.0.0.1:[`PORT`] and send that socket to the daemon, which serves it
//! with its proxy. A socket keeps the namespace it was made in, so the daemon accepts the
//! tree's connections without entering the namespace, and the tree has no other way out.
//! Runs in the child's hook: raw system calls only, no allocation.

use std::io;
use std::os::fd::RawFd;

use super::fd_pass;

/// The proxy's port on the tree's own loopback: the namespace is new, so it is always free.
pub const PORT: u16 = 3128;

/// In the child, after the namespace was made: `lo` up, the listener, sent on `socket`.
pub fn open(socket: RawFd, cmsg: &mut [u64; 4]) -> io::Result<()> {
    loopback_up()?;
    // SAFETY: plain system calls on integers and on the local `addr`; the descriptor is
    // closed on every path (the daemon has its own copy once it is sent).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: PORT.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let bound = libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len) == 0
            && libc::listen(fd, 128) == 0;
        let result = match bound {
            true => fd_pass::send_fd(socket, fd, cmsg),
            false => Err(io::Error::last_os_error()),
        };
        libc::close(fd);
        result
    }
}

/// `ip link set lo up`, by `SIOCSIFFLAGS` (the namespace's owner may).
fn loopback_up() -> io::Result<()> {
    // SAFETY: `req` is a zeroed ifreq whose name is set within its bounds; the flags member of
    // the union is the one both ioctls read and write.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut ok = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) == 0;
        if ok {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            ok = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req) == 0;
        }
        let err = io::Error::last_os_error();
        libc::close(fd);
        match ok {
            true => Ok(()),
            false => Err(err),
        }
    }
}

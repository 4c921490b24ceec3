//! The filter a child installs before its own exec: every `execve`/`execveat` of it and of all
//! its descendants becomes a notification the daemon answers (`SECCOMP_RET_USER_NOTIF`), every
//! other system call goes on. The filter is inherited and cannot be removed. The child sends
//! the listener to the daemon over a socket made for it, and closes its own copy.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use libc::{c_uint, sock_filter, sock_fprog};

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

/// The architectures a child may call the kernel as, with their exec system calls.
#[cfg(target_arch = "x86_64")]
const ARCHES: [(u32, [u32; 4]); 2] = [
    (
        AUDIT_ARCH_X86_64,
        // execve, execveat, and the x32 ABI's two.
        [59, 322, X32_BIT | 520, X32_BIT | 545],
    ),
    (AUDIT_ARCH_I386, [11, 358, 11, 358]),
];
#[cfg(target_arch = "aarch64")]
const ARCHES: [(u32, [u32; 4]); 2] = [
    (AUDIT_ARCH_AARCH64, [221, 281, 221, 281]),
    (AUDIT_ARCH_ARM, [11, 387, 11, 387]),
];

/// Which architecture a notification came from: decides how its arguments are read.
pub fn is_compat(arch: u32) -> bool {
    matches!(arch, AUDIT_ARCH_I386 | AUDIT_ARCH_ARM)
}

/// Whether system call `nr` of `arch` is `execveat` (else `execve`).
pub fn is_execveat(arch: u32, nr: i32) -> bool {
    let nr = nr as u32;
    ARCHES
        .iter()
        .any(|(a, calls)| *a == arch && (nr == calls[1] || nr == calls[3]))
}

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// `seccomp_data`: `nr` at 0, `arch` at 4.
const NR: u32 = 0;
const ARCH: u32 = 4;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter {
        code: JEQ_K,
        jt,
        jf,
        k,
    }
}

/// The program: per architecture, load the number and notify on its exec calls; allow the
/// rest. An unknown architecture is allowed too: it cannot exec anything this kernel runs.
pub fn program() -> Vec<sock_filter> {
    let notify = libc::SECCOMP_RET_USER_NOTIF;
    let allow = libc::SECCOMP_RET_ALLOW;
    let mut p = vec![stmt(LD_W_ABS, ARCH)];
    for (arch, calls) in ARCHES {
        // Not this arch: skip its block (load, 4 compares, 2 returns).
        p.push(jeq(arch, 0, 7));
        p.push(stmt(LD_W_ABS, NR));
        for (i, nr) in calls.iter().enumerate() {
            // Matched: jump to the notify return, past the compares left and the allow.
            let to_notify = (3 - i + 1) as u8;
            p.push(jeq(*nr, to_notify, 0));
        }
        p.push(stmt(RET_K, allow));
        p.push(stmt(RET_K, notify));
        // The next arch's compare needs `arch` loaded again.
        p.push(stmt(LD_W_ABS, ARCH));
    }
    p.push(stmt(RET_K, allow));
    p
}

/// What the child's hook needs, built in the daemon: it only makes raw system calls.
pub struct ChildSide {
    pub filter: Vec<sock_filter>,
    /// Where the listener goes: the child's end of the socket.
    pub socket: RawFd,
    /// `no_new_privs` first: required without CAP_SYS_ADMIN.
    pub no_new_privs: bool,
    /// A control-message buffer for one descriptor, aligned for `cmsghdr`.
    pub cmsg: Box<[u64; 4]>,
}

/// In the child: install the filter, send its listener, close it.
pub fn enter(side: &mut ChildSide) -> io::Result<()> {
    if side.no_new_privs {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let prog = sock_fprog {
        len: side.filter.len() as u16,
        filter: side.filter.as_mut_ptr(),
    };
    let mut flags =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    let listener = loop {
        // SAFETY: `prog` points at a filter that lives until the call returns.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER as c_uint,
                flags,
                &prog as *const sock_fprog,
            )
        };
        if fd >= 0 {
            break fd as RawFd;
        }
        let e = io::Error::last_os_error();
        // Before Linux 5.19 there is no killable wait: without it a signal restarts the exec,
        // which is asked about again.
        if e.raw_os_error() == Some(libc::EINVAL)
            && flags & libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0
        {
            flags &= !libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
            continue;
        }
        return Err(e);
    };
    let sent = send_fd(side, listener);
    // SAFETY: the child's own copy; the daemon has its own now.
    unsafe { libc::close(listener) };
    sent
}

fn send_fd(side: &mut ChildSide, fd: RawFd) -> io::Result<()> {
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
        msg.msg_control = side.cmsg.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        loop {
            if libc::sendmsg(side.socket, &msg, libc::MSG_NOSIGNAL) >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }
}

/// The listener sent over the spawn's socketpair ([`send_fd`]), if it has come.
pub(super) fn recv_fd(sock: RawFd) -> io::Result<Option<OwnedFd>> {
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
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_jumps_stay_inside_it_and_end_in_a_return() {
        let p = program();
        for (i, ins) in p.iter().enumerate() {
            if ins.code == JEQ_K {
                assert!(i + 1 + (ins.jt as usize) < p.len());
                assert!(i + 1 + (ins.jf as usize) < p.len());
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(RET_K));
        // The notify return of the first arch is where each of its compares jumps.
        for (i, ins) in p.iter().enumerate().take(7).skip(3) {
            let to = i + 1 + ins.jt as usize;
            assert_eq!((p[to].code, p[to].k), (RET_K, libc::SECCOMP_RET_USER_NOTIF));
        }
        // A wrong arch skips to the next arch's compare.
        let to = 1 + 1 + p[1].jf as usize;
        assert_eq!((p[to].code, p[to].k), (LD_W_ABS, ARCH));
    }
}

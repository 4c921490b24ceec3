//! The filter a child installs before its own exec: every `execve`/`execveat` of it and of all
//! its descendants becomes a notification the daemon answers (`SECCOMP_RET_USER_NOTIF`), and
//! in a tree with a Unix socket rule every `connect` and `bind` too; every other system call
//! goes on. The filter is inherited and cannot be removed. The child sends the listener to the
//! daemon over a socket made for it, and closes its own copy.

use std::io;
use std::os::fd::{OwnedFd, RawFd};

use libc::{c_uint, sock_filter, sock_fprog};

use super::calls::{ARCHES, AUDIT_ARCH_ARM, AUDIT_ARCH_I386, X32_ALL};

/// `clone` flags that make a namespace: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
/// NEWPID, NEWNET.
const CLONE_NEW: u32 = 0x7E02_0000;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
/// `seccomp_data`: `nr` at 0, `arch` at 4, `args[0]`'s low half at 16 (little endian).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    debug_assert!(matches!(code, JEQ_K | JSET_K));
    sock_filter { code, jt, jf, k }
}

/// The program: per architecture, load the number; notify on its exec calls; with `sockets`
/// (the tree has a Unix socket rule) on its `connect` and `bind`; where namespaces are
/// refused, notify on its namespace and mount calls and on a `clone` asking for a new
/// namespace, and answer `clone3` ENOSYS (its flags are in memory a filter cannot read, so the
/// C library falls back to `clone`, whose flags it can); allow the rest. An unknown
/// architecture is allowed too: it cannot exec anything this kernel runs.
pub fn program(refuse_namespaces: bool, sockets: bool) -> Vec<sock_filter> {
    let notify = libc::SECCOMP_RET_USER_NOTIF;
    let allow = libc::SECCOMP_RET_ALLOW;
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let mut p = vec![stmt(LD_W_ABS, ARCH)];
    for c in ARCHES {
        let mut block = vec![stmt(LD_W_ABS, NR)];
        if X32_ALL != 0 && c.arch != AUDIT_ARCH_I386 && c.arch != AUDIT_ARCH_ARM {
            block.push(stmt(AND_K, !X32_ALL));
        }
        let mut notified: Vec<u32> = c.exec.to_vec();
        if refuse_namespaces {
            notified.extend(c.ns);
        }
        if sockets {
            notified.extend(c.sock);
        }
        // Each compare jumps to the notify return at the end of the block when it matches.
        let compares = notified.len() + usize::from(refuse_namespaces) * 2;
        for (i, nr) in notified.iter().enumerate() {
            // The compares left after this one, then the ALLOW, and (with namespaces refused)
            // the clone3 ENOSYS and clone's flag test.
            let tail = match refuse_namespaces {
                true => 5,
                false => 1,
            };
            let to_notify = (compares - i - 1 + tail) as u8;
            block.push(jump(JEQ_K, *nr, to_notify, 0));
        }
        if refuse_namespaces {
            // clone3 → ENOSYS; clone → its flags looked at.
            block.push(jump(JEQ_K, c.clone3, 2, 0));
            block.push(jump(JEQ_K, c.clone, 2, 0));
            block.push(stmt(RET_K, allow));
            block.push(stmt(RET_K, enosys));
            block.push(stmt(LD_W_ABS, ARG0_LOW));
            block.push(jump(JSET_K, CLONE_NEW, 1, 0));
        }
        block.push(stmt(RET_K, allow));
        block.push(stmt(RET_K, notify));
        // Not this arch: skip the block.
        p.push(jump(JEQ_K, c.arch, 0, block.len() as u8));
        p.extend(block);
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
    crate::platform::linux::fd_pass::send_fd(side.socket, fd, &mut side.cmsg)
}

/// The listener sent over the spawn's socketpair ([`send_fd`]), if it has come.
pub(super) fn recv_fd(sock: RawFd) -> io::Result<Option<OwnedFd>> {
    crate::platform::linux::fd_pass::recv_fd(sock)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `p` on one call as the kernel would (the subset of BPF the program uses).
    fn run(p: &[sock_filter], arch: u32, nr: u32, arg0: u32) -> u32 {
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let ins = p[pc];
            pc += 1;
            match ins.code {
                LD_W_ABS => {
                    acc = match ins.k {
                        NR => nr,
                        ARCH => arch,
                        ARG0_LOW => arg0,
                        other => panic!("load of {other}"),
                    }
                }
                AND_K => acc &= ins.k,
                JEQ_K | JSET_K => {
                    let hit = match ins.code {
                        JEQ_K => acc == ins.k,
                        _ => acc & ins.k != 0,
                    };
                    pc += usize::from(if hit { ins.jt } else { ins.jf });
                }
                RET_K => return ins.k,
                other => panic!("instruction {other}"),
            }
            assert!(pc < p.len(), "ran off the end");
        }
    }

    #[test]
    fn execs_are_notified_and_namespaces_and_sockets_only_where_asked() {
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        for (refuse, sockets) in [(false, false), (true, false), (false, true), (true, true)] {
            let p = program(refuse, sockets);
            for c in ARCHES {
                for nr in c.exec {
                    assert_eq!(run(&p, c.arch, nr, 0), notify);
                }
                let ns = if refuse { notify } else { allow };
                for nr in c.ns {
                    assert_eq!(run(&p, c.arch, nr, 0), ns, "{nr}");
                }
                let sock = if sockets { notify } else { allow };
                for nr in c.sock {
                    assert_eq!(run(&p, c.arch, nr, 0), sock, "{nr}");
                }
                let new_user = 0x1000_0000;
                assert_eq!(run(&p, c.arch, c.clone, new_user), ns);
                // A plain fork's clone, and everything else, goes on.
                assert_eq!(run(&p, c.arch, c.clone, 0x0120_0011), allow);
                assert_eq!(run(&p, c.arch, 0, 0), allow);
                let clone3 = if refuse { enosys } else { allow };
                assert_eq!(run(&p, c.arch, c.clone3, 0), clone3);
            }
            assert_eq!(run(&p, 0xdead, 59, 0), allow);
        }
        #[cfg(target_arch = "x86_64")]
        {
            use super::super::calls::*;
            let p = program(true, true);
            // The x32 ABI's numbers of the same calls.
            assert_eq!(run(&p, AUDIT_ARCH_X86_64, X32_BIT | 520, 0), notify);
            assert_eq!(run(&p, AUDIT_ARCH_X86_64, X32_BIT | 272, 0), notify);
            assert_eq!(run(&p, AUDIT_ARCH_X86_64, X32_BIT | 42, 0), notify);
            // i386's `socketcall` is let through (see `Calls::sock`).
            assert_eq!(run(&p, AUDIT_ARCH_I386, 102, 0), allow);
            assert!(is_exec(AUDIT_ARCH_X86_64, (X32_BIT | 545) as i32));
            assert!(is_execveat(AUDIT_ARCH_X86_64, 322));
            assert!(!is_exec(AUDIT_ARCH_X86_64, 272));
            assert_eq!(call_name(AUDIT_ARCH_X86_64, 272), "unshare");
            assert_eq!(call_name(AUDIT_ARCH_X86_64, 56), "clone (a new namespace)");
            let connect = socket_call(AUDIT_ARCH_X86_64, (X32_BIT | 42) as i32);
            assert_eq!(connect, Some(SocketCall::Connect));
            assert_eq!(socket_call(AUDIT_ARCH_I386, 361), Some(SocketCall::Bind));
            assert_eq!(socket_call(AUDIT_ARCH_X86_64, 59), None);
        }
    }
}

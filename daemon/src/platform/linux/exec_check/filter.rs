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

/// The system calls a checked tree makes that the filter looks at, per architecture.
struct Calls {
    arch: u32,
    /// `execve`, `execveat` (and the x32 ABI's two).
    exec: [u32; 4],
    /// What makes a namespace, changes mounts or the root: `unshare`, `setns`, `mount`,
    /// `umount2`, `pivot_root`, `chroot`, and the mount API's `open_tree` … `mount_setattr`.
    ns: [u32; 13],
    clone: u32,
    clone3: u32,
}

/// The mount API's numbers, the same on every architecture (Linux 5.2+).
const MOUNT_API: [u32; 7] = [428, 429, 430, 431, 432, 433, 442];

const fn calls(arch: u32, exec: [u32; 4], old: [u32; 6], clone: u32) -> Calls {
    let mut ns = [0u32; 13];
    let mut i = 0;
    while i < 6 {
        ns[i] = old[i];
        i += 1;
    }
    while i < 13 {
        ns[i] = MOUNT_API[i - 6];
        i += 1;
    }
    Calls {
        arch,
        exec,
        ns,
        clone,
        clone3: 435,
    }
}

/// The architectures a child may call the kernel as, with the calls looked at.
/// On x86_64 the x32 ABI's calls are the native numbers with `X32_BIT` set, which the program
/// clears before it compares (x32's own `execve` and `execveat` are 520 and 545).
#[cfg(target_arch = "x86_64")]
const ARCHES: [Calls; 2] = [
    calls(
        AUDIT_ARCH_X86_64,
        [59, 322, 520, 545],
        [272, 308, 165, 166, 155, 161],
        56,
    ),
    calls(
        AUDIT_ARCH_I386,
        [11, 358, 11, 358],
        [310, 346, 21, 52, 217, 61],
        120,
    ),
];
#[cfg(target_arch = "aarch64")]
const ARCHES: [Calls; 2] = [
    calls(
        AUDIT_ARCH_AARCH64,
        [221, 281, 221, 281],
        [97, 268, 40, 39, 41, 51],
        220,
    ),
    calls(
        AUDIT_ARCH_ARM,
        [11, 387, 11, 387],
        [337, 375, 21, 52, 218, 61],
        120,
    ),
];

/// `clone` flags that make a namespace: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
/// NEWPID, NEWNET.
const CLONE_NEW: u32 = 0x7E02_0000;

/// Which architecture a notification came from: decides how its arguments are read.
pub fn is_compat(arch: u32) -> bool {
    matches!(arch, AUDIT_ARCH_I386 | AUDIT_ARCH_ARM)
}

/// Whether system call `nr` of `arch` is `execveat` (else `execve`).
pub fn is_execveat(arch: u32, nr: i32) -> bool {
    let nr = (nr as u32) & !X32_ALL;
    ARCHES
        .iter()
        .any(|c| c.arch == arch && (nr == c.exec[1] || nr == c.exec[3]))
}

/// Whether system call `nr` of `arch` is an exec (else a namespace or mount call).
pub fn is_exec(arch: u32, nr: i32) -> bool {
    let nr = (nr as u32) & !X32_ALL;
    ARCHES
        .iter()
        .any(|c| c.arch == arch && c.exec.contains(&nr))
}

/// The name of namespace or mount call `nr` of `arch`, for a report.
pub fn call_name(arch: u32, nr: i32) -> &'static str {
    const NAMES: [&str; 13] = [
        "unshare",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
    ];
    let nr = (nr as u32) & !X32_ALL;
    ARCHES
        .iter()
        .filter(|c| c.arch == arch)
        .find_map(|c| {
            if nr == c.clone {
                return Some("clone (a new namespace)");
            }
            c.ns.iter().position(|n| *n == nr).map(|i| NAMES[i])
        })
        .unwrap_or("a namespace call")
}

#[cfg(target_arch = "x86_64")]
const X32_ALL: u32 = X32_BIT;
#[cfg(not(target_arch = "x86_64"))]
const X32_ALL: u32 = 0;

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

/// The program: per architecture, load the number; notify on its exec calls; where namespaces
/// are refused, notify on its namespace and mount calls and on a `clone` asking for a new
/// namespace, and answer `clone3` ENOSYS (its flags are in memory a filter cannot read, so the
/// C library falls back to `clone`, whose flags it can); allow the rest. An unknown
/// architecture is allowed too: it cannot exec anything this kernel runs.
pub fn program(refuse_namespaces: bool) -> Vec<sock_filter> {
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
    fn execs_are_notified_and_namespaces_only_where_refused() {
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        for refuse in [false, true] {
            let p = program(refuse);
            for c in ARCHES {
                for nr in c.exec {
                    assert_eq!(run(&p, c.arch, nr, 0), notify);
                }
                let ns = if refuse { notify } else { allow };
                for nr in c.ns {
                    assert_eq!(run(&p, c.arch, nr, 0), ns, "{nr}");
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
            let p = program(true);
            // The x32 ABI's numbers of the same calls.
            assert_eq!(run(&p, AUDIT_ARCH_X86_64, X32_BIT | 520, 0), notify);
            assert_eq!(run(&p, AUDIT_ARCH_X86_64, X32_BIT | 272, 0), notify);
            assert!(is_exec(AUDIT_ARCH_X86_64, (X32_BIT | 545) as i32));
            assert!(is_execveat(AUDIT_ARCH_X86_64, 322));
            assert!(!is_exec(AUDIT_ARCH_X86_64, 272));
            assert_eq!(call_name(AUDIT_ARCH_X86_64, 272), "unshare");
            assert_eq!(call_name(AUDIT_ARCH_X86_64, 56), "clone (a new namespace)");
        }
    }
}

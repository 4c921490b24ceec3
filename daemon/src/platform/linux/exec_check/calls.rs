//! The system calls the filter looks at, by architecture: their numbers, and what a
//! notification's number is (an exec, a namespace or mount call, a socket's `connect` or
//! `bind`).

#[cfg(target_arch = "x86_64")]
pub(super) const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
pub(super) const AUDIT_ARCH_I386: u32 = 0x4000_0003;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
pub(super) const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
#[cfg(target_arch = "x86_64")]
pub(super) const X32_BIT: u32 = 0x4000_0000;

/// The system calls a checked tree makes that the filter looks at, per architecture.
pub(super) struct Calls {
    pub(super) arch: u32,
    /// `execve`, `execveat` (and the x32 ABI's two).
    pub(super) exec: [u32; 4],
    /// What makes a namespace, changes mounts or the root: `unshare`, `setns`, `mount`,
    /// `umount2`, `pivot_root`, `chroot`, and the mount API's `open_tree` … `mount_setattr`.
    pub(super) ns: [u32; 13],
    /// `connect`, `bind`: the direct calls (i386 and arm have had them since Linux 4.3).
    /// i386's `socketcall` (102), through which an old C library still makes them, is let
    /// through as it is: its arguments are in memory a filter cannot read, and a C library
    /// of Linux 4.3's time or later makes the direct calls.
    pub(super) sock: [u32; 2],
    pub(super) clone: u32,
    pub(super) clone3: u32,
}

/// The mount API's numbers, the same on every architecture (Linux 5.2+).
const MOUNT_API: [u32; 7] = [428, 429, 430, 431, 432, 433, 442];

const fn calls(arch: u32, exec: [u32; 4], old: [u32; 6], sock: [u32; 2], clone: u32) -> Calls {
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
        sock,
        clone,
        clone3: 435,
    }
}

/// The architectures a child may call the kernel as, with the calls looked at.
/// On x86_64 the x32 ABI's calls are the native numbers with `X32_BIT` set, which the program
/// clears before it compares (x32's own `execve` and `execveat` are 520 and 545; its
/// `connect` and `bind` are the native 42 and 49).
#[cfg(target_arch = "x86_64")]
pub(super) const ARCHES: [Calls; 2] = [
    calls(
        AUDIT_ARCH_X86_64,
        [59, 322, 520, 545],
        [272, 308, 165, 166, 155, 161],
        [42, 49],
        56,
    ),
    calls(
        AUDIT_ARCH_I386,
        [11, 358, 11, 358],
        [310, 346, 21, 52, 217, 61],
        [362, 361],
        120,
    ),
];
#[cfg(target_arch = "aarch64")]
pub(super) const ARCHES: [Calls; 2] = [
    calls(
        AUDIT_ARCH_AARCH64,
        [221, 281, 221, 281],
        [97, 268, 40, 39, 41, 51],
        [203, 200],
        220,
    ),
    calls(
        AUDIT_ARCH_ARM,
        [11, 387, 11, 387],
        [337, 375, 21, 52, 218, 61],
        [283, 282],
        120,
    ),
];

#[cfg(target_arch = "x86_64")]
pub(super) const X32_ALL: u32 = X32_BIT;
#[cfg(not(target_arch = "x86_64"))]
pub(super) const X32_ALL: u32 = 0;

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

/// Whether system call `nr` of `arch` is an exec.
pub fn is_exec(arch: u32, nr: i32) -> bool {
    let nr = (nr as u32) & !X32_ALL;
    ARCHES
        .iter()
        .any(|c| c.arch == arch && c.exec.contains(&nr))
}

/// A socket's call the filter hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketCall {
    Connect,
    Bind,
}

/// Whether system call `nr` of `arch` is a socket's `connect` or `bind`.
pub fn socket_call(arch: u32, nr: i32) -> Option<SocketCall> {
    let nr = (nr as u32) & !X32_ALL;
    let c = ARCHES.iter().find(|c| c.arch == arch)?;
    match c.sock.iter().position(|n| *n == nr)? {
        0 => Some(SocketCall::Connect),
        _ => Some(SocketCall::Bind),
    }
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

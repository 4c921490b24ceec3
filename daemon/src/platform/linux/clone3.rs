//! The raw `clone3` system call: the child starts on a stack of its own and calls a function
//! there, which never returns; the parent gets the pid. Written per architecture, as the
//! child's first instructions run before any of Rust's set-up.

use std::ffi::c_void;

/// The kernel's `struct clone_args` (version 2, with `cgroup`).
#[repr(C)]
#[derive(Default)]
pub struct CloneArgs {
    pub flags: u64,
    pub pidfd: u64,
    pub child_tid: u64,
    pub parent_tid: u64,
    pub exit_signal: u64,
    pub stack: u64,
    pub stack_size: u64,
    pub tls: u64,
    pub set_tid: u64,
    pub set_tid_size: u64,
    pub cgroup: u64,
}

/// The raw clone3 system call. In the child (return value 0, on the new stack) it calls
/// `f(arg)`, which never returns; in the parent it returns the pid or `-errno`.
#[cfg(target_arch = "x86_64")]
pub unsafe fn clone3(
    args: *mut CloneArgs,
    f: extern "C" fn(*mut c_void) -> !,
    arg: *mut c_void,
) -> isize {
    let ret: isize;
    // SAFETY: the caller's contract; the child never comes back to this frame.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r13",
            "call r12",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") args,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") f,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        )
    };
    ret
}

#[cfg(target_arch = "aarch64")]
pub unsafe fn clone3(
    args: *mut CloneArgs,
    f: extern "C" fn(*mut c_void) -> !,
    arg: *mut c_void,
) -> isize {
    let ret: isize;
    // SAFETY: the caller's contract; the child never comes back to this frame.
    unsafe {
        std::arch::asm!(
            "svc 0",
            "cbnz x0, 2f",
            "mov x0, x21",
            "blr x20",
            "brk #0",
            "2:",
            inlateout("x0") args => ret,
            in("x1") std::mem::size_of::<CloneArgs>(),
            in("x8") libc::SYS_clone3,
            in("x20") f,
            in("x21") arg,
            options(nostack),
        )
    };
    ret
}

/// Elsewhere: no raw clone here, std's start instead.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub unsafe fn clone3(
    _args: *mut CloneArgs,
    _f: extern "C" fn(*mut c_void) -> !,
    _arg: *mut c_void,
) -> isize {
    -(libc::ENOSYS as isize)
}

//! Whether a process is blocked reading a given pipe or terminal. macOS shows no process's wait
//! channel or current system call to an unprivileged daemon, so this is a narrower answer than
//! on Linux:
//!
//! - **Terminal**: detected when every thread of the (foreground) process is waiting
//!   (`PROC_PIDLISTTHREADS` + `PROC_PIDTHREADINFO` run state `TH_STATE_WAITING`) while the
//!   terminal is in non-canonical mode: what a line editor or full-screen program waiting for a
//!   key (a REPL with readline, zsh's editor, `vim`, a password prompt reading raw) looks
//!   like. Not detected: a read in canonical mode (`read line` in `sh`, `cat`), which cannot be
//!   told from a `sleep`.
//! - **Pipe**: never detected (always false): a process waiting on its stdin pipe cannot be told
//!   from one waiting on anything else.

use std::ffi::{c_int, CString};

use super::proc::pidinfo;

/// `<sys/proc_info.h>` flavour listing a process's thread handles; not in the `libc` crate.
const PROC_PIDLISTTHREADS: c_int = 6;
/// Threads looked at, at most (a process waiting for a key has few).
const MAX_THREADS: usize = 256;

/// What a process waiting for input would be blocked reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A pipe, by inode (both ends share it): the stdin pipe the daemon holds.
    Pipe(u64),
    /// A terminal device, e.g. `/dev/ttys003`.
    Tty(String),
}

/// Whether `pid` is waiting for input from `source`, as far as macOS lets it be seen (see the
/// module's comment); false when unknown.
pub fn blocked_on(pid: i32, source: &Source) -> bool {
    match source {
        Source::Pipe(_) => false,
        Source::Tty(path) => all_threads_waiting(pid) && non_canonical(path),
    }
}

/// Every thread of `pid` is waiting (none running, stopped or in an uninterruptible wait).
fn all_threads_waiting(pid: i32) -> bool {
    let mut ids = vec![0u64; MAX_THREADS];
    let Ok(size) = c_int::try_from(ids.len() * size_of::<u64>()) else {
        return false;
    };
    // SAFETY: the kernel writes at most `size` bytes of thread handles into the buffer.
    let n =
        unsafe { libc::proc_pidinfo(pid, PROC_PIDLISTTHREADS, 0, ids.as_mut_ptr().cast(), size) };
    let Ok(n) = usize::try_from(n) else {
        return false;
    };
    ids.truncate(n / size_of::<u64>());
    !ids.is_empty()
        && ids.iter().all(|id| {
            pidinfo::<libc::proc_threadinfo>(pid, libc::PROC_PIDTHREADINFO, *id)
                .is_some_and(|t| t.pth_run_state == libc::TH_STATE_WAITING)
        })
}

/// The terminal at `path` has canonical (line) input off.
fn non_canonical(path: &str) -> bool {
    let Ok(path) = CString::new(path) else {
        return false;
    };
    // Never our controlling terminal, never a blocking open.
    let flags = libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: open on a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return false;
    }
    let mut t = std::mem::MaybeUninit::<libc::termios>::zeroed();
    // SAFETY: tcgetattr on the fd just opened, into a buffer of the right type; the fd is
    // closed once.
    let (rc, t) = unsafe {
        let rc = libc::tcgetattr(fd, t.as_mut_ptr());
        libc::close(fd);
        (rc, t.assume_init())
    };
    rc == 0 && t.c_lflag & libc::ICANON == 0
}

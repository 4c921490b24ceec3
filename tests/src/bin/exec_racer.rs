//! A test helper that races the exec checks, run under a `cubad` whose blocklist names a
//! program `B` (a copy of `sleep`) and not a program `A` of the same path length (a copy of
//! `true`). Each attempt starts a child that execs `A`'s path while something changes what
//! that path means, so that the daemon's check and the kernel's own read can see different
//! programs:
//!
//! - `threads A B`: a second thread of the child rewrites the path in the child's memory
//!   between `A` and `B` as fast as it can (the caller shares its memory with a thread);
//! - `thread-exec A B`: the same, but the exec is made by a third thread, not the first: once
//!   it has happened the process goes on under the first thread's number, not the caller's;
//! - `links LINK A B`: another process swaps the link `LINK` between `A` and `B` (the caller
//!   is single-threaded and the path never changes; what it names does).
//!
//! An attempt ends one of four ways: `A` ran (exit 0), the exec was refused (exit 126), `B`
//! ran and was killed (SIGKILL), or `B` ran and was not stopped (still running after 5 s: the
//! checks failed). Prints `allowed=N refused=N killed=N ran=N` and exits 1 if any ran; stops
//! early once `want` kills were seen (the race was provoked and caught), after `max` attempts
//! at most.
//!
//! Usage: `cuba-test-exec-racer threads A B WANT MAX` or `... links LINK A B WANT MAX`.

#![allow(clippy::unwrap_used)]

use std::ffi::CString;
use std::process::exit;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// How long `B` (a `sleep 30`) may live before the attempt counts as a failure.
const BOUND: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Counts {
    allowed: u32,
    refused: u32,
    killed: u32,
    ran: u32,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: exec_racer threads|thread-exec A B WANT MAX | links LINK A B WANT MAX");
        exit(2)
    };
    let (mode, rest) = args.split_first().unwrap_or_else(|| usage());
    let from_thread = mode == "thread-exec";
    let (link, a, b, want, max) = match (mode.as_str(), rest) {
        ("threads" | "thread-exec", [a, b, want, max]) => (None, a, b, want, max),
        ("links", [link, a, b, want, max]) => (Some(link), a, b, want, max),
        _ => usage(),
    };
    let want: u32 = want.parse().unwrap_or_else(|_| usage());
    let max: u32 = max.parse().unwrap_or_else(|_| usage());
    if a.len() != b.len() {
        eprintln!("A and B must be paths of the same length");
        exit(2);
    }
    let swapper = link.map(|l| swap_links(l, a, b));
    let mut counts = Counts::default();
    for _ in 0..max {
        let pid = match link {
            None => fork_racing_thread(a, b, from_thread),
            Some(l) => fork_exec(l),
        };
        match end_of(pid) {
            End::Exited(0) => counts.allowed += 1,
            End::Exited(126) => counts.refused += 1,
            End::Killed => counts.killed += 1,
            End::Running => counts.ran += 1,
            End::Exited(other) => {
                eprintln!("an attempt exited {other}");
                exit(2);
            }
        }
        if counts.ran > 0 || counts.killed >= want {
            break;
        }
    }
    if let Some(pid) = swapper {
        // SAFETY: the swapper forked above; reaped below.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        // SAFETY: reaps it.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
    println!(
        "allowed={} refused={} killed={} ran={}",
        counts.allowed, counts.refused, counts.killed, counts.ran
    );
    exit(if counts.ran > 0 { 1 } else { 0 });
}

enum End {
    Exited(i32),
    Killed,
    Running,
}

/// Waits for `pid` up to BOUND; one still running then is killed and counted as `Running`.
fn end_of(pid: i32) -> End {
    let start = Instant::now();
    let mut pause = Duration::from_micros(100);
    loop {
        let mut st = 0;
        // SAFETY: waits for a child of this process without blocking.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
        if r == pid {
            if libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGKILL {
                return End::Killed;
            }
            return End::Exited(if libc::WIFEXITED(st) {
                libc::WEXITSTATUS(st)
            } else {
                -1
            });
        }
        if start.elapsed() > BOUND {
            // SAFETY: our child; reaped at once.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            return End::Running;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

fn argv() -> [*const libc::c_char; 3] {
    // `true 30` exits 0 at once; `sleep 30` is what must not be left running.
    static ARG0: &std::ffi::CStr = c"racer";
    static ARG1: &std::ffi::CStr = c"30";
    [ARG0.as_ptr(), ARG1.as_ptr(), std::ptr::null()]
}

/// The path both threads of the child see, rewritten by one while the other execs it.
static PATH: [AtomicU8; 4096] = [const { AtomicU8::new(0) }; 4096];
static FLIPPING: AtomicBool = AtomicBool::new(false);

fn fork_racing_thread(a: &str, b: &str, from_thread: bool) -> i32 {
    let (a, b) = (a.as_bytes().to_vec(), b.as_bytes().to_vec());
    // Where the two paths differ: the bytes the flipping thread writes.
    let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    for (i, byte) in a.iter().enumerate() {
        PATH[i].store(*byte, Ordering::Relaxed);
    }
    PATH[a.len()].store(0, Ordering::Relaxed);
    // SAFETY: the child starts a thread and execs; it never returns into this loop.
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        return pid;
    }
    std::thread::spawn(move || {
        FLIPPING.store(true, Ordering::Release);
        loop {
            for which in [&b, &a] {
                for &i in &diff {
                    PATH[i].store(which[i], Ordering::Relaxed);
                }
            }
        }
    });
    while !FLIPPING.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let exec = || {
        let argv = argv();
        // SAFETY: PATH is NUL-terminated (its last byte is never written); argv ends in NULL.
        unsafe {
            libc::execv(PATH.as_ptr().cast(), argv.as_ptr());
            libc::_exit(126);
        }
    };
    if !from_thread {
        exec();
    }
    std::thread::spawn(exec);
    // The exec replaces this thread too; until then it waits.
    loop {
        std::thread::park();
    }
}

fn fork_exec(link: &str) -> i32 {
    let path = CString::new(link).unwrap();
    let argv = argv();
    // SAFETY: the child only calls execv and _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: a NUL-terminated path and a NULL-terminated argv.
        unsafe {
            libc::execv(path.as_ptr(), argv.as_ptr());
            libc::_exit(126);
        }
    }
    pid
}

/// A process that swaps `link` between `a` and `b` (a new link renamed over it) until killed.
fn swap_links(link: &str, a: &str, b: &str) -> i32 {
    let tmp = format!("{link}.new");
    let (link, tmp) = (CString::new(link).unwrap(), CString::new(tmp).unwrap());
    let (a, b) = (CString::new(a).unwrap(), CString::new(b).unwrap());
    // SAFETY: the child loops on symlink and rename until it is killed.
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        return pid;
    }
    loop {
        for target in [&a, &b] {
            // SAFETY: NUL-terminated paths.
            unsafe {
                libc::unlink(tmp.as_ptr());
                libc::symlink(target.as_ptr(), tmp.as_ptr());
                libc::rename(tmp.as_ptr(), link.as_ptr());
            }
        }
    }
}

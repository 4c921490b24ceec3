//! The check after an exec was let go on. Between the check and the kernel's own read of the
//! path, another thread sharing the caller's memory can change the path, and another process
//! can change what the path names (a link swapped in a directory it may write). So once the
//! exec has happened, what the process runs must be a file that was checked; a program that
//! was not, and that the rules refuse, is killed and reported like a refusal.
//!
//! It costs one `statx` of `/proc/PID/exe` when the exec is answered (what the caller ran),
//! and one a millisecond later (what it runs now); a later exec of the same process settles
//! the look at once, with the `statx` that exec makes anyway.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::notif;
use super::types::{Exec, Refusal, Verdict};
use super::Judge;

/// When the process is looked at (ms after the answer): soon, then less often, for as long
/// as an exec can take on a loaded machine (about 5 s in all).
const AFTER: [u64; 10] = [10, 10, 20, 40, 80, 160, 320, 640, 1280, 2560];
/// Due times are rounded up to this (ms), so that one wake-up makes the looks of every exec
/// answered in that time: a build's thousands of execs wake the thread a hundred times a
/// second at most, not once per exec.
const BATCH: u64 = 10;

/// What one exec let go on must turn out to be.
pub struct After {
    pub judge: Arc<dyn Judge>,
    /// What the caller ran when it made the call (device, inode), where it could be read.
    pub before: Option<(u64, u64)>,
    /// The files the check found: the program and its interpreters.
    pub checked: Vec<(u64, u64)>,
    /// Whether the caller was a shell, where the rules asked (an allowlist governs them).
    pub shell_caller: Option<bool>,
}

/// What a look at the process found.
enum Seen {
    /// The exec happened with a file that was checked, or something else ran and was dealt
    /// with, or the process has ended.
    Done,
    /// Not known yet (the exec has not happened, or it failed): look again later.
    Again,
}

struct Pending {
    after: After,
    step: usize,
    /// Which scheduling a heap entry is for.
    seq: u64,
}

/// Every pending check, by pid, and when each is due.
#[derive(Default)]
pub struct Afters {
    by_pid: HashMap<i32, Pending>,
    due: BinaryHeap<Reverse<(Instant, u64, i32)>>,
    seq: u64,
    origin: Option<Instant>,
}

impl Afters {
    /// How long `epoll_wait` may sleep: until the next check is due.
    pub fn timeout_ms(&self) -> i32 {
        self.due.peek().map_or(-1, |Reverse((due, _, _))| {
            let left = due.saturating_duration_since(Instant::now());
            // Rounded up: a wake-up before the due time only waits again.
            left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
        })
    }

    pub fn schedule(&mut self, pid: i32, after: After) {
        self.put(
            pid,
            Pending {
                after,
                step: 0,
                seq: 0,
            },
        );
    }

    fn put(&mut self, pid: i32, mut p: Pending) {
        let Some(ms) = AFTER.get(p.step) else {
            // Looked for long enough: an exec still not seen has failed.
            return;
        };
        self.seq += 1;
        p.seq = self.seq;
        let due = self.batch(Instant::now() + Duration::from_millis(*ms));
        self.due.push(Reverse((due, self.seq, pid)));
        self.by_pid.insert(pid, p);
    }

    /// `at`, rounded up to the next multiple of BATCH since the first check.
    fn batch(&mut self, at: Instant) -> Instant {
        let origin = *self.origin.get_or_insert(at);
        let ms = at.saturating_duration_since(origin).as_millis() as u64;
        origin + Duration::from_millis(ms.div_ceil(BATCH) * BATCH)
    }

    /// A new exec of `pid`, which runs `now`: the look for its previous exec is made with it.
    pub fn settle(&mut self, pid: i32, now: Option<(u64, u64)>) {
        if let Some(p) = self.by_pid.remove(&pid) {
            // Again (not yet known) cannot be: the process is making a new exec, so the last
            // one has happened or failed; and whatever it runs now was checked or is dealt
            // with by the look.
            let _ = look(pid, &p.after, now, true);
        }
    }

    /// Makes the looks that are due.
    pub fn run_due(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((due, seq, pid))) = self.due.peek().copied() {
            if due > now {
                return;
            }
            self.due.pop();
            if self.by_pid.get(&pid).is_none_or(|p| p.seq != seq) {
                // Settled since, or scheduled again.
                continue;
            }
            let Some(mut p) = self.by_pid.remove(&pid) else {
                continue;
            };
            if let Seen::Again = look(pid, &p.after, notif::running_id(pid), false) {
                p.step += 1;
                self.put(pid, p);
            }
        }
    }
}

/// One look at what process `pid` runs (`now`) for the check after its exec `a`. `settled`:
/// the process is making another exec, so the last one is over whatever `now` says.
fn look(pid: i32, a: &After, now: Option<(u64, u64)>, settled: bool) -> Seen {
    let Some(now) = now else {
        // Ended: whatever ran has ended with it.
        return Seen::Done;
    };
    if Some(now) == a.before {
        // The caller's own program: the exec has not happened yet, or it failed (it is over
        // when the process makes another). That program was let go on by a check of its own.
        return match settled {
            true => Seen::Done,
            false => Seen::Again,
        };
    }
    if a.checked.contains(&now) {
        return Seen::Done;
    }
    // Neither what was checked nor what the caller ran: the rules decide on it as on an exec.
    let Some(target) = super::inspect::running(pid) else {
        return Seen::Done;
    };
    let ran = Exec {
        pid,
        path: target.path().display().to_string(),
        target: Some(target),
        shell_caller: std::cell::Cell::new(a.shell_caller),
        argv: Some(notif::cmdline(pid)),
        ..Exec::default()
    };
    let refusal = match a.judge.decide(&ran) {
        Verdict::Allow => None,
        Verdict::Refuse(r) => Some(r),
        // It runs already: there is nothing left to hold, and nobody approved it.
        Verdict::Ask(rule) => Some(Refusal {
            program: ran.path.clone(),
            message: format!("it matches {rule} and ran without an approval"),
            rule: "ask",
            errno: libc::EACCES,
        }),
    };
    if let Some(mut refusal) = refusal {
        let argv = notif::cmdline(pid);
        // Reported whether or not it was still there to kill: it ran.
        if !kill_if_running(pid, now) {
            refusal.message = format!(
                "{}; it ran, and had ended before it could be killed",
                refusal.message
            );
        }
        a.judge.refused(refusal.report(pid, argv, true));
    }
    Seen::Done
}

/// SIGKILLs `pid` if it still runs the program `what`: through a pidfd taken first and checked
/// against the program after, so no other process that reused the pid is hit.
fn kill_if_running(pid: i32, what: (u64, u64)) -> bool {
    // SAFETY: pidfd_open takes a pid and flags; the new descriptor is owned at once.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    if notif::running_id(pid) != Some(what) {
        return false;
    }
    // SAFETY: a pidfd owned here; no siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0
}

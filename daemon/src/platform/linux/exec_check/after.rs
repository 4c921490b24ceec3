//! The check after an exec was let go on. Between the check and the kernel's own read of the
//! path, another thread sharing the caller's memory can change the path, and another process
//! can change what the path names (a link swapped in a directory it may write). So once the
//! exec has happened, what the process runs must be a file that was checked; a program that
//! was not, and that the rules refuse, is killed and reported like a refusal.
//!
//! It costs one `statx` of `/proc/PID/exe` when the exec is answered (what the caller ran),
//! and one a millisecond later (what it runs now); a later exec of the same process settles
//! the look at once, with the `statx` that exec makes anyway.
//!
//! A process number is only a name: the process may end before the look, and with a few tens
//! of thousands of numbers a busy machine gives its number to another process within the
//! looks' five seconds. So the look holds the process itself (a pidfd taken while its exec
//! was held): what `/proc/PID` shows counts only while that process still lives, and a kill
//! goes through it, never to whoever has the number now.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;
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
    /// The caller's process, taken while its exec was held ([`hold`]); `None` where no
    /// descriptor could be had, and then the number is trusted as it was read.
    pub process: Option<OwnedFd>,
}

/// The process `tgid` as a descriptor, for the look after an exec of it: taken while the
/// exec is still held (before its answer), so the number names the caller.
pub fn hold(tgid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the new descriptor is owned at once.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) };
    // SAFETY: a new descriptor nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether the process `fd` holds has not ended (a zombie has not: its number is still its).
fn lives(fd: &OwnedFd) -> bool {
    // SAFETY: signal 0 on a pidfd owned here only checks the process; no siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
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
        // Unreadable: it has ended (whatever ran has ended with it), or an exec from another
        // thread than its first is replacing that thread, whose program cannot be read
        // meanwhile: looked at again while it lives.
        return match &a.process {
            Some(p) if !settled && lives(p) => Seen::Again,
            _ => Seen::Done,
        };
    };
    // Read first, then asked whether the process still lives: if it does, what was read was
    // its (its number cannot have passed on while it lived).
    if a.process.as_ref().is_some_and(|p| !lives(p)) {
        // Ended, and the number may be another's now.
        return Seen::Done;
    }
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
        if !kill_if_running(pid, a.process.as_ref(), now) {
            refusal.message = format!(
                "{}; it ran, and had ended before it could be killed",
                refusal.message
            );
        }
        a.judge.refused(refusal.report(pid, argv, true));
    }
    Seen::Done
}

/// SIGKILLs the process `held` (else the one numbered `pid` now) if it still runs the program
/// `what`: through a pidfd, checked against the program after it was taken, so no other
/// process that took the number is hit.
fn kill_if_running(pid: i32, held: Option<&OwnedFd>, what: (u64, u64)) -> bool {
    let taken;
    let fd = match held {
        Some(fd) => fd,
        None => match hold(pid) {
            Some(fd) => {
                taken = fd;
                &taken
            }
            None => return false,
        },
    };
    if notif::running_id(pid) != Some(what) || held.is_some_and(|p| !lives(p)) {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::process::{Child, Command};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use cuba_protocol::ExecBlocked;

    use super::super::types::{AskStart, Made, SocketAsk, Target};
    use super::super::Reply;

    /// Rules that refuse every program, counting the refusals reported.
    #[derive(Default)]
    struct RefuseAll(AtomicUsize);

    impl Judge for RefuseAll {
        fn decide(&self, exec: &Exec) -> Verdict {
            Verdict::Refuse(Refusal {
                program: exec.path.clone(),
                message: "refused".to_string(),
                rule: "test",
                errno: libc::EACCES,
            })
        }
        fn refused(&self, _: ExecBlocked) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn listening(&self, _: Arc<OwnedFd>) {}
        fn wants_argv(&self, _: &Target) -> bool {
            false
        }
        fn ask(&self, _: &Exec, _: String, _: Reply) -> AskStart {
            AskStart::Allow
        }
        fn socket(&self, _: SocketAsk<'_>) -> Result<(), String> {
            Err("refused".to_string())
        }
        fn made(&self, _: Made<'_>) {}
    }

    /// A `sleep` numbered `pid`: the kernel is told the last number given was `pid - 1`
    /// (root only), and asked again when another process took `pid` first.
    fn child_numbered(pid: i32) -> Option<Child> {
        for _ in 0..500 {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).ok()?;
            let mut c = Command::new("sleep").arg("30").spawn().ok()?;
            if c.id() as i32 == pid {
                return Some(c);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        None
    }

    #[test]
    fn the_look_after_an_ended_process_spares_the_one_given_its_number() {
        let mut first = Command::new("true").spawn().unwrap();
        let pid = first.id() as i32;
        let process = hold(pid);
        assert!(
            process.is_some(),
            "pidfd_open: {}",
            io::Error::last_os_error()
        );
        first.wait().unwrap();
        let Some(mut second) = child_numbered(pid) else {
            let why = "no process could be given an ended one's number (ns_last_pid needs root)";
            let ci = std::env::var_os("CI").is_some_and(|v| v == "true" || v == "1");
            assert!(!ci, "skipped under CI, whose machines have this: {why}");
            eprintln!(
                "SKIPPED the_look_after_an_ended_process_spares_the_one_given_its_number: {why}"
            );
            return;
        };
        let judge = Arc::new(RefuseAll::default());
        let after = |process| After {
            judge: judge.clone(),
            before: None,
            checked: Vec::new(),
            shell_caller: None,
            process,
        };
        let held = after(process);
        assert!(matches!(
            look(pid, &held, notif::running_id(pid), false),
            Seen::Done
        ));
        assert_eq!(judge.0.load(Ordering::SeqCst), 0, "nothing is reported");
        assert!(second.try_wait().unwrap().is_none(), "and nothing killed");
        // By its number alone, the same look takes the newcomer for the caller and kills it.
        let blind = after(None);
        let _ = look(pid, &blind, notif::running_id(pid), false);
        assert_eq!(judge.0.load(Ordering::SeqCst), 1);
        // Killed by the look (else `sleep` ends by itself, after 30 s, with 0).
        let status = second.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
    }
}

//! The thread children are cloned from: it has a descriptor table of its own, nearly empty, so
//! a start costs the same with 5 000 processes running as with none.
//!
//! A child copies its parent's descriptor table at the clone and closes every close-on-exec
//! entry at its exec, one by one. The daemon holds several descriptors per running process
//! (pipes, cgroup files), so from the daemon's table that is thousands of copies and closes per
//! start: measured, a start took 0.40 ms idle and 2.1 ms with 1 000 running. This thread
//! unshares its table at birth and closes its copies; for each start it takes copies of just
//! the descriptors the child uses (`pidfd_getfd` on the daemon itself, at the same numbers, so
//! nothing the child reads changes), clones, and closes them again. The caller waits for it:
//! the start stays synchronous, as it is on the calling thread.
//!
//! Where the kernel lacks a part (`close_range`, `pidfd_getfd`: Linux 5.9), the start happens
//! on the calling thread, as before.

use std::os::fd::RawFd;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

/// A start the calling thread waits for: the closure to run (on the caller's stack; the
/// caller blocks until it has run) and the descriptors it needs, with their close-on-exec flag.
struct Job {
    run: *mut (dyn FnMut() + 'static),
    fds: Vec<(RawFd, bool)>,
    done: mpsc::SyncSender<bool>,
}

// SAFETY: `run` is only called while the thread that sent it waits on `done`.
unsafe impl Send for Job {}

struct Spawner {
    jobs: Mutex<mpsc::Sender<Job>>,
}

static SPAWNER: OnceLock<Option<Spawner>> = OnceLock::new();

/// Runs `f` (a clone) on the spawner thread with the descriptors `fds` of the daemon at the
/// same numbers in its table. `None`: the spawner cannot (it did not start, or could not copy
/// a descriptor); `f` has not run and the caller runs it itself.
pub fn run<R>(fds: &[RawFd], f: impl FnOnce() -> R) -> Option<R> {
    let spawner = SPAWNER.get_or_init(start).as_ref()?;
    let mut fds: Vec<(RawFd, bool)> = fds
        .iter()
        .filter(|fd| **fd >= 0)
        .map(|&fd| {
            // SAFETY: F_GETFD on an integer; a closed one reads -1 (then copied as is: the
            // copy fails and the caller starts it here, with the same error as before).
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            (fd, flags >= 0 && flags & libc::FD_CLOEXEC != 0)
        })
        .collect();
    fds.sort_unstable();
    fds.dedup_by_key(|(fd, _)| *fd);
    let mut f = Some(f);
    let mut out = None;
    let mut call = || {
        if let Some(f) = f.take() {
            out = Some(f());
        }
    };
    let run: &mut dyn FnMut() = &mut call;
    // SAFETY: only the lifetime is erased; this thread waits below until the spawner has run
    // it (or dropped the job unrun), so `call` and what it borrows outlive every use.
    let run: *mut (dyn FnMut() + 'static) = unsafe { std::mem::transmute(run) };
    let (done, finished) = mpsc::sync_channel(1);
    let sent = spawner
        .jobs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send(Job { run, fds, done });
    if sent.is_err() {
        return None;
    }
    // `false`, or the spawner gone: the job did not run.
    match finished.recv() {
        Ok(true) => out,
        _ => None,
    }
}

/// Starts the spawner thread; `None` if its table cannot be made its own.
fn start() -> Option<Spawner> {
    let (jobs, queue) = mpsc::channel::<Job>();
    let (ready_tx, ready) = mpsc::sync_channel(1);
    let thread = std::thread::Builder::new()
        .name("cubad-spawn".into())
        .spawn(move || {
            let own = Table::make();
            let ok = own.is_some();
            let _ = ready_tx.send(ok);
            if let Some(mut table) = own {
                for job in queue {
                    let ran = table.install(&job.fds);
                    if ran {
                        // SAFETY: the sender waits on `done` until this returns.
                        unsafe { (*job.run)() };
                        table.uninstall(&job.fds);
                    }
                    let _ = job.done.send(ran);
                }
            }
        });
    if let Err(e) = thread {
        tracing::warn!("cannot start the spawner thread: {e}; children start from the runtime");
        return None;
    }
    match ready.recv() {
        Ok(true) => Some(Spawner {
            jobs: Mutex::new(jobs),
        }),
        _ => {
            tracing::warn!("children start from the runtime: no descriptor table of their own");
            None
        }
    }
}

/// The spawner thread's own descriptor table: its stdio and a pidfd of the daemon.
struct Table {
    pidfd: RawFd,
}

impl Table {
    /// On the spawner thread: every signal blocked (the runtime's threads take them), the
    /// table unshared, the copies of the daemon's descriptors above stdio closed.
    fn make() -> Option<Table> {
        // SAFETY: plain system calls on this thread's own state; the sigset is local.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
            if libc::unshare(libc::CLONE_FILES) != 0 {
                return None;
            }
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
                return None;
            }
            let pidfd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as RawFd;
            if pidfd < 0 {
                return None;
            }
            // Copying needs pidfd_getfd: try it on the daemon's stdin.
            let probe = libc::syscall(libc::SYS_pidfd_getfd, pidfd, 0, 0) as RawFd;
            if probe < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                return None;
            }
            if probe >= 0 {
                libc::close(probe);
            }
            Some(Table { pidfd })
        }
    }

    /// Copies the daemon's descriptors `fds` (ascending) to the same numbers here. Whether all
    /// were; if not, none is left.
    fn install(&mut self, fds: &[(RawFd, bool)]) -> bool {
        let highest = fds.last().map_or(0, |(fd, _)| *fd);
        if fds.iter().any(|(fd, _)| *fd == self.pidfd) {
            // SAFETY: moves our own pidfd above every number to fill.
            let moved = unsafe { libc::fcntl(self.pidfd, libc::F_DUPFD_CLOEXEC, highest + 1) };
            if moved < 0 {
                return false;
            }
            // SAFETY: the old number is ours and replaced.
            unsafe { libc::close(self.pidfd) };
            self.pidfd = moved;
        }
        for (i, &(fd, cloexec)) in fds.iter().enumerate() {
            // SAFETY: pidfd_getfd on the daemon itself (same thread group: always allowed). The
            // copy takes the lowest free number: `fd` itself, or another, moved to `fd` and
            // closed at once (never one filled before: those are taken).
            let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.pidfd, fd, 0) } as RawFd;
            let placed = got >= 0 && (got == fd || dup_to(got, fd));
            if got >= 0 && got != fd {
                // SAFETY: the copy is ours.
                unsafe { libc::close(got) };
            }
            let flagged = placed && {
                let flags = if cloexec { libc::FD_CLOEXEC } else { 0 };
                // SAFETY: F_SETFD on our own copy.
                unsafe { libc::fcntl(fd, libc::F_SETFD, flags) == 0 }
            };
            if !flagged {
                if placed {
                    // SAFETY: our own copy.
                    unsafe { libc::close(fd) };
                }
                self.uninstall(&fds[..i]);
                return false;
            }
        }
        true
    }

    /// Closes the copies `fds` made by [`Table::install`].
    fn uninstall(&self, fds: &[(RawFd, bool)]) {
        for (fd, _) in fds {
            // SAFETY: our own copies, closed once.
            unsafe { libc::close(*fd) };
        }
    }
}

/// `dup3(from, to)`: whether `to` now refers to `from`'s file.
fn dup_to(from: RawFd, to: RawFd) -> bool {
    // SAFETY: dup3 on integers of our own table.
    unsafe { libc::dup3(from, to, libc::O_CLOEXEC) == to }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::fd::AsRawFd;

    fn valid(fd: RawFd) -> Option<bool> {
        // SAFETY: F_GETFD on an integer.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        (flags >= 0).then_some(flags & libc::FD_CLOEXEC != 0)
    }

    /// `/dev/null` open at 700 or above: far from the spawner's own few descriptors.
    fn high() -> std::os::fd::OwnedFd {
        use std::os::fd::FromRawFd;
        let f = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: F_DUPFD_CLOEXEC of our own descriptor; the new one is ours alone.
        unsafe {
            let fd = libc::fcntl(f.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 700);
            assert!(fd >= 700);
            std::os::fd::OwnedFd::from_raw_fd(fd)
        }
    }

    #[test]
    fn the_spawner_has_the_descriptors_it_is_given_at_their_numbers_and_no_others() {
        let (used, kept, other) = (high(), high(), high());
        // One given without close-on-exec keeps that too.
        // SAFETY: F_SETFD on our own descriptor.
        unsafe { libc::fcntl(kept.as_raw_fd(), libc::F_SETFD, 0) };
        let (u, k, o) = (used.as_raw_fd(), kept.as_raw_fd(), other.as_raw_fd());
        let seen = run(&[u, k, -1], || (valid(u), valid(k), valid(o))).unwrap();
        assert_eq!(seen, (Some(true), Some(false), None));
        // Closed again afterwards.
        assert_eq!(run(&[], || (valid(u), valid(k))).unwrap(), (None, None));
        // Here, all are still open.
        assert_eq!(
            (valid(u), valid(k), valid(o)),
            (Some(true), Some(false), Some(true))
        );
    }

    #[test]
    fn a_descriptor_that_is_not_open_leaves_the_start_to_the_caller() {
        // A number at the descriptor limit can be open in no thread: one just closed could be
        // reopened at once by a test running beside this one.
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills the struct given.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        let gone = RawFd::try_from(lim.rlim_cur).unwrap_or(RawFd::MAX);
        let mut ran = false;
        assert!(run(&[gone], || ran = true).is_none());
        assert!(!ran, "not run on the spawner");
    }
}

//! The daemon reaps every child itself: it is a child subreaper, so orphaned grandchildren
//! (double forks, `setsid` escapees) are reparented to it and reaped here too.
//!
//! On each SIGCHLD, `waitpid(-1, WNOHANG)` collects every exited child; a tracked process's status
//! goes to its supervisor through a oneshot channel, anything else is just reaped. Spawning and
//! reaping share one lock: a spawn waits for a child whose `exec` failed,
//! and that child must not be reaped from under it; and a pid is registered before its status can
//! be collected.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::oneshot;

use crate::platform::spawn::Spawn;

pub use crate::platform::Exit;

#[derive(Default)]
pub struct Reaper {
    /// std Mutex: held only for a spawn or a reaping sweep, never across an await.
    waiters: Mutex<HashMap<i32, oneshot::Sender<Exit>>>,
    /// An in-place upgrade is under way: exits stay unreaped (zombies keep their status), so
    /// the program that takes over collects them.
    frozen: AtomicBool,
}

impl Reaper {
    /// Becomes the subreaper and starts reaping. Must run inside the tokio runtime, before the
    /// first spawn.
    pub fn start() -> io::Result<Arc<Reaper>> {
        Reaper::start_adopting(&[]).map(|(r, _)| r)
    }

    /// As [`Reaper::start`], first registering `pids`: children of this process that a
    /// previous program of it started (an in-place upgrade). Their exits, including one that
    /// happened during the hand-over, come on the returned receivers.
    pub fn start_adopting(pids: &[i32]) -> io::Result<(Arc<Reaper>, Vec<oneshot::Receiver<Exit>>)> {
        crate::platform::process::become_subreaper()?;
        let mut sigchld = signal(SignalKind::child())?;
        let reaper = Arc::new(Reaper::default());
        let exits = {
            let mut waiters = reaper.lock();
            pids.iter()
                .map(|&pid| {
                    let (tx, rx) = oneshot::channel();
                    waiters.insert(pid, tx);
                    rx
                })
                .collect()
        };
        let r = reaper.clone();
        tokio::spawn(async move {
            // Reap once at start: children that exited before the handler existed.
            r.reap();
            while sigchld.recv().await.is_some() {
                r.reap();
            }
        });
        Ok((reaper, exits))
    }

    /// Stops (`true`) or resumes reaping; resuming reaps what exited meanwhile.
    pub fn freeze(&self, frozen: bool) {
        self.frozen.store(frozen, Ordering::SeqCst);
        if !frozen {
            self.reap();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<i32, oneshot::Sender<Exit>>> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` while no child can be spawned: for opening a descriptor that is not
    /// close-on-exec from its first moment (a PTY master), so no child inherits it.
    pub fn exclusive<T>(&self, f: impl FnOnce() -> T) -> T {
        let _spawns = self.lock();
        f()
    }

    /// Spawns `cmd` and registers the child, atomically with respect to reaping. Also returns
    /// the child's start time, read while it cannot yet have been reaped (it identifies the
    /// pid for later signals).
    pub fn spawn(
        &self,
        cmd: Spawn,
    ) -> io::Result<(i32, oneshot::Receiver<Exit>, crate::platform::StartTime)> {
        let mut waiters = self.lock();
        let before = crate::platform::proc::clock();
        let pid = cmd.start()?;
        let start_time = crate::platform::proc::start_time_of(pid, before);
        let (tx, rx) = oneshot::channel();
        waiters.insert(pid, tx);
        Ok((pid, rx, start_time))
    }

    fn reap(&self) {
        let mut waiters = self.lock();
        if self.frozen.load(Ordering::SeqCst) {
            return;
        }
        loop {
            let status = match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    tracing::error!("waitpid failed: {e}");
                    break;
                }
                Ok(s) => s,
            };
            let (pid, exit) = match status {
                WaitStatus::Exited(pid, code) => (pid, Exit::Code(code)),
                WaitStatus::Signaled(pid, sig, _) => (pid, Exit::Signal(sig as i32)),
                _ => continue,
            };
            if let Some(tx) = waiters.remove(&pid.as_raw()) {
                // The supervisor may be gone (daemon shutting down): nothing to tell.
                let _ = tx.send(exit);
            }
        }
    }
}

//! The threads socket calls that can wait are made on, apart from the checker thread: kept a
//! while after their call, so a command that connects in a loop does not pay for a new thread
//! each time, and as many as there are calls waiting at once, up to a bound.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// One call and its answer to the caller.
pub type Job = Box<dyn FnOnce() + Send>;

/// How long a thread with nothing to do waits for a call before it ends.
const IDLE_FOR: Duration = Duration::from_secs(10);

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads waiting for a job.
    idle: usize,
    threads: usize,
}

/// std Mutex and Condvar: the threads are plain threads, and a lock is held only to take or
/// leave a job.
#[derive(Default)]
pub struct Workers {
    state: Mutex<State>,
    ready: Condvar,
}

impl Workers {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `job` on a thread that waits for one, else on a new one; `false` (not run) when
    /// `max` threads are busy or no thread can be made.
    pub fn run(self: &Arc<Self>, job: Job, max: usize) -> bool {
        let mut s = self.lock();
        if s.idle > s.jobs.len() {
            s.jobs.push_back(job);
            drop(s);
            self.ready.notify_one();
            return true;
        }
        if s.threads >= max {
            return false;
        }
        s.threads += 1;
        drop(s);
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("cubad-socket".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                block_signals();
                job();
                me.serve();
            });
        if spawned.is_err() {
            self.lock().threads -= 1;
        }
        spawned.is_ok()
    }

    /// A thread's life after its first job: the next job, until none comes for a while.
    fn serve(&self) {
        let mut s = self.lock();
        loop {
            if let Some(job) = s.jobs.pop_front() {
                drop(s);
                job();
                s = self.lock();
                continue;
            }
            s.idle += 1;
            let (again, waited) = self
                .ready
                .wait_timeout(s, IDLE_FOR)
                .unwrap_or_else(|e| e.into_inner());
            s = again;
            s.idle -= 1;
            if waited.timed_out() && s.jobs.is_empty() {
                s.threads -= 1;
                return;
            }
        }
    }
}

/// No signal interrupts a call this thread makes for a caller (the daemon's handlers run
/// elsewhere): an interrupted connect would go on without the caller hearing how it ended.
pub fn block_signals() {
    // SAFETY: a full set, filled before use; only this thread's mask changes.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_thread_is_kept_for_the_next_call_and_none_past_the_bound() {
        let w = Arc::new(Workers::default());
        let (tx, rx) = mpsc::channel();
        let t = tx.clone();
        assert!(w.run(
            Box::new(move || t.send(std::thread::current().id()).unwrap()),
            1
        ));
        let first = rx.recv().unwrap();
        // Once it waits for work, the next call is its own.
        while w.lock().idle == 0 {
            std::thread::yield_now();
        }
        let t = tx.clone();
        assert!(w.run(
            Box::new(move || t.send(std::thread::current().id()).unwrap()),
            1
        ));
        assert_eq!(rx.recv().unwrap(), first);
        // Busy with a call that waits, it takes no other past the bound of one.
        let (go, wait) = mpsc::channel::<()>();
        assert!(w.run(Box::new(move || wait.recv().unwrap()), 1));
        while w.lock().idle != 0 {
            std::thread::yield_now();
        }
        assert!(!w.run(Box::new(|| ()), 1));
        go.send(()).unwrap();
    }
}

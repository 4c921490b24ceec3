//! Who gets a connection: at most `max_connections` at once, and a clear refusal instead of a
//! hang when the daemon has no file descriptor left to accept with.

use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::net::UnixListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::conn;
use crate::platform::descriptors;

/// The soft `RLIMIT_NOFILE`: descriptors this process may have open at once (POSIX).
pub fn fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    Some(lim.rlim_cur)
}

/// The process (EMFILE) or the whole system (ENFILE) has no descriptor left.
pub fn out_of_fds(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Places for connections, one taken from accept to close.
pub struct Slots {
    free: Arc<Semaphore>,
    max: usize,
}

impl Slots {
    pub fn new(max: usize) -> Slots {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Slots {
            free: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// A place for a connection just accepted; `None` when all are taken.
    pub fn take(&self) -> Option<OwnedSemaphorePermit> {
        self.free.clone().try_acquire_owned().ok()
    }

    /// What a connection over the limit is told.
    pub fn refusal(&self) -> String {
        format!(
            "cubad serves at most {} connections at once (CUBA_EXEC_MAX_CONNECTIONS); close \
             some (idle ones close by themselves after CUBA_EXEC_IDLE_TIMEOUT) or raise the \
             setting",
            self.max
        )
    }
}

/// Counts events and says when to log them: the first at once, then at most once per
/// `every`, with the number seen since the last line.
pub struct Burst {
    every: Duration,
    last: Option<Instant>,
    unlogged: u64,
}

impl Burst {
    pub fn new(every: Duration) -> Burst {
        Burst {
            every,
            last: None,
            unlogged: 0,
        }
    }

    /// One more event at `now`: `Some(n)` when a line is due, for `n` events.
    pub fn note(&mut self, now: Instant) -> Option<u64> {
        self.unlogged += 1;
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < self.every)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

/// One descriptor held back (`/dev/null`) so that, when every other one is taken, a connection
/// can still be accepted, told why it is refused and closed: otherwise it waits in the backlog
/// until the client's handshake times out, and accept fails in a loop.
pub struct Reserve {
    file: Option<File>,
    failures: Burst,
}

impl Default for Reserve {
    fn default() -> Reserve {
        Reserve {
            file: File::open("/dev/null").ok(),
            failures: Burst::new(Duration::from_secs(1)),
        }
    }
}

impl Reserve {
    /// Takes the descriptor back if it was given up and one is free again.
    pub fn refill(&mut self) {
        if self.file.is_none() {
            self.file = File::open("/dev/null").ok();
        }
    }

    /// Accept failed for want of descriptors: spends the reserve on the waiting connection to
    /// refuse it, then takes the reserve back. Without a reserve (not refilled yet), waits a
    /// little instead, so accept does not fail in a busy loop.
    pub async fn refuse_one(&mut self, listener: &UnixListener, pid: u32) {
        self.refill();
        let Some(file) = self.file.take() else {
            self.log(None);
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        };
        drop(file);
        // Counted with the freed descriptor (which stands in for the reserve itself).
        let open = descriptors::open_count().map(|n| n + 1);
        // Only a connection already waiting: the kernel fails accept for want of a descriptor
        // even when none is, and one that comes later may find descriptors free again.
        match listener.accept().now_or_never() {
            Some(Ok((stream, _))) => {
                let reason = exhausted(open, fd_limit());
                self.log(Some(&reason));
                // Awaited here, not in a task: the reserve is this connection's descriptor
                // until it closes. A client reads the reason and closes at once; the wait is
                // bounded.
                conn::refuse(
                    stream,
                    cuba_protocol::handshake::encode_refusal(pid, &reason),
                )
                .await;
            }
            Some(Err(_)) => {
                // Another task took the freed descriptor first.
                self.log(None);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            None => {}
        }
        self.refill();
    }

    fn log(&mut self, reason: Option<&str>) {
        if let Some(n) = self.failures.note(Instant::now()) {
            let what = reason.unwrap_or("out of file descriptors, none left to refuse with");
            tracing::warn!("accept failed: {what} ({n} times since the last report)");
        }
    }
}

/// The refusal when descriptors have run out: `open` of `limit`, and what to do.
pub fn exhausted(open: Option<usize>, limit: Option<u64>) -> String {
    let counts = match (open, limit) {
        (Some(n), Some(m)) => format!(" ({n} open, limit {m})"),
        (None, Some(m)) => format!(" (limit {m})"),
        (Some(n), None) => format!(" ({n} open)"),
        (None, None) => String::new(),
    };
    format!(
        "cubad is out of file descriptors{counts}; close connections or stop processes it \
         runs, or start it with a higher limit (`ulimit -n`)"
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_burst_is_logged_once_per_period_with_its_count() {
        let mut b = Burst::new(Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(b.note(t0), Some(1), "the first event is reported at once");
        for ms in [10, 100, 900] {
            assert_eq!(b.note(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(b.note(t0 + Duration::from_millis(1000)), Some(4));
        assert_eq!(b.note(t0 + Duration::from_millis(1500)), None);
        assert_eq!(b.note(t0 + Duration::from_secs(5)), Some(2));
    }

    #[test]
    fn slots_run_out_and_come_back() {
        let slots = Slots::new(2);
        let a = slots.take().unwrap();
        let _b = slots.take().unwrap();
        assert!(slots.take().is_none());
        drop(a);
        assert!(slots.take().is_some());
        let why = slots.refusal();
        assert!(why.contains("at most 2 connections") && why.contains("CUBA_EXEC_MAX_CONNECTIONS"));
    }

    #[test]
    fn the_descriptor_refusal_says_how_many_and_what_to_do() {
        let why = exhausted(Some(64), Some(64));
        assert!(
            why.contains("out of file descriptors (64 open, limit 64)"),
            "{why}"
        );
        assert!(why.contains("ulimit -n"), "{why}");
        assert!(exhausted(None, None).starts_with("cubad is out of file descriptors;"));
    }
}

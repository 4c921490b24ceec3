//! Who gets a connection: at most `max_connections` at once (the refusal when the daemon has no
//! descriptor left to accept with is the Unix transport's, `platform::transport`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
}

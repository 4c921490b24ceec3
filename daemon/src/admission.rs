//! Who gets a connection: at most `max_connections` at once.

use std::sync::Arc;

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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

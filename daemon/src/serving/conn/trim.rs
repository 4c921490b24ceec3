//! Memory back to the kernel after large clients leave: their environments (up to 1 MiB each)
//! are freed into the allocator, which would keep them. Trimming walks every arena, so it runs
//! at most once a second, a second after the first large client of a burst closed: one trim
//! covers the whole burst.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a burst of closing connections is gathered before one trim.
const GATHER: Duration = Duration::from_secs(1);

/// A trim is due (one process, one allocator: one flag).
static DUE: AtomicBool = AtomicBool::new(false);

/// A connection that held a large hello has closed (its memory is free now).
pub fn after_large_client() {
    if DUE.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::spawn(async {
        tokio::time::sleep(GATHER).await;
        // Cleared first: a connection closing during the trim schedules the next one.
        DUE.store(false, Ordering::Release);
        let _ = tokio::task::spawn_blocking(crate::platform::memory::release_free).await;
    });
}

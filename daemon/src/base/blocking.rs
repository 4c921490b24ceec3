//! Work that waits for the disk or the kernel, kept off the runtime's one thread: every
//! connection and every process's supervision runs on that thread, so a synced file or a
//! batch of removals there would hold all of them up.

/// Runs `work` on the runtime's blocking pool, or here when there is no runtime (start-up,
/// tests without one).
pub fn off_runtime(work: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn_blocking(work);
        }
        Err(_) => work(),
    }
}

//! The daemon's own file descriptors: how many are open.

/// Descriptors open in this process now (`/proc/self/fd`, less the one reading it). Needs one
/// free descriptor itself; `None` without it.
pub fn open_count() -> Option<usize> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(dir.count().saturating_sub(1))
}

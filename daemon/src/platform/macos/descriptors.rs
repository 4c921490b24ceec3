//! The daemon's own file descriptors: how many are open.

/// Descriptors open in this process now (`/dev/fd`, less the one reading it). Needs one free
/// descriptor itself; `None` without it.
pub fn open_count() -> Option<usize> {
    let dir = std::fs::read_dir("/dev/fd").ok()?;
    Some(dir.count().saturating_sub(1))
}

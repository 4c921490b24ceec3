//! The daemon's own file descriptors: how many are open, how many it may have, and whether an
//! error says there are none left.

use std::io;

/// Descriptors open in this process now (`/proc/self/fd`, less the one reading it). Needs one
/// free descriptor itself; `None` without it.
pub fn open_count() -> Option<usize> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(dir.count().saturating_sub(1))
}

/// The soft `RLIMIT_NOFILE`: descriptors this process may have open at once.
pub fn limit() -> Option<u64> {
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
pub fn exhausted(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

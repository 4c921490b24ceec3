//! Portable stand-ins, for an OS without an implementation of its own, of the concerns that
//! are correct without one: descriptor facts through POSIX calls, and no memory trimming.

pub mod descriptors {
    use std::io;

    /// Not known without `/proc`.
    pub fn open_count() -> Option<usize> {
        None
    }

    /// The soft `RLIMIT_NOFILE`.
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

    /// EMFILE or ENFILE.
    pub fn exhausted(e: &io::Error) -> bool {
        matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    }
}

pub mod memory {
    /// Nothing to do: the allocator keeps what it keeps.
    pub fn release_free() {}
}

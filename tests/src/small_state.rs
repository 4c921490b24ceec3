//! A test daemon's small state directory, for the full-disk tests: a tmpfs of its own where the
//! machine allows a mount, else a limit on the size of every file the daemon writes.

use std::fs;
use std::path::Path;

/// How a test daemon's small state directory is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallState {
    /// A tmpfs of that size: it fills up as a disk does, and frees when a file is deleted.
    Tmpfs,
    /// No mount allowed: every file the daemon writes is limited to that size (EFBIG).
    FileSizeLimit,
}

impl SmallState {
    /// Makes `state` (private, as the daemon requires) and a tmpfs of `bytes` on it where it can.
    pub fn make(state: &Path, bytes: u64) -> SmallState {
        std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), 0o700)
            .create(state)
            .expect("cannot create the state dir");
        if mount_tmpfs(state, bytes) {
            return SmallState::Tmpfs;
        }
        // Asked for (`CUBA_TESTS_NO_MOUNT`), or standing in for a mount this machine does not
        // allow: a skip of the tmpfs variant.
        if std::env::var_os("CUBA_TESTS_NO_MOUNT").is_none() {
            crate::machine::skip(
                "full disk on a tmpfs",
                "no tmpfs mount here (needs root on Linux): the file-size limit stands in",
            );
        }
        SmallState::FileSizeLimit
    }
}

/// Mounts a tmpfs of `bytes` at `dir`; false when this user may not (or
/// `CUBA_TESTS_NO_MOUNT` is set, to run the file-size-limit variant as root).
#[cfg(target_os = "linux")]
fn mount_tmpfs(dir: &Path, bytes: u64) -> bool {
    use std::os::unix::ffi::OsStrExt;
    if std::env::var_os("CUBA_TESTS_NO_MOUNT").is_some() {
        return false;
    }
    let (Ok(target), Ok(opts)) = (
        std::ffi::CString::new(dir.as_os_str().as_bytes()),
        std::ffi::CString::new(format!("size={bytes},mode=0700")),
    ) else {
        return false;
    };
    // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            opts.as_ptr().cast(),
        )
    };
    rc == 0
}

/// A tmpfs of our own is a Linux mount: elsewhere the file-size limit stands in.
#[cfg(not(target_os = "linux"))]
fn mount_tmpfs(_dir: &Path, _bytes: u64) -> bool {
    false
}

/// Lazily, as processes of the test may still hold files there for a moment.
#[cfg(target_os = "linux")]
pub fn unmount(dir: &Path) {
    if let Ok(target) =
        std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))
    {
        // SAFETY: umount2(2) on a NUL-terminated path that outlives the call.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

#[cfg(not(target_os = "linux"))]
pub fn unmount(_dir: &Path) {}

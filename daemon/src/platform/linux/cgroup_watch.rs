//! An inotify watch on a cgroup's `cgroup.events`: the kernel signals its changes (`populated`
//! going to 0) as `IN_MODIFY`, so waiting for a cgroup to empty is an event, not a poll.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// An inotify watch for `IN_MODIFY` on one file (the kernel signals `cgroup.events` changes
/// that way).
pub(super) struct Watch {
    fd: OwnedFd,
}

impl Watch {
    pub(super) fn new(path: &Path) -> io::Result<Watch> {
        // SAFETY: inotify_init1 has no memory arguments; the result is checked.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid descriptor and a NUL-terminated path.
        if unsafe { libc::inotify_add_watch(raw, c.as_ptr(), libc::IN_MODIFY) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Watch { fd })
    }

    /// Waits until `dir` is empty, each change an event of the runtime.
    pub(super) async fn until_empty(self, populated: impl Fn() -> bool) -> io::Result<()> {
        // SAFETY: an OwnedFd: valid and the same descriptor for the AsyncFd's whole life.
        let fd = unsafe { AsyncFd::register_with_interest(self.fd, Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        // Checked after the watch exists, so no change can fall in between.
        let waited = async {
            while populated() {
                let mut guard = fd.readable().await?;
                if !drain(fd.get_ref().as_raw_fd()) {
                    guard.clear_ready();
                }
            }
            Ok(())
        }
        .await;
        // Closing an inotify instance waits for an SRCU grace period (milliseconds): not on
        // a runtime worker, where it would stall every connection.
        let fd = fd.into_inner();
        tokio::task::spawn_blocking(move || drop(fd));
        waited
    }

    /// Waits up to `ms` for a change, blocking the thread (start-up only).
    pub(super) fn block(&self, ms: i32) {
        let raw = self.fd.as_raw_fd();
        let mut pfd = libc::pollfd {
            fd: raw,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, ms) };
        drain(raw);
    }
}

/// Reads every pending event; whether there was one.
fn drain(fd: RawFd) -> bool {
    let mut buf = [0u8; 1024];
    let mut any = false;
    loop {
        // SAFETY: read into a local buffer of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return any;
        }
        any = true;
    }
}

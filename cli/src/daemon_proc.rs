//! The daemon as an OS process: who holds the socket's lock, whether it still runs, and
//! waiting for it to exit (a pidfd, so no polling) or stopping it with a signal.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The pid of the daemon holding `<socket>.lock`, or `None` when no daemon holds it (the file
/// may still name a pid that is long gone).
pub fn lock_holder(socket: &Path) -> Result<Option<i32>> {
    let path = cuba_protocol::paths::lock_path(socket);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
    };
    // SAFETY: flock on an fd we own; a shared lock conflicts only with the daemon's exclusive
    // one and is released when `file` closes.
    let free = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
    if free {
        return Ok(None);
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let pid = text
        .trim()
        .parse()
        .with_context(|| format!("{} holds no pid ({text:?})", path.display()))?;
    Ok(Some(pid))
}

/// Waits until process `pid` has exited, at most `limit`. True when it has.
pub async fn wait_exit(pid: i32, limit: Duration) -> Result<bool> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ESRCH) => Ok(true),
            // Kernels before 5.3: check now and then instead.
            _ => Ok(poll_exit(pid, limit).await),
        };
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the AsyncFd owns the OwnedFd, so the fd stays open and unchanged for its life.
    let afd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
        .map_err(io::Error::from)?;
    // A pidfd becomes readable when the process exits.
    Ok(tokio::time::timeout(limit, afd.readable()).await.is_ok())
}

async fn poll_exit(pid: i32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while alive(pid) {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|l| crate::procfs::parse_stat(&l))
        .is_some_and(|s| !s.zombie)
}

/// Sends SIGTERM to the daemon: it stops its processes gracefully and exits.
pub fn terminate(pid: i32) -> Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .with_context(|| format!("cannot signal cubad (pid {pid})"))
}

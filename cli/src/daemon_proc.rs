//! The daemon as an OS process: who holds the socket's lock, and stopping it with a signal.
//! (Waiting for it to exit is `platform::exit`.)

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{Context, Result};

/// The pid of the daemon holding `<socket>.lock`, or `None` when no daemon holds it (the file
/// may still name a pid that is long gone).
pub fn lock_holder(socket: &Path) -> Result<Option<i32>> {
    let path = cuba_protocol::paths::lock_path(socket);
    let mut file = match cuba_protocol::safe_fs::open_read(&path) {
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

/// Sends SIGTERM to the daemon: it stops its processes gracefully and exits.
pub fn terminate(pid: i32) -> Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .with_context(|| format!("cannot signal cubad (pid {pid})"))
}

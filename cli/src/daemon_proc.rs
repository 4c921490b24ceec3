//! The daemon as an OS process: who holds the socket's lock, and stopping it with a signal.
//! (Waiting for it to exit is `platform::exit`.) On Windows the daemon is whoever serves its
//! pipe, and stopping it is `TerminateProcess`: Windows has no SIGTERM to ask it.

use std::io;
use std::path::Path;

use anyhow::{Context, Result};

/// How a person ends a process by force, for hints.
pub const FORCE_KILL: &str = if cfg!(windows) {
    "taskkill /F /PID"
} else {
    "kill -9"
};

/// The pid of the daemon holding `<socket>.lock`, or `None` when no daemon holds it (the file
/// may still name a pid that is long gone).
#[cfg(unix)]
pub fn lock_holder(socket: &Path) -> Result<Option<i32>> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
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

/// The pid of the daemon serving the pipe `socket`, or `None` when nothing serves it. (A pipe
/// name has no file beside it to lock: the server of the pipe is the daemon.) The connection
/// opened to ask is closed at once, before any handshake.
#[cfg(windows)]
pub fn lock_holder(socket: &Path) -> Result<Option<i32>> {
    use std::time::{Duration, Instant};
    const ERROR_PIPE_BUSY: i32 = 231;
    // Every instance busy: the server makes the next one as soon as it accepts.
    let deadline = Instant::now() + Duration::from_secs(2);
    let pipe = loop {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(socket)
        {
            Ok(pipe) => break pipe,
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", socket.display())),
        }
    };
    let not_ours = || format!("cannot tell who serves {}", socket.display());
    cuba_protocol::win::check_server(&pipe).with_context(not_ours)?;
    let pid = cuba_protocol::win::pipe_server_pid(&pipe).with_context(not_ours)?;
    Ok(i32::try_from(pid).ok())
}

/// Sends SIGTERM to the daemon: it stops its processes gracefully and exits.
#[cfg(unix)]
pub fn terminate(pid: i32) -> Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .with_context(|| format!("cannot signal cubad (pid {pid})"))
}

/// Ends the daemon at once (`TerminateProcess`, exit code 1): Windows has no signal that asks
/// a program without a console window to stop, so it cannot stop its processes first.
#[cfg(windows)]
pub fn terminate(pid: i32) -> Result<()> {
    use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
    use windows_sys::Win32::System::Threading::{OpenProcess, TerminateProcess, PROCESS_TERMINATE};
    let fail = || format!("cannot end cubad (pid {pid})");
    let id = u32::try_from(pid)
        .map_err(io::Error::other)
        .with_context(fail)?;
    // SAFETY: plain values; a null result is an error, reported below.
    let handle = unsafe { OpenProcess(PROCESS_TERMINATE, 0, id) };
    if handle.is_null() {
        return Err(io::Error::last_os_error()).with_context(fail);
    }
    // SAFETY: a handle just opened, owned here and closed on drop.
    let process = unsafe { OwnedHandle::from_raw_handle(handle) };
    // SAFETY: the handle is open with PROCESS_TERMINATE for the call.
    if unsafe { TerminateProcess(process.as_raw_handle(), 1) } == 0 {
        return Err(io::Error::last_os_error()).with_context(fail);
    }
    Ok(())
}

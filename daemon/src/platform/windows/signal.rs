//! Signals to one exact process, on Windows, which has none: each protocol signal maps to what
//! `win_signal` says it is there (a Ctrl-Break on the process's console, or the process
//! terminated). The signal numbers are the protocol's (`cuba_protocol::Signal::number`), not a
//! C library's. A pid is checked against its start time just before, so a pid Windows has
//! handed to another process since is not hit (except if it was reused between the check and
//! the call).

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};

use cuba_protocol::Signal;
use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_INVALID_PARAMETER, STILL_ACTIVE};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, TerminateProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    PROCESS_TERMINATE,
};

use super::{console, proc};
use crate::platform::win_signal::{self, Action};
use crate::platform::StartTime;

/// Sends protocol signal `signal` to `pid` if it is still the process that started at
/// `start_time` (any process with that pid when the start is unknown). `Ok(false)`: it is gone
/// (or is another process now), or the signal has no meaning on Windows.
pub fn signal_exact(pid: i32, start_time: StartTime, signal: i32) -> io::Result<bool> {
    if start_time != StartTime::UNKNOWN && proc::start_time_of(pid) != start_time {
        return Ok(false);
    }
    let Ok(id) = u32::try_from(pid) else {
        return Ok(false);
    };
    match win_signal::action(Signal::from_number(signal)) {
        Ok(Action::Terminate) => terminate(id),
        Ok(Action::CtrlBreak) => match console::ctrl_break(id) {
            Ok(()) => Ok(true),
            Err(e) => {
                tracing::debug!(pid, error = %e, "Ctrl-Break not delivered");
                Ok(false)
            }
        },
        Err(why) => {
            tracing::debug!(pid, signal, "{why}");
            Ok(false)
        }
    }
}

/// `TerminateProcess(pid, 1)`. `Ok(false)`: there is no such process, or it has ended already.
fn terminate(pid: u32) -> io::Result<bool> {
    // SAFETY: plain values; a null handle is the error.
    let raw = unsafe {
        OpenProcess(
            PROCESS_TERMINATE | PROCESS_QUERY_LIMITED_INFORMATION,
            0,
            pid,
        )
    };
    if raw.is_null() {
        let err = io::Error::last_os_error();
        // No process has that pid (any more).
        if err.raw_os_error() == Some(ERROR_INVALID_PARAMETER as i32) {
            return Ok(false);
        }
        return Err(err);
    }
    // SAFETY: a handle just opened, owned (and closed) from here.
    let process = unsafe { OwnedHandle::from_raw_handle(raw) };
    // One that has ended (its object kept by a handle) is not signalled: asked first, since
    // Wine lets an ended process be terminated again.
    let mut code = 0u32;
    // SAFETY: a process handle with the query right, and a u32 to write.
    if unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } != 0
        && code != STILL_ACTIVE as u32
    {
        return Ok(false);
    }
    // SAFETY: a process handle with the terminate right.
    if unsafe { TerminateProcess(process.as_raw_handle(), 1) } != 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    // A process that has ended (its object kept by a handle) refuses with "access denied".
    if err.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) {
        let mut code = 0u32;
        // SAFETY: a process handle with the query right, and a u32 to write.
        let read = unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } != 0;
        if read && code != STILL_ACTIVE as u32 {
            return Ok(false);
        }
    }
    Err(err)
}

/// Never: there are no POSIX process groups to ask about on Windows (a command's tree is its
/// job, `platform::cgroup`).
pub fn group_alive(_pid: i32) -> bool {
    false
}

/// Terminates a child that must not run on (its set-up failed); errors are ignored: it is our
/// own child, and gone already if the call fails.
pub fn kill_child(pid: i32) {
    if let Ok(id) = u32::try_from(pid) {
        let _ = terminate(id);
    }
}

/// Another process's exit as an event: a client that started commands (the orphan check). A
/// thread waits on the process's handle and says when it has ended.
pub struct ExitWatch(tokio::sync::watch::Receiver<bool>);

impl ExitWatch {
    /// Watches `pid` (one already gone has exited at once); an error if it cannot be watched.
    pub fn of(pid: i32) -> io::Result<ExitWatch> {
        use windows_sys::Win32::Foundation::{ERROR_INVALID_PARAMETER, WAIT_OBJECT_0};
        use windows_sys::Win32::System::Threading::{
            OpenProcess, WaitForSingleObject, INFINITE, PROCESS_SYNCHRONIZE,
        };
        let (tx, rx) = tokio::sync::watch::channel(false);
        let Ok(id) = u32::try_from(pid) else {
            let _ = tx.send(true);
            return Ok(ExitWatch(rx));
        };
        // SAFETY: plain call; a handle or null.
        let raw = unsafe { OpenProcess(PROCESS_SYNCHRONIZE, 0, id) };
        if raw.is_null() {
            let err = io::Error::last_os_error();
            // No such process: it has exited.
            if err.raw_os_error() == Some(ERROR_INVALID_PARAMETER as i32) {
                let _ = tx.send(true);
                return Ok(ExitWatch(rx));
            }
            return Err(err);
        }
        // SAFETY: a handle just opened, owned from here.
        let handle = unsafe {
            <std::os::windows::io::OwnedHandle as std::os::windows::io::FromRawHandle>::from_raw_handle(raw)
        };
        super::threaded::thread("cubad-client", move || {
            use std::os::windows::io::AsRawHandle;
            // SAFETY: the handle is open for as long as `handle`, owned by this thread.
            if unsafe { WaitForSingleObject(handle.as_raw_handle(), INFINITE) } == WAIT_OBJECT_0 {
                let _ = tx.send(true);
            }
        })?;
        Ok(ExitWatch(rx))
    }

    /// Resolves once the process has exited.
    pub async fn exited(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|gone| *gone).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_ends_the_exact_process_only() {
        let mut child = std::process::Command::new("cmd.exe")
            .args(["/d", "/c", "ping -n 30 127.0.0.1 >NUL"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let pid = child.id() as i32;
        let start = proc::start_time_of(pid);
        let other = StartTime(start.0.wrapping_add(1));
        let kill = Signal::Kill.number();
        assert!(!signal_exact(pid, other, kill).expect("signal"));
        assert!(!signal_exact(pid, start, Signal::Usr1.number()).expect("signal"));
        assert!(signal_exact(pid, start, kill).expect("signal"));
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(1));
        // Ended, its object still held by `child`: no longer signalled.
        assert!(!signal_exact(pid, StartTime::UNKNOWN, kill).expect("signal"));
    }
}

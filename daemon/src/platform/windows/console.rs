//! Console control events: what `INT` and `TERM` are on Windows.
//!
//! Each command runs in a process group of its own with a hidden console of its own. To send
//! it a Ctrl-Break the daemon attaches to that console for the moment of the call (a process
//! has at most one console, so these calls are serialised), then detaches. Ctrl-C cannot be
//! sent to one process group (Windows delivers it to every process on a console, and a new
//! process group starts with it disabled), so `INT` is a Ctrl-Break as well: the event every
//! console program can catch and that ends the others (docs/decisions.md, "Windows").

use std::io;
use std::sync::Mutex;

use windows_sys::Win32::System::Console::{
    AttachConsole, FreeConsole, GenerateConsoleCtrlEvent, SetConsoleCtrlHandler, CTRL_BREAK_EVENT,
};

static ATTACHED: Mutex<()> = Mutex::new(());

/// The daemon itself ignores Ctrl-C: attached to a command's console for a moment, it must not
/// be ended by an event meant for that console.
pub fn ignore_ctrl_c() {
    // SAFETY: no handler routine; TRUE makes this process ignore Ctrl-C.
    unsafe { SetConsoleCtrlHandler(None, 1) };
}

/// Sends a Ctrl-Break to the process group `pid` leads, on its console.
pub fn ctrl_break(pid: u32) -> io::Result<()> {
    let _one = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: plain calls on this process's console state; detached again below on every path.
    unsafe {
        if AttachConsole(pid) == 0 {
            return Err(io::Error::last_os_error());
        }
        let sent = GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, pid);
        let error = io::Error::last_os_error();
        FreeConsole();
        if sent == 0 {
            return Err(error);
        }
    }
    Ok(())
}

//! The Windows console: its size from the screen buffer's window, and the input mode
//! `GetConsoleMode`/`SetConsoleMode` set. Lacking: raw mode (virtual-terminal input, so keys
//! reach a process's terminal as typed) is not set up yet, so nothing takes the console over;
//! and a console line is read only at Enter, so the detach key takes effect with it.

use std::io;
use std::os::windows::io::{AsRawHandle, RawHandle};

use cuba_protocol::TtySize;
use windows_sys::Win32::System::Console::{
    GetConsoleMode, GetConsoleScreenBufferInfo, SetConsoleMode, CONSOLE_MODE,
    CONSOLE_SCREEN_BUFFER_INFO, ENABLE_ECHO_INPUT, ENABLE_LINE_INPUT,
};

/// No raw mode here: a process's terminal cannot take the console over.
pub const RAW_MODE: bool = false;

pub fn stdout_size() -> Option<TtySize> {
    console_size(io::stdout().as_raw_handle())
}

/// The console window's size on stdout, else on stderr (an input handle has no screen).
pub fn size() -> Option<TtySize> {
    stdout_size().or_else(|| console_size(io::stderr().as_raw_handle()))
}

/// The visible window of the screen buffer `handle` writes to (the buffer itself may be
/// thousands of lines tall).
fn console_size(handle: RawHandle) -> Option<TtySize> {
    // SAFETY: plain integers; an all-zero value is valid for the call to overwrite.
    let mut info: CONSOLE_SCREEN_BUFFER_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: writes one struct through the pointer; a handle that is not a console screen
    // buffer (a pipe, a file, none) makes the call fail, nothing else.
    if unsafe { GetConsoleScreenBufferInfo(handle.cast(), &mut info) } == 0 {
        return None;
    }
    let w = info.srWindow;
    let cols = u16::try_from(i32::from(w.Right) - i32::from(w.Left) + 1).ok()?;
    let rows = u16::try_from(i32::from(w.Bottom) - i32::from(w.Top) + 1).ok()?;
    (cols > 0 && rows > 0).then_some(TtySize { cols, rows })
}

/// Windows has no background process groups: reading the console never stops us.
pub fn in_foreground() -> bool {
    true
}

/// While alive, the console on stdin reads whole lines (it edits them itself), with echo off
/// for passwords. The previous mode is restored on drop.
pub struct LineMode {
    saved: CONSOLE_MODE,
}

impl LineMode {
    pub fn enter(echo: bool) -> io::Result<LineMode> {
        let saved = console_mode()?;
        let mut mode = saved | ENABLE_LINE_INPUT | ENABLE_ECHO_INPUT;
        if !echo {
            mode &= !ENABLE_ECHO_INPUT;
        }
        set_console_mode(mode)?;
        Ok(LineMode { saved })
    }
}

impl Drop for LineMode {
    fn drop(&mut self) {
        // Nothing more can be done if the console went away.
        let _ = set_console_mode(self.saved);
    }
}

/// Raw mode is not set up on Windows yet; [`super::passthrough`] is false there, so nothing
/// asks for it.
pub struct RawMode;

impl RawMode {
    pub fn enter() -> io::Result<RawMode> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "taking the terminal over needs a Unix terminal; not available on Windows yet",
        ))
    }
}

fn console_mode() -> io::Result<CONSOLE_MODE> {
    let mut mode: CONSOLE_MODE = 0;
    // SAFETY: writes one integer; a stdin that is not a console makes the call fail.
    if unsafe { GetConsoleMode(io::stdin().as_raw_handle().cast(), &mut mode) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(mode)
}

fn set_console_mode(mode: CONSOLE_MODE) -> io::Result<()> {
    // SAFETY: plain values; a stdin that is not a console makes the call fail.
    if unsafe { SetConsoleMode(io::stdin().as_raw_handle().cast(), mode) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

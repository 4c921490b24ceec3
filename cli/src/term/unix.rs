//! The Unix terminal: its size from `TIOCGWINSZ`, the foreground process group, and termios
//! modes.

use std::io;
use std::os::fd::BorrowedFd;

use cuba_protocol::TtySize;
use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};

use super::DETACH_KEY;

/// Raw mode is set up here: a process's terminal can take this one over.
pub const RAW_MODE: bool = true;

pub fn stdout_size() -> Option<TtySize> {
    winsize(libc::STDOUT_FILENO)
}

pub fn size() -> Option<TtySize> {
    [libc::STDOUT_FILENO, libc::STDIN_FILENO]
        .into_iter()
        .find_map(winsize)
}

fn winsize(fd: libc::c_int) -> Option<TtySize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass; an fd that is not a
    // terminal (or not open) makes it fail with an error, nothing else.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0 && size.ws_row > 0).then_some(TtySize {
        cols: size.ws_col,
        rows: size.ws_row,
    })
}

/// This process is in the foreground group of the terminal on stdin (a terminal).
pub fn in_foreground() -> bool {
    // SAFETY: tcgetpgrp and getpgrp only read process state.
    let (fg, me) = unsafe { (libc::tcgetpgrp(libc::STDIN_FILENO), libc::getpgrp()) };
    // -1: a terminal that is not our controlling terminal, which cannot stop us either.
    fg == me || fg == -1
}

/// While alive, the terminal on stdin stays line-edited (so a person can correct a typo) but
/// Ctrl-] ends a line at once, so the detach key is seen without Enter. Echo can be switched
/// off for passwords. The previous mode is restored on drop.
///
/// Not raw mode on purpose: raw mode would also switch off output processing, and the
/// process's `\n` would no longer return the cursor.
pub struct LineMode {
    saved: Termios,
}

impl LineMode {
    pub fn enter(echo: bool) -> io::Result<LineMode> {
        let fd = stdin_fd();
        let saved = termios::tcgetattr(fd)?;
        let mut mode = saved.clone();
        mode.local_flags.insert(LocalFlags::ICANON);
        if !echo {
            mode.local_flags.remove(LocalFlags::ECHO);
        }
        mode.control_chars[SpecialCharacterIndices::VEOL as usize] = DETACH_KEY;
        termios::tcsetattr(fd, SetArg::TCSANOW, &mode)?;
        Ok(LineMode { saved })
    }
}

impl Drop for LineMode {
    fn drop(&mut self) {
        // Nothing more can be done if the terminal went away.
        let _ = termios::tcsetattr(stdin_fd(), SetArg::TCSANOW, &self.saved);
    }
}

/// While alive, the terminal on stdin is in raw mode: every key (Ctrl-C, Ctrl-Z, arrows …)
/// reaches the process as the bytes the terminal sends, and its output is shown as is (the
/// process's own terminal already turned `\n` into `\r\n`). The previous mode is restored on
/// drop, which also runs when an error or a panic unwinds past it.
pub struct RawMode {
    saved: Termios,
}

impl RawMode {
    pub fn enter() -> io::Result<RawMode> {
        let fd = stdin_fd();
        let saved = termios::tcgetattr(fd)?;
        let mut mode = saved.clone();
        termios::cfmakeraw(&mut mode);
        termios::tcsetattr(fd, SetArg::TCSANOW, &mode)?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // TCSADRAIN: what we wrote last (the terminal reset) is shown before the mode changes.
        let _ = termios::tcsetattr(stdin_fd(), SetArg::TCSADRAIN, &self.saved);
    }
}

fn stdin_fd() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process.
    unsafe { BorrowedFd::borrow_raw(libc::STDIN_FILENO) }
}

//! The terminal: its width, whether we own it, and the input mode `attach` sets while attached.

use std::io::{self, IsTerminal};
use std::os::fd::BorrowedFd;

use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};

/// The byte Ctrl-] sends: `attach`'s detach key.
pub const DETACH_KEY: u8 = 0x1d;

/// Columns to fit output into: `$COLUMNS` when set, else the terminal's width, else no limit
/// (a pipe or a file gets whole lines).
pub fn width() -> Option<usize> {
    if let Some(cols) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
    {
        return Some(cols);
    }
    let stdout = io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass; the fd is valid for the
    // duration of the call.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// True when stdin is a terminal and this process is in its foreground group, so reading it
/// will not stop us with SIGTTIN (`cubactl run … &`).
pub fn stdin_is_foreground_terminal() -> bool {
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        return false;
    }
    // SAFETY: tcgetpgrp and getpgrp only read process state.
    unsafe { libc::tcgetpgrp(libc::STDIN_FILENO) == libc::getpgrp() }
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
    pub fn enter(echo: bool) -> nix::Result<LineMode> {
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

fn stdin_fd() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process.
    unsafe { BorrowedFd::borrow_raw(libc::STDIN_FILENO) }
}

/// Reads stdin on a thread of its own (a blocked read cannot be cancelled; a plain thread does
/// not keep the process alive at exit) and hands the chunks to async code. `None` marks EOF.
pub fn stdin_chunks() -> Chunks {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    std::thread::spawn(move || {
        use std::io::Read;
        let mut lock = io::stdin().lock();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match lock.read(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(0) | Err(_) => {
                    let _ = tx.blocking_send(None);
                    return;
                }
                Ok(n) => {
                    if tx.blocking_send(Some(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Stdin chunks as [`stdin_chunks`] hands them out; `None` marks EOF.
pub type Chunks = tokio::sync::mpsc::Receiver<Option<Vec<u8>>>;

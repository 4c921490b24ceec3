//! The terminal: its width and size, whether we own it, and the input modes `attach` sets
//! while attached (line mode for a process on pipes, raw mode for one on a terminal).

use std::io::{self, IsTerminal};
use std::os::fd::BorrowedFd;

use cuba_protocol::TtySize;
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
    if !io::stdout().is_terminal() {
        return None;
    }
    winsize(libc::STDOUT_FILENO).map(|s| usize::from(s.cols))
}

/// The size of the terminal on stdout (else on stdin), when there is one and it knows its
/// size. Unlike [`width`], `$COLUMNS` does not count: a remote terminal must match the real one.
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

/// True when stdout is a terminal and stdin one we may read (see
/// [`stdin_is_foreground_terminal`]): keys can be passed through and a screen painted
/// (`attach` and `run --tty` on a process's terminal).
pub fn interactive() -> bool {
    io::stdout().is_terminal() && stdin_is_foreground_terminal()
}

/// True when stdin is a terminal and this process is in its foreground group, so reading it
/// will not stop us with SIGTTIN (`cubactl run … &`).
pub fn stdin_is_foreground_terminal() -> bool {
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        return false;
    }
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

/// While alive, the terminal on stdin is in raw mode: every key (Ctrl-C, Ctrl-Z, arrows …)
/// reaches the process as the bytes the terminal sends, and its output is shown as is (the
/// process's own terminal already turned `\n` into `\r\n`). The previous mode is restored on
/// drop, which also runs when an error or a panic unwinds past it.
pub struct RawMode {
    saved: Termios,
}

impl RawMode {
    pub fn enter() -> nix::Result<RawMode> {
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

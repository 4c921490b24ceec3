//! The terminal: its width and size, whether we own it, and the input modes `attach` sets
//! while attached (line mode for a process on pipes, raw mode for one on a terminal). What
//! each system does is in `unix` and `windows`; this is what callers use.

use std::io::{self, IsTerminal};

use cuba_protocol::TtySize;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as os;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;

pub use os::{LineMode, RawMode};

/// The byte Ctrl-] sends: `attach`'s detach key.
pub const DETACH_KEY: u8 = 0x1d;

/// How the detach key is typed in line mode: a Windows console hands over a line only at
/// Enter, so there Ctrl-] takes effect with it.
pub const DETACH_HINT: &str = if cfg!(windows) {
    "Ctrl-] then Enter detaches"
} else {
    "Ctrl-] detaches"
};

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
    os::stdout_size().map(|s| usize::from(s.cols))
}

/// The size of the terminal on stdout (else on stdin; on Windows stderr), when there is one
/// and it knows its size. Unlike [`width`], `$COLUMNS` does not count: a remote terminal must
/// match the real one.
pub fn size() -> Option<TtySize> {
    os::size()
}

/// True when stdout is a terminal and stdin one we may read (see
/// [`stdin_is_foreground_terminal`]): a person can be asked, keys passed through and a screen
/// painted.
pub fn interactive() -> bool {
    io::stdout().is_terminal() && stdin_is_foreground_terminal()
}

/// True when a process's terminal can take this one over, keys raw (`attach` and `run --tty`
/// on a process's terminal). Never on Windows yet: no raw console mode is set up there, so
/// those fall back to lines (`attach`) and streamed output (`run --tty`).
pub fn passthrough() -> bool {
    os::RAW_MODE && interactive()
}

/// True when stdin is a terminal and reading it will not stop us (on Unix: this process is in
/// its foreground group, so no SIGTTIN, as for `cubactl run … &`).
pub fn stdin_is_foreground_terminal() -> bool {
    io::stdin().is_terminal() && os::in_foreground()
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

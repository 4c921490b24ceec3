//! Terminals: sizes, resizing, and the rendered screen of a PTY process.

use serde::{Deserialize, Serialize};

/// A terminal size in character cells.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtySize {
    pub cols: u16,
    pub rows: u16,
}

impl TtySize {
    /// What a PTY process gets unless the caller says otherwise.
    pub const DEFAULT: TtySize = TtySize {
        cols: 120,
        rows: 40,
    };
    /// Larger sizes are refused: the daemon keeps a screen of this many cells per process.
    pub const MAX_CELLS: u32 = 100_000;
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResizeRequest {
    pub id: u64,
    pub size: TtySize,
}

/// A PTY process's terminal as rendered by a terminal emulator from everything it wrote.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScreenView {
    pub size: TtySize,
    /// One string per row, trailing blanks removed (wide characters take one `char`).
    pub lines: Vec<String>,
    /// Cursor position, 0-based.
    pub cursor_row: u16,
    pub cursor_col: u16,
    /// The program switched to the alternate screen (full-screen programs such as `vim`, `top`).
    pub alternate: bool,
    /// The window title the program set (OSC 0/2), if any.
    pub title: String,
    /// The output cursor this screen reflects: everything before it was rendered, nothing
    /// after. Follow from here to keep a copy of the screen up to date.
    pub cursor: u64,
    /// The screen as the bytes a terminal would need to show it exactly: contents with colours
    /// and attributes, cursor, and input modes (application keys, bracketed paste, …).
    pub formatted: Vec<u8>,
}

impl ScreenView {
    /// The screen as text: rows joined by newlines, blank rows at the bottom left out.
    pub fn text(&self) -> String {
        let used = self
            .lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        self.lines[..used].join("\n")
    }
}

//! A terminal in replies: its size, and its screen as a person would see it now.

use cuba_protocol::{ScreenView, TtySize};
use schemars::JsonSchema;
use serde::Serialize;

// A terminal size in character cells. Inlined without a description: every tool's output
// schema carries it.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(inline)]
pub struct TtyReply {
    pub cols: u16,
    pub rows: u16,
}

impl From<TtySize> for TtyReply {
    fn from(t: TtySize) -> TtyReply {
        TtyReply {
            cols: t.cols,
            rows: t.rows,
        }
    }
}

// A terminal as a person would see it now (view="screen").
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(inline)]
pub struct ScreenReply {
    pub cols: u16,
    pub rows: u16,
    /// One string per row, trailing blanks removed.
    pub lines: Vec<String>,
    /// [row, col], 0-based.
    pub cursor: [u16; 2],
    /// A full-screen program (vim, top, an installer) is on the alternate screen.
    pub alternate: bool,
    pub title: String,
}

impl ScreenReply {
    /// `screen` with `redact` applied to every line and the title (secrets never leave as text).
    pub fn new(screen: ScreenView, redact: impl Fn(&str) -> String) -> ScreenReply {
        ScreenReply {
            cols: screen.size.cols,
            rows: screen.size.rows,
            lines: screen.lines.iter().map(|l| redact(l)).collect(),
            cursor: [screen.cursor_row, screen.cursor_col],
            alternate: screen.alternate,
            title: redact(&screen.title),
        }
    }

    /// Rows joined by newlines, blank rows at the bottom left out.
    pub fn text(&self) -> String {
        let used = self
            .lines
            .iter()
            .rposition(|l| !l.trim_end().is_empty())
            .map_or(0, |i| i + 1);
        self.lines[..used].join("\n")
    }

    /// The text on the cursor's row before the cursor: the prompt of a program waiting there.
    pub fn before_cursor(&self) -> Option<String> {
        let [row, col] = self.cursor;
        let line = self.lines.get(usize::from(row))?;
        // Rows come without trailing blanks: pad up to the cursor (">>> " is the prompt).
        let before: String = line
            .chars()
            .chain(std::iter::repeat(' '))
            .take(usize::from(col))
            .collect();
        Some(before).filter(|b| !b.trim().is_empty())
    }
}

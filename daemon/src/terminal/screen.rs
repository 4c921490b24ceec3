//! The screen of a PTY process: a vt100 emulator fed with everything the program writes, and
//! the view clients get of it.

use cuba_protocol::{ScreenView, TtySize};

/// Keeps the window title a program sets, for the screen view.
#[derive(Default)]
struct Title(String);

impl vt100::Callbacks for Title {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        // Bounded: a title is one line of a window's frame.
        let t = String::from_utf8_lossy(&title[..title.len().min(256)]);
        self.0 = t.into_owned();
    }
}

/// A terminal emulator fed with everything the program writes.
pub struct Screen {
    parser: vt100::Parser<Title>,
}

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}

impl Screen {
    pub fn new(size: TtySize) -> Screen {
        Screen {
            parser: vt100::Parser::new_with_callbacks(
                nz(size.rows),
                nz(size.cols),
                0,
                Title::default(),
            ),
        }
    }

    /// Escape codes that rebuild this screen (contents, cursor, input modes) when fed to a new
    /// one of the same size: how a screen crosses an in-place upgrade.
    pub fn state(&self) -> Vec<u8> {
        self.parser.screen().state_formatted().into_bytes()
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    pub fn resize(&mut self, size: TtySize) {
        self.parser.set_size(nz(size.rows), nz(size.cols));
    }

    /// The screen now; `cursor` is the output position it reflects.
    pub fn view(&self, cursor: u64) -> ScreenView {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let lines = screen
            .rows(0, cols.get())
            .map(|l| l.trim_end().to_string())
            .collect();
        let (cursor_row, cursor_col) = screen.cursor_position();
        ScreenView {
            size: TtySize {
                cols: cols.get(),
                rows: rows.get(),
            },
            lines,
            cursor_row,
            cursor_col,
            alternate: screen.alternate_screen(),
            title: self.parser.callbacks().0.clone(),
            cursor,
            formatted: screen.state_formatted().into_bytes(),
        }
    }
}

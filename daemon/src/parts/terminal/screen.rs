//! The screen of a PTY process: a vt100 emulator fed with everything the program writes, and
//! the view clients get of it. On every OS.

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

/// For a chunk of plain text (printable ASCII, tabs, CR LF line ends) with more than twice
/// `rows` lines: where the part fed as is ends (after its first line) and where the tail of its
/// last `rows` lines begins. What lies between scrolls off the screen before the chunk ends.
/// Anything else — an escape sequence, another control, UTF-8, bare LF line ends — is fed whole.
fn skippable(bytes: &[u8], rows: usize) -> Option<(usize, usize)> {
    let plain = |b: &u8| matches!(b, b' '..=b'~' | b'\r' | b'\n' | b'\t');
    if bytes.len() < 4 * rows || !bytes.iter().all(plain) {
        return None;
    }
    let head = bytes.iter().position(|b| *b == b'\n')? + 1;
    // The start of the tail: just after the (rows + 1)-th line feed from the end.
    let mut feeds = 0;
    let mut tail = None;
    for (i, b) in bytes.iter().enumerate().rev() {
        if *b == b'\n' {
            feeds += 1;
            if feeds == rows + 1 {
                tail = Some(i + 1);
                break;
            }
        }
    }
    let tail = tail?;
    // What is skipped holds `rows` line feeds at least and ends a CR LF line.
    let skipped = bytes[head..tail].iter().filter(|b| **b == b'\n').count();
    (skipped >= rows && tail >= 2 && bytes[tail - 2] == b'\r').then_some((head, tail))
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
    /// one of the same size: how a screen crosses an in-place upgrade (Unix).
    #[cfg(unix)]
    pub fn state(&self) -> Vec<u8> {
        self.parser.screen().state_formatted().into_bytes()
    }

    /// Feeds what the program wrote. A flood of plain lines (`yes`, a log) is fed in part: the
    /// lines that scroll off before the chunk ends change nothing a client can see, and their
    /// scrolling was most of a flood's cost (each scroll resets a row of cells).
    pub fn feed(&mut self, bytes: &[u8]) {
        let rows = usize::from(self.parser.screen().size().0.get());
        match skippable(bytes, rows) {
            Some((head, tail)) => {
                self.parser.process(&bytes[..head]);
                // The cursor at the foot of the scrolling region, column 0, as the skipped
                // lines (at least `rows` of them) left it; the tail's `rows` line feeds then
                // scroll out everything before it, as they would have.
                self.parser.process(b"\r");
                for _ in 0..rows {
                    self.parser.process(b"\n");
                }
                self.parser.process(&bytes[tail..]);
            }
            None => self.parser.process(bytes),
        }
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

/// Checks a size a client asked for.
pub fn valid_size(size: TtySize) -> Result<(), String> {
    if size.cols == 0 || size.rows == 0 {
        return Err("cols and rows must be at least 1".into());
    }
    if u32::from(size.cols) * u32::from(size.rows) > TtySize::MAX_CELLS {
        return Err(format!(
            "a {}x{} terminal is larger than the {} cells allowed",
            size.cols,
            size.rows,
            TtySize::MAX_CELLS
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The screen fed in chunks through `Screen::feed`, and a parser fed every byte.
    fn both(size: TtySize, chunks: &[Vec<u8>]) -> (ScreenView, ScreenView) {
        let mut fast = Screen::new(size);
        let mut whole = Screen::new(size);
        for c in chunks {
            fast.feed(c);
            whole.parser.process(c);
        }
        (fast.view(0), whole.view(0))
    }

    fn lines(n: usize, text: impl Fn(usize) -> String) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("{}\r\n", text(i)).into_bytes())
            .collect()
    }

    #[test]
    fn a_flood_skipped_in_part_leaves_the_screen_a_full_feed_leaves() {
        let size = TtySize { cols: 20, rows: 6 };
        let cases: Vec<Vec<Vec<u8>>> = vec![
            // `yes`.
            vec![lines(500, |_| "y".into())],
            // Numbered lines, some wrapping, a partial last line.
            vec![
                lines(300, |i| "n".repeat(i % 45) + &i.to_string()),
                b"partial".to_vec(),
            ],
            // After a screen that was drawn on: a cleared screen, the cursor up top, colours.
            vec![
                b"\x1b[2J\x1b[H\x1b[31mred\x1b[5;3Hmid".to_vec(),
                lines(200, |i| format!("{i}\tx")),
            ],
            // A scrolling region above a status line that stays.
            vec![
                b"\x1b[6;1Hstatus\x1b[1;5r\x1b[1;1H".to_vec(),
                lines(400, |i| i.to_string()),
                lines(100, |i| format!("b{i}")),
            ],
            // The alternate screen.
            vec![b"\x1b[?1049h".to_vec(), lines(100, |i| format!("alt {i}"))],
        ];
        for chunks in cases {
            let (fast, whole) = both(size, &chunks);
            assert_eq!(fast.lines, whole.lines);
            assert_eq!(
                (fast.cursor_row, fast.cursor_col),
                (whole.cursor_row, whole.cursor_col)
            );
            assert_eq!(fast.formatted, whole.formatted);
        }
    }

    #[test]
    fn anything_but_plain_lines_is_fed_whole() {
        let rows = 6;
        let flood = lines(100, |_| "y".into());
        assert!(skippable(&flood, rows).is_some());
        for odd in [&b"\x1b[1m"[..], "é".as_bytes(), b"\x07", b"\x08"] {
            let mut chunk = flood.clone();
            chunk.splice(50..50, odd.iter().copied());
            assert_eq!(skippable(&chunk, rows), None, "{odd:?}");
        }
        let bare: Vec<u8> = (0..100).flat_map(|_| *b"y\n").collect();
        assert_eq!(skippable(&bare, rows), None, "bare line feeds");
        assert_eq!(
            skippable(&lines(12, |_| "y".into()), rows),
            None,
            "too few lines"
        );
    }
}

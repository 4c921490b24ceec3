//! The model view of output: what an agent reads instead of the raw bytes. ANSI escapes
//! stripped, carriage-return redraws (progress bars) collapsed to their final state, secrets
//! redacted. The spool keeps the raw bytes; cursors always count raw bytes.

use regex::Regex;

/// Turns raw output into text for a model.
#[derive(Debug, Clone)]
pub struct View {
    strip_ansi: bool,
    /// The secret values, longest first.
    secrets: Vec<Vec<u8>>,
    redact: Option<Regex>,
    redact_raw: Option<regex::bytes::Regex>,
}

/// Environment variable names whose values are secrets.
pub const SECRET_NAMES: &str = "(?i)TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL";
/// Shorter values are too likely to occur by chance to be worth hiding.
const MIN_SECRET_LEN: usize = 6;
/// A tail this long that starts a secret is held back until more output shows what it is.
const MIN_HELD: usize = 3;
const REDACTED: &str = "[REDACTED]";

impl View {
    /// A view that redacts the values of variables in `env` whose names match `names`.
    pub fn new<'a>(
        strip_ansi: bool,
        names: Option<&Regex>,
        env: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> View {
        let mut secrets: Vec<&str> = env
            .into_iter()
            .filter(|(k, v)| names.is_some_and(|n| n.is_match(k)) && v.len() >= MIN_SECRET_LEN)
            .map(|(_, v)| v)
            .collect();
        // Longest first, so a secret that contains another is hidden whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        let alternation: Vec<String> = secrets.iter().map(|s| regex::escape(s)).collect();
        let pattern = alternation.join("|");
        let (redact, redact_raw) = if secrets.is_empty() {
            (None, None)
        } else {
            (
                Regex::new(&pattern).ok(),
                regex::bytes::Regex::new(&pattern).ok(),
            )
        };
        View {
            strip_ansi,
            secrets: secrets.iter().map(|s| s.as_bytes().to_vec()).collect(),
            redact,
            redact_raw,
        }
    }

    /// How many bytes before a cursor to pass as `before`, so a secret that crosses the cursor
    /// is still recognised.
    pub fn context_len(&self) -> usize {
        self.secrets.first().map_or(0, |s| s.len() - 1)
    }

    /// The text a model sees for `raw`.
    pub fn render(&self, raw: &[u8]) -> String {
        self.render_part(&[], raw, false).0
    }

    /// The text a model sees for `raw`, the bytes that follow `before`. A secret that begins in
    /// `before` is hidden too. When `more` output may follow, a tail of `raw` that could be the
    /// start of a secret is held back: the second value is how many bytes were (the caller's
    /// next cursor stops before them).
    pub fn render_part(&self, before: &[u8], raw: &[u8], more: bool) -> (String, usize) {
        let held = match more {
            // A secret's start, or an escape sequence still open, waits for the next read.
            true => self.held_tail(raw).max(match self.strip_ansi {
                true => open_escape(raw),
                false => 0,
            }),
            false => 0,
        };
        let raw = &raw[..raw.len() - held];
        let mut kept: Vec<u8>;
        let raw = match &self.redact_raw {
            Some(re) => {
                let joined = [before, raw].concat();
                kept = Vec::with_capacity(raw.len());
                let mut at = 0;
                for m in re.find_iter(&joined) {
                    if m.end() <= before.len() {
                        continue;
                    }
                    let start = m.start().saturating_sub(before.len()).max(at);
                    kept.extend_from_slice(&raw[at..start]);
                    kept.extend_from_slice(REDACTED.as_bytes());
                    at = m.end() - before.len();
                }
                kept.extend_from_slice(&raw[at..]);
                &kept[..]
            }
            None => raw,
        };
        let text = if self.strip_ansi {
            String::from_utf8_lossy(&strip_escapes(raw)).into_owned()
        } else {
            String::from_utf8_lossy(raw).into_owned()
        };
        let text = collapse(&text, self.strip_ansi);
        // Once more after the transforms, for a secret an escape sequence had split.
        let text = match &self.redact {
            Some(re) => re.replace_all(&text, REDACTED).into_owned(),
            None => text,
        };
        (text, held)
    }

    /// `text` with secret values replaced (for text that is not raw output, e.g. a screen row).
    pub fn redact(&self, text: &str) -> String {
        match &self.redact {
            Some(re) => re.replace_all(text, REDACTED).into_owned(),
            None => text.to_string(),
        }
    }

    /// The longest tail of `raw` (at least `MIN_HELD` bytes) that is a proper prefix of a secret.
    fn held_tail(&self, raw: &[u8]) -> usize {
        let longest = self.context_len().min(raw.len());
        (MIN_HELD..=longest)
            .rev()
            .find(|&k| {
                let tail = &raw[raw.len() - k..];
                self.secrets
                    .iter()
                    .any(|s| s.len() > k && s.starts_with(tail))
            })
            .unwrap_or(0)
    }
}

/// What `strip_escapes` leaves for "erase to the end of the line" (`ESC [ K`) and "erase the
/// line" (`ESC [ 2 K`), for `collapse` to apply: progress lines on a terminal are redrawn with
/// `\r ESC [ K`, and a shorter redraw must not keep the tail of the longer one. ESC never
/// survives stripping otherwise, so the marks are unambiguous.
const ERASE_END: &[u8] = b"\x1bK";
const ERASE_LINE: &[u8] = b"\x1bL";

/// The longest escape sequence taken as one: a string (OSC, DCS, APC, PM, SOS) or a CSI
/// still open after this many bytes is a stray introducer, not a sequence (a title, a
/// hyperlink's address are far shorter).
pub const MAX_ESCAPE: usize = 4096;

/// How one escape sequence at `raw[0] == ESC` ends.
#[derive(Debug, PartialEq)]
enum Escape {
    /// A whole sequence of this many bytes; an erasure to mark, if it is one.
    Whole(usize, Option<&'static [u8]>),
    /// Not a sequence: a stray introducer of this many bytes (`ESC ]`, `ESC [`) before text
    /// that does not continue it (a line end, another control, no end within [`MAX_ESCAPE`]).
    /// The introducer goes; what follows it is text.
    Stray(usize),
    /// Still open at the end of `raw`: more output may end it.
    Open,
}

fn escape(raw: &[u8]) -> Escape {
    let at = |i: usize| raw.get(i).copied();
    match at(1) {
        None => Escape::Open,
        Some(b'[') => {
            // Parameter and intermediate bytes, then a final byte; anything else ends it.
            let mut i = 2;
            while let Some(b) = at(i) {
                match b {
                    0x20..=0x3f if i < MAX_ESCAPE => i += 1,
                    0x40..=0x7e => {
                        let erase = match (&raw[2..i], b) {
                            (b"" | b"0", b'K') => Some(ERASE_END),
                            (b"2", b'K') => Some(ERASE_LINE),
                            _ => None,
                        };
                        return Escape::Whole(i + 1, erase);
                    }
                    _ => return Escape::Stray(2),
                }
            }
            Escape::Open
        }
        Some(b']' | b'P' | b'X' | b'^' | b'_') => {
            // A string: ends at BEL or ST (`ESC \`); CAN, SUB, a line end, another escape or
            // the bound make it a stray introducer.
            let mut i = 2;
            while let Some(b) = at(i) {
                match b {
                    0x07 => return Escape::Whole(i + 1, None),
                    0x1b => match at(i + 1) {
                        Some(b'\\') => return Escape::Whole(i + 2, None),
                        None => return Escape::Open,
                        Some(_) => return Escape::Stray(2),
                    },
                    b'\n' | b'\r' | 0x18 | 0x1a => return Escape::Stray(2),
                    _ if i >= MAX_ESCAPE => return Escape::Stray(2),
                    _ => i += 1,
                }
            }
            Escape::Open
        }
        // Character-set designations take one more byte: `ESC ( B`.
        Some(b'(' | b')' | b'*' | b'+' | b'#' | b'%') => match at(2) {
            Some(_) => Escape::Whole(3, None),
            None => Escape::Open,
        },
        Some(_) => Escape::Whole(2, None),
    }
}

/// How many bytes at the end of `raw` are an escape sequence still open: held back while more
/// output may follow, so that a sequence split across reads is judged whole.
pub fn open_escape(raw: &[u8]) -> usize {
    let from = raw.len().saturating_sub(MAX_ESCAPE + 1);
    raw[from..]
        .iter()
        .rposition(|&b| b == 0x1b)
        .map(|i| from + i)
        .filter(|&i| escape(&raw[i..]) == Escape::Open)
        .map_or(0, |i| raw.len() - i)
}

/// Removes terminal escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ST`, DCS/APC/PM/SOS
/// strings, two- and three-byte escapes), keeping every other byte: text, tabs, newlines and
/// carriage returns (those are collapsed later), and marking line erasures (`ERASE_END`,
/// `ERASE_LINE`). Nothing is lost with a sequence that does not end: a stray introducer goes
/// and the text after it stays, and a sequence open at the end is kept as text (the caller
/// holds such a tail back while more output may come: [`open_escape`]).
pub fn strip_escapes(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != 0x1b {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        match escape(&raw[i..]) {
            Escape::Whole(n, erase) => {
                out.extend_from_slice(erase.unwrap_or_default());
                i += n;
            }
            Escape::Stray(n) => i += n,
            // The output ended inside it: a stray introducer after all.
            Escape::Open => i += 2.min(raw.len() - i),
        }
    }
    out
}

/// Applies carriage returns the way a terminal would: `10%\r55%\r100%` shows as `100%`, and a
/// shorter redraw leaves the tail of the longer one (`abcdef\rxy` → `xycdef`). `\r\n` (a
/// terminal's line ending) is `\n`.
pub fn collapse_cr(text: &str) -> String {
    collapse(text, false)
}

/// `collapse_cr`, also applying the erase marks of `strip_escapes` when `marks` (the text was
/// stripped; unstripped text keeps its real escapes untouched).
fn collapse(text: &str, marks: bool) -> String {
    // Only carriage returns and erase marks change anything.
    let redrawn = |t: &str| t.contains('\r') || (marks && t.contains('\x1b'));
    if !redrawn(text) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        if !redrawn(line) {
            out.push_str(line);
            continue;
        }
        // One line of a terminal: cells written at a cursor that `\r` moves back to 0.
        let mut cells: Vec<char> = Vec::new();
        let mut col = 0;
        let mut erased = false;
        let mut chars = line.chars();
        while let Some(ch) = chars.next() {
            match ch {
                '\r' => col = 0,
                '\x1b' if marks => {
                    erased = true;
                    match chars.next() {
                        Some('K') => cells.truncate(col),
                        // The cursor stays where it is: the cells before it become blanks.
                        Some('L') => {
                            cells.truncate(col);
                            cells.iter_mut().for_each(|c| *c = ' ');
                        }
                        _ => {}
                    }
                }
                ch => {
                    if col < cells.len() {
                        cells[col] = ch;
                    } else {
                        cells.resize(col, ' ');
                        cells.push(ch);
                    }
                    col += 1;
                }
            }
        }
        // Blanks an erase left at the end are no text.
        if erased {
            while cells.last() == Some(&' ') {
                cells.pop();
            }
        }
        out.extend(cells);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn plain() -> View {
        View::new(true, Some(&Regex::new(SECRET_NAMES).unwrap()), [])
    }

    #[test]
    fn strips_ansi_colours_and_cursor_moves() {
        let v = plain();
        assert_eq!(v.render(b"\x1b[31mred\x1b[0m \x1b[?25lok"), "red ok");
        // Erasing the line blanks it up to the cursor, as on a terminal.
        assert_eq!(v.render(b"red \x1b[2Kok"), "    ok");
        assert_eq!(v.render(b"\x1b]0;title\x07text"), "text");
        assert_eq!(v.render(b"a\tb\n"), "a\tb\n");
        assert_eq!(
            v.render(b"\x1b[32m10%\x1b[0m\r\x1b[32m100%\x1b[0m\n"),
            "100%\n"
        );
    }

    #[test]
    fn collapses_progress_redraws() {
        assert_eq!(collapse_cr("10%\r55%\r100%\ndone\n"), "100%\ndone\n");
        assert_eq!(collapse_cr("abcdef\rxy"), "xycdef");
        assert_eq!(collapse_cr("a\r\nb\r\n"), "a\nb\n");
    }

    #[test]
    fn terminal_line_ends_and_erasures_keep_every_line() {
        let v = plain();
        // A terminal's output: \r\n line ends, \r\r\n, \n\r (raw mode), a partial last line.
        assert_eq!(v.render(b"a\r\nb\r\r\nc\n\rd\r\n>>> "), "a\nb\nc\nd\n>>> ");
        assert_eq!(v.render(b"\r\n\r\nx\r\n"), "\n\nx\n");
        // Progress redrawn with \r + erase-to-end: the shorter text does not keep the old tail.
        assert_eq!(v.render(b"Downloading 50%\r\x1b[KDone\r\n"), "Done\n");
        assert_eq!(v.render(b"Downloading 50%\x1b[2K\rDone\n"), "Done\n");
        assert_eq!(v.render(b"ab\x1b[0Kc\x1b[K\n"), "abc\n");
        assert_eq!(v.render(b"12345\r\x1b[2K"), "");
        // Other CSI K forms are dropped like any escape.
        assert_eq!(v.render(b"abc\x1b[1Kd\n"), "abcd\n");
        // Without stripping, escapes are left alone and only \r is applied.
        let raw = View::new(false, None, []);
        assert_eq!(raw.render(b"x\x1b[Ky\r\n"), "x\x1b[Ky\n");
    }

    #[test]
    fn redacts_secret_values_only() {
        let names = Regex::new(SECRET_NAMES).unwrap();
        let env = [
            ("GITHUB_TOKEN", "ghp_abcdef123456"),
            ("API_KEY", "k-987654321"),
            ("HOME", "/home/someone"),
            ("SHORT_KEY", "abc"),
        ];
        let v = View::new(true, Some(&names), env);
        let out = v.render(b"token=ghp_abcdef123456 key=k-987654321 home=/home/someone abc");
        assert_eq!(
            out,
            "token=[REDACTED] key=[REDACTED] home=/home/someone abc"
        );
    }

    #[test]
    fn a_secret_split_across_reads_is_hidden_on_both_sides() {
        let names = Regex::new(SECRET_NAMES).unwrap();
        let v = View::new(true, Some(&names), [("MY_TOKEN", "supersecret123")]);
        // The first part is held back while more may come…
        let (text, held) = v.render_part(b"", b"key=supersec", true);
        assert_eq!((text.as_str(), held), ("key=", 8));
        // …and when the rest arrives after it, the whole is redacted.
        let (text, held) = v.render_part(b"key=", b"supersecret123\n", true);
        assert_eq!((text.as_str(), held), ("[REDACTED]\n", 0));
        // A reply that starts in the middle of a secret hides its end too.
        let (text, _) = v.render_part(b"key=supersec", b"ret123 ok", false);
        assert_eq!(text, "[REDACTED] ok");
        // At the end of the output nothing is held.
        let (text, held) = v.render_part(b"", b"x supersec", false);
        assert_eq!((text.as_str(), held), ("x supersec", 0));
    }

    #[test]
    fn an_escape_that_never_ends_drops_no_text() {
        let v = plain();
        for intro in [b']', b'P', b'_', b'^', b'X'] {
            let raw = [b"a\x1b".as_slice(), &[intro], b"0;t\nafter\n"].concat();
            assert_eq!(v.render(&raw), "a0;t\nafter\n", "ESC {}", intro as char);
            // Ended properly, it goes whole; CAN aborts it; so does another escape.
            let ended = [b"a\x1b".as_slice(), &[intro], b"0;t\x07b\n"].concat();
            assert_eq!(v.render(&ended), "ab\n");
            let st = [b"a\x1b".as_slice(), &[intro], b"0;t\x1b\\b"].concat();
            assert_eq!(v.render(&st), "ab");
            let can = [b"a\x1b".as_slice(), &[intro], b"x\x18y"].concat();
            assert_eq!(v.render(&can), "ax\x18y");
            // Longer than the bound: a stray introducer, its text kept.
            let long = [b"\x1b".as_slice(), &[intro], &vec![b'z'; MAX_ESCAPE + 10]].concat();
            assert_eq!(v.render(&long).len(), MAX_ESCAPE + 10);
            // At the very end of the output: kept as text too.
            let end = [b"a\x1b".as_slice(), &[intro], b"0;t"].concat();
            assert_eq!(v.render(&end), "a0;t");
        }
        // A CSI that meets a line end is no CSI.
        assert_eq!(v.render(b"a\x1b[12\n34\n"), "a12\n34\n");
        assert_eq!(v.render(b"a\x1b[1;31mred\x1b[0m"), "ared");
    }

    #[test]
    fn an_escape_split_across_reads_is_judged_whole() {
        let v = plain();
        for intro in [b']', b'P', b'_', b'^', b'X', b'['] {
            let whole = match intro {
                b'[' => [b"a\x1b[".as_slice(), b"1;31", b"m", b"after\n"].concat(),
                _ => [b"a\x1b".as_slice(), &[intro], b"0;ti", b"tle\x07after\n"].concat(),
            };
            for cut in 1..whole.len() {
                let (first, held) = v.render_part(&[], &whole[..cut], true);
                let next = cut - held;
                let (second, _) = v.render_part(&whole[..next], &whole[next..], false);
                assert_eq!(
                    format!("{first}{second}"),
                    "aafter\n",
                    "ESC {} cut at {cut}",
                    intro as char
                );
            }
            // Unterminated, split anywhere: every text byte arrives once.
            let stray = [b"a\x1b".as_slice(), &[intro], b"0;t\nafter\n"].concat();
            let expect = v.render(&stray);
            for cut in 1..stray.len() {
                let (first, held) = v.render_part(&[], &stray[..cut], true);
                let next = cut - held;
                let (second, _) = v.render_part(&stray[..next], &stray[next..], false);
                assert_eq!(format!("{first}{second}"), expect, "cut at {cut}");
            }
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        assert_eq!(plain().render(b"a\xffb"), "a\u{fffd}b");
    }
}

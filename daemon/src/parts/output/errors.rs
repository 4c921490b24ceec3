//! The first and last error lines of a process's output, found as it is drained: a long
//! build's first error sits in the middle, where every client cuts a long reply.
//!
//! The scan is on the drain's path, so it looks at a line only when one of the patterns'
//! substrings is in it (one SIMD search over each chunk); whole lines only, the line still
//! open carried to the next chunk (its first [`MAX_LINE_SCAN`] bytes: a line without end
//! costs no more).

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};
use cuba_protocol::{ErrorMark, ErrorMarks};
use memchr::{memchr, memrchr};
use serde::{Deserialize, Serialize};

use super::patterns::{classify, Found, NEEDLES};

/// Bytes of a line that are looked at (and carried while the line is open).
pub const MAX_LINE_SCAN: usize = 4096;
/// After an error line that names no location, the lines within this many bytes are looked at
/// for one (rustc's ` --> …`, pytest's `file.py:12: AssertionError`, a stack frame).
const LOCATION_WINDOW: u64 = 2048;
/// Lines looked back over for the file an eslint problem is in.
const ESLINT_LOOKBACK: usize = 256;

// Leftmost-first: the kind with a SIMD prefilter (about 10× the standard kind's rate here).
static FINDER: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(NEEDLES)
        .ok()
});

/// The scan's state: carried with the output across an in-place upgrade.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ErrorScan {
    marks: Option<ErrorMarks>,
    /// The start of the line still open, and where it starts.
    carry: Vec<u8>,
    carry_at: u64,
    /// Error lines from this cursor on that named no location take the next one seen before
    /// `until`.
    pending_since: u64,
    pending_until: u64,
    /// The file of the last eslint group seen.
    eslint_file: Option<String>,
    /// The start of the last whole line before the bytes being scanned: the head of an eslint
    /// group may be in an earlier chunk.
    prev_line: Vec<u8>,
}

/// Bytes of the line before a chunk that are kept.
const PREV_LINE: usize = 512;

impl ErrorScan {
    pub fn marks(&self) -> Option<&ErrorMarks> {
        self.marks.as_ref()
    }

    /// Scans `data`, the bytes of the combined stream from cursor `at`.
    pub fn feed(&mut self, data: &[u8], mut at: u64) {
        let mut rest = data;
        if !self.carry.is_empty() {
            let Some(i) = memchr(b'\n', rest) else {
                self.keep(rest);
                return;
            };
            self.keep(&rest[..i]);
            let line = std::mem::take(&mut self.carry);
            self.line(&line, self.carry_at, &[]);
            self.set_prev(&line);
            // The allocation is kept for the next open line.
            self.carry = line;
            self.carry.clear();
            rest = &rest[i + 1..];
            at += i as u64 + 1;
        }
        let end = memrchr(b'\n', rest).map_or(0, |i| i + 1);
        self.block(&rest[..end], at);
        if end > 0 {
            let last = end - 1;
            let start = memrchr(b'\n', &rest[..last]).map_or(0, |i| i + 1);
            self.set_prev(&rest[start..last]);
        }
        if end < rest.len() {
            self.carry_at = at + end as u64;
            self.keep(&rest[end..]);
        }
    }

    /// The output has ended: a last line without a line end is a line too.
    pub fn end(&mut self) {
        if !self.carry.is_empty() {
            let line = std::mem::take(&mut self.carry);
            self.line(&line, self.carry_at, &[]);
        }
    }

    fn set_prev(&mut self, line: &[u8]) {
        self.prev_line.clear();
        self.prev_line
            .extend_from_slice(&line[..line.len().min(PREV_LINE)]);
    }

    fn keep(&mut self, part: &[u8]) {
        let room = MAX_LINE_SCAN - self.carry.len();
        self.carry.extend_from_slice(&part[..part.len().min(room)]);
    }

    /// Whole lines (`b` starts at a line's start and ends after a line end).
    fn block(&mut self, b: &[u8], at: u64) {
        let Some(finder) = FINDER.as_ref() else {
            return;
        };
        let mut pos = 0;
        while pos < b.len() {
            let (start, end) = if at + (pos as u64) < self.pending_until {
                // Just after an error without location: every line, for the one that says where.
                (pos, memchr(b'\n', &b[pos..]).map_or(b.len(), |i| pos + i))
            } else {
                let Some(hit) = finder.find(&b[pos..]) else {
                    return;
                };
                let h = pos + hit.start();
                let start = memrchr(b'\n', &b[pos..h]).map_or(pos, |i| pos + i + 1);
                (start, memchr(b'\n', &b[h..]).map_or(b.len(), |i| h + i))
            };
            self.line(&b[start..end], at + start as u64, &b[..start]);
            pos = end + 1;
        }
    }

    /// One line starting at cursor `at`; `before` is the output just before it, as far as the
    /// caller has it.
    fn line(&mut self, raw: &[u8], at: u64, before: &[u8]) {
        let raw = &raw[..raw.len().min(MAX_LINE_SCAN)];
        let text = clean(raw);
        let end = at + raw.len() as u64 + 1;
        match classify(&text) {
            None => {}
            Some(Found::Location(location)) => self.located(&location, at),
            Some(Found::Error(location)) => self.error(&text, at, end, location),
            Some(Found::Eslint(position)) => {
                let location = self.eslint_file(before).map(|f| format!("{f}:{position}"));
                self.error(&text, at, end, location);
            }
        }
    }

    fn error(&mut self, text: &str, at: u64, end: u64, location: Option<String>) {
        match &location {
            Some(l) => self.located(l, at),
            None => {
                if at >= self.pending_until {
                    self.pending_since = at;
                }
                self.pending_until = end + LOCATION_WINDOW;
            }
        }
        let mark = ErrorMark {
            cursor: at,
            line: cut(text.trim(), ErrorMark::MAX_LINE),
            location,
        };
        match &mut self.marks {
            Some(m) => {
                m.count += 1;
                m.last = mark;
            }
            None => {
                self.marks = Some(ErrorMarks {
                    first: mark.clone(),
                    last: mark,
                    count: 1,
                })
            }
        }
    }

    /// A location at `at`: the error lines just before it that named none are there.
    fn located(&mut self, location: &str, at: u64) {
        if at >= self.pending_until {
            return;
        }
        if let Some(m) = &mut self.marks {
            for mark in [&mut m.first, &mut m.last] {
                if mark.location.is_none() && mark.cursor >= self.pending_since && mark.cursor < at
                {
                    mark.location = Some(location.to_string());
                }
            }
        }
        self.pending_until = 0;
    }

    /// The file an eslint problem is in: the unindented line that heads its group.
    fn eslint_file(&mut self, before: &[u8]) -> Option<String> {
        let mut end = before.len();
        for _ in 0..ESLINT_LOOKBACK {
            // `before` ends with the line end of the line before; before it, `prev_line`.
            let (line, last) = match end.checked_sub(1) {
                Some(line_end) => {
                    let start = memrchr(b'\n', &before[..line_end]).map_or(0, |i| i + 1);
                    end = start;
                    (&before[start..line_end], false)
                }
                None => (&self.prev_line[..], true),
            };
            match line.first() {
                // A blank line ends a group.
                None => break,
                Some(b) if b.is_ascii_whitespace() => {}
                Some(_) => {
                    let file = clean(line).trim().to_string();
                    if !file.is_empty() && !file.contains("  ") {
                        self.eslint_file = Some(file);
                    }
                    break;
                }
            }
            if last {
                break;
            }
        }
        self.eslint_file.clone()
    }
}

/// A line as text: terminal escapes removed, invalid UTF-8 replaced, only what the last
/// carriage return left.
fn clean(raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let raw = match memrchr(b'\r', raw) {
        Some(i) => &raw[i + 1..],
        None => raw,
    };
    if memchr(0x1b, raw).is_none() {
        return String::from_utf8_lossy(raw).into_owned();
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != 0x1b {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        i += match raw.get(i + 1) {
            // CSI: parameters, then one final byte.
            Some(b'[') => {
                let params = raw[i + 2..]
                    .iter()
                    .position(|b| !(0x20..=0x3f).contains(b))
                    .unwrap_or(raw.len() - i - 2);
                params + 3
            }
            // OSC: up to BEL or ST.
            Some(b']') => raw[i..]
                .iter()
                .position(|&b| b == 0x07 || b == b'\\')
                .map_or(raw.len() - i, |n| n + 1),
            _ => 2,
        };
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `s` cut to at most `max` bytes, on a character boundary.
fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests;

//! The lines around a process's first and last error, for a reply whose output is cut where
//! they are: the daemon marks them as it drains the output (`ProcessInfo::errors`), and the
//! reply keeps them between its head and tail, whatever the client cuts after.

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{ErrorMarks, ReadRequest, StreamFilter};

/// Lines kept before an error line.
const LINES_BEFORE: usize = 2;
/// The error line and the lines after it that are kept.
const LINES_FROM: usize = 6;

/// Raw output around one error line; `at` is the cursor of `bytes[0]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Excerpt {
    pub at: u64,
    pub bytes: Vec<u8>,
}

impl Excerpt {
    pub fn end(&self) -> u64 {
        self.at + self.bytes.len() as u64
    }

    /// Only what lies in `[from, to)`.
    pub fn clip(mut self, from: u64, to: u64) -> Option<Excerpt> {
        let (start, end) = (self.at.max(from), self.end().min(to));
        if start >= end {
            return None;
        }
        self.bytes.truncate((end - self.at) as usize);
        self.bytes.drain(..(start - self.at) as usize);
        self.at = start;
        Some(self)
    }
}

/// The cursors of the first and last error from `since` on, in order, each once.
pub fn cursors(marks: &ErrorMarks, since: u64) -> Vec<u64> {
    let mut c = vec![marks.first.cursor, marks.last.cursor];
    c.dedup();
    c.retain(|&at| at >= since);
    c
}

/// The excerpts around `cursors` (in order), each from a read of at most `budget` bytes;
/// excerpts that meet are one.
pub async fn read(
    client: &Client,
    id: u64,
    cursors: &[u64],
    budget: u64,
) -> Result<Vec<Excerpt>, ClientError> {
    let mut out: Vec<Excerpt> = Vec::new();
    for &cursor in cursors {
        let from = cursor.saturating_sub(budget / 4);
        let r = client
            .read(ReadRequest {
                id,
                since: Some(from),
                max_bytes: budget.clamp(64, u64::from(u32::MAX)) as u32,
                stream: StreamFilter::Both,
            })
            .await?;
        // Gone from the spool: there is nothing to show.
        let Some(split) = cursor.checked_sub(r.start) else {
            continue;
        };
        let bytes = r.bytes();
        let Some(ex) = around(&bytes, r.start, split as usize) else {
            continue;
        };
        match out.last_mut() {
            Some(prev) if ex.at <= prev.end() => {
                let skip = (prev.end() - ex.at) as usize;
                prev.bytes
                    .extend_from_slice(ex.bytes.get(skip..).unwrap_or_default());
            }
            _ => out.push(ex),
        }
    }
    Ok(out)
}

/// The lines around the line at `bytes[split..]` (`bytes` starts at cursor `at`).
fn around(bytes: &[u8], at: u64, split: usize) -> Option<Excerpt> {
    if split >= bytes.len() {
        return None;
    }
    let before = &bytes[..split];
    let body = before.strip_suffix(b"\n").unwrap_or(before);
    let mut start = nth_line_back(body, LINES_BEFORE);
    // A read that starts inside a line: that part line is left out.
    if start == 0 && at > 0 && !before.is_empty() {
        start = before
            .iter()
            .position(|&b| b == b'\n')
            .map_or(split, |i| i + 1);
    }
    let after = &bytes[split..];
    let ends: Vec<usize> = after
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .take(LINES_FROM)
        .collect();
    // The last line ends within the read, or (the error line alone too long) all of it.
    let end = split + ends.last().copied().unwrap_or(after.len());
    Some(Excerpt {
        at: at + start as u64,
        bytes: bytes[start..end].to_vec(),
    })
}

/// Where the last `n` lines of `body` (no final line end) start.
fn nth_line_back(body: &[u8], n: usize) -> usize {
    let mut seen = 0;
    for i in (0..body.len()).rev() {
        if body[i] == b'\n' {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_lines_before_and_the_error_with_five_after() {
        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let split = text.find("line 10").unwrap_or_default();
        // A read from cursor 1000 that starts inside "line 1".
        let ex = around(text.as_bytes(), 1000, split).unwrap_or_else(|| panic!("none"));
        let shown = String::from_utf8_lossy(&ex.bytes).into_owned();
        let lines: String = (8..=15).map(|i| format!("line {i}\n")).collect();
        assert_eq!(shown, lines);
        assert_eq!(ex.at, 1000 + text.find("line 8").unwrap_or_default() as u64);
        // Near the start of the read: the part line before is left out.
        let ex = around(b"ine 1\nerror: x\nnext\n", 50, 6).unwrap_or_else(|| panic!("none"));
        assert_eq!(ex.bytes, b"error: x\nnext\n");
        assert_eq!(ex.at, 56);
        // Clipped to a gap.
        let ex = ex.clip(58, 60).unwrap_or_else(|| panic!("none"));
        assert_eq!((ex.at, ex.bytes.as_slice()), (58, &b"ro"[..]));
    }
}

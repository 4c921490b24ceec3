//! Fetching a process's output for a reply: everything after `since` when it fits in
//! `max_output`, else its first quarter and last three quarters with a marker between them.

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{OutputRead, ProcessInfo, ReadRequest, StreamFilter};

use crate::excerpt::{self, Excerpt};
use crate::view::View;

/// The default output bound of a reply: small enough that every tested client hands the model
/// all of it inline (docs/clients.md: Codex keeps about 10 000 bytes of a tool result).
pub const DEFAULT_MAX_OUTPUT: u64 = 8 * 1024;
/// The output a resource read returns: a client fetches it, no model reads it inline.
pub const RESOURCE_MAX_OUTPUT: u64 = 64 * 1024;
/// Even when asked, one reply carries at most this much output.
const MAX_MAX_OUTPUT: u64 = 1024 * 1024;

/// The output bound of a reply: `asked`, else `default`, within 256 B … 1 MiB.
pub fn max_output(asked: Option<u64>, default: u64) -> u64 {
    asked.unwrap_or(default).clamp(256, MAX_MAX_OUTPUT)
}

/// Lines a reply's output keeps at most for a bound of `max` bytes: what clients that count
/// lines (opencode keeps the first 2000) deliver whole, for a bound that is short lines only.
pub fn max_lines(max: u64) -> usize {
    usize::try_from(max / 16).unwrap_or(usize::MAX).max(64)
}

/// Output ready for a reply.
pub struct Fetched {
    pub text: String,
    /// Raw bytes left out between head and tail.
    pub truncated: u64,
    pub dropped: u64,
    pub next: u64,
    /// Bytes were left out between head and tail (though the error lines among them are
    /// shown).
    pub cut: bool,
}

/// Read window when collecting one stream's bytes out of the combined stream.
const WINDOW: u64 = 1024 * 1024;

async fn read(
    client: &Client,
    id: u64,
    since: u64,
    max: u64,
    stream: StreamFilter,
) -> Result<OutputRead, ClientError> {
    client
        .read(ReadRequest {
            id,
            since: Some(since),
            max_bytes: max.min(u64::from(u32::MAX)) as u32,
            stream,
        })
        .await
}

/// The bytes a reply covers: all of them, or a head and a tail with `skipped` bytes between.
#[derive(Default)]
struct Collected {
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Cursor where `tail` starts (where `head` starts is the `since` asked for).
    tail_at: u64,
    skipped: u64,
    dropped: u64,
    next: u64,
}

/// Everything from `since` to `end`, reading on until done (reads may stop short).
async fn read_all(
    client: &Client,
    id: u64,
    since: u64,
    end: u64,
    stream: StreamFilter,
    max: u64,
) -> Result<Collected, ClientError> {
    let head_len = (max / 4) as usize;
    let tail_len = (max as usize) - head_len;
    let mut c = Collected {
        next: since,
        tail_at: since,
        ..Collected::default()
    };
    let mut all: Vec<u8> = Vec::new();
    let mut cut = false;
    while c.next < end {
        let r = read(client, id, c.next, (end - c.next).min(WINDOW), stream).await?;
        if r.next <= c.next {
            break;
        }
        c.dropped += r.dropped;
        c.next = r.next;
        all.extend(r.bytes());
        if all.len() > head_len + tail_len {
            // Keep the head once, then only the last `tail_len` bytes.
            if !cut {
                c.head = all[..head_len].to_vec();
                all.drain(..head_len);
                cut = true;
            }
            let excess = all.len() - tail_len;
            all.drain(..excess);
            c.skipped += excess as u64;
        }
    }
    if cut {
        // Exact for the combined stream; for one stream only the redaction context uses it.
        c.tail_at = c.next.saturating_sub(all.len() as u64);
        c.tail = all;
    } else {
        c.head = all;
    }
    Ok(c)
}

/// The raw bytes a reply about `info` covers from `since`: `ready` when it covers them all,
/// else read.
async fn collect(
    client: &Client,
    info: &ProcessInfo,
    since: u64,
    max: u64,
    stream: StreamFilter,
    ready: Option<OutputRead>,
) -> Result<Collected, ClientError> {
    let total = info.total_bytes();
    let id = info.id;
    let mut c = match ready.filter(|r| r.start == since && r.next >= total) {
        Some(r) => Collected {
            head: r.bytes(),
            dropped: r.dropped,
            next: r.next,
            tail_at: r.next,
            ..Collected::default()
        },
        // The combined stream past `max`: its head and its tail, two reads.
        None if stream == StreamFilter::Both && total - since > max => {
            let head_len = max / 4;
            let head = read(client, id, since, head_len, stream).await?;
            let tail = read(client, id, total - (max - head_len), max - head_len, stream).await?;
            Collected {
                head: head.bytes(),
                tail: tail.bytes(),
                tail_at: tail.start,
                skipped: tail.start.saturating_sub(head.next),
                dropped: head.dropped,
                next: tail.next,
            }
        }
        // All of it, or one stream's bytes picked out of the combined stream.
        None => read_all(client, id, since, total, stream, max).await?,
    };
    fit_lines(&mut c, max_lines(max));
    Ok(c)
}

/// Cuts `c` to at most `lines` lines: the first quarter of them from its head and the rest
/// from its tail (of the whole when it was not cut by bytes), on line boundaries.
fn fit_lines(c: &mut Collected, lines: usize) {
    let head_lines = lines / 4;
    let tail_lines = lines - head_lines;
    if c.tail.is_empty() {
        if count_lines(&c.head) <= lines {
            return;
        }
        let keep = head_cut(&c.head, head_lines);
        let from = keep + tail_cut(&c.head[keep..], tail_lines);
        c.tail = c.head.split_off(from);
        c.skipped += (from - keep) as u64;
        c.head.truncate(keep);
        c.tail_at = c.next - c.tail.len() as u64;
        return;
    }
    let keep = head_cut(&c.head, head_lines);
    c.skipped += (c.head.len() - keep) as u64;
    c.head.truncate(keep);
    let from = tail_cut(&c.tail, tail_lines);
    c.skipped += from as u64;
    c.tail_at += from as u64;
    c.tail.drain(..from);
}

/// Lines in `b`: each newline ends one, and a last one may have none.
fn count_lines(b: &[u8]) -> usize {
    let n = b.iter().filter(|&&x| x == b'\n').count();
    n + usize::from(b.last().is_some_and(|&l| l != b'\n'))
}

/// The length of `b`'s first `n` lines.
fn head_cut(b: &[u8], n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    b.iter()
        .enumerate()
        .filter(|(_, &x)| x == b'\n')
        .nth(n - 1)
        .map_or(b.len(), |(i, _)| i + 1)
}

/// Where `b`'s last `n` lines start.
fn tail_cut(b: &[u8], n: usize) -> usize {
    if n == 0 {
        return b.len();
    }
    let end = b.len() - usize::from(b.last() == Some(&b'\n'));
    let mut seen = 0;
    for i in (0..end).rev() {
        if b[i] == b'\n' {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    0
}

/// Output of `info`'s process from `since`, as the model sees it. `ready` is output the caller
/// already has (from a wait reply, read at the same moment as `info`): used when it covers all.
/// Where the output is cut, the lines around its first and last error stay (`excerpt.rs`).
pub async fn output(
    client: &Client,
    view: &View,
    info: &ProcessInfo,
    since: u64,
    max: u64,
    stream: StreamFilter,
    ready: Option<OutputRead>,
) -> Result<Fetched, ClientError> {
    let since = since.min(info.total_bytes());
    let id = info.id;
    // Error lines are marked by their cursor in the combined stream.
    let marks = match (stream, &info.errors) {
        (StreamFilter::Both, Some(m)) => excerpt::cursors(m, since),
        _ => Vec::new(),
    };
    let budget = max / 8;
    let mut excerpts = Vec::new();
    let mut room = max;
    if !marks.is_empty() && info.total_bytes() - since > max {
        // Cut for certain: the excerpts' bytes come out of the head's and tail's.
        excerpts = excerpt::read(client, id, &marks, budget).await?;
        let taken: u64 = excerpts.iter().map(|e| e.bytes.len() as u64).sum();
        room = max - taken.min(max / 2);
    }
    let c = collect(client, info, since, room, stream, ready).await?;
    // Holding back a possible secret's start moves the cursor back, which only the combined
    // stream's cursors can express.
    let more = !info.state.is_finished() && stream == StreamFilter::Both;
    let truncated = !c.tail.is_empty() || c.skipped > 0;
    let before = context(client, view, id, since, stream).await?;
    let (mut text, held) = view.render_part(&before, &c.head, more && !truncated);
    let mut next = c.next - held as u64;
    let mut skipped = c.skipped;
    if truncated {
        // The error lines that fall in the gap, in order.
        let gap = (since + c.head.len() as u64, c.tail_at);
        if excerpts.is_empty() && !marks.is_empty() {
            excerpts = excerpt::read(client, id, &marks, budget).await?;
        }
        let shown: Vec<Excerpt> = excerpts
            .into_iter()
            .filter(|e| {
                marks
                    .iter()
                    .any(|&m| m >= gap.0 && m < gap.1 && m >= e.at && m < e.end())
            })
            .filter_map(|e| e.clip(gap.0, gap.1))
            .collect();
        let mut at = gap.0;
        for e in &shown {
            cut_marker(&mut text, e.at - at);
            let before = context(client, view, id, e.at, stream).await?;
            text.push_str(&view.render_part(&before, &e.bytes, false).0);
            at = e.end();
            skipped -= (e.bytes.len() as u64).min(skipped);
        }
        match shown.is_empty() {
            // As ever: one marker for the whole gap.
            true => {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&format!("[... {} bytes truncated ...]\n", c.skipped));
            }
            false => cut_marker(&mut text, gap.1.saturating_sub(at)),
        }
        let before = context(client, view, id, c.tail_at, stream).await?;
        let (tail, held) = view.render_part(&before, &c.tail, more);
        text.push_str(&tail);
        next = c.next - held as u64;
    }
    Ok(Fetched {
        text,
        truncated: skipped,
        dropped: c.dropped,
        next,
        cut: truncated,
    })
}

/// The line that stands for `n` bytes left out (none for none).
fn cut_marker(text: &mut String, n: u64) {
    if n == 0 {
        return;
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("[... {n} bytes truncated ...]\n"));
}

/// The bytes just before `at` that a secret crossing `at` could start in (none without secrets).
async fn context(
    client: &Client,
    view: &View,
    id: u64,
    at: u64,
    stream: StreamFilter,
) -> Result<Vec<u8>, ClientError> {
    let len = view.context_len() as u64;
    if len == 0 || at == 0 {
        return Ok(Vec::new());
    }
    let from = at.saturating_sub(len);
    let r = read(client, id, from, at - from, stream).await?;
    Ok(r.bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> Vec<u8> {
        (1..=n)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect()
    }

    #[test]
    fn lines_are_counted_with_a_last_one_unended() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a"), 1);
        assert_eq!(count_lines(b"a\nb\n"), 2);
        assert_eq!(count_lines(b"a\nb"), 2);
        assert_eq!(head_cut(b"a\nb\nc", 2), 4);
        assert_eq!(tail_cut(b"a\nb\nc\n", 2), 2);
        assert_eq!(tail_cut(b"a\nb\nc", 2), 2);
        assert_eq!(tail_cut(b"a\nb", 5), 0);
    }

    #[test]
    fn output_within_the_line_bound_is_left_whole() {
        let mut c = Collected {
            head: lines(64),
            next: 500,
            ..Collected::default()
        };
        fit_lines(&mut c, 64);
        assert_eq!((c.head, c.tail.len(), c.skipped), (lines(64), 0, 0));
    }

    #[test]
    fn many_short_lines_keep_a_quarter_at_the_head_and_the_rest_at_the_tail() {
        let all = lines(1000);
        let mut c = Collected {
            head: all.clone(),
            next: 10_000 + all.len() as u64,
            ..Collected::default()
        };
        fit_lines(&mut c, 100);
        assert_eq!(c.head, lines(25));
        let tail: Vec<u8> = (926..=1000)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        assert_eq!(c.tail, tail);
        assert_eq!(c.skipped as usize, all.len() - c.head.len() - c.tail.len());
        assert_eq!(c.tail_at, c.next - c.tail.len() as u64);
    }

    #[test]
    fn a_byte_cut_is_cut_again_to_the_line_bound() {
        let mut c = Collected {
            head: lines(50),
            tail: lines(300),
            tail_at: 9_000,
            skipped: 7_000,
            next: 9_000 + lines(300).len() as u64,
            ..Collected::default()
        };
        let tail_len = c.tail.len();
        fit_lines(&mut c, 100);
        assert_eq!(c.head, lines(25));
        assert_eq!(count_lines(&c.tail), 75);
        assert_eq!(c.tail_at, c.next - c.tail.len() as u64);
        let cut = (lines(50).len() - c.head.len()) + (tail_len - c.tail.len());
        assert_eq!(c.skipped, 7_000 + cut as u64);
    }
}

//! The `until` of a wait: a regex matched line by line against new output, across reads,
//! scanning only bytes it has not seen.

use cuba_protocol::{ProtocolError, StreamFilter};
use regex::bytes::{Regex, RegexBuilder};

use crate::state::record::Proc;

/// How much of an unfinished line is kept for matching across reads.
const MAX_CARRY: usize = 64 * 1024;
const SCAN_STEP: u64 = 1024 * 1024;
/// Compiled size a pattern may have: a hostile regex costs bounded memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Scans output for a pattern, line by line, across reads.
pub struct Matcher {
    re: Regex,
    pos: u64,
    carry: Vec<u8>,
}

impl Matcher {
    /// Looks at the output from `pos` on; returns the first matching line.
    pub fn scan(&mut self, p: &Proc, filter: StreamFilter) -> Option<String> {
        loop {
            let read = p.lock().output.read(Some(self.pos), SCAN_STEP, filter);
            if read.next == self.pos {
                return None;
            }
            self.pos = read.next;
            if read.dropped > 0 {
                self.carry.clear();
            }
            for chunk in &read.chunks {
                self.carry.extend_from_slice(&chunk.data);
            }
            if let Some(m) = self.re.find(&self.carry) {
                let start = self.carry[..m.start()]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                let end = self.carry[m.end()..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(self.carry.len(), |i| m.end() + i);
                return Some(String::from_utf8_lossy(&self.carry[start..end]).into_owned());
            }
            // Keep only the unfinished last line (bounded).
            let keep_from = self
                .carry
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1)
                .max(self.carry.len().saturating_sub(MAX_CARRY));
            self.carry.drain(..keep_from);
        }
    }
}

impl Matcher {
    /// A matcher for `pattern` over output from cursor `since` on.
    pub fn new(pattern: &str, since: u64) -> Result<Matcher, ProtocolError> {
        let re = RegexBuilder::new(pattern)
            .multi_line(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| {
                ProtocolError::bad_request(format!("`until` is not a valid regex: {e}"))
            })?;
        Ok(Matcher {
            re,
            pos: since,
            carry: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use cuba_protocol::Stream;

    use super::*;
    use crate::parts::output::Output;
    use crate::state::record::{ProcData, Writer};

    fn proc() -> Writer {
        let info = crate::state::table::tests::row(1);
        Proc::create(ProcData::new(info, Output::new(1 << 20, None), false)).1
    }

    fn write(p: &Writer, stream: Stream, text: &str) {
        p.lock().output.append(stream, text.as_bytes());
    }

    #[test]
    fn a_match_across_reads_returns_its_whole_line() {
        let p = proc();
        let mut m = Matcher::new("listening on \\d+", 0).unwrap();
        write(&p, Stream::Stdout, "starting\nlisten");
        assert_eq!(m.scan(&p, StreamFilter::Both), None);
        write(&p, Stream::Stdout, "ing on 8000 (ok)\nmore\n");
        assert_eq!(
            m.scan(&p, StreamFilter::Both).as_deref(),
            Some("listening on 8000 (ok)")
        );
    }

    #[test]
    fn only_output_after_the_cursor_and_of_the_stream_asked_counts() {
        let p = proc();
        write(&p, Stream::Stdout, "ready\n");
        let since = p.lock().output.total();
        let mut m = Matcher::new("ready", since).unwrap();
        assert_eq!(m.scan(&p, StreamFilter::Both), None, "before the cursor");
        write(&p, Stream::Stderr, "ready on stderr\n");
        assert_eq!(m.scan(&p, StreamFilter::Stdout), None, "another stream");
        write(&p, Stream::Stdout, "ready again\n");
        assert_eq!(
            m.scan(&p, StreamFilter::Stdout).as_deref(),
            Some("ready again")
        );
    }

    #[test]
    fn an_endless_line_keeps_bounded_memory_and_bad_patterns_are_refused() {
        let p = proc();
        let mut m = Matcher::new("^never$", 0).unwrap();
        for _ in 0..100 {
            write(&p, Stream::Stdout, &"x".repeat(10_000));
            assert_eq!(m.scan(&p, StreamFilter::Both), None);
            assert!(m.carry.len() <= MAX_CARRY + 10_000);
        }
        let err = Matcher::new("(", 0).err().unwrap();
        assert!(err.message.contains("not a valid regex"), "{}", err.message);
    }
}

//! `Notify`: a pattern a client registered on a running process's output. A task of its own
//! reads the output as `Follow` does (woken by the record's changes, off the drain's path),
//! tests each new whole line and logs a `Matched` event per match, at most
//! [`MAX_MATCHES`] per registration; it ends with the process, or when the record is pruned.

use cuba_protocol::{EventKind, NotifyRequest, ProtocolError, Response, StreamFilter};
use regex::bytes::{Regex, RegexBuilder};

use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;
use crate::state::events::{PatternPlace, MAX_PATTERNS};
use crate::state::record::Proc;

/// Matches one registration reports; the pattern is then dropped (register it again for more).
pub const MAX_MATCHES: u32 = 100;
/// A pattern's compiled size: a hostile regex costs bounded memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Longest pattern text, and longest line an event carries (the rest is cut).
const MAX_PATTERN: usize = 1024;
const MAX_LINE: usize = 512;
/// An unfinished line kept for the next read, at most; longer ones are tested in pieces.
const MAX_CARRY: usize = 64 * 1024;
const STEP: u64 = 256 * 1024;

pub fn notify(d: &Daemon, _caller: &Caller, r: NotifyRequest) -> Result<Response, ProtocolError> {
    if r.pattern.len() > MAX_PATTERN {
        let msg = format!("the pattern is longer than {MAX_PATTERN} bytes");
        return Err(ProtocolError::bad_request(msg));
    }
    let re = RegexBuilder::new(&r.pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| ProtocolError::bad_request(format!("not a valid regex: {e}")))?;
    let p = d.table().get(r.id)?;
    if p.lock().finished() {
        let msg = format!("process {} has ended: its output is final", r.id);
        return Err(ProtocolError::invalid_state(msg));
    }
    let Some(place) = d.table().events().watch_output(r.id) else {
        return Err(ProtocolError::new(
            cuba_protocol::ErrorKind::Limit,
            format!(
                "process {} has {MAX_PATTERNS} patterns watched already, the most allowed; \
                 each reports at most {MAX_MATCHES} matches and ends with the process",
                r.id
            ),
        ));
    };
    // New output only: from the cursor now.
    let since = p.lock().output.total();
    let table = d.table().clone();
    tokio::spawn(async move {
        let watch = Watch {
            re,
            pattern: r.pattern,
            since,
            carry: Vec::new(),
            found: 0,
        };
        watch.run(&table, &p, place).await;
    });
    Ok(Response::Ok)
}

struct Watch {
    re: Regex,
    pattern: String,
    since: u64,
    carry: Vec<u8>,
    found: u32,
}

impl Watch {
    async fn run(mut self, table: &crate::state::table::Table, p: &Proc, _place: PatternPlace) {
        let mut changes = p.subscribe();
        loop {
            changes.borrow_and_update();
            let (read, done) = {
                let data = p.lock();
                let read = data.output.read(Some(self.since), STEP, StreamFilter::Both);
                (read, data.finished() && data.drained)
            };
            let moved = read.next > self.since;
            self.since = read.next;
            if read.dropped > 0 {
                self.carry.clear();
            }
            for chunk in &read.chunks {
                self.carry.extend_from_slice(&chunk.data);
            }
            for line in self.lines(done) {
                table.event(
                    p,
                    EventKind::Matched {
                        pattern: self.pattern.clone(),
                        line,
                    },
                );
                self.found += 1;
                if self.found >= MAX_MATCHES {
                    return;
                }
            }
            if moved {
                continue;
            }
            if done || changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// The matching whole lines in the carry (and its last piece once the output is final),
    /// at most what this registration may still report; the unfinished rest stays.
    fn lines(&mut self, last: bool) -> Vec<String> {
        let mut found = Vec::new();
        let mut start = 0;
        while let Some(n) = self.carry[start..].iter().position(|b| *b == b'\n') {
            self.test(start, start + n, &mut found);
            start += n + 1;
        }
        if last || self.carry.len() - start > MAX_CARRY {
            self.test(start, self.carry.len(), &mut found);
            start = self.carry.len();
        }
        self.carry.drain(..start);
        found.truncate((MAX_MATCHES - self.found) as usize);
        found
    }

    fn test(&self, from: usize, to: usize, found: &mut Vec<String>) {
        let line = &self.carry[from..to];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.is_empty() && self.re.is_match(line) {
            let text = String::from_utf8_lossy(line);
            found.push(text.chars().take(MAX_LINE).collect());
        }
    }
}

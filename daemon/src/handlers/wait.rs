//! `Wait`: block until the process exits, its output matches `until`, it has been quiet for
//! `quiet_ms`, it waits for input (blocked reading its stdin pipe, see `supervise`), or the
//! timeout. Never kills. Woken by the process's change channel, not by polling.

use std::time::Duration;

use cuba_protocol::{
    ProcState, ProtocolError, Response, StreamFilter, WaitReason, WaitRequest, WaitResult,
};
use regex::bytes::{Regex, RegexBuilder};
use tokio::time::{sleep_until, Instant};

use super::bad_request;
use crate::daemon::Daemon;
use crate::proc::Proc;

/// Longest wait one request may ask for.
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);
/// How much of an unfinished line is kept for matching across reads.
const MAX_CARRY: usize = 64 * 1024;
const SCAN_STEP: u64 = 1024 * 1024;

/// Scans output for a pattern, line by line, across reads.
struct Matcher {
    re: Regex,
    pos: u64,
    carry: Vec<u8>,
}

impl Matcher {
    /// Looks at the output from `pos` on; returns the first matching line.
    fn scan(&mut self, p: &Proc, filter: StreamFilter) -> Option<String> {
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

pub async fn wait(d: &Daemon, r: WaitRequest) -> Result<Response, ProtocolError> {
    let p = d.get(r.id)?;
    let since = r.since.unwrap_or(0);
    let mut matcher = match &r.spec.until {
        Some(pattern) => Some(Matcher {
            re: RegexBuilder::new(pattern)
                .multi_line(true)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| bad_request(format!("`until` is not a valid regex: {e}")))?,
            pos: since,
            carry: Vec::new(),
        }),
        None => None,
    };
    let deadline = Instant::now() + Duration::from_millis(r.spec.timeout_ms).min(MAX_WAIT);
    let quiet = r.spec.quiet_ms.map(Duration::from_millis);
    let mut changes = p.subscribe();
    let reason = loop {
        changes.borrow_and_update();
        if let Some(m) = matcher.as_mut() {
            if let Some(line) = m.scan(&p, r.spec.stream) {
                break WaitReason::Matched(line);
            }
        }
        // The exit is reported as soon as it happens: what the process wrote is already in
        // (the supervisor reads its pipes before publishing the exit); a grandchild still
        // holding the pipes must not delay it.
        let (finished, waiting, last_output) = {
            let data = p.lock();
            (
                data.finished(),
                data.info.state == ProcState::WaitingInput,
                data.last_output,
            )
        };
        if finished {
            break WaitReason::Exited;
        }
        // Blocked reading the stdin pipe with nothing more to say: only an answer moves it on.
        if waiting {
            break WaitReason::WaitingInput;
        }
        let quiet_at = quiet.map(|q| Instant::from_std(last_output) + q);
        if quiet_at.is_some_and(|q| q <= Instant::now()) {
            break WaitReason::Quiet;
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { break WaitReason::Exited },
            _ = sleep_until(deadline) => break WaitReason::Timeout,
            _ = async { sleep_until(quiet_at.unwrap_or(deadline)).await }, if quiet_at.is_some() => {}
        }
    };
    let max = r
        .spec
        .max_bytes
        .min(cuba_protocol::wire::MAX_OUTPUT_PER_FRAME);
    let data = p.lock();
    Ok(Response::Waited(WaitResult {
        reason,
        process: data.snapshot(),
        output: data.output.read(Some(since), u64::from(max), r.spec.stream),
    }))
}

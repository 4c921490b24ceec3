//! `Wait` (and the second half of `Run`): until the exit, a line matching `until`, a wait for
//! input (`input.rs`), `quiet_ms` of silence, or the timeout. Woken by the record's change
//! channel, not by polling. Never kills.

use std::time::Duration;

use cuba_protocol::{ProcState, ProtocolError, Response, WaitReason, WaitRequest, WaitResult};
use regex::bytes::Regex;
use tokio::time::{sleep_until, Instant};

use super::table::Rec;

/// Longest wait one request may ask for.
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);
/// Most output a pattern is looked for in, per look: the newest bytes since the cursor.
const SCAN: u64 = 1024 * 1024;

pub async fn wait(p: &Rec, r: WaitRequest) -> Result<Response, ProtocolError> {
    let since = r.since.unwrap_or(0);
    let pattern = match &r.spec.until {
        Some(text) => Some(Regex::new(text).map_err(|e| {
            ProtocolError::bad_request(format!("`until` is not a valid regular expression: {e}"))
        })?),
        None => None,
    };
    let deadline = Instant::now() + Duration::from_millis(r.spec.timeout_ms).min(MAX_WAIT);
    let quiet = r.spec.quiet_ms.map(Duration::from_millis);
    let mut changes = p.subscribe();
    let timeout = sleep_until(deadline);
    tokio::pin!(timeout);
    let mut scanned = since;
    let reason = loop {
        changes.borrow_and_update();
        let (finished, waiting, last_output) = {
            let d = p.lock();
            (
                d.finished(),
                d.info.state == ProcState::WaitingInput,
                d.last_output,
            )
        };
        if let Some(re) = &pattern {
            if let Some(line) = matched(p, re, &mut scanned, r.spec.stream, finished) {
                break WaitReason::Matched(line);
            }
        }
        if finished {
            break WaitReason::Exited;
        }
        // Blocked reading its stdin with nothing more to say: only an answer moves it on.
        if waiting {
            break WaitReason::WaitingInput;
        }
        let quiet_at = quiet.map(|q| Instant::from_std(last_output) + q);
        if quiet_at.is_some_and(|q| q <= Instant::now()) {
            break WaitReason::Quiet;
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { break WaitReason::Exited },
            _ = &mut timeout => break WaitReason::Timeout,
            _ = async { sleep_until(quiet_at.unwrap_or(deadline)).await }, if quiet_at.is_some() => {}
        }
    };
    let max = r
        .spec
        .max_bytes
        .min(cuba_protocol::wire::MAX_OUTPUT_PER_FRAME);
    let d = p.lock();
    Ok(Response::Waited(WaitResult {
        reason,
        process: d.snapshot(),
        output: d.output.read(Some(since), u64::from(max), r.spec.stream),
    }))
}

/// The first whole line after `scanned` that matches, moving `scanned` past the lines looked
/// at (a line not ended yet is looked at again once it is, or once the process has ended).
fn matched(
    p: &Rec,
    re: &Regex,
    scanned: &mut u64,
    stream: cuba_protocol::StreamFilter,
    ended: bool,
) -> Option<String> {
    let read = p.lock().output.read(Some(*scanned), SCAN, stream);
    let bytes = read.bytes();
    let whole = match ended {
        true => bytes.len(),
        false => bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1),
    };
    let found = bytes[..whole]
        .split(|&b| b == b'\n')
        .find(|line| re.is_match(line))
        .map(|line| {
            String::from_utf8_lossy(line)
                .trim_end_matches('\r')
                .to_string()
        });
    *scanned = read.start + whole as u64;
    found
}

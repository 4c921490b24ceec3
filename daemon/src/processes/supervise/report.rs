//! What the supervisor tells the event log: a process waiting for input (with its prompt) and
//! the limits it enforces (the timeout, the orphan timeout, an OOM kill, the output cap).

use cuba_protocol::{EventKind, StreamFilter};

use super::Supervisor;
use crate::state::record::Proc;

/// How much of the output's end is looked at for the prompt, and the longest prompt logged.
const PROMPT_TAIL: u64 = 1024;
const MAX_PROMPT: usize = 200;

impl Supervisor<'_> {
    /// `target` now waits for input: once per wait (the caller saw the state change).
    pub(super) fn report_waiting(&self, target: &Proc) {
        let prompt = prompt(target);
        self.table.event(target, EventKind::WaitingInput { prompt });
    }

    /// The daemon enforced `limit` on `target`; `detail` says what it did.
    pub(super) fn report_limit(&self, target: &Proc, limit: &str, detail: String) {
        let limit = limit.to_string();
        self.table
            .event(target, EventKind::LimitHit { limit, detail });
    }

    /// Output was spilled: if the spool has just begun dropping its oldest bytes to keep its
    /// cap (`dropped_before` was 0), that is said once.
    pub(super) fn report_output_cap(&self, dropped_before: u64) {
        let dropped = self.p.lock().output.dropped();
        if dropped_before == 0 && dropped > 0 {
            let detail = "the spool is full (CUBA_EXEC_SPOOL_SIZE): its oldest output after the \
                          head is dropped"
                .to_string();
            self.report_limit(self.p, "output", detail);
        }
    }
}

/// The last line of `p`'s output (what a program prints before it reads), bounded.
fn prompt(p: &Proc) -> String {
    let read = {
        let rec = p.lock();
        let total = rec.output.total();
        let since = total.saturating_sub(PROMPT_TAIL);
        rec.output
            .read(Some(since), PROMPT_TAIL, StreamFilter::Both)
    };
    let bytes: Vec<u8> = read.chunks.into_iter().flat_map(|c| c.data).collect();
    let text = String::from_utf8_lossy(&bytes);
    let line = text
        .split(['\n', '\r'])
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    line.trim().chars().take(MAX_PROMPT).collect()
}

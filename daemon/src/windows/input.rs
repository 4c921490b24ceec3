//! Waiting for input on Windows: once a command's output and stdin have been quiet for
//! [`QUIET`], the daemon looks a few times, with doubling pauses, then not again until the next
//! output or input: an idle command costs nothing. Output and input clear the state
//! (`Data::moved_on`).
//!
//! - On pipes: a read waits on its stdin pipe (`platform::windows::input::read_pending`: the
//!   pipe's write quota, Cygwin's technique), and its tree used no CPU since the last look (a
//!   program busy elsewhere while a thread of it reads is not waiting for an answer).
//! - On a terminal, where no such signal exists, a heuristic: its tree used no CPU since the
//!   last look, and its output ends without a line feed (a prompt).
//!
//! Wine reports no write quota on a pipe and no CPU time for a job, so under Wine both would see
//! a wait always: the watcher is not started there (README, Windows).

use std::fs::File;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use cuba_protocol::{ProcState, StreamFilter};

use super::table::Rec;
use crate::platform::windows::input::read_pending;

/// How long output and input must have been quiet before the pipe is asked.
const QUIET: Duration = Duration::from_millis(150);
/// Looks at the pipe per quiet period: after QUIET, then pauses doubling from it.
const CHECKS: u32 = 5;

/// Watches `rec` for a wait for input: on its stdin pipe (`pipe`: the writer's end, gone once
/// stdin is closed), or on its terminal (`None`).
pub fn watch(rec: Arc<Rec>, pipe: Option<Weak<File>>) {
    if cuba_protocol::win::wine().is_some() {
        return;
    }
    tokio::spawn(async move { watching(&rec, pipe.as_ref()).await });
}

/// When it last did something: the later of its last output and its last input.
fn active_at(rec: &Rec) -> Option<Instant> {
    let d = rec.lock();
    (!d.finished()).then(|| d.last_output.max(d.last_input))
}

/// The CPU time its tree has used, when its job says.
fn cpu_ns(rec: &Rec) -> Option<u64> {
    let job = rec.lock().job.clone()?;
    job.usage().ok().map(|u| u.cpu_ns)
}

/// Whether its output so far ends without a line feed (a prompt waiting on the line).
fn ends_mid_line(rec: &Rec) -> bool {
    let d = rec.lock();
    let total = d.output.total();
    let last = d
        .output
        .read(Some(total.saturating_sub(1)), 1, StreamFilter::Both);
    last.bytes().last().is_some_and(|b| *b != b'\n')
}

/// Whether it looks blocked on its input now (`cpu`: its CPU time at the last look, updated).
fn blocked(rec: &Rec, pipe: Option<&Weak<File>>, cpu: &mut Option<u64>) -> Option<bool> {
    let now = cpu_ns(rec);
    let idle = now.is_some() && now == *cpu;
    *cpu = now;
    match pipe {
        Some(pipe) => {
            let end = pipe.upgrade()?;
            Some(idle && read_pending(&*end).unwrap_or(false))
        }
        None => Some(idle && ends_mid_line(rec)),
    }
}

async fn watching(rec: &Rec, pipe: Option<&Weak<File>>) {
    let mut changes = rec.subscribe();
    'watch: loop {
        let Some(since) = active_at(rec) else { return };
        let mut cpu = cpu_ns(rec);
        // Quiet for QUIET, then up to CHECKS looks at the pipe.
        let mut pause = QUIET;
        let mut at = tokio::time::Instant::from_std(since) + QUIET;
        for _ in 0..CHECKS {
            // Until the look is due, or it does something (then the quiet starts again).
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => break,
                    changed = changes.changed() => {
                        if changed.is_err() { return }
                        if active_at(rec) != Some(since) { continue 'watch }
                    }
                }
            }
            // Stdin closed: nothing to wait for.
            let Some(pending) = blocked(rec, pipe, &mut cpu) else {
                return;
            };
            if pending {
                let waiting = {
                    let mut d = rec.lock();
                    let still = d.last_output.max(d.last_input) == since;
                    if still && d.info.state == ProcState::Running {
                        d.info.state = ProcState::WaitingInput;
                    }
                    still
                };
                if waiting {
                    rec.notify();
                }
                break;
            }
            pause *= 2;
            at = tokio::time::Instant::now() + pause;
        }
        // Nothing more until it does something again.
        loop {
            if changes.changed().await.is_err() {
                return;
            }
            match active_at(rec) {
                None => return,
                Some(t) if t != since => break,
                Some(_) => {}
            }
        }
    }
}

//! Waiting for input on Windows: once a command's output and stdin have been quiet for
//! [`QUIET`], the daemon asks its stdin pipe whether a read waits on it
//! (`platform::windows::input::read_pending`: the pipe's write quota, Cygwin's technique), a few
//! times with doubling pauses, then not again until the next output or input: an idle command
//! costs nothing. Output and input clear the state (`Data::moved_on`).
//!
//! Wine reports no write quota on a pipe, so under Wine the check would see a read waiting
//! always: it is not started there (README, Windows).

use std::fs::File;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use cuba_protocol::ProcState;

use super::table::Rec;
use crate::platform::windows::input::read_pending;

/// How long output and input must have been quiet before the pipe is asked.
const QUIET: Duration = Duration::from_millis(150);
/// Looks at the pipe per quiet period: after QUIET, then pauses doubling from it.
const CHECKS: u32 = 5;

/// Watches the stdin pipe of `rec` (`pipe`: the writer's end, gone once stdin is closed).
pub fn watch(rec: Arc<Rec>, pipe: Weak<File>) {
    if cuba_protocol::win::wine().is_some() {
        return;
    }
    tokio::spawn(async move { watching(&rec, &pipe).await });
}

/// When it last did something: the later of its last output and its last input.
fn active_at(rec: &Rec) -> Option<Instant> {
    let d = rec.lock();
    (!d.finished()).then(|| d.last_output.max(d.last_input))
}

async fn watching(rec: &Rec, pipe: &Weak<File>) {
    let mut changes = rec.subscribe();
    'watch: loop {
        let Some(since) = active_at(rec) else { return };
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
            let Some(end) = pipe.upgrade() else { return };
            let pending = read_pending(&*end).unwrap_or(false);
            drop(end);
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

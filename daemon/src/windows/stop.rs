//! Stopping a tree on Windows: a Ctrl-Break, the grace period, then the whole job.

use std::sync::Arc;
use std::time::Duration;

use cuba_protocol::Signal;

use super::console;
use super::table::{Rec, Stop};
use crate::platform::win_signal::{self, Action};

/// Waits until `p` has ended, at most `within`.
pub async fn ended(p: &Rec, within: Duration) {
    let mut changes = p.subscribe();
    let deadline = tokio::time::Instant::now() + within;
    while !p.lock().finished() {
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            _ => break,
        }
    }
}

/// Stops `p`'s tree for `cause` as `signal` says on Windows: a Ctrl-Break on its console, then
/// (with `grace`) the whole job ended if it still runs; `KILL` ends the job at once, and so
/// does any stop whose Ctrl-Break cannot be delivered. A signal with no Windows meaning does
/// nothing (the request was refused before).
pub fn stop(p: &Arc<Rec>, cause: Stop, signal: Signal, grace: Option<Duration>) {
    let Ok(action) = win_signal::action(signal) else {
        return;
    };
    let (job, pid) = {
        let mut data = p.lock();
        if data.finished() {
            return;
        }
        data.stop.get_or_insert(cause);
        (data.job.clone(), data.info.pid)
    };
    let Some(job) = job else { return };
    let kill = move || {
        if let Err(e) = job.kill(1) {
            tracing::warn!(pid, "cannot end the job: {e}");
        }
    };
    if action == Action::Terminate {
        kill();
        return;
    }
    if let Err(e) = console::ctrl_break(pid) {
        tracing::info!(pid, "no Ctrl-Break for it ({e}): its job is ended");
        kill();
        return;
    }
    let Some(grace) = grace else { return };
    let p = p.clone();
    tokio::spawn(async move {
        ended(&p, grace).await;
        if !p.lock().finished() {
            kill();
        }
    });
}

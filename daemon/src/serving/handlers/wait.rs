//! `Wait`: block until the process exits, its output matches `until`, it has been quiet for
//! `quiet_ms`, it waits for input (blocked reading its stdin pipe, see `supervise`, or a
//! password asked of the person), it awaits a person's approval, or the timeout. Never kills.
//! Woken by the process's change channel, not by polling.

use std::time::Duration;

use cuba_protocol::{ProcState, ProtocolError, Response, WaitReason, WaitRequest, WaitResult};
use tokio::time::{sleep_until, Instant};

use super::matcher::Matcher;
use crate::serving::daemon::Daemon;

/// Longest wait one request may ask for.
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// `inside`: the caller runs in this process's own tree (not someone attending to it).
pub async fn wait(d: &Daemon, r: WaitRequest, inside: bool) -> Result<Response, ProtocolError> {
    let p = d.table().get(r.id)?;
    let _own = inside.then(|| p.own_follower());
    let since = r.since.unwrap_or(0);
    let mut matcher = match &r.spec.until {
        Some(pattern) => Some(Matcher::new(pattern, since)?),
        None => None,
    };
    let deadline = Instant::now() + Duration::from_millis(r.spec.timeout_ms).min(MAX_WAIT);
    let quiet = r.spec.quiet_ms.map(Duration::from_millis);
    let mut changes = p.subscribe();
    // One timer for the whole wait: one made per turn would register anew on every change.
    let timeout = sleep_until(deadline);
    tokio::pin!(timeout);
    let reason = loop {
        changes.borrow_and_update();
        // The state first, then the output: the supervisor stores what the process wrote before
        // it publishes an exit or a wait for input, so a line written just before either is
        // scanned here and matches, rather than losing to the state it preceded.
        let (finished, waiting, held, last_output) = {
            let data = p.lock();
            (
                data.finished(),
                data.info().state == ProcState::WaitingInput,
                // Held with a question open: once answered, a command not yet started is
                // waited for (its launch is a change).
                data.info().state == ProcState::AwaitingApproval
                    && data.info().asks.iter().any(|a| a.kind.holds()),
                data.last_output,
            )
        };
        if let Some(m) = matcher.as_mut() {
            if let Some(line) = m.scan(&p, r.spec.stream) {
                break WaitReason::Matched(line);
            }
        }
        // The exit is reported as soon as it happens: what the process wrote is already in
        // (the supervisor reads its pipes before publishing the exit); a grandchild still
        // holding the pipes must not delay it.
        if finished {
            break WaitReason::Exited;
        }
        // Blocked reading the stdin pipe with nothing more to say: only an answer moves it on.
        if waiting {
            break WaitReason::WaitingInput;
        }
        // Held until a person answers: the caller says so (and asks in its own way).
        if held {
            break WaitReason::AwaitingApproval;
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
    let data = p.lock();
    Ok(Response::Waited(WaitResult {
        reason,
        process: data.snapshot(),
        output: data.output.read(Some(since), u64::from(max), r.spec.stream),
    }))
}

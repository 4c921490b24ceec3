//! `Prune`: remove every finished record now, with its spool.

use std::time::Duration;

use cuba_protocol::Response;
use tokio::time::{timeout_at, Instant};

use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

/// How long a prune waits for ended processes whose last output is still being collected
/// (pipes held open a moment by what they left behind; the supervisor gives up after 1 s).
const DRAIN_WAIT: Duration = Duration::from_secs(3);

/// A confined caller prunes only its own records.
pub async fn prune(d: &Daemon, caller: &Caller) -> Response {
    // `kill 1 && prune` must remove 1: it has ended, but its output may not all be in yet.
    let deadline = Instant::now() + DRAIN_WAIT;
    let draining: Vec<_> = d
        .table()
        .all()
        .into_iter()
        .filter(|p| {
            let rec = p.lock();
            rec.finished() && !rec.drained && caller.reaches(&rec)
        })
        .collect();
    for p in draining {
        let mut changes = p.subscribe();
        while !p.done() {
            if !matches!(timeout_at(deadline, changes.changed()).await, Ok(Ok(()))) {
                break;
            }
        }
    }
    Response::Pruned(d.table().prune_of(caller.tenant.as_ref()))
}

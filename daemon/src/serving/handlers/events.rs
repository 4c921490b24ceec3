//! `Events`: the event log as the caller may see it (a confined caller: its own processes'
//! events only), one batch, or followed: the backlog, then each new batch as the log wakes its
//! readers, until the client cancels or goes away or the daemon shuts down.

use cuba_protocol::{EventsRequest, ProtocolError, Response};

use super::Responder;
use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;
use crate::state::events::View;

pub async fn events(
    d: &Daemon,
    caller: &Caller,
    r: EventsRequest,
    out: &Responder,
) -> Result<Response, ProtocolError> {
    let view = match caller.tenant.as_deref() {
        Some(t) => View::Tenant(t),
        None => View::All,
    };
    let log = d.table().events();
    if !r.follow {
        return Ok(Response::Events(log.read(r.since, r.id, view, r.max)));
    }
    let mut changes = log.subscribe();
    let mut since = r.since;
    let mut first = true;
    loop {
        changes.borrow_and_update();
        let batch = log.read(since, r.id, view, r.max);
        since = Some(batch.next);
        // The backlog is sent even empty: the client learns its cursor.
        if first || !batch.events.is_empty() || batch.lost > 0 {
            first = false;
            if !out.send(Response::Events(batch)).await {
                return Ok(Response::End);
            }
        }
        // A full batch has more behind it: read on before waiting.
        if since < Some(log.next_seq()) {
            continue;
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return Ok(Response::End) },
            _ = d.shutdown().cancelled() => return Ok(Response::End),
        }
    }
}

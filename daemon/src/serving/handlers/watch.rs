//! `WatchTable`: the table now and after every change, until the client cancels or goes away.

use cuba_protocol::{ListRequest, ProtocolError, Response};

use super::{list::list, Responder};
use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

pub async fn watch(
    d: &Daemon,
    caller: &Caller,
    r: ListRequest,
    out: &Responder,
) -> Result<Response, ProtocolError> {
    let mut changes = d.table().subscribe();
    loop {
        changes.borrow_and_update();
        if !out.send(Response::List(list(d, caller, &r))).await {
            return Ok(Response::End);
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return Ok(Response::End) },
            _ = d.shutdown().cancelled() => return Ok(Response::End),
        }
    }
}

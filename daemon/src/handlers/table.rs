//! `List` and `WatchTable`: the shared table, filtered by state and owner.

use cuba_protocol::{ListRequest, ProcessInfo, ProtocolError, Response};

use super::Responder;
use crate::daemon::Daemon;

pub fn list(d: &Daemon, r: &ListRequest) -> Vec<ProcessInfo> {
    d.all()
        .iter()
        .map(|p| p.info())
        .filter(|i| r.state.is_none_or(|s| i.state == s))
        .filter(|i| r.owner.as_ref().is_none_or(|o| &i.owner.name == o))
        .collect()
}

/// Sends the table now and after every change, until the client cancels or goes away.
pub async fn watch(d: &Daemon, r: ListRequest, out: &Responder) -> Result<Response, ProtocolError> {
    let mut changes = d.subscribe_table();
    loop {
        changes.borrow_and_update();
        if !out.send(Response::List(list(d, &r))).await {
            return Ok(Response::End);
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return Ok(Response::End) },
            _ = d.shutdown.cancelled() => return Ok(Response::End),
        }
    }
}

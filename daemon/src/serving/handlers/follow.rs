//! `Follow`: stream a process's output as it is produced, then its final row, then `End`.

use cuba_protocol::{FollowRequest, ProtocolError, Response};

use super::Responder;
use crate::serving::daemon::Daemon;

/// Largest output frame sent while following.
const STEP: u64 = 256 * 1024;

/// `inside`: the caller runs in this process's own tree.
pub async fn follow(
    d: &Daemon,
    r: FollowRequest,
    out: &Responder,
    inside: bool,
) -> Result<Response, ProtocolError> {
    let p = d.table().get(r.id)?;
    let _own = inside.then(|| p.own_follower());
    let mut changes = p.subscribe();
    let mut cursor = r.since;
    if cursor.is_none() {
        let total = p.lock().output.total();
        cursor = Some(total.saturating_sub(u64::from(r.backlog)));
    }
    let mut cursor = cursor.unwrap_or(0);
    loop {
        changes.borrow_and_update();
        let (read, done) = {
            let data = p.lock();
            let read = data.output.read(Some(cursor), STEP, r.stream);
            (read, data.finished() && data.drained)
        };
        if read.next > cursor {
            cursor = read.next;
            if !out.send(Response::Output(read)).await {
                return Ok(Response::End);
            }
            continue;
        }
        if done {
            out.send(Response::Process(p.info())).await;
            return Ok(Response::End);
        }
        if changes.changed().await.is_err() {
            return Ok(Response::End);
        }
    }
}

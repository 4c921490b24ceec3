//! `Run`: spawn and wait in one round trip. The record is sent first (its id, for signals and
//! progress), then the wait's result; cancelling ends only the wait. A retry with the request's
//! token starts nothing: it gets the same record and waits on it from cursor 0 again.

use cuba_protocol::{ProtocolError, Response, RunRequest, WaitRequest};

use super::{spawn, wait, Responder};
use crate::caller::Caller;
use crate::daemon::Daemon;

pub async fn run(
    d: &Daemon,
    caller: &Caller,
    r: RunRequest,
    out: &Responder,
) -> Result<Response, ProtocolError> {
    let info = spawn::spawn(d, caller, r.spawn).await?;
    let id = info.id;
    if !out.send(Response::Process(info)).await {
        return Ok(Response::End);
    }
    let req = WaitRequest {
        id,
        since: Some(0),
        spec: r.wait,
    };
    wait::wait(d, req).await
}

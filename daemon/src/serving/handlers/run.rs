//! `Run`: spawn and wait in one round trip. The record is sent first (its id, for signals and
//! progress), then the wait's result; cancelling ends only the wait. A retry with the request's
//! token starts nothing: it gets the same record and waits on it from cursor 0 again.
//!
//! The record waits up to [`HOLD`] for the result: a command that ends by then (most an agent
//! runs) gets both in one write, and its client wakes once, not twice (on a small machine the
//! first wake-up lands in the middle of the command's run). A client learns the id that much
//! later; a cancel it gets meanwhile takes effect once the record is there.

use std::time::Duration;

use cuba_protocol::{ProtocolError, Response, RunRequest, WaitRequest};

use super::{spawn, wait, Responder};
use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

pub async fn run(
    d: &Daemon,
    caller: &Caller,
    r: RunRequest,
    out: &Responder,
) -> Result<Response, ProtocolError> {
    let info = spawn::spawn(d, caller, r.spawn).await?;
    let req = WaitRequest {
        id: info.id,
        since: Some(0),
        spec: r.wait,
    };
    let wait = wait::wait(d, req, false);
    tokio::pin!(wait);
    let ended = tokio::select! {
        biased;
        result = &mut wait => Some(result),
        () = tokio::time::sleep(HOLD) => None,
    };
    if !out.send(Response::Process(info)).await {
        return Ok(Response::End);
    }
    match ended {
        Some(result) => result,
        None => wait.await,
    }
}

/// How long a run's record waits for the run's end before it is sent alone.
const HOLD: Duration = Duration::from_millis(5);

//! `Shutdown`: a person's verb; refused while processes run unless forced; answered before the
//! daemon starts going down (then every process is stopped gracefully: TERM, grace period,
//! KILL).

use cuba_protocol::{ProtocolError, Response, ShutdownRequest};

use super::Responder;
use crate::serving::daemon::Daemon;
use crate::state::caller::Caller;

pub async fn shutdown(d: &Daemon, caller: &Caller, r: ShutdownRequest, out: &Responder) {
    if let Err(e) = super::person(d, caller, "daemon stop", "stop the daemon") {
        out.send(Response::Error(e)).await;
        return;
    }
    let running = d.table().count_running();
    if running > 0 && !r.force {
        let refusal = ProtocolError::invalid_state(format!(
            "{running} process(es) still running; stop them first, or force the shutdown \
             (they are then stopped gracefully: TERM, grace period, KILL)"
        ));
        out.send(Response::Error(refusal)).await;
        return;
    }
    out.send(Response::Ok).await;
    d.shutdown().cancel();
}

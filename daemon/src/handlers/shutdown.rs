//! `Shutdown`: refused while processes run unless forced; answered before the daemon starts
//! going down (then every process is stopped gracefully: TERM, grace period, KILL).

use cuba_protocol::{ProtocolError, Response, ShutdownRequest};

use super::Responder;
use crate::daemon::Daemon;

pub async fn shutdown(d: &Daemon, r: ShutdownRequest, out: &Responder) {
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

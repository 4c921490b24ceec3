//! `DaemonStatus` and `Shutdown`.

use std::sync::atomic::Ordering;

use cuba_protocol::{
    DaemonStatus, ErrorKind, ProtocolError, Response, ShutdownRequest, PROTOCOL_VERSION, VERSION,
};

use crate::daemon::Daemon;

pub fn status(d: &Daemon) -> DaemonStatus {
    let all = d.all();
    let running = all.iter().filter(|p| !p.lock().finished()).count();
    DaemonStatus {
        daemon_version: VERSION.to_string(),
        protocol_version: PROTOCOL_VERSION,
        pid: d.pid,
        started_at_ms: d.started_at_ms,
        socket: d.config.socket.display().to_string(),
        state_dir: d.config.state_dir.display().to_string(),
        clients: d.clients.load(Ordering::Relaxed),
        running: running as u32,
        total: all.len() as u32,
        max_procs: d.config.max_procs as u32,
    }
}

pub fn shutdown(d: &Daemon, r: ShutdownRequest) -> Result<Response, ProtocolError> {
    let running = d.count_running();
    if running > 0 && !r.force {
        return Err(ProtocolError::new(
            ErrorKind::InvalidState,
            format!(
                "{running} process(es) still running; stop them first, or force the shutdown \
                 (they are then stopped gracefully: TERM, grace period, KILL)"
            ),
        ));
    }
    Ok(Response::Ok)
}

//! `DaemonStatus`: the daemon's version, pid, socket, state directory and counts.

use cuba_protocol::{DaemonStatus, PROTOCOL_VERSION, VERSION};

use crate::daemon::Daemon;

pub fn status(d: &Daemon) -> DaemonStatus {
    let all = d.table().all();
    let running = all.iter().filter(|p| !p.lock().finished()).count();
    DaemonStatus {
        daemon_version: VERSION.to_string(),
        protocol_version: PROTOCOL_VERSION,
        pid: d.pid(),
        started_at_ms: d.started_at_ms(),
        socket: d.config().socket.display().to_string(),
        state_dir: d.config().state_dir.display().to_string(),
        clients: d.clients(),
        running: running as u32,
        total: all.len() as u32,
        max_procs: d.config().max_procs as u32,
    }
}

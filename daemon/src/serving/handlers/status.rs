//! `DaemonStatus`: the daemon's version, pid, socket, state directory and counts.

use cuba_protocol::{DaemonStatus, PROTOCOL_VERSION, VERSION};

use crate::serving::daemon::Daemon;

pub fn status(d: &Daemon) -> DaemonStatus {
    let all = d.table().all();
    let running = all.iter().filter(|p| !p.lock().finished()).count();
    let mut notices = Vec::new();
    let stopped: Vec<(u64, String)> = all
        .iter()
        .filter_map(|p| {
            let rec = p.lock();
            let why = rec.output.spool_stopped().filter(|_| !rec.finished())?;
            Some((p.id, why))
        })
        .collect();
    if let Some((_, why)) = stopped.first() {
        let ids: Vec<String> = stopped
            .iter()
            .take(10)
            .map(|(id, _)| id.to_string())
            .collect();
        let more = if stopped.len() > 10 { " …" } else { "" };
        notices.push(format!(
            "spool stopped: {why}; {} running process(es) (ids {}{more}) keep their output in \
             memory only until the state directory {} takes writes again",
            stopped.len(),
            ids.join(", "),
            d.config().state_dir.display()
        ));
    }
    notices.extend(os_notices());
    notices.extend(crate::base::health::notices());
    let upgrade_failed = d.upgrade_failure();
    if let Some(why) = &upgrade_failed {
        notices.push(format!("the last upgrade did not happen: {why}"));
    }
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
        os: std::env::consts::OS.to_string(),
        arch: std::env::consts::ARCH.to_string(),
        hostname: cuba_protocol::hosts::hostname().unwrap_or_default(),
        shell: d.config().shell.clone(),
        notices,
        upgraded_at_ms: d.upgraded_at_ms(),
        upgrades: d.upgrades().1,
        upgrade_failed,
        supervision: d.launcher().supervision().to_string(),
        exec_checks: d.launcher().exec_checks(),
        sandbox: d.config().sandbox.lines(&d.config().policy.dirs),
    }
}

/// What this OS's daemon lacks (`platform::capability`), and on Windows the sandbox and Wine.
fn os_notices() -> Vec<String> {
    let mut notices = Vec::new();
    if let Some(missing) = crate::platform::capability::missing() {
        notices.push(format!(
            "not offered on {}: {missing}.",
            std::env::consts::OS
        ));
    }
    #[cfg(windows)]
    {
        notices.push(format!("{}.", crate::platform::windows::SANDBOX));
        if let Some(version) = cuba_protocol::win::wine() {
            notices.push(format!(
                "running under Wine {version}: file access lists are not checked (Wine keeps \
                 none)"
            ));
        }
    }
    notices
}

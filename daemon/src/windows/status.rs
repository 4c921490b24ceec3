//! `DaemonStatus` and `PolicyCheck` on Windows: what the daemon is and what it would run.

use cuba_protocol::{DaemonStatus, PolicyDecision, PROTOCOL_VERSION, VERSION};

use super::client::Client;
use super::Daemon;

/// What `list_hosts` and `daemon status` say of the sandbox on Windows.
pub const SANDBOX: &str = "the sandbox is unavailable on Windows (no write confinement or network \
                       cut-off is built for it yet: Landlock and Seatbelt have no equivalent \
                       wired up there)";

pub fn policy_check(d: &Daemon, client: &Client, text: &str) -> PolicyDecision {
    let shell = &d.config.shell;
    match crate::platform::win_shell::Kind::of(shell).parsed() {
        true => client.policy.check(text),
        false => {
            let cwd = std::path::Path::new(&client.info.cwd);
            client.policy.check_unread(shell, text, cwd)
        }
    }
}

pub fn status(d: &Daemon) -> DaemonStatus {
    let all = d.table.all();
    let running = all.iter().filter(|p| !p.lock().finished()).count();
    let mut notices = vec![format!("{SANDBOX}.")];
    if let Some(version) = cuba_protocol::win::wine() {
        notices.push(format!(
            "running under Wine {version}: file access lists are not checked (Wine keeps none)"
        ));
    }
    notices.extend(crate::health::notices());
    DaemonStatus {
        daemon_version: VERSION.to_string(),
        protocol_version: PROTOCOL_VERSION,
        pid: Daemon::pid(),
        started_at_ms: d.started_at_ms,
        socket: d.config.socket.display().to_string(),
        state_dir: d.config.state_dir.display().to_string(),
        clients: d.clients(),
        running: running as u32,
        total: all.len() as u32,
        max_procs: d.config.max_procs as u32,
        os: std::env::consts::OS.to_string(),
        arch: std::env::consts::ARCH.to_string(),
        hostname: cuba_protocol::hosts::hostname().unwrap_or_default(),
        shell: d.config.shell.clone(),
        notices,
        upgraded_at_ms: None,
        upgrades: 0,
        upgrade_failed: None,
        supervision: "a Job Object per command (whole-tree stop, CPU time and peak memory; \
                      pids_max and memory_max as the job's limits)"
            .to_string(),
        exec_checks: "unavailable (Windows: no check at each exec is built there)".to_string(),
    }
}

//! Waiting for a process to exit: an event where the system has one, else a check every 50 ms.
//!
//! The system provides (`os::exit`): `async wait(pid, limit) -> io::Result<Option<bool>>`:
//! `Some(true)` once it has exited (or was already gone), `Some(false)` when `limit` passed,
//! `None` when this system (or kernel) has no exit event to wait on.

use std::time::Duration;

use anyhow::Result;

use super::{os, procs};

/// Waits until process `pid` has exited, at most `limit`. True when it has.
pub async fn wait_exit(pid: i32, limit: Duration) -> Result<bool> {
    match os::exit::wait(pid, limit).await? {
        Some(exited) => Ok(exited),
        None => Ok(poll_exit(pid, limit).await),
    }
}

async fn poll_exit(pid: i32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while procs::alive(pid) {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn exit_is_seen_and_a_living_process_times_out() {
        let mut child = long_sleeper().spawn().expect("spawn sleep");
        let pid = child.id() as i32;
        let waited = wait_exit(pid, Duration::from_millis(100)).await;
        assert!(!waited.expect("wait"), "sleep 30 counted as exited");
        child.kill().expect("kill");
        // Unreaped, it is a zombie: that counts as exited.
        let waited = wait_exit(pid, Duration::from_secs(10)).await;
        assert!(waited.expect("wait"), "no exit seen");
        child.wait().expect("reap");
    }

    /// A process that runs for 30 s.
    fn long_sleeper() -> std::process::Command {
        if cfg!(windows) {
            let mut c = std::process::Command::new("ping");
            c.args(["-n", "30", "127.0.0.1"])
                .stdout(std::process::Stdio::null());
            c
        } else {
            let mut c = std::process::Command::new("sleep");
            c.arg("30");
            c
        }
    }
}

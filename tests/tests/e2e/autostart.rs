//! Auto-start: two `cubactl` runs racing against an empty socket directory start exactly one
//! daemon, and both are served by it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use cuba_tests::procfs::{cmdline, kill9, with_cmdline};
use cuba_tests::{bin, bounded, pid_alive, wait_for, STEP};

/// Kills whatever daemon the test's clients started (it is not our child: it daemonized).
struct Cleanup {
    socket: PathBuf,
    state: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let lock = cuba_protocol::paths::lock_path(&self.socket);
        if let Some(pid) = std::fs::read_to_string(lock)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            if cmdline(pid).contains(&*self.socket.to_string_lossy()) {
                kill9(pid);
            }
        }
        for pid in with_cmdline(&self.socket.to_string_lossy()) {
            if cmdline(pid).contains("cubad") {
                kill9(pid);
            }
        }
        cuba_tests::cgroups::remove_instance_of(&self.state);
    }
}

async fn cubactl_ps(socket: &Path, state: &Path) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(bin("cubactl"));
    cmd.arg("ps")
        .env("CUBA_EXEC_SOCKET", socket)
        .env("CUBA_EXEC_STATE_DIR", state)
        .env("CUBA_EXEC_DAEMON", bin("cubad"))
        .env("CUBA_EXEC_SHUTDOWN_TIMEOUT", "300ms")
        .kill_on_drop(true);
    bounded("cubactl ps", STEP, cmd.output()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_clients_start_exactly_one_daemon() {
    let dir = tempfile::Builder::new()
        .prefix("cx")
        // Private, as the daemon requires of its socket and state directories.
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in("/tmp")
        .unwrap();
    // A socket directory that does not exist yet: the daemon creates it owner-only.
    let socket = dir.path().join("run").join("s");
    let state = dir.path().join("state");
    let _cleanup = Cleanup {
        socket: socket.clone(),
        state: state.clone(),
    };
    let (a, b) = tokio::join!(cubactl_ps(&socket, &state), cubactl_ps(&socket, &state));
    for out in [&a, &b] {
        assert!(out.status.success(), "cubactl ps failed: {out:?}");
    }

    let lock = cuba_protocol::paths::lock_path(&socket);
    let pid: i32 = std::fs::read_to_string(&lock)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pid_alive(pid), "the daemon in {} is gone", lock.display());
    let needle = socket.to_string_lossy().into_owned();
    assert!(cmdline(pid).contains(&needle), "{}", cmdline(pid));
    // A losing daemon may take a moment to notice it lost the lock and exit.
    let daemons = || {
        with_cmdline(&needle)
            .into_iter()
            .filter(|p| cmdline(*p).contains("cubad"))
            .collect::<Vec<_>>()
    };
    assert!(
        wait_for(|| daemons() == vec![pid], Duration::from_secs(5)).await,
        "daemons for the socket: {:?}",
        daemons()
    );
    let mode = std::fs::metadata(socket.parent().unwrap()).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o700
    );
    let mode = std::fs::metadata(&socket).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );

    // A third client finds it running and starts nothing.
    let c = cubactl_ps(&socket, &state).await;
    assert!(c.status.success(), "{c:?}");
    assert_eq!(daemons(), vec![pid]);
    // Exactly one daemon ever came up (a loser of the race says "already running").
    let log = std::fs::read_to_string(state.join("cubad.log")).unwrap();
    assert_eq!(log.matches(" ready").count(), 1, "{log}");
}

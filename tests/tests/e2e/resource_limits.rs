//! Resource limits end to end: rlimits set with prlimit on each command
//! (`CUBA_EXEC_RLIMIT_FSIZE`, `CUBA_EXEC_RLIMIT_NOFILE`). `pids_max` and `memory_max` go through
//! the per-process cgroup: `cgroups.rs`.
//!
//! Each command first reads a line from stdin, which the daemon writes only after the spawn
//! (and so the limits) is done: the short window between exec and prlimit, documented in
//! docs/decisions.md, cannot make these tests flaky.

#![allow(clippy::unwrap_used)]

use cuba_protocol::SpawnRequest;
use cuba_tests::{read_all, spawn_req, spawn_with, text, wait_exit, TestDaemon};

fn gated(command: &str) -> SpawnRequest {
    SpawnRequest {
        stdin: Some(b"go\n".to_vec()),
        ..spawn_req(&format!("read _go; {command}"))
    }
}

async fn run(d: &TestDaemon, command: &str) -> (Option<i32>, String) {
    let c = d.client().await;
    let p = spawn_with(&c, gated(command)).await;
    let w = wait_exit(&c, p.id).await;
    (w.process.exit_code, text(&read_all(&c, p.id).await))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_size_limit_stops_a_big_write() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_RLIMIT_FSIZE", "1024")
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    let cmd = format!(
        "ulimit -f; head -c 4096 /dev/zero > {}; echo rc=$?",
        f.display()
    );
    let (code, out) = run(&d, &cmd).await;
    assert_eq!(code, Some(0), "{out}");
    // dash counts `ulimit -f` in 512-byte blocks; SIGXFSZ (25) kills head: 128 + 25. dash
    // names the signal on stderr, which may be drained before stdout's earlier "2" when both
    // wait in their pipes: the order of two pipes is not the order of the writes.
    let stdout: Vec<&str> = out.lines().filter(|l| !l.contains("exceeded")).collect();
    assert_eq!(stdout.first(), Some(&"2"), "{out}");
    assert!(out.contains("rc=153"), "{out}");
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 1024);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_files_limit_is_set() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_RLIMIT_NOFILE", "64")
        .start()
        .await;
    let (code, out) = run(&d, "ulimit -n; ulimit -Hn").await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out, "64\n64\n");
}

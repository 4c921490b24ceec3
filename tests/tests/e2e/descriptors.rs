//! Descriptors and records do not grow with the number of processes that have finished: a
//! finished record holds no open file, and past `max_finished` the oldest records go, so a
//! daemon with a low open-file limit runs any number of commands one after another; a session
//! whose shell ended keeps nothing open either, however many names were used.

#![allow(clippy::unwrap_used)]

use cuba_protocol::{ListRequest, ProcState};
use cuba_tests::procfs::open_fds;
use cuba_tests::{bounded, spawn, wait_exit, TestDaemon, STEP};

/// Far fewer than two per run below: a leak of one file per finished record would exhaust it.
const OPEN_FILES: u64 = 96;
const RUNS: u64 = 300;
const MAX_FINISHED: usize = 40;

/// A daemon with few files to open and few finished records kept.
async fn capped_daemon() -> TestDaemon {
    TestDaemon::builder()
        .open_files(OPEN_FILES)
        .env("CUBA_EXEC_MAX_FINISHED", &MAX_FINISHED.to_string())
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_records_hold_no_descriptor_and_are_capped() {
    let d = capped_daemon().await;
    let c = d.client().await;
    let first = spawn(&c, "echo out; echo err >&2").await;
    wait_exit(&c, first.id).await;
    let before = open_fds(d.pid());
    let mut last = first;
    for _ in 1..RUNS {
        // Both streams, so each record has a spool with data and tags.
        last = spawn(&c, "echo out; echo err >&2").await;
        let w = wait_exit(&c, last.id).await;
        assert_eq!(w.process.exit_code, Some(0), "{:?}", w.process);
    }
    let after = open_fds(d.pid());
    eprintln!("daemon descriptors after 1 run: {before}, after {RUNS} runs: {after}");
    assert!(after <= before + 4, "{before} → {after} descriptors");

    let list = bounded("list", STEP, c.list(ListRequest::default()))
        .await
        .unwrap();
    let finished = list.iter().filter(|p| p.state == ProcState::Exited).count();
    eprintln!("records kept after {RUNS} runs: {finished} (max_finished {MAX_FINISHED})");
    // Pruned in batches: a little over the cap at most, never the newest.
    assert!(
        finished <= MAX_FINISHED + MAX_FINISHED / 20 + 2,
        "{finished}"
    );
    assert!(list.iter().any(|p| p.id == last.id));
    assert!(!list.iter().any(|p| p.id == 1), "the oldest went first");
    // Their output is still readable, from files opened for the read.
    assert_eq!(cuba_tests::read_all(&c, last.id).await.len(), 8);
}

/// Session names an agent might make, one per task.
const SESSIONS: u32 = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_shell_ended_holds_no_descriptor() {
    let d = capped_daemon().await;
    let c = d.client().await;
    let in_session = |name: String, command: &str| cuba_protocol::SpawnRequest {
        command: command.to_string(),
        session: Some(name),
        ..cuba_protocol::SpawnRequest::default()
    };
    let once = |n: u32| {
        let c = &c;
        async move {
            // A command, then the shell's own end: each name's shell starts and ends.
            let p = cuba_tests::spawn_with(c, in_session(format!("u{n}"), "true")).await;
            assert_eq!(wait_exit(c, p.id).await.process.exit_code, Some(0));
            let p = cuba_tests::spawn_with(c, in_session(format!("u{n}"), "exit")).await;
            wait_exit(c, p.id).await;
        }
    };
    once(0).await;
    // The command `exit` ends when its shell does, after the shell's end let go of its pipe.
    let before = open_fds(d.pid());
    // Far more names than the daemon may open files: one kept per name would exhaust them.
    for n in 1..SESSIONS {
        once(n).await;
    }
    // The last shell's other descriptors (its output pipes, its cgroup's files) go as its
    // supervisor ends, a moment after its command.
    assert!(
        cuba_tests::wait_for(|| open_fds(d.pid()) <= before + 4, STEP).await,
        "{before} → {} descriptors after {SESSIONS} sessions",
        open_fds(d.pid())
    );
}

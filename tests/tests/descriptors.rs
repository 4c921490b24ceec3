//! Descriptors and records do not grow with the number of processes that have finished: a
//! finished record holds no open file, and past `max_finished` the oldest records go, so a
//! daemon with a low open-file limit runs any number of commands one after another.

#![allow(clippy::unwrap_used)]

use cuba_protocol::{ListRequest, ProcState};
use cuba_tests::procfs::open_fds;
use cuba_tests::{bounded, spawn, wait_exit, TestDaemon, STEP};

/// Far fewer than two per run below: a leak of one file per finished record would exhaust it.
const OPEN_FILES: u64 = 96;
const RUNS: u64 = 300;
const MAX_FINISHED: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_records_hold_no_descriptor_and_are_capped() {
    let d = TestDaemon::builder()
        .open_files(OPEN_FILES)
        .env("CUBA_EXEC_MAX_FINISHED", &MAX_FINISHED.to_string())
        .start()
        .await;
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

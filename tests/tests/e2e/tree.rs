//! Whole trees: stopping a process ends its `setsid` escapees and double-forked grandchildren,
//! what a process leaves behind at its exit is stopped too, and a grandchild holding the output
//! pipe does not delay the exit report.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use cuba_protocol::{ProcState, Signal, SignalRequest};
use cuba_tests::procfs::cmdline;
use cuba_tests::{
    bounded, number_after, pid_alive, spawn, text, wait_exit, wait_for, wait_match, TestDaemon,
    STEP,
};

/// How long a stopped tree may take to vanish.
const GONE: Duration = Duration::from_secs(10);

async fn all_gone(pids: &[i32]) -> bool {
    wait_for(|| pids.iter().all(|p| !pid_alive(*p)), GONE).await
}

fn describe(pids: &[i32]) -> Vec<(i32, String)> {
    pids.iter()
        .filter(|p| pid_alive(**p))
        .map(|p| (*p, cmdline(*p)))
        .collect()
}

/// Starts a setsid escapee, a double-forked grandchild and a plain child, and prints their pids.
const TREE: &str = "\
    setsid sh -c 'echo esc=$$; exec sleep 301' & \
    sh -c 'sleep 302 & echo gc=$!'; \
    sleep 303 & echo child=$!; \
    echo main=$$; wait";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_process_ends_its_whole_tree() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, TREE).await;
    let mut pids = Vec::new();
    for key in ["esc", "gc", "child", "main"] {
        let line = wait_match(&c, p.id, &format!(r"^{key}=\d+$")).await;
        pids.push(number_after(&line, key));
    }
    assert_eq!(pids[3], p.pid as i32, "main=$$ is the tracked pid");
    for pid in &pids {
        assert!(pid_alive(*pid), "{pid} is not running before the stop");
    }
    // The escapee left the group and the grandchild left its parent: both are still found.
    // (Each once its exec is done: a process in the middle of one has no environment yet.)
    let all_marked = || {
        let marked = d.marked(p.id);
        pids.iter().all(|pid| marked.contains(pid))
    };
    assert!(
        wait_for(all_marked, GONE).await,
        "unmarked: {pids:?} against {:?}",
        d.marked(p.id)
    );
    let info = bounded(
        "stop",
        STEP,
        c.signal(SignalRequest {
            id: p.id,
            signal: Signal::Term,
            escalate: true,
            grace_ms: None,
            wait: true,
        }),
    )
    .await
    .unwrap();
    assert_eq!(info.state, ProcState::Killed, "{info:?}");
    assert!(all_gone(&pids).await, "survivors: {:?}", describe(&pids));
    assert!(
        d.marked(p.id).is_empty(),
        "marked survivors: {:?}",
        d.marked(p.id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_process_leaves_behind_is_stopped_after_its_exit() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(
        &c,
        "sleep 300 & echo bg=$!; setsid sleep 304 & echo esc=$!; \
         sh -c 'sleep 305 & echo gc=$!'",
    )
    .await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0), "{:?}", w.process);
    let out = text(&w.output.bytes());
    let pids: Vec<i32> = ["bg", "esc", "gc"]
        .iter()
        .map(|k| number_after(&out, k))
        .collect();
    assert!(all_gone(&pids).await, "left behind: {:?}", describe(&pids));
    assert!(
        d.marked(p.id).is_empty(),
        "marked survivors: {:?}",
        d.marked(p.id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_holding_the_pipe_does_not_delay_the_exit() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    // `wait_exit`'s bound (STEP) is shorter than the grandchild's 30 s.
    let p = spawn(&c, "sleep 30 & echo done").await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(
        (w.process.state, w.process.exit_code),
        (ProcState::Exited, Some(0))
    );
    assert_eq!(text(&w.output.bytes()), "done\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_ignoring_term_does_not_delay_the_exit_past_the_grace() {
    let d = TestDaemon::builder()
        .grace("300ms")
        .env("CUBA_EXEC_LOG", "cuba_daemon=debug")
        .start()
        .await;
    let c = d.client().await;
    // The grandchild keeps the pipe open and shrugs off TERM: only the KILL ends it (and
    // `wait_exit`'s bound, STEP, is shorter than its 30 s).
    let p = spawn(&c, "(trap '' TERM; sleep 30) & echo gc=$!").await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0), "{:?}", w.process);
    let gc = number_after(&text(&w.output.bytes()), "gc");
    assert!(
        all_gone(&[gc]).await,
        "left behind: {:?}; log:\n{}",
        describe(&[gc]),
        d.log()
    );
}

/// What the process left behind closed its pipes and ignores TERM: the KILL after the grace
/// period still comes, though no pipe keeps the supervisor waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_ignoring_term_without_the_pipes_is_killed() {
    let d = TestDaemon::builder().grace("300ms").start().await;
    let c = d.client().await;
    let p = spawn(
        &c,
        "(trap '' TERM; exec sleep 30 >/dev/null 2>&1 </dev/null) & echo gc=$!",
    )
    .await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0), "{:?}", w.process);
    let gc = number_after(&text(&w.output.bytes()), "gc");
    assert!(all_gone(&[gc]).await, "left behind: {:?}", describe(&[gc]));
}

//! `Signal`: a stop reaches the whole tree (the child's child too) on both OSes; a signal with
//! no Windows meaning is refused there, naming what works, and delivered on Unix.

use cuba_protocol::client::Client;
use cuba_protocol::{ErrorKind, ProcState, ProcessInfo, Signal, SignalRequest};

use crate::fixture::{bounded, spawn_running, until, wait_exit, Daemon};
use crate::os::{self, text};

/// Starts [`text::tree`] and waits until its tree is whole: at least two processes under the
/// root, one of them a grandchild. Returns the row and every pid of the tree.
async fn tree(d: &Daemon, c: &Client) -> (ProcessInfo, Vec<u32>) {
    let p = spawn_running(c, d.req(&text::tree())).await;
    assert!(p.pid > 0, "{p:?}");
    let mut members = Vec::new();
    until("the tree's processes", || {
        members = os::descendants(p.pid);
        members.len() >= 2 && members.iter().any(|(_, depth)| *depth >= 2)
    })
    .await;
    let mut pids: Vec<u32> = members.into_iter().map(|(pid, _)| pid).collect();
    pids.push(p.pid);
    (p, pids)
}

fn stop(id: u64, signal: Signal, escalate: bool) -> SignalRequest {
    SignalRequest {
        id,
        signal,
        escalate,
        grace_ms: Some(300),
        wait: true,
    }
}

async fn gone(pids: &[u32]) {
    until("the whole tree gone", || os::alive(pids).is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_ends_the_whole_tree_at_once() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let (p, pids) = tree(&d, &c).await;
    let row = bounded("kill", c.signal(stop(p.id, Signal::Kill, false)))
        .await
        .unwrap();
    assert_eq!(row.state, ProcState::Killed, "{row:?}");
    gone(&pids).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.state, ProcState::Killed);
    // Ended: another signal is refused, and so is one to no process.
    let again = bounded("kill", c.signal(stop(p.id, Signal::Kill, false))).await;
    assert_eq!(again.unwrap_err().kind(), Some(ErrorKind::InvalidState));
    let none = bounded("kill", c.signal(stop(u64::MAX, Signal::Kill, false))).await;
    assert_eq!(none.unwrap_err().kind(), Some(ErrorKind::NotFound));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_ends_the_whole_tree() {
    // TERM (Unix) or a Ctrl-Break (Windows; Wine cannot deliver it, so the job is ended after
    // the grace period), escalated: either way the tree is gone and the row says `killed`.
    let d = Daemon::start().await;
    let c = d.client().await;
    let (p, pids) = tree(&d, &c).await;
    let row = bounded("term", c.signal(stop(p.id, Signal::Term, true)))
        .await
        .unwrap();
    assert_eq!(row.state, ProcState::Killed, "{row:?}");
    gone(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_without_a_windows_meaning_is_refused_there_and_delivered_on_unix() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let p = spawn_running(&c, d.req(&text::long())).await;
    let answer = bounded("usr1", c.signal(stop(p.id, Signal::Usr1, false))).await;
    if cfg!(windows) {
        let e = answer.unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
        let why = e.to_string();
        assert!(
            why.contains("has no meaning on Windows") && why.contains("KILL"),
            "{why}"
        );
        let row = bounded("info", c.info(p.id)).await.unwrap();
        assert!(!row.state.is_finished(), "{row:?}");
        bounded("kill", c.signal(stop(p.id, Signal::Kill, false)))
            .await
            .unwrap();
    } else {
        // Its default action ends the process: reported as the signal, not as a stop.
        let row = answer.unwrap();
        assert_eq!(
            (row.state, row.signal),
            (ProcState::Signaled, Some(Signal::Usr1))
        );
    }
    let w = wait_exit(&c, p.id).await;
    assert!(w.process.state.is_finished(), "{w:?}");
}

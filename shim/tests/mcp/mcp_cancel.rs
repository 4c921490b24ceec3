//! Long calls of an in-process `CubaExec`: cancelling a synchronous `run` stops its process
//! tree, cancelling a `wait` does not, and a `run` blocking longer than the progress period
//! sends progress notifications for the request's token.

use crate::common;

use std::time::{Duration, Instant};

use common::mcp::{in_process, reply_of};
use common::{pid_alive, TestDir};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_sync_run_stops_its_process_tree() {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "cancel-test").await;
    // Both sleeps are forked before `started` is written, so the tree is whole when it matches.
    let command = "sleep 30 & sleep 31 & echo started; wait";
    let handle = c
        .send_call("run", json!({ "command": command, "yield_ms": 60_000 }))
        .await;
    let row = c.find_running(command).await;
    let id = row["id"].as_u64().expect("an id");
    let w = c
        .call(
            "wait",
            json!({ "id": id, "until": "started", "timeout_ms": 10_000 }),
        )
        .await;
    assert_eq!(w.str("wait"), "matched", "{}", w.text());
    // A sleep in the middle of its exec has no environment to read (the kernel is between the
    // old image and the new one's stack): the tree is counted once each has one.
    assert!(
        common::wait_for(|| t.marked(id).len() >= 3, common::STEP).await,
        "shell and two sleeps: {:?}",
        t.marked(id)
    );
    let tree = t.marked(id);

    common::bounded("cancel", common::STEP, handle.cancel(Some("test".into())))
        .await
        .expect("cannot send the cancellation");

    let done = c.wait_exit(id, 0).await;
    assert_eq!(done.state(), "killed", "{}", done.text());
    assert!(
        common::wait_for(|| tree.iter().all(|p| !pid_alive(*p)), common::STEP).await,
        "processes of the cancelled run survive: {:?}",
        t.marked(id)
    );
    assert!(t.marked(id).is_empty());

    let next = c.call("run", json!({ "command": "echo after" })).await;
    assert_eq!(next.output(), "after\n", "the server keeps serving");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_wait_leaves_the_process_running() {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "cancel-wait-test").await;
    let id = c.start("exec sleep 30").await.id();
    let handle = c
        .send_call("wait", json!({ "id": id, "timeout_ms": 50_000 }))
        .await;
    // The wait is in flight once the server answers a later call on the same connection.
    let s = c.call("status", json!({ "id": id })).await;
    assert_eq!(s.state(), "running");
    common::bounded("cancel", common::STEP, handle.cancel(None))
        .await
        .expect("cannot send the cancellation");
    let w = c.call("wait", json!({ "id": id, "timeout_ms": 300 })).await;
    assert_eq!(w.str("wait"), "timeout", "{}", w.text());
    assert_eq!(
        w.state(),
        "running",
        "a cancelled wait never stops the process"
    );
    assert!(!t.marked(id).is_empty());
    c.call("send_signal", json!({ "id": id, "signal": "SIGKILL" }))
        .await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_sends_progress_notifications() {
    let t = TestDir::with_daemon().await;
    let mut c = in_process(&t.socket(), "progress-test").await;
    let handle = c
        .send_call("run", json!({ "command": "echo tick; sleep 6; echo done" }))
        .await;
    let token = handle.progress_token.clone();
    let r = reply_of(handle, Duration::from_secs(30)).await;
    let answered = Instant::now();
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(r.output(), "tick\ndone\n");

    let mut notes = Vec::new();
    while let Ok(note) = c.progress.try_recv() {
        notes.push(note);
    }
    assert!(!notes.is_empty(), "no progress notification in 6 s");
    for (at, note) in &notes {
        assert_eq!(note.progress_token, token, "progress for this request");
        assert!(*at < answered, "progress arrives before the reply");
        assert!(note.progress >= 4.0, "seconds elapsed: {}", note.progress);
        let message = note.message.as_deref().unwrap_or("");
        assert!(
            message.contains(&format!("process {}", r.id())) && message.contains("5 bytes"),
            "message says which process and how much output: {message:?}"
        );
    }
    c.close().await;
}

//! The daemon's own life: a SIGKILLed daemon's successor keeps finished records and their output
//! and marks (and ends) what was running as lost; `cubactl daemon stop` refuses while processes
//! run and `--force` stops them and removes the socket; SIGTERM stops children gracefully.

#![allow(clippy::unwrap_used)]

use std::process::Output;
use std::time::Duration;

use cuba_protocol::{ListRequest, ProcState};
use cuba_tests::procfs::cmdline;
use cuba_tests::{
    bin, bounded, number_after, pid_alive, read_all, spawn, text, wait_exit, wait_for, wait_match,
    Step, TestDaemon, STEP,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_after_sigkill_keeps_records_and_ends_orphans() {
    let mut d = TestDaemon::start().await;
    let c = d.client().await;
    let kept = spawn(&c, "echo kept").await;
    wait_exit(&c, kept.id).await;
    let running = spawn(&c, "sleep 301 & echo child=$!; sleep 300").await;
    let child = number_after(&wait_match(&c, running.id, r"^child=\d+$").await, "child");
    // Output is written to the spool within moments of being read (not before the reply of a
    // short command): what a crash can take is the last few milliseconds, not this line.
    let spooled = d
        .state_dir()
        .join(format!("spool/{}/{:020}.out", running.id, 0));
    assert!(
        wait_for(
            || std::fs::read_to_string(&spooled).is_ok_and(|t| t.contains("child=")),
            STEP
        )
        .await,
        "the output never reached the spool"
    );
    // The tree: the shell, its background child, and `sleep 300` (unless the shell exec'd it).
    assert!(
        wait_for(
            || d.marked(running.id)
                .iter()
                .any(|p| cmdline(*p) == "sleep 300"),
            STEP
        )
        .await,
        "sleep 300 never started"
    );
    let mut tree = d.marked(running.id);
    tree.push(running.pid as i32);
    tree.sort_unstable();
    tree.dedup();
    assert!(tree.contains(&child), "{tree:?} lacks {child}");
    assert!(tree.len() >= 2, "{tree:?}");

    d.kill9();
    // Nothing killed them: the daemon's death alone leaves them orphaned.
    assert!(tree.iter().all(|p| pid_alive(*p)), "{tree:?}");
    d.restart().await;
    let c = d.client().await;

    let list = c.list(ListRequest::default()).step().await.unwrap();
    let old = list
        .iter()
        .find(|r| r.id == kept.id)
        .expect("kept is listed");
    assert_eq!((old.state, old.exit_code), (ProcState::Exited, Some(0)));
    assert_eq!(old.command, "echo kept");
    assert_eq!(text(&read_all(&c, kept.id).await), "kept\n");
    let lost = list.iter().find(|r| r.id == running.id).expect("listed");
    assert_eq!(lost.state, ProcState::Lost, "{lost:?}");
    assert!(
        lost.ended_at_ms.is_some() && lost.error.is_some(),
        "{lost:?}"
    );
    assert_eq!(
        text(&read_all(&c, running.id).await),
        format!("child={child}\n")
    );
    assert!(
        wait_for(
            || tree.iter().all(|p| !pid_alive(*p)),
            Duration::from_secs(10)
        )
        .await,
        "survivors of the lost process: {:?}",
        tree.iter().filter(|p| pid_alive(**p)).collect::<Vec<_>>()
    );

    let new = spawn(&c, "echo new").await;
    assert!(
        new.id > kept.id && new.id > running.id,
        "id {} reused",
        new.id
    );
    assert_eq!(text(&wait_exit(&c, new.id).await.output.bytes()), "new\n");

    // A second restart still has all three, the lost one unchanged.
    d.restart().await;
    let c = d.client().await;
    let list = c.list(ListRequest::default()).step().await.unwrap();
    let states: Vec<_> = list.iter().map(|r| (r.id, r.state)).collect();
    assert_eq!(
        states,
        vec![
            (kept.id, ProcState::Exited),
            (running.id, ProcState::Lost),
            (new.id, ProcState::Exited)
        ]
    );
}

/// Follows `id` to its end: the stream ends only once all its output is in and stored.
async fn follow_to_end(c: &cuba_protocol::client::Client, id: u64) {
    let req = cuba_protocol::FollowRequest {
        id,
        since: Some(0),
        backlog: 0,
        stream: cuba_protocol::StreamFilter::Both,
    };
    let mut sub = bounded(
        "follow",
        STEP,
        c.subscribe(cuba_protocol::Request::Follow(req)),
    )
    .await
    .unwrap();
    while let Some(Ok(r)) = bounded("follow frame", STEP, sub.next()).await {
        if matches!(r, cuba_protocol::Response::End) {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_output_is_kept_in_the_journal_and_a_long_one_in_the_spool() {
    let mut d = TestDaemon::start().await;
    let c = d.client().await;
    // Both streams, and bytes that are not UTF-8.
    let short = spawn(&c, "echo out; printf 'e\\377\\n' >&2; echo é").await;
    let long = spawn(&c, "head -c 20000 /dev/zero | tr '\\0' x").await;
    for p in [&short, &long] {
        wait_exit(&c, p.id).await;
        follow_to_end(&c, p.id).await;
    }
    // The two pipes are read as they come: the streams' order between them is the kernel's.
    let before = read_all(&c, short.id).await;
    let stdout = cuba_tests::read_stream(&c, short.id, cuba_protocol::StreamFilter::Stdout).await;
    assert_eq!(stdout, "out\né\n".as_bytes().to_vec());
    // No spool for the short one: its output is one journal line.
    assert!(!d.state_dir().join(format!("spool/{}", short.id)).exists());
    assert!(d.state_dir().join(format!("spool/{}", long.id)).is_dir());

    d.kill9();
    d.restart().await;
    let c = d.client().await;
    assert_eq!(read_all(&c, short.id).await, before);
    let stderr = cuba_tests::read_stream(&c, short.id, cuba_protocol::StreamFilter::Stderr).await;
    assert_eq!(stderr, b"e\xff\n".to_vec());
    assert_eq!(read_all(&c, long.id).await, vec![b'x'; 20000]);
    let list = c.list(ListRequest::default()).step().await.unwrap();
    let row = list.iter().find(|r| r.id == short.id).expect("listed");
    assert_eq!((row.stdout_bytes, row.stderr_bytes), (7, 3));

    // The journal's compaction (at start-up) keeps it too.
    d.restart().await;
    let c = d.client().await;
    assert_eq!(read_all(&c, short.id).await, before);
}

async fn cubactl(d: &TestDaemon, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(bin("cubactl"));
    cmd.args(args)
        .env("CUBA_EXEC_SOCKET", d.socket())
        .env("CUBA_EXEC_STATE_DIR", d.state_dir())
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    bounded("cubactl", STEP, cmd.output()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_stop_refuses_while_running_and_force_stops_all() {
    let mut d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "sleep 100").await;

    let out = cubactl(&d, &["daemon", "stop"]).await;
    assert!(
        !out.status.success(),
        "stop with a running process: {out:?}"
    );
    let err = text(&out.stderr);
    assert!(err.contains("running"), "{err}");
    assert!(pid_alive(p.pid as i32));
    assert_eq!(c.info(p.id).step().await.unwrap().state, ProcState::Running);

    let out = cubactl(&d, &["daemon", "stop", "--force"]).await;
    assert!(out.status.success(), "forced stop: {out:?}");
    let status = d.wait_daemon_exit(Duration::from_secs(10)).await;
    assert!(status.success(), "cubad exited with {status}");
    assert!(!pid_alive(p.pid as i32), "the sleep outlived the daemon");
    assert!(!d.socket().exists(), "the socket file was left behind");
    assert!(d.log().contains("shutting down"), "{}", d.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_children_gracefully_and_removes_the_socket() {
    let mut d = TestDaemon::builder().grace("5s").start().await;
    let c = d.client().await;
    // A process that handles TERM itself: a graceful stop lets it say goodbye.
    let p = spawn(
        &c,
        "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.1; done",
    )
    .await;
    wait_match(&c, p.id, "ready").await;

    // SAFETY: kill(2) on the daemon's pid, which this test owns.
    assert_eq!(unsafe { libc::kill(d.pid(), libc::SIGTERM) }, 0);
    let status = d.wait_daemon_exit(Duration::from_secs(10)).await;
    assert!(status.success(), "cubad exited with {status}");
    assert!(!pid_alive(p.pid as i32), "the child outlived the daemon");
    assert!(!d.socket().exists(), "the socket file was left behind");

    // The record says how it ended, and the child had time to run its TERM handler.
    d.restart().await;
    let c = d.client().await;
    let info = c.info(p.id).step().await.unwrap();
    assert_eq!(info.state, ProcState::Killed, "{info:?}");
    let out = text(&read_all(&c, p.id).await);
    assert!(out.contains("bye"), "the TERM handler did not run: {out:?}");
}

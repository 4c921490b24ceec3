//! Nothing left behind (`client_gone`, `unwatched_timeout`), through the real `cuba-exec`
//! binary: its editor closes (the MCP server sees the end of its input and exits) and what it
//! started is stopped after the grace, or asked about, or kept; and what nobody attends to is
//! stopped while what someone reads runs on. The table is watched, not polled.

use crate::common;

use common::mcp::binary;
use common::TestDir;
use cuba_protocol::client::{this_client, Client, Subscription};
use cuba_protocol::{AskKind, ClientKind, ListRequest, ProcState, ProcessInfo, Request};
use serde_json::json;

/// A client of the daemon's own (not the MCP server) and its watch of the table.
async fn watcher(t: &TestDir) -> (Client, Subscription) {
    let me = this_client(ClientKind::Other, "watcher");
    let direct = Client::connect(&t.socket(), me).await.expect("connect");
    let table = direct
        .subscribe(Request::WatchTable(ListRequest::default()))
        .await
        .expect("watch the table");
    (direct, table)
}

/// The table's rows as they change, until `done` holds for one frame (bounded).
async fn until(frames: &mut Subscription, what: &str, done: impl Fn(&[ProcessInfo]) -> bool) {
    loop {
        match common::bounded(what, common::STEP, frames.next()).await {
            Some(Ok(cuba_protocol::Response::List(l))) if done(&l.processes) => return,
            Some(Ok(_)) => {}
            other => panic!("{what}: the table watch ended: {other:?}"),
        }
    }
}

fn row(rows: &[ProcessInfo], id: u64) -> Option<&ProcessInfo> {
    rows.iter().find(|p| p.id == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_clients_commands_are_stopped_after_the_grace_unless_followed() {
    let set = [
        ("CUBA_EXEC_CLIENT_GONE", "stop"),
        ("CUBA_EXEC_CLIENT_GONE_GRACE", "300ms"),
    ];
    let mut t = TestDir::with_daemon_env(&set).await;
    let c = binary(&mut t, "gone-agent", &[]).await;
    let lone = c.start("sleep 300").await.id();
    let followed = c.start("sleep 300").await.id();
    let (direct, mut table) = watcher(&t).await;
    let follow = cuba_protocol::FollowRequest {
        id: followed,
        since: None,
        backlog: 0,
        stream: cuba_protocol::StreamFilter::Both,
    };
    let follower = Client::connect(&t.socket(), this_client(ClientKind::Other, "tail"))
        .await
        .expect("connect");
    let following = follower
        .subscribe(Request::Follow(follow))
        .await
        .expect("follow");

    c.close().await;
    until(&mut table, "the lone one stopped", |rows| {
        row(rows, lone).is_some_and(|p| p.state.is_finished())
    })
    .await;
    let stopped = direct.info(lone).await.expect("its row");
    assert_eq!(stopped.state, ProcState::Killed, "{stopped:?}");
    let error = stopped.error.unwrap_or_default();
    assert!(error.contains("client_gone = \"stop\""), "{error}");
    // The followed one has its notice, and runs on while followed.
    let kept = direct.info(followed).await.expect("its row");
    assert_eq!(kept.state, ProcState::Running, "{kept:?}");
    assert!(
        kept.notice
            .as_deref()
            .is_some_and(|n| n.contains("gone-agent has gone")),
        "{kept:?}"
    );
    // The follower leaves: the next look stops it.
    drop(following);
    drop(follower);
    until(&mut table, "the followed one stopped", |rows| {
        row(rows, followed).is_some_and(|p| p.state == ProcState::Killed)
    })
    .await;
    // Audited with the reason.
    let audit = std::fs::read_to_string(t.state().join("audit.jsonl")).unwrap_or_default();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"end\"") && l.contains("client_gone")),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_clients_command_is_asked_about_and_runs_on_until_approved() {
    let mut t = TestDir::with_daemon_env(&[("CUBA_EXEC_CLIENT_GONE", "ask")]).await;
    let c = binary(&mut t, "asked-agent", &[]).await;
    let stop = c.start("sleep 300").await.id();
    let keep = c.start("sleep 301").await.id();
    let (direct, mut table) = watcher(&t).await;
    c.close().await;
    let asked = |p: Option<&ProcessInfo>| {
        p.is_some_and(|p| p.asks.iter().any(|a| a.kind == AskKind::ClientGone))
    };
    until(&mut table, "both asked about", |rows| {
        asked(row(rows, stop)) && asked(row(rows, keep))
    })
    .await;
    // Asked, not held: it runs on meanwhile.
    let info = direct.info(stop).await.expect("its row");
    assert_eq!(info.state, ProcState::Running, "{info:?}");
    let (ok, out, err) = t.ctl(&["approvals"]).await;
    assert!(ok && out.contains("stop it?"), "{out}{err}");
    let (ok, _, err) = t.ctl(&["deny", &keep.to_string()]).await;
    assert!(ok, "{err}");
    let (ok, _, err) = t.ctl(&["approve", &stop.to_string()]).await;
    assert!(ok, "{err}");
    until(&mut table, "the approved one stopped", |rows| {
        row(rows, stop).is_some_and(|p| p.state == ProcState::Killed)
    })
    .await;
    let info = direct.info(stop).await.expect("its row");
    assert!(
        info.error
            .as_deref()
            .is_some_and(|e| e.contains("approved the stop")),
        "{info:?}"
    );
    let kept = direct.info(keep).await.expect("its row");
    assert_eq!(kept.state, ProcState::Running, "denied: kept {kept:?}");
    assert!(kept.asks.is_empty(), "{kept:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_nobody_attends_to_is_stopped_and_what_is_read_runs_on() {
    // Long enough that a loaded machine reads the one often within it.
    let mut t = TestDir::with_daemon_env(&[("CUBA_EXEC_UNWATCHED_TIMEOUT", "3s")]).await;
    let c = binary(&mut t, "busy-agent", &[]).await;
    let read = c.start("sleep 301").await.id();
    let first = c.call("status", json!({ "id": read })).await;
    assert_eq!(first.state(), "running", "{}", first.text());
    let ignored = c.start("sleep 300").await.id();
    // It cannot keep itself alive by reading its own output from inside its tree.
    let cubactl = common::hosts::cubactl_bin().display().to_string();
    let selfish = c
        .start(&format!(
            "while :; do {cubactl} logs ${{CUBA_EXEC_PROCESS##*.}} >/dev/null 2>&1; sleep 0.1; done"
        ))
        .await
        .id();
    // A person's command is not an agent's: never stopped for it by default.
    let person = Client::connect(&t.socket(), this_client(ClientKind::Cli, "cubactl"))
        .await
        .expect("connect");
    let theirs = person
        .spawn(cuba_protocol::SpawnRequest {
            command: "sleep 302".into(),
            ..Default::default()
        })
        .await
        .expect("spawn")
        .id;
    let (direct, mut table) = watcher(&t).await;
    // Read the one, again and again, until the other has been stopped for want of it.
    let mut reads = 0u32;
    loop {
        let r = c.call("status", json!({ "id": read })).await;
        assert_eq!(r.state(), "running", "{}", r.text());
        reads += 1;
        let rows = direct.list(ListRequest::default()).await.expect("list");
        let done = |id| row(&rows, id).is_some_and(|p| p.state.is_finished());
        if done(ignored) && done(selfish) {
            break;
        }
        assert!(reads < 2000, "never stopped: {rows:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for id in [ignored, selfish] {
        let info = direct.info(id).await.expect("its row");
        assert_eq!(info.state, ProcState::Killed, "{info:?}");
        assert!(
            info.error
                .as_deref()
                .is_some_and(|e| e.contains("unwatched_timeout")),
            "{info:?}"
        );
    }
    assert_eq!(
        direct.info(theirs).await.map(|p| p.state).ok(),
        Some(ProcState::Running)
    );
    until(&mut table, "a frame", |_| true).await;
    c.close().await;
}

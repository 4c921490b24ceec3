//! The real `cuba-exec` binary over stdio (`TokioChildProcess`): it auto-starts a private
//! `cubad` from its environment (and again when that daemon dies), redacts its own secret
//! environment values from output, and two shims racing to start the daemon end up with one
//! daemon and one table. Ignored tests pin down known bugs of the same surface.

use crate::common;

use common::mcp::{binary, binary_env};
use common::{kill9, pid_alive, TestDir};
use serde_json::json;

const SECRET: (&str, &str) = ("MY_API_TOKEN", "supersecret123");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_auto_starts_its_daemon_and_redacts_secrets() {
    let mut t = TestDir::new();
    let c = binary(&mut t, "binary-agent", &[SECRET]).await;
    let info = c.service.peer_info().expect("the server introduced itself");
    let info = serde_json::to_value(&*info).expect("server info serialises");
    assert_eq!(info["serverInfo"]["name"], json!("cuba-exec"), "{info}");

    let tools = common::bounded("tools/list", common::STEP, c.service.list_all_tools())
        .await
        .expect("tools/list failed");
    // No host is configured: list_hosts is not offered.
    assert_eq!(tools.len(), 7);

    let r = c
        .call(
            "run",
            json!({ "command": "echo token=$MY_API_TOKEN; echo supersecret123 >&2; echo plain" }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    // stdout and stderr are separate pipes: compare lines regardless of their interleaving.
    let mut lines: Vec<&str> = r.output().lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["[REDACTED]", "plain", "token=[REDACTED]"],
        "{}",
        r.output()
    );
    assert!(!r.text().contains("supersecret123"), "{}", r.text());
    assert!(
        !r.sc().to_string().contains("supersecret123"),
        "structuredContent leaks the secret: {}",
        r.sc()
    );
    // Cursors count the raw bytes, secrets included.
    assert_eq!(r.u64("bytes"), 42);

    let pid = t
        .daemon_pid()
        .expect("the auto-started daemon wrote its lock file");
    assert!(pid_alive(pid), "cubad {pid} runs");
    assert_eq!(
        t.daemons(),
        vec![pid],
        "one daemon, serving this dir's socket"
    );
    assert!(
        t.instance().is_some(),
        "the daemon uses this dir's state dir"
    );
    let rows = c.rows(json!({})).await;
    assert_eq!(rows[0]["owner"], json!("binary-agent"), "{rows:?}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shims_start_one_daemon_and_share_the_table() {
    let mut t = TestDir::new();
    let one = binary(&mut t, "shim-one", &[]).await;
    let two = binary(&mut t, "shim-two", &[]).await;
    // Both shims connect (and so try to start the daemon) at the same moment.
    let (a, b) = tokio::join!(
        one.call(
            "start",
            json!({ "command": "exec sleep 30", "name": "first" })
        ),
        two.call(
            "start",
            json!({ "command": "exec sleep 31", "name": "second" })
        ),
    );
    assert!(!a.is_error(), "{}", a.text());
    assert!(!b.is_error(), "{}", b.text());
    assert_ne!(a.id(), b.id());
    // The loser of the start-up race exits once it finds the lock taken.
    assert!(
        common::wait_for(|| t.daemons().len() == 1, common::STEP).await,
        "one daemon: {:?}",
        t.daemons()
    );

    for client in [&one, &two] {
        let rows = client.rows(json!({})).await;
        let owners: Vec<(u64, &str)> = rows
            .iter()
            .map(|r| {
                let id = r["id"].as_u64().expect("id");
                (id, r["owner"].as_str().expect("owner"))
            })
            .collect();
        let mut want = vec![(a.id(), "shim-one"), (b.id(), "shim-two")];
        want.sort_unstable();
        let mut got = owners.clone();
        got.sort_unstable();
        assert_eq!(got, want, "both shims see the same table");
    }
    one.call("send_signal", json!({ "id": b.id(), "signal": "SIGKILL" }))
        .await;
    two.call("send_signal", json!({ "id": a.id(), "signal": "SIGKILL" }))
        .await;
    one.close().await;
    two.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shim_restarts_a_daemon_that_died() {
    let mut t = TestDir::new();
    let c = binary(&mut t, "restart-agent", &[]).await;
    let first = c.call("start", json!({ "command": "exec sleep 30" })).await;
    let old = t.daemon_pid().expect("a daemon runs");
    kill9(old);
    assert!(
        common::wait_for(|| !pid_alive(old), common::STEP).await,
        "cubad {old} survived SIGKILL"
    );
    // The first call after the death succeeds: the shim starts a new daemon and sends it.
    let r = c
        .call("run", json!({ "command": "echo after-restart" }))
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(r.output(), "after-restart\n", "{}", r.text());
    let new = t.daemon_pid().expect("a new daemon runs");
    assert_ne!(new, old);
    let s = c.call("status", json!({ "id": first.id() })).await;
    assert_eq!(
        s.state(),
        "lost",
        "a process of the dead daemon: {}",
        s.text()
    );
    assert!(
        common::wait_for(|| t.marked(first.id()).is_empty(), common::STEP).await,
        "the lost process was killed: {:?}",
        t.marked(first.id())
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_call_after_the_daemon_died_succeeds() {
    let mut t = TestDir::new();
    let c = binary(&mut t, "reconnect-agent", &[]).await;
    for round in 0..20 {
        let r = c.call("run", json!({ "command": "echo up" })).await;
        assert_eq!(r.output(), "up\n", "round {round}: {}", r.text());
        let pid = t.daemon_pid().expect("a daemon runs");
        kill9(pid);
        assert!(common::wait_for(|| !pid_alive(pid), common::STEP).await);
        let r = c.call("list_processes", json!({})).await;
        assert!(!r.is_error(), "round {round}: {}", r.text());
    }
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_matched_line_of_wait_is_redacted() {
    let mut t = TestDir::new();
    let c = binary(&mut t, "redact-agent", &[SECRET]).await;
    let id = c.start("echo key=supersecret123; exec sleep 30").await.id();
    let w = c.call("wait", json!({ "id": id, "until": "key=" })).await;
    assert_eq!(w.str("wait"), "matched", "{}", w.text());
    assert_eq!(w.output(), "key=[REDACTED]\n", "the output is redacted");
    assert_eq!(w.str("matched"), "key=[REDACTED]", "{}", w.sc());
    assert!(!w.text().contains("supersecret123"), "{}", w.text());
    c.call("send_signal", json!({ "id": id, "signal": "SIGKILL" }))
        .await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_split_across_reads_is_never_revealed() {
    let mut t = TestDir::new();
    let c = binary(&mut t, "split-agent", &[SECRET]).await;
    let id = c
        .start("printf supersec; read x; printf 'ret123\\n'")
        .await
        .id();
    let first = c
        .call(
            "wait",
            json!({ "id": id, "quiet_ms": 300, "timeout_ms": 10_000 }),
        )
        .await;
    // Blocked reading its stdin with its output quiet: reported before quiet_ms.
    assert_eq!(first.str("wait"), "waiting_input", "{}", first.text());
    let next = first.u64("next");
    c.call("send_input", json!({ "id": id, "text": "\n" }))
        .await;
    let second = c.wait_exit(id, next).await;
    let seen = format!("{}{}", first.output(), second.output());
    assert!(
        !seen.contains("supersecret123"),
        "the agent can join the halves: {:?} + {:?}",
        first.output(),
        second.output()
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_without_a_terminal_get_pager_cat_and_term_dumb() {
    let mut t = TestDir::new();
    let unset = ["PAGER", "GIT_PAGER", "TERM"];
    let c = binary_env(&mut t, "pager-agent", &[], &unset).await;
    let r = c
        .call(
            "run",
            json!({ "command": "echo \"$PAGER $GIT_PAGER $TERM\"" }),
        )
        .await;
    assert_eq!(r.output(), "cat cat dumb\n");
    let r = c
        .call(
            "run",
            json!({ "command": "echo \"$PAGER\"", "env": { "PAGER": "less" } }),
        )
        .await;
    assert_eq!(r.output(), "less\n", "the caller's value wins");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_cannot_start_is_reported_with_its_fix_not_a_retry() {
    let mut t = TestDir::new();
    let open = t.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let socket = open.join("s").to_string_lossy().into_owned();
    let c = binary(&mut t, "new-user", &[("CUBA_EXEC_SOCKET", socket.as_str())]).await;
    let r = c
        .call_within("run", json!({ "command": "echo hi" }), common::STEP)
        .await;
    assert!(r.is_error(), "{}", r.text());
    assert_eq!(r.code(), Some("UNAVAILABLE"), "{}", r.text());
    let text = r.text();
    assert!(
        text.contains("a person must fix this")
            && text.contains(&format!("chmod 700 {}", open.display())),
        "{text}"
    );
    c.close().await;
}

/// The table's rows as they change, until `done` holds for one frame (bounded).
async fn until_rows(
    frames: &mut cuba_protocol::client::Subscription,
    what: &str,
    done: impl Fn(&[cuba_protocol::ProcessInfo]) -> bool,
) -> Vec<cuba_protocol::ProcessInfo> {
    loop {
        let frame = common::bounded(what, common::STEP, frames.next()).await;
        match frame {
            Some(Ok(cuba_protocol::Response::List(l))) if done(&l.processes) => return l.processes,
            Some(Ok(_)) => {}
            other => panic!("{what}: the table watch ended: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_left_waiting_for_input_by_a_gone_client_is_stopped() {
    use cuba_protocol::{FollowRequest, ListRequest, ProcState, Request, StreamFilter};
    let mut t = TestDir::with_daemon_env(&[("CUBA_EXEC_ORPHAN_TIMEOUT", "300ms")]).await;
    let c = binary(&mut t, "orphan-agent", &[]).await;
    let run = |command: &'static str| {
        let c = &c;
        async move {
            let r = c.call("run", json!({ "command": command })).await;
            assert_eq!(r.state(), "waiting_input", "{}", r.text());
            r.id()
        }
    };
    let lone = run("echo name?; read x").await;
    let followed = run("read y").await;
    let busy = c.start("sleep 300").await.id();

    let me = cuba_protocol::client::this_client(cuba_protocol::ClientKind::Other, "watcher");
    let direct = cuba_protocol::client::Client::connect(&t.socket(), me.clone())
        .await
        .expect("connect");
    let follow = FollowRequest {
        id: followed,
        since: None,
        backlog: 0,
        stream: StreamFilter::Both,
    };
    let follower = cuba_protocol::client::Client::connect(&t.socket(), me)
        .await
        .expect("connect");
    let following = follower
        .subscribe(Request::Follow(follow))
        .await
        .expect("follow");
    let mut table = direct
        .subscribe(Request::WatchTable(ListRequest::default()))
        .await
        .expect("watch the table");

    // The editor closes: the MCP server sees the end of its input and exits.
    c.close().await;
    let row =
        |rows: &[cuba_protocol::ProcessInfo], id: u64| rows.iter().find(|p| p.id == id).cloned();
    let rows = until_rows(&mut table, "the lone waiter stopped", |rows| {
        row(rows, lone).is_some_and(|p| p.state.is_finished())
    })
    .await;
    let stopped = row(&rows, lone).expect("its row");
    assert_eq!(stopped.state, ProcState::Killed, "{stopped:?}");
    let error = stopped.error.unwrap_or_default();
    assert!(
        error.contains("orphan_timeout") && error.contains("300ms"),
        "{error}"
    );
    // Its timeout has passed for the followed one too (a measurement of an absence): a
    // follower keeps it, and what does not wait for input is not an orphan.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let now = direct.list(ListRequest::default()).await.expect("list");
    assert_eq!(
        row(&now, followed).map(|p| p.state),
        Some(ProcState::WaitingInput)
    );
    assert_eq!(row(&now, busy).map(|p| p.state), Some(ProcState::Running));
    // The follower leaves: the next check stops it.
    drop(following);
    drop(follower);
    until_rows(&mut table, "the followed waiter stopped", |rows| {
        row(rows, followed).is_some_and(|p| p.state == ProcState::Killed)
    })
    .await;
    assert_eq!(
        direct.info(busy).await.map(|p| p.state).ok(),
        Some(ProcState::Running)
    );
}

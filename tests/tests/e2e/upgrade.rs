//! In-place upgrades (`cubactl daemon upgrade`): the daemon re-executes itself with the same pid
//! and carries on every running process — output (every byte once, to a cursor reader and to
//! `tail -f`), stdin, waiting for input, terminal screens, timers and whole-tree stops — and a
//! binary that cannot take the hand-over leaves the old daemon serving.

#![allow(clippy::unwrap_used)]

use std::process::{Output, Stdio};
use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::{
    ProcState, ProcessInfo, Request, Response, SignalRequest, SpawnRequest, TtySize, WaitReason,
    WaitRequest, WaitSpec,
};
use cuba_tests::{
    bounded, pid_alive, read_all, spawn, spawn_with, text, wait_exit, wait_for, wait_for_async,
    wait_match, Step, TestDaemon, STEP,
};

fn cubactl(d: &TestDaemon, args: &[&str]) -> tokio::process::Command {
    d.cubactl(args)
}

async fn upgrade(d: &TestDaemon) -> Output {
    let out = bounded(
        "cubactl daemon upgrade",
        STEP,
        cubactl(d, &["daemon", "upgrade"]).output(),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "upgrade failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// The numbers 0..n, one per line.
fn counted(n: u32) -> String {
    (0..n).map(|i| format!("{i}\n")).collect()
}

/// Everything process `id` printed, read across upgrades as a reconnecting client does.
async fn follow_across(d: &TestDaemon, id: u64) -> Vec<u8> {
    let mut seen = Vec::new();
    cuba_tests::follow::follow_across(d, id, |read| seen.extend(read.bytes())).await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_is_seen_exactly_once_across_upgrades_by_a_cursor_and_by_tail_f() {
    let d = TestDaemon::start().await;
    let c = d.client_named("starter").await;
    let n = 300;
    let p = spawn(
        &c,
        &format!("i=0; while [ $i -lt {n} ]; do echo $i; i=$((i+1)); sleep 0.01; done"),
    )
    .await;
    wait_match(&c, p.id, "^5$").await;
    let reader = follow_across(&d, p.id);
    let tail = cubactl(&d, &["tail", "-n", "100000", "-f", &p.id.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = d.pid();
    let upgrades = async {
        for _ in 0..5 {
            upgrade(&d).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let (seen, ()) = bounded("follow and upgrades", STEP * 2, async {
        tokio::join!(reader, upgrades)
    })
    .await;
    assert_eq!(text(&seen), counted(n));
    let tailed = bounded("tail -f", STEP, tail.wait_with_output())
        .await
        .unwrap();
    assert!(tailed.status.success(), "{}", text(&tailed.stderr));
    assert_eq!(text(&tailed.stdout), counted(n));
    assert!(
        text(&tailed.stderr).contains("exited with code 0"),
        "{}",
        text(&tailed.stderr)
    );
    // The same process, the same daemon pid, the same row.
    let c = d.client().await;
    let s = c.status().step().await.unwrap();
    assert_eq!((s.pid as i32, s.upgrades), (pid, 5));
    assert!(s.upgraded_at_ms.is_some());
    let row = c.info(p.id).step().await.unwrap();
    assert_eq!((row.pid, &row.owner.name), (p.pid, &p.owner.name));
    assert_eq!((row.state, row.exit_code), (ProcState::Exited, Some(0)));
    assert_eq!(text(&read_all(&c, p.id).await), counted(n));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_waiting_for_input_is_answered_after_the_upgrade() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "printf 'name? '; read n; echo hi-$n").await;
    let waiting = WaitRequest {
        id: p.id,
        since: Some(0),
        spec: WaitSpec::exit(STEP.as_millis() as u64, 1 << 16),
    };
    let w = c.wait(waiting.clone()).step().await.unwrap();
    assert_eq!(w.reason, WaitReason::WaitingInput, "{w:?}");
    upgrade(&d).await;
    let c = d.client().await;
    let row = c.info(p.id).step().await.unwrap();
    assert_eq!(row.state, ProcState::WaitingInput, "{row:?}");
    c.stdin(p.id, b"bob\n".to_vec(), false)
        .step()
        .await
        .unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0));
    assert_eq!(text(&read_all(&c, p.id).await), "name? hi-bob\n");
}

/// The new program answers the execs of a tree the old one started: a blocked program reached
/// after the upgrade is still refused, an allowed one still runs (an unanswered exec would hang).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execs_after_the_upgrade_are_still_checked() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let status = c.status().step().await.unwrap();
    if !status.exec_checks.starts_with("on") {
        cuba_tests::machine::skip("exec checks across an upgrade", &status.exec_checks);
        return;
    }
    let marker = d.dir().join("keep");
    std::fs::write(&marker, "x").unwrap();
    let text_of = format!(
        "read n; x=$(printf rm); $x {}; /bin/echo after-$n",
        marker.display()
    );
    let p = spawn(&c, &text_of).await;
    let waiting = WaitRequest {
        id: p.id,
        since: Some(0),
        spec: WaitSpec::exit(STEP.as_millis() as u64, 1 << 16),
    };
    let w = c.wait(waiting).step().await.unwrap();
    assert_eq!(w.reason, WaitReason::WaitingInput, "{w:?}");
    upgrade(&d).await;
    let c = d.client().await;
    c.stdin(p.id, b"go\n".to_vec(), false).step().await.unwrap();
    let w = wait_exit(&c, p.id).await;
    assert!(marker.exists());
    assert!(
        w.process.blocked.iter().any(|b| b.program == "/usr/bin/rm"),
        "{:?}",
        w.process.blocked
    );
    assert!(text(&read_all(&c, p.id).await).contains("after-go"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_run_follows_its_command_across_the_upgrade() {
    // Output before and after, input typed after it, and the exit code: as if nothing happened.
    let d = TestDaemon::start().await;
    let mut run = cubactl(
        &d,
        &["run", "--", "echo before; read x; echo got-$x; exit 3"],
    );
    run.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = run.spawn().unwrap();
    let c = d.client().await;
    let listed = || async { c.list(Default::default()).await.unwrap_or_default() };
    assert!(
        wait_for_async(|| async { listed().await.len() == 1 }, STEP).await,
        "cubactl run started nothing"
    );
    let id = listed().await[0].id;
    let w = c
        .wait(WaitRequest {
            id,
            since: Some(0),
            spec: WaitSpec::exit(STEP.as_millis() as u64, 1 << 16),
        })
        .step()
        .await
        .unwrap();
    assert_eq!(w.reason, WaitReason::WaitingInput, "{w:?}");
    upgrade(&d).await;
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"bob\n")
        .await
        .unwrap();
    drop(stdin);
    let out = bounded("cubactl run", STEP, child.wait_with_output())
        .await
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        "before\ngot-bob\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_keeps_its_screen_and_its_input_across_the_upgrade() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let req = SpawnRequest {
        command: "printf 'top-line\\n'; read x; echo after-$x".to_string(),
        tty: Some(TtySize { rows: 10, cols: 40 }),
        ..SpawnRequest::default()
    };
    let p = spawn_with(&c, req).await;
    wait_match(&c, p.id, "top-line").await;
    let before = c.screen(p.id).step().await.unwrap();
    upgrade(&d).await;
    let c = d.client().await;
    let after = c.screen(p.id).step().await.unwrap();
    assert_eq!(after.lines, before.lines);
    assert_eq!(
        (after.cursor_row, after.cursor_col),
        (before.cursor_row, before.cursor_col)
    );
    c.stdin(p.id, b"yes\r".to_vec(), false)
        .step()
        .await
        .unwrap();
    wait_exit(&c, p.id).await;
    let end = c.screen(p.id).step().await.unwrap();
    assert!(
        end.lines.iter().any(|l| l == "after-yes"),
        "{:?}",
        end.lines
    );
    assert_eq!(end.lines.first().map(String::as_str), Some("top-line"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_and_whole_tree_stops_carry_on_after_the_upgrade() {
    // With cgroups asked for: where the tree is writable, the hand-over keeps them.
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_CGROUPS", "on")
        .start()
        .await;
    let c = d.client().await;
    let timed = spawn_with(
        &c,
        SpawnRequest {
            command: "sleep 300".to_string(),
            timeout_ms: Some(2500),
            ..SpawnRequest::default()
        },
    )
    .await;
    let tree = spawn(&c, "sleep 301 & sleep 302 & echo started; wait").await;
    wait_match(&c, tree.id, "^started$").await;
    assert!(
        wait_for(|| d.marked(tree.id).len() >= 2, STEP).await,
        "the tree never grew"
    );
    let mut members = d.marked(tree.id);
    members.push(tree.pid as i32);
    let supervision = c.status().step().await.unwrap().supervision;
    // The machine says whether the daemon (cgroups `auto`) should have them, not its report.
    let expected = cuba_tests::machine::per_process_cgroups();
    let has = supervision.starts_with("cgroup v2 at ");
    assert!(
        has || !expected,
        "no cgroups on a machine that has them: {supervision}"
    );
    if !has {
        cuba_tests::machine::skip("cgroups kept at upgrade", &supervision);
    }
    let cgroup = has.then(|| cuba_tests::cgroups::v2_of(tree.pid as i32).unwrap());
    upgrade(&d).await;
    let c = d.client().await;
    // Where processes have cgroups, the new program keeps theirs (and stops through it).
    if let Some(dir) = &cgroup {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
        assert!(procs.lines().count() >= 3, "{}: {procs}", dir.display());
        // ...and holds its files open as for a process it started: each read is one pread.
        let open = open_files(d.pid());
        for file in ["cgroup.events", "cpu.stat"] {
            assert!(open.contains(&dir.join(file)), "{file} not open: {open:?}");
        }
    }
    let killed: ProcessInfo = c
        .signal(SignalRequest {
            id: tree.id,
            signal: cuba_protocol::Signal::Kill,
            escalate: false,
            grace_ms: None,
            wait: true,
        })
        .step()
        .await
        .unwrap();
    assert_eq!(killed.state, ProcState::Killed, "{killed:?}");
    assert!(
        wait_for(|| members.iter().all(|p| !pid_alive(*p)), STEP).await,
        "left alive: {:?}",
        members
            .iter()
            .filter(|p| pid_alive(**p))
            .collect::<Vec<_>>()
    );
    if let Some(dir) = &cgroup {
        assert!(
            wait_for(|| !dir.exists(), STEP).await,
            "{} was left",
            dir.display()
        );
    }
    let w = wait_exit(&c, timed.id).await;
    assert_eq!(w.process.state, ProcState::TimedOut, "{:?}", w.process);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_that_cannot_take_the_hand_over_leaves_the_daemon_serving() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "echo up; sleep 300").await;
    wait_match(&c, p.id, "^up$").await;
    for binary in ["/bin/true", "/nonexistent/cubad"] {
        let out = bounded(
            "a refused upgrade",
            STEP,
            cubactl(&d, &["daemon", "upgrade", "--binary", binary]).output(),
        )
        .await
        .unwrap();
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(
            err.contains("cannot upgrade") && err.contains(binary) && err.contains("carries on"),
            "{err}"
        );
    }
    let s = c.status().step().await.unwrap();
    assert_eq!((s.pid as i32, s.upgrades), (d.pid(), 0));
    let row = c.info(p.id).step().await.unwrap();
    assert_eq!(row.state, ProcState::Running);
    c.stdin(p.id, Vec::new(), true).step().await.unwrap();
}

/// A command in session `name`, waited for: its output.
async fn in_session(c: &Client, name: &str, command: &str) -> String {
    let req = SpawnRequest {
        command: command.to_string(),
        session: Some(name.to_string()),
        ..SpawnRequest::default()
    };
    let p = spawn_with(c, req).await;
    let w = wait_exit(c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0), "{:?}", w.process);
    text(&read_all(c, p.id).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_keeps_its_cd_and_exports_across_the_upgrade() {
    let d = TestDaemon::start().await;
    let c: Client = d.client().await;
    let here = d.dir().join("work");
    std::fs::create_dir_all(&here).unwrap();
    in_session(
        &c,
        "s1",
        &format!("cd '{}'; export KEPT=yes", here.display()),
    )
    .await;
    let shell = c
        .list(cuba_protocol::ListRequest::default())
        .step()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.kind == cuba_protocol::ProcKind::Session)
        .unwrap();
    upgrade(&d).await;
    let c = d.client().await;
    let out = in_session(&c, "s1", "pwd; echo kept=$KEPT").await;
    assert_eq!(out, format!("{}\nkept=yes\n", here.display()));
    let again = c.info(shell.id).step().await.unwrap();
    assert_eq!((again.pid, again.state), (shell.pid, ProcState::Running));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_running_a_command_refuses_the_upgrade_with_the_reason() {
    let d = TestDaemon::start().await;
    let c: Client = d.client().await;
    let req = SpawnRequest {
        command: "echo busy; sleep 300".to_string(),
        session: Some("s1".to_string()),
        ..SpawnRequest::default()
    };
    let p = spawn_with(&c, req).await;
    wait_match(&c, p.id, "^busy$").await;
    let out = bounded(
        "a refused upgrade",
        STEP,
        cubactl(&d, &["daemon", "upgrade"]).output(),
    )
    .await
    .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("session s1") && err.contains("running a command"),
        "{err}"
    );
    // The old daemon carries on: the command is still the session's, and ends on request.
    let c = d.client().await;
    assert_eq!(c.info(p.id).step().await.unwrap().state, ProcState::Running);
    c.signal(SignalRequest {
        id: p.id,
        signal: cuba_protocol::Signal::Int,
        escalate: true,
        grace_ms: None,
        wait: true,
    })
    .step()
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_and_a_stdin_write_retried_after_the_upgrade_are_not_carried_out_again() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let marker = d.dir().join("marker");
    let spawn_req = SpawnRequest {
        command: format!("echo x >> '{}'; cat", marker.display()),
        token: Some(cuba_protocol::RequestToken::fresh()),
        ..SpawnRequest::default()
    };
    let first = spawn_with(&c, spawn_req.clone()).await;
    let input = cuba_protocol::StdinRequest {
        id: first.id,
        data: b"once\n".to_vec(),
        eof: false,
        token: Some(cuba_protocol::RequestToken::fresh()),
    };
    let write = |c: Client, r: cuba_protocol::StdinRequest| async move {
        match c.call(Request::Stdin(r)).await.unwrap() {
            Response::Ok => {}
            other => panic!("stdin write: {other:?}"),
        }
    };
    write(c.clone(), input.clone()).await;
    wait_match(&c, first.id, "^once$").await;
    upgrade(&d).await;
    let c = d.client().await;
    // The retries a client makes when it lost the first answers: same requests, same tokens.
    let again = spawn_with(&c, spawn_req).await;
    assert_eq!((again.id, again.pid), (first.id, first.pid));
    write(c.clone(), input).await;
    c.stdin(first.id, Vec::new(), true).step().await.unwrap();
    wait_exit(&c, first.id).await;
    assert_eq!(text(&read_all(&c, first.id).await), "once\n");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "x\n");
}

/// The files process `pid` has open.
fn open_files(pid: i32) -> Vec<std::path::PathBuf> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .collect()
}

//! Persistent sessions: commands run in one long-lived shell, so state carries over, while each
//! command has its own record, output, exit code and timeout; interrupts keep the session.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::{
    ErrorKind, ListRequest, ProcKind, ProcState, Signal, SignalRequest, SpawnRequest, StreamFilter,
    TtySize, WaitReason, WaitRequest, WaitSpec,
};
use cuba_tests::{
    bounded, read_stream, spawn_with, text, wait_exit, wait_match, Step, TestDaemon, STEP,
};

fn in_session(session: &str, command: &str) -> SpawnRequest {
    SpawnRequest {
        command: command.to_string(),
        session: Some(session.to_string()),
        ..SpawnRequest::default()
    }
}

/// Runs `command` in `session` to its end; returns (exit code, output).
async fn run(c: &Client, session: &str, command: &str) -> (Option<i32>, String, u64) {
    let p = spawn_with(c, in_session(session, command)).await;
    assert_eq!(p.kind, ProcKind::InSession);
    assert_eq!(p.session.as_deref(), Some(session));
    let w = wait_exit(c, p.id).await;
    (w.process.exit_code, text(&w.output.bytes()), p.id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_and_exports_carry_over_and_each_command_has_its_exit_code() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    let (code, out, first) = run(&c, "dev", &format!("cd {}", path.display())).await;
    assert_eq!((code, out.as_str()), (Some(0), ""));
    let (code, out, _) = run(&c, "dev", "export FOO=bar; myfn() { echo fn-$1; }").await;
    assert_eq!((code, out.as_str()), (Some(0), ""));
    let (code, out, third) = run(&c, "dev", "echo $FOO; pwd; myfn x; false").await;
    assert_eq!(code, Some(1));
    assert_eq!(out, format!("bar\n{}\nfn-x\n", path.display()));
    // Each command is its own record; the shell is one more, listed as the session.
    assert!(third > first);
    let all = c.list(ListRequest::default()).step().await.unwrap();
    let shells: Vec<_> = all.iter().filter(|p| p.kind == ProcKind::Session).collect();
    assert_eq!(shells.len(), 1, "{all:?}");
    assert_eq!(shells[0].name.as_deref(), Some("dev"));
    assert_eq!(shells[0].state, ProcState::Running);
    // The command reports the session's working directory.
    let info = c.info(third).step().await.unwrap();
    assert_eq!(info.cwd, path.display().to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_split_by_command_and_stream_and_partial_lines_survive() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let (_, out, id) = run(&c, "s", "printf 'no newline'; printf 'err' >&2").await;
    // Two pipes: the order between them is the order the daemon read them in.
    assert!(out == "no newlineerr" || out == "errno newline", "{out:?}");
    assert_eq!(
        text(&read_stream(&c, id, StreamFilter::Stdout).await),
        "no newline"
    );
    assert_eq!(
        text(&read_stream(&c, id, StreamFilter::Stderr).await),
        "err"
    );
    // A command that changes the prompt or prints marker-like bytes does not confuse it.
    let (code, out, _) = run(&c, "s", "PS1='$ '; printf '\\036CUBA\\036\\n'; echo after").await;
    assert_eq!(code, Some(0));
    assert_eq!(out, "\u{1e}CUBA\u{1e}\nafter\n");
    let (_, out, _) = run(&c, "s", "echo only-mine").await;
    assert_eq!(out, "only-mine\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_interrupts_the_command_and_keeps_the_session() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    run(&c, "i", "export KEEP=yes").await;
    let p = spawn_with(
        &c,
        in_session("i", "echo started; sleep 100; echo not-reached"),
    )
    .await;
    wait_match(&c, p.id, "started").await;
    c.signal(SignalRequest {
        id: p.id,
        signal: Signal::Int,
        escalate: false,
        grace_ms: None,
        wait: false,
    })
    .step()
    .await
    .unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.state, ProcState::Killed);
    assert_eq!(w.process.exit_code, Some(130));
    assert_eq!(text(&w.output.bytes()), "started\n");
    let (code, out, _) = run(&c, "i", "echo $KEEP").await;
    assert_eq!((code, out.as_str()), (Some(0), "yes\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_interrupts_only_the_command() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let mut req = in_session("t", "sleep 100");
    req.timeout_ms = Some(300);
    let p = spawn_with(&c, req).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.state, ProcState::TimedOut);
    let (code, out, _) = run(&c, "t", "echo alive").await;
    assert_eq!((code, out.as_str()), (Some(0), "alive\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_session_is_reported_and_started_again() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let first = spawn_with(&c, in_session("x", "export GONE=1")).await;
    assert!(first
        .notice
        .as_deref()
        .unwrap()
        .contains("session x started"));
    wait_exit(&c, first.id).await;
    let p = spawn_with(&c, in_session("x", "exit 3")).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(3));
    assert!(w.process.error.as_deref().unwrap().contains("shell ended"));
    let p = spawn_with(&c, in_session("x", "echo ${GONE:-unset}")).await;
    let notice = p.notice.clone().unwrap();
    assert!(
        notice.contains("started again") && notice.contains("exit 3"),
        "{notice}"
    );
    let w = wait_exit(&c, p.id).await;
    assert_eq!(text(&w.output.bytes()), "unset\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_session_refuses_a_second_command_and_can_be_closed() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn_with(&c, in_session("b", "echo go; sleep 100")).await;
    wait_match(&c, p.id, "go").await;
    let e = c.spawn(in_session("b", "true")).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::InvalidState), "{e}");
    assert!(e.to_string().contains("busy"), "{e}");
    // Closing the session (its shell's record) ends the command too.
    let all = c.list(ListRequest::default()).step().await.unwrap();
    let shell = all.iter().find(|p| p.kind == ProcKind::Session).unwrap();
    c.signal(SignalRequest {
        id: shell.id,
        signal: Signal::Term,
        escalate: true,
        grace_ms: Some(1000),
        wait: true,
    })
    .step()
    .await
    .unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.state, ProcState::Killed);
    assert!(!cuba_tests::pid_alive(shell.pid as i32));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_reading_stdin_waits_for_input_and_gets_it() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn_with(&c, in_session("r", "printf 'Name? '; read x; echo hi $x")).await;
    let req = WaitRequest {
        id: p.id,
        since: Some(0),
        spec: WaitSpec::exit(15_000, 1 << 20),
    };
    let w = bounded("wait", STEP, c.wait(req)).await.unwrap();
    assert_eq!(w.reason, WaitReason::WaitingInput, "{:?}", w.process);
    assert_eq!(text(&w.output.bytes()), "Name? ");
    c.stdin(p.id, b"bob\n".to_vec(), false)
        .step()
        .await
        .unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(text(&w.output.bytes()), "Name? hi bob\n");
    // The idle session between commands is not waiting for input.
    let (code, _, _) = run(&c, "r", "true").await;
    assert_eq!(code, Some(0));
    let e = c.stdin(p.id, vec![], true).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::InvalidState));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_session_requests_are_refused() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let mut req = in_session("p", "true");
    req.tty = Some(TtySize::DEFAULT);
    let e = c.spawn(req).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
    let e = c
        .spawn(in_session("has space", "true"))
        .step()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
    let mut req = in_session("p", "true");
    req.name = Some("n".into());
    let e = c.ensure(req).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
    // The policy applies to commands in a session as to any other.
    let e = c
        .spawn(in_session("p", "mkfs /dev/null"))
        .step()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Blocked), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_restart_ends_sessions_as_lost_and_a_new_one_starts() {
    let mut d = TestDaemon::start().await;
    let c = d.client().await;
    let done = spawn_with(&c, in_session("r", "echo before")).await;
    wait_exit(&c, done.id).await;
    let p = spawn_with(&c, in_session("r", "echo go; sleep 300")).await;
    wait_match(&c, p.id, "go").await;
    let shell = p.pid as i32;
    d.kill9();
    d.restart().await;
    let c = d.client().await;
    let all = c.list(ListRequest::default()).step().await.unwrap();
    let cmd = all.iter().find(|r| r.id == p.id).unwrap();
    assert_eq!(cmd.state, ProcState::Lost, "{cmd:?}");
    assert_eq!(cmd.kind, ProcKind::InSession);
    let old = all.iter().find(|r| r.id == done.id).unwrap();
    assert_eq!((old.state, old.exit_code), (ProcState::Exited, Some(0)));
    assert!(
        cuba_tests::wait_for(|| !cuba_tests::pid_alive(shell), Duration::from_secs(10)).await,
        "the old session's shell survived the restart"
    );
    let (code, out, _) = run(&c, "r", "echo fresh").await;
    assert_eq!((code, out.as_str()), (Some(0), "fresh\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_a_command_leaves_unread_is_never_run_as_a_command() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let dir = tempfile::tempdir().unwrap();
    let evil = dir.path().join("evil");
    let line = format!("touch {}\n", evil.display());
    // With the command's stdin text.
    let mut req = in_session("in", "true");
    req.stdin = Some(line.clone().into_bytes());
    let p = spawn_with(&c, req).await;
    wait_exit(&c, p.id).await;
    // Sent to a running command that does not read it.
    let p = spawn_with(&c, in_session("in", "echo go; sleep 0.5")).await;
    wait_match(&c, p.id, "go").await;
    c.stdin(p.id, line.clone().into_bytes(), false)
        .step()
        .await
        .unwrap();
    wait_exit(&c, p.id).await;
    let (code, _, _) = run(&c, "in", "true").await;
    assert_eq!(code, Some(0));
    assert!(!evil.exists(), "unread input ran as a command");
    // An idle session takes no input at all.
    let all = c.list(ListRequest::default()).step().await.unwrap();
    let shell = all.iter().find(|p| p.kind == ProcKind::Session).unwrap();
    let e = c
        .stdin(shell.id, line.into_bytes(), false)
        .step()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::InvalidState), "{e}");
    // The commands' pipe is not open in what they run.
    // (Nor anything else the daemon holds: 3 is `ls`'s own directory.)
    let (_, out, _) = run(&c, "in", "ls /proc/self/fd").await;
    let fds: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{out}");
}

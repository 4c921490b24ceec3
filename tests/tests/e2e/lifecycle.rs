//! A process's life end to end: stdin, exit codes, deaths by signal, stop requests, timeouts with
//! a grace period, and processes that cannot start.

#![allow(clippy::unwrap_used)]

use cuba_protocol::now_ms;

use cuba_protocol::{ErrorKind, ProcState, Signal, SignalRequest};
use cuba_tests::{
    bounded, read_all, spawn, spawn_req, spawn_with, text, wait_exit, wait_match, Step, TestDaemon,
    STEP,
};

fn stop(id: u64, signal: Signal) -> SignalRequest {
    SignalRequest {
        id,
        signal,
        escalate: true,
        grace_ms: None,
        wait: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_round_trip_and_eof() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "cat").await;
    c.stdin(p.id, b"hello\n".to_vec(), false)
        .step()
        .await
        .unwrap();
    c.stdin(p.id, b"world\n".to_vec(), false)
        .step()
        .await
        .unwrap();
    c.stdin(p.id, Vec::new(), true).step().await.unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(text(&w.output.bytes()), "hello\nworld\n");
    assert_eq!(
        (w.process.state, w.process.exit_code),
        (ProcState::Exited, Some(0))
    );
    let err = c
        .stdin(p.id, b"late\n".to_vec(), false)
        .step()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::InvalidState), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_refused_after_eof_while_running() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    // Reads stdin to its end, then keeps running.
    let p = spawn(&c, "cat; echo eof; sleep 100").await;
    c.stdin(p.id, b"a\n".to_vec(), true).step().await.unwrap();
    wait_match(&c, p.id, "^eof$").await;
    let err = c
        .stdin(p.id, b"b\n".to_vec(), false)
        .step()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::InvalidState), "{err}");
    assert_eq!(c.info(p.id).step().await.unwrap().state, ProcState::Running);
    let info = bounded("stop", STEP, c.signal(stop(p.id, Signal::Term)))
        .await
        .unwrap();
    assert_eq!(info.state, ProcState::Killed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_given_at_spawn_is_delivered() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let mut req = spawn_req("read x; echo got:$x");
    req.stdin = Some(b"hello\n".to_vec());
    req.close_stdin = true;
    let p = spawn_with(&c, req).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(text(&w.output.bytes()), "got:hello\n");
    assert_eq!(w.process.exit_code, Some(0));

    // More than a pipe holds, through `cat`, comes back byte for byte.
    let input: String = (0..30_000).map(|i| format!("{i:09}\n")).collect();
    let mut req = spawn_req("cat");
    req.stdin = Some(input.clone().into_bytes());
    req.close_stdin = true;
    let p = spawn_with(&c, req).await;
    wait_exit(&c, p.id).await;
    assert_eq!(text(&read_all(&c, p.id).await), input);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_deadly_signals_are_reported() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "exit 7").await;
    let info = wait_exit(&c, p.id).await.process;
    assert_eq!(
        (info.state, info.exit_code, info.signal),
        (ProcState::Exited, Some(7), None)
    );
    assert!(info.ended_at_ms.is_some());

    let p = spawn(&c, "kill -SEGV $$").await;
    let info = wait_exit(&c, p.id).await.process;
    assert_eq!(
        (info.state, info.exit_code, info.signal),
        (ProcState::Signaled, None, Some(Signal::Segv))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn term_request_stops_the_process() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "sleep 100").await;
    let info = bounded("stop", STEP, c.signal(stop(p.id, Signal::Term)))
        .await
        .unwrap();
    assert_eq!(
        (info.state, info.signal),
        (ProcState::Killed, Some(Signal::Term)),
        "{info:?}"
    );
    assert!(!cuba_tests::pid_alive(p.pid as i32));
    // An ended process cannot be signalled again.
    let err = c.signal(stop(p.id, Signal::Term)).step().await.unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::InvalidState), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_stops_the_process_quickly() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let mut req = spawn_req("sleep 100");
    req.timeout_ms = Some(300);
    let p = spawn_with(&c, req).await;
    let info = wait_exit(&c, p.id).await.process;
    assert_eq!(info.state, ProcState::TimedOut, "{info:?}");
    assert_eq!(info.signal, Some(Signal::Term), "{info:?}");
    assert_eq!(info.timeout_ms, Some(300));
    // The daemon's own times: not before the limit (and `wait_exit`'s bound catches a hang).
    let ran = info.ended_at_ms.unwrap() - info.started_at_ms;
    assert!(ran >= 300, "ended before its timeout: {ran} ms");
}

/// `timeout_ms: 0` is no limit (as `timeout 0` is), not a limit already passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_timeout_is_no_limit() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    for command in ["true", "sleep 0.2; echo slept"] {
        let mut req = spawn_req(command);
        req.timeout_ms = Some(0);
        let p = spawn_with(&c, req).await;
        assert_eq!(p.timeout_ms, None, "{p:?}");
        let info = wait_exit(&c, p.id).await.process;
        assert_eq!(
            (info.state, info.exit_code),
            (ProcState::Exited, Some(0)),
            "{command}: {info:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_ignoring_term_is_killed_after_the_grace_period() {
    let d = TestDaemon::builder().grace("300ms").start().await;
    let c = d.client().await;
    // The ignored TERM is inherited by `sleep` too.
    let mut req = spawn_req("trap '' TERM; sleep 100");
    req.timeout_ms = Some(200);
    let p = spawn_with(&c, req).await;
    let info = wait_exit(&c, p.id).await.process;
    assert_eq!(
        (info.state, info.signal),
        (ProcState::TimedOut, Some(Signal::Kill)),
        "{info:?}"
    );
    let ran = info.ended_at_ms.unwrap() - info.started_at_ms;
    assert!(ran >= 200 + 300, "killed before timeout + grace: {ran} ms");

    // The same through a stop request.
    let p = spawn(&c, "trap '' TERM; echo ready; sleep 100").await;
    wait_match(&c, p.id, "^ready$").await;
    let asked = now_ms();
    let info = bounded("stop", STEP, c.signal(stop(p.id, Signal::Term)))
        .await
        .unwrap();
    assert_eq!(
        (info.state, info.signal),
        (ProcState::Killed, Some(Signal::Kill)),
        "{info:?}"
    );
    let after = info.ended_at_ms.unwrap() - asked;
    assert!(
        after >= 300,
        "killed {after} ms after the stop: no grace period"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_cwd_or_shell_fails_to_start() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let missing = d.dir().join("no-such-dir");
    let mut req = spawn_req("echo never");
    req.cwd = Some(missing.clone().into_os_string());
    let info = spawn_with(&c, req).await;
    assert_eq!(info.state, ProcState::FailedToStart, "{info:?}");
    let error = info.error.clone().unwrap_or_default();
    assert!(error.contains(&missing.display().to_string()), "{error}");
    assert!(error.contains("No such file"), "{error}");
    assert_eq!((info.pid, info.exit_code), (0, None));

    let mut req = spawn_req("echo never");
    req.shell = Some("/nonexistent/sh".into());
    let info = spawn_with(&c, req).await;
    assert_eq!(info.state, ProcState::FailedToStart, "{info:?}");
    let error = info.error.clone().unwrap_or_default();
    assert!(error.contains("/nonexistent/sh"), "{error}");
    // The record stays listed and waiting on it returns at once.
    let w = wait_exit(&c, info.id).await;
    assert_eq!(w.process.state, ProcState::FailedToStart);
    assert!(w.output.bytes().is_empty());
    assert_eq!(c.info(info.id).step().await.unwrap().error, info.error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_inherits_no_descriptor_of_the_daemon() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    // The daemon itself was started with extra descriptors (whatever the test runner has
    // open); its children get only their stdio (3 is `ls`'s own directory).
    let p = spawn(&c, "ls /proc/self/fd").await;
    let w = wait_exit(&c, p.id).await;
    let out = text(&w.output.bytes());
    let fds: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_ignores_no_signal_the_daemon_inherited_ignored() {
    // `nohup`, or a background job of a script, starts cubad with these ignored; a command it
    // runs must not inherit that (a person's Ctrl-C or Ctrl-\ would vanish).
    let ignored = [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP, libc::SIGUSR1];
    let d = TestDaemon::builder().ignoring(&ignored).start().await;
    let c = d.client().await;
    let p = spawn(&c, "grep -E '^Sig(Ign|Blk)' /proc/self/status").await;
    let w = wait_exit(&c, p.id).await;
    let out = text(&w.output.bytes());
    let mask = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or_else(|| panic!("no {name} line: {out:?}"))
    };
    // Signals 1-31; the C library's own real-time signals (32, 33) are not ours to reset.
    assert_eq!(mask("SigIgn:") & 0x7fff_ffff, 0, "{out}");
    // And none blocked: the daemon blocks every signal around a spawn, the child unblocks.
    assert_eq!(mask("SigBlk:"), 0, "{out}");
    // The daemon itself still ignores them: a stray SIGHUP does not end it.
    // SAFETY: kill(2) on the test's own daemon.
    unsafe { libc::kill(d.pid(), libc::SIGHUP) };
    let p = spawn(&c, "echo still here").await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(text(&w.output.bytes()), "still here\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_spawns_and_waits_in_one_request() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let run = |command: &str, timeout_ms: u64| cuba_protocol::RunRequest {
        spawn: spawn_req(command),
        wait: cuba_protocol::WaitSpec::exit(timeout_ms, 1 << 20),
    };
    // The record comes first, then the end of the wait.
    let running = c.run(run("echo hi; exit 3", 20_000)).step().await.unwrap();
    assert!(running.info.id > 0 && running.info.pid > 0);
    let id = running.info.id;
    let w = running.result().step().await.unwrap();
    assert_eq!(w.reason, cuba_protocol::WaitReason::Exited);
    assert_eq!((w.process.id, w.process.exit_code), (id, Some(3)));
    assert_eq!(text(&w.output.bytes()), "hi\n");
    // A wait that times out leaves the process running, as `Wait` does.
    let running = c.run(run("sleep 30", 100)).step().await.unwrap();
    let w = running.result().step().await.unwrap();
    assert_eq!(w.reason, cuba_protocol::WaitReason::Timeout);
    assert_eq!(w.process.state, ProcState::Running);
    // Dropping it before the end cancels the wait only.
    let running = c.run(run("sleep 30", 20_000)).step().await.unwrap();
    let pid = running.info.pid as i32;
    drop(running);
    let info = c.info(w.process.id).step().await.unwrap();
    assert_eq!(info.state, ProcState::Running);
    assert!(cuba_tests::pid_alive(pid));
    // A refused spawn is one error.
    let e = c.run(run("", 1000)).step().await.err().unwrap();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
}

//! Waiting for input: a process blocked reading the stdin pipe the daemon holds, with its output
//! quiet, is reported `WaitingInput` at once; one reading a file, or only sleeping, never is.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::{ProcState, WaitReason, WaitRequest, WaitResult, WaitSpec};
use cuba_tests::{bounded, spawn, text, wait_exit, Step, TestDaemon, STEP};

async fn wait_for(c: &Client, id: u64, timeout: Duration) -> WaitResult {
    let req = WaitRequest {
        id,
        since: Some(0),
        spec: WaitSpec::exit(timeout.as_millis() as u64, 1 << 20),
    };
    bounded("wait", STEP + timeout, c.wait(req)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_read_from_stdin_returns_waiting_input_at_once() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "printf 'Name? '; read x; echo hi $x").await;
    let w = wait_for(&c, p.id, Duration::from_secs(10)).await;
    assert_eq!(w.reason, WaitReason::WaitingInput, "{:?}", w.process);
    assert_eq!(w.process.state, ProcState::WaitingInput);
    assert!(
        text(&w.output.bytes()).ends_with("Name? "),
        "{:?}",
        text(&w.output.bytes())
    );
    // The table shows it too.
    assert_eq!(
        c.info(p.id).step().await.unwrap().state,
        ProcState::WaitingInput
    );

    // An answer moves it on at once (no stale WaitingInput), and it ends.
    c.stdin(p.id, b"bob\n".to_vec(), false)
        .step()
        .await
        .unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.state, ProcState::Exited);
    assert_eq!(text(&w.output.bytes()), "Name? hi bob\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_prompt_is_reported_after_the_first_answer() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "read a; read b; echo $a-$b").await;
    let w = wait_for(&c, p.id, Duration::from_secs(10)).await;
    assert_eq!(w.reason, WaitReason::WaitingInput, "{:?}", w.process);
    c.stdin(p.id, b"x\n".to_vec(), false).step().await.unwrap();
    // No output between the reads: the stdin write restarts the quiet period.
    let w = wait_for(&c, p.id, Duration::from_secs(10)).await;
    assert_eq!(w.reason, WaitReason::WaitingInput, "{:?}", w.process);
    c.stdin(p.id, b"y\n".to_vec(), false).step().await.unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(text(&w.output.bytes()), "x-y\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_file_or_sleeping_is_not_waiting_for_input() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let reader = spawn(&c, "sleep 0.5; cat /etc/hostname; sleep 2").await;
    let sleeper = spawn(&c, "sleep 2").await;
    // `cat` blocks reading a pipe, but not the one the daemon holds.
    let other_pipe = spawn(&c, "sleep 2 | cat").await;
    let quiet = Duration::from_millis(1500);
    let (r, s, o) = tokio::join!(
        wait_for(&c, reader.id, quiet),
        wait_for(&c, sleeper.id, quiet),
        wait_for(&c, other_pipe.id, quiet)
    );
    for w in [r, s, o] {
        assert_eq!(w.reason, WaitReason::Timeout, "{:?}", w.process);
        assert_eq!(w.process.state, ProcState::Running);
    }
    // Closing stdin: nobody can answer, so never waiting.
    let eof = spawn(&c, "cat; sleep 1").await;
    c.stdin(eof.id, Vec::new(), true).step().await.unwrap();
    let w = wait_for(&c, eof.id, Duration::from_millis(500)).await;
    assert_eq!(w.reason, WaitReason::Timeout, "{:?}", w.process);
    for id in [reader.id, sleeper.id, other_pipe.id, eof.id] {
        let w = wait_exit(&c, id).await;
        assert_eq!(w.process.exit_code, Some(0), "{:?}", w.process);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_reading_stdin_is_found() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(
        &c,
        "echo start; sh -c 'head -n1 >/dev/null; echo done'; sleep 0",
    )
    .await;
    let w = wait_for(&c, p.id, Duration::from_secs(10)).await;
    assert_eq!(w.reason, WaitReason::WaitingInput, "{:?}", w.process);
    c.stdin(p.id, b"line\n".to_vec(), false)
        .step()
        .await
        .unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(text(&w.output.bytes()), "start\ndone\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_in_select_on_stdin_is_waiting_input_and_with_a_timeout_is_not() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    // select() on stdin with no timeout: it waits for the answer.
    let forever = spawn(
        &c,
        "python3 -c 'import select,sys; print(\"ready?\", flush=True); \
         select.select([sys.stdin],[],[]); print(\"got\", sys.stdin.readline().strip())'",
    )
    .await;
    // select() with a timeout, in a loop: a program doing its own work, not waiting for us.
    let polling = spawn(
        &c,
        "python3 -c 'import select,sys,time
t = time.time()
while time.time() - t < 2: select.select([sys.stdin],[],[], 0.5)'",
    )
    .await;
    let (w, p) = tokio::join!(
        wait_for(&c, forever.id, Duration::from_secs(10)),
        wait_for(&c, polling.id, Duration::from_millis(1500))
    );
    assert_eq!(w.reason, WaitReason::WaitingInput, "{:?}", w.process);
    assert_eq!(p.reason, WaitReason::Timeout, "{:?}", p.process);
    c.stdin(forever.id, b"yes\n".to_vec(), false)
        .step()
        .await
        .unwrap();
    let w = wait_exit(&c, forever.id).await;
    assert_eq!(text(&w.output.bytes()), "ready?\ngot yes\n");
    wait_exit(&c, polling.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_forever_on_something_else_than_stdin_is_not_waiting_input() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    // `make -j` waits for its jobs in pselect on its jobserver, its fd 0 our stdin pipe.
    let dir = tempfile::tempdir_in(d.dir()).unwrap();
    std::fs::write(
        dir.path().join("Makefile"),
        "all: a b\na:\n\t@sleep 2\nb:\n\t@sleep 2\n",
    )
    .unwrap();
    let make = spawn(
        &c,
        &format!("make -s -j2 -C {} && echo built", dir.path().display()),
    )
    .await;
    // select() with no timeout on a pipe of its own, not on stdin.
    let other = spawn(
        &c,
        "python3 -c 'import os,select,threading,time
r, w = os.pipe()
threading.Timer(2, lambda: os.write(w, b\"x\")).start()
select.select([r],[],[]); print(\"woken\")'",
    )
    .await;
    let quiet = Duration::from_millis(1500);
    let (m, o) = tokio::join!(wait_for(&c, make.id, quiet), wait_for(&c, other.id, quiet));
    for w in [m, o] {
        assert_eq!(w.reason, WaitReason::Timeout, "{:?}", w.process);
        assert_eq!(w.process.state, ProcState::Running);
    }
    let w = wait_exit(&c, make.id).await;
    assert_eq!(text(&w.output.bytes()), "built\n");
    let w = wait_exit(&c, other.id).await;
    assert_eq!(text(&w.output.bytes()), "woken\n");
}

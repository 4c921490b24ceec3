//! `Run`, `Spawn`, `Wait`, `Read` and `Stdin`: output on its two streams, exit codes, the
//! environment of a request, stdin written and closed.

use cuba_protocol::{ErrorKind, ProcState, ReadRequest, Stream, StreamFilter, WaitReason};

use crate::fixture::{bounded, run, spawn, wait_exit, Daemon};
use crate::os::{lines, stream, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_returns_both_streams_and_the_exit_code() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let w = run(&c, d.req(&text::both_streams("out", "err", 3))).await;
    assert_eq!(w.reason, WaitReason::Exited, "{w:?}");
    let p = &w.process;
    assert_eq!(
        (p.state, p.exit_code, p.signal),
        (ProcState::Exited, Some(3), None)
    );
    assert_eq!(lines(&stream(&w, Stream::Stdout)), ["out"], "{w:?}");
    assert_eq!(lines(&stream(&w, Stream::Stderr)), ["err"], "{w:?}");
    assert!(p.stdout_bytes >= 3 && p.stderr_bytes >= 3, "{p:?}");
    assert_eq!(w.output.total, p.stdout_bytes + p.stderr_bytes);
    assert!(p.pid > 0 && p.ended_at_ms.is_some(), "{p:?}");
    for code in [0, 1, 7, 255] {
        let w = run(&c, d.req(&text::exit(code))).await;
        assert_eq!(
            (w.process.state, w.process.exit_code),
            (ProcState::Exited, Some(code)),
            "exit {code}: {w:?}"
        );
        assert!(w.output.chunks.is_empty(), "{w:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_gets_its_environment_and_its_output_is_read_back() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let mut req = d.req(&text::echo_var("CUBA_HANDLERS_T"));
    req.env = vec![("CUBA_HANDLERS_T".into(), "from-the-request".into())];
    let p = spawn(&c, req).await;
    assert!(p.id > 0 && p.pid > 0, "{p:?}");
    assert!(
        !p.state.is_finished() || p.state == ProcState::Exited,
        "{p:?}"
    );
    let w = wait_exit(&c, p.id).await;
    assert_eq!(
        (w.reason, w.process.exit_code),
        (WaitReason::Exited, Some(0))
    );
    assert_eq!(lines(&w.output.bytes()), ["from-the-request"]);
    // A read from the start and a tail read give the same bytes as the wait.
    for since in [Some(0), None] {
        let read = ReadRequest {
            id: p.id,
            since,
            max_bytes: 1 << 16,
            stream: StreamFilter::Both,
        };
        let r = bounded("read", c.read(read)).await.unwrap();
        assert_eq!(r.bytes(), w.output.bytes(), "since {since:?}");
        assert_eq!((r.start, r.next, r.total), (0, r.total, w.output.total));
    }
    let r = ReadRequest {
        id: p.id,
        since: Some(0),
        max_bytes: 1 << 16,
        stream: StreamFilter::Stderr,
    };
    assert!(bounded("read", c.read(r)).await.unwrap().chunks.is_empty());
    // And `info` is the row the wait ended with.
    let row = bounded("info", c.info(p.id)).await.unwrap();
    assert_eq!((row.state, row.exit_code), (ProcState::Exited, Some(0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_written_reaches_the_command_and_its_close_is_the_end_of_file() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, d.req(&text::filter("hello"))).await;
    bounded(
        "stdin",
        c.stdin(p.id, b"hello there\nbye\n".to_vec(), false),
    )
    .await
    .unwrap();
    bounded("stdin", c.stdin(p.id, b"hello again\n".to_vec(), false))
        .await
        .unwrap();
    // It reads to the end of its input: still running while stdin is open.
    let row = bounded("info", c.info(p.id)).await.unwrap();
    assert!(
        !row.state.is_finished(),
        "ended before its stdin closed: {row:?}"
    );
    bounded("close", c.stdin(p.id, Vec::new(), true))
        .await
        .unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(
        (w.reason, w.process.exit_code),
        (WaitReason::Exited, Some(0))
    );
    assert_eq!(lines(&w.output.bytes()), ["hello there", "hello again"]);
    // Nothing more can be written: the process has ended.
    let late = bounded("stdin", c.stdin(p.id, b"x\n".to_vec(), false)).await;
    assert_eq!(late.unwrap_err().kind(), Some(ErrorKind::InvalidState));
    let none = bounded("stdin", c.stdin(u64::MAX, b"x\n".to_vec(), false)).await;
    assert_eq!(none.unwrap_err().kind(), Some(ErrorKind::NotFound));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_given_with_the_request_is_read_and_closed() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let mut req = d.req(&text::filter("hello"));
    req.stdin = Some(b"bye\nhello world\n".to_vec());
    req.close_stdin = true;
    let w = run(&c, req).await;
    assert_eq!(
        (w.reason, w.process.exit_code),
        (WaitReason::Exited, Some(0))
    );
    assert_eq!(lines(&w.output.bytes()), ["hello world"]);
    // Closed at the start: a write now is refused (ended, or its stdin closed).
    let p = spawn(&c, {
        let mut r = d.req(&text::filter("x"));
        r.close_stdin = true;
        r
    })
    .await;
    let w = wait_exit(&c, p.id).await;
    // find and grep end with 1 when nothing matched.
    assert_eq!(
        (w.reason, w.process.exit_code),
        (WaitReason::Exited, Some(1))
    );
    let late = bounded("stdin", c.stdin(p.id, b"x\n".to_vec(), false)).await;
    assert_eq!(late.unwrap_err().kind(), Some(ErrorKind::InvalidState));
}

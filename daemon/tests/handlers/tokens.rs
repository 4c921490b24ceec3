//! Request tokens: a `Spawn`, `Run` or `Stdin` sent again with its token (as a client does
//! after a lost connection) is carried out once and answered as the first time; the same token
//! on another request is refused.

use cuba_protocol::{ErrorKind, ListRequest, ProcState, RequestToken, StdinRequest, WaitReason};

use crate::fixture::{bounded, run, spawn, wait_exit, Daemon};
use crate::os::{lines, text};

/// The rows whose command is `command`.
async fn rows_of(c: &cuba_protocol::client::Client, command: &str) -> usize {
    let all = bounded("list", c.list(ListRequest::default()))
        .await
        .unwrap();
    all.iter().filter(|p| p.command == command).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_sent_again_with_its_token_runs_once_and_gets_the_same_record() {
    let d = Daemon::start().await;
    let mut req = d.req(&text::echo("once"));
    req.token = Some(RequestToken::fresh());
    let first = spawn(&d.client().await, req.clone()).await;
    // The retry comes on a new connection, as after a lost one.
    let c = d.client().await;
    let again = spawn(&c, req.clone()).await;
    assert_eq!((again.id, again.pid), (first.id, first.pid));
    let w = wait_exit(&c, first.id).await;
    assert_eq!(lines(&w.output.bytes()), ["once"]);
    // Ended now, a third attempt still gets that record, and nothing runs again.
    let third = spawn(&c, req.clone()).await;
    assert_eq!((third.id, third.state), (first.id, ProcState::Exited));
    assert_eq!(rows_of(&c, &req.command).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sent_again_with_its_token_waits_on_the_first_record() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let mut req = d.req(&text::both_streams("ran", "once", 4));
    req.token = Some(RequestToken::fresh());
    let first = run(&c, req.clone()).await;
    let again = run(&d.client().await, req.clone()).await;
    assert_eq!(again.process.id, first.process.id);
    assert_eq!(again.reason, WaitReason::Exited);
    assert_eq!(again.process.exit_code, Some(4));
    assert_eq!(again.output.bytes(), first.output.bytes());
    assert_eq!(rows_of(&c, &req.command).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_token_on_another_request_is_refused_and_runs_nothing() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let token = Some(RequestToken::fresh());
    let mut first = d.req(&text::echo("first"));
    first.token = token;
    let p = spawn(&c, first).await;
    let mut other = d.req(&text::echo("other"));
    other.token = token;
    let refused = bounded("spawn", c.spawn(other.clone())).await.unwrap_err();
    assert_eq!(refused.kind(), Some(ErrorKind::BadRequest), "{refused}");
    assert!(refused.to_string().contains("token"), "{refused}");
    // Nor may a stdin write take a spawn's token.
    let write = StdinRequest {
        id: p.id,
        data: b"x\n".to_vec(),
        eof: false,
        token,
    };
    let refused = bounded("stdin", c.write_stdin(write)).await.unwrap_err();
    assert_eq!(refused.kind(), Some(ErrorKind::BadRequest), "{refused}");
    assert_eq!(rows_of(&c, &other.command).await, 0);
    let w = wait_exit(&c, p.id).await;
    assert_eq!(lines(&w.output.bytes()), ["first"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdin_write_sent_again_with_its_token_is_written_once() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, d.req(&text::filter("hello"))).await;
    let write = StdinRequest {
        id: p.id,
        data: b"hello once\n".to_vec(),
        eof: false,
        token: Some(RequestToken::fresh()),
    };
    for _ in 0..3 {
        let c = d.client().await;
        bounded("stdin", c.write_stdin(write.clone()))
            .await
            .unwrap();
    }
    bounded("close", c.stdin(p.id, Vec::new(), true))
        .await
        .unwrap();
    let w = wait_exit(&c, p.id).await;
    assert_eq!(lines(&w.output.bytes()), ["hello once"]);
}

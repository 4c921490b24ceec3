//! Exactly once across reconnects: a `Run`, `Spawn` or stdin write with a request token that
//! the daemon carried out but whose answer was lost (a proxy cuts the connection right after the
//! daemon took the request), or that comes again after a daemon restart, is answered with the
//! first attempt's record and not carried out again; the same token on another request is
//! refused.

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::path::Path;

use cuba_protocol::client::{this_client, Client, ClientError};
use cuba_protocol::{
    ClientKind, ErrorKind, ListRequest, Request, RequestToken, RunRequest, StdinRequest, WaitSpec,
};
use cuba_tests::proxy::CutProxy;
use cuba_tests::{read_all, spawn_req, text, wait_exit, Step, TestDaemon, STEP};

/// Connects to `socket` and runs `f`, connecting again and repeating `f` (the same request,
/// the same token) after a lost connection, as the shim and cubactl do; bounded.
async fn retrying<T, F, Fut>(socket: &Path, f: F) -> (T, u32)
where
    F: Fn(Client) -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    for attempt in 0..5 {
        let c = Client::connect(socket, this_client(ClientKind::Other, "retry"))
            .step()
            .await
            .unwrap();
        match f(c).step().await {
            Ok(v) => return (v, attempt),
            Err(e) if e.connection_lost() => continue,
            Err(e) => panic!("attempt {attempt} failed: {e}"),
        }
    }
    panic!("no answer after 5 attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_answer_was_lost_runs_once_and_its_retry_gets_the_output() {
    let d = TestDaemon::start().await;
    let marker = d.dir().join("marker");
    let proxy = CutProxy::start(&d.dir().join("p"), d.socket(), |r| {
        matches!(r, Request::Run(_))
    });
    let mut spawn = spawn_req(&format!("echo x >> {}; echo done", marker.display()));
    spawn.token = Some(RequestToken::fresh());
    let req = RunRequest {
        spawn,
        wait: WaitSpec::exit(STEP.as_millis() as u64, 1 << 20),
    };
    let (w, attempts) = retrying(proxy.path(), |c| {
        let req = req.clone();
        async move { c.run(req).await?.result().await }
    })
    .await;
    assert_eq!(
        (proxy.cuts(), attempts),
        (1, 1),
        "the first attempt was cut"
    );
    assert_eq!(text(&w.output.bytes()), "done\n");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "x\n", "ran once");
    let c = d.client().await;
    let all = c.list(ListRequest::default()).step().await.unwrap();
    assert_eq!(all.len(), 1, "one record: {all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdin_write_retried_with_its_token_is_written_once() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let cat = c.spawn(spawn_req("cat")).step().await.unwrap();
    let proxy = CutProxy::start(&d.dir().join("p"), d.socket(), |r| {
        matches!(r, Request::Stdin(_))
    });
    let req = StdinRequest {
        id: cat.id,
        data: b"once\n".to_vec(),
        eof: false,
        token: Some(RequestToken::fresh()),
    };
    let ((), attempts) = retrying(proxy.path(), |c| {
        let req = req.clone();
        async move { c.write_stdin(req).await }
    })
    .await;
    assert_eq!((proxy.cuts(), attempts), (1, 1));
    // And once more on a live connection: still answered, still not written.
    c.write_stdin(req.clone()).step().await.unwrap();
    c.stdin(cat.id, Vec::new(), true).step().await.unwrap();
    wait_exit(&c, cat.id).await;
    assert_eq!(text(&read_all(&c, cat.id).await), "once\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_retried_after_a_daemon_restart_finds_its_record() {
    let mut d = TestDaemon::start().await;
    let marker = d.dir().join("marker");
    let mut req = spawn_req(&format!("echo x >> {}; sleep 300", marker.display()));
    req.token = Some(RequestToken::fresh());
    let c = d.client().await;
    let first = c.spawn(req.clone()).step().await.unwrap();
    // Its line written, not only the file made by the redirect: the stop below must not
    // come between the two.
    let ran = || std::fs::read_to_string(&marker).is_ok_and(|t| t == "x\n");
    assert!(
        cuba_tests::wait_for(ran, STEP).await,
        "the command never ran"
    );
    // SIGTERM: the daemon stops its children and exits; a new one restores the journal.
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(d.pid(), libc::SIGTERM) };
    d.wait_daemon_exit(STEP).await;
    d.restart().await;
    let c = d.client().await;
    let again = c.spawn(req.clone()).step().await.unwrap();
    assert_eq!(again.id, first.id, "the same record");
    assert!(again.state.is_finished(), "{again:?}");
    let all = c.list(ListRequest::default()).step().await.unwrap();
    assert_eq!(all.len(), 1, "nothing new started: {all:?}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "x\n", "ran once");
    assert!(d.all_marked().is_empty(), "{:?}", d.all_marked());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_token_on_another_command_is_refused() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let token = Some(RequestToken::fresh());
    let mut first = spawn_req("true");
    first.token = token;
    let p = c.spawn(first).step().await.unwrap();
    wait_exit(&c, p.id).await;
    let mut other = spawn_req("echo other");
    other.token = token;
    let e = c.spawn(other).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
    assert!(e.to_string().contains("different request"), "{e}");
    // Nor as a stdin write.
    let write = StdinRequest {
        id: p.id,
        data: b"x".to_vec(),
        eof: false,
        token,
    };
    let e = c.write_stdin(write).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ensure_retried_with_its_token_gets_the_same_answer_kind() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let mut req = spawn_req("sleep 300");
    req.name = Some("server".into());
    req.token = Some(RequestToken::fresh());
    let (first, existing) = c.ensure(req.clone()).step().await.unwrap();
    assert!(!existing, "started");
    // Without its token it would be found running (`Existing`); with it, the retry is told
    // what the first attempt was told: started.
    let (again, existing) = c.ensure(req.clone()).step().await.unwrap();
    assert_eq!((again.id, existing), (first.id, false));
    req.token = Some(RequestToken::fresh());
    let (found, existing) = c.ensure(req).step().await.unwrap();
    assert_eq!((found.id, existing), (first.id, true));
}

//! One table for every client: what one client starts, another lists, watches and stops.

#![allow(clippy::unwrap_used)]

use cuba_protocol::{
    ClientKind, ListRequest, ProcState, Request, Response, Signal, SignalRequest, WaitReason,
    WaitRequest, WaitSpec,
};
use cuba_tests::{bounded, spawn_req, spawn_with, wait_exit, Step, TestDaemon, STEP};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_see_and_steer_the_same_table() {
    let d = TestDaemon::start().await;
    let alice = d.client_named("alice").await;
    let bob = d.client_named("bob").await;

    // Bob watches the table while Alice starts a process.
    let mut watch = bob
        .subscribe(Request::WatchTable(ListRequest::default()))
        .step()
        .await
        .unwrap();
    match bounded("first table", STEP, watch.next()).await {
        Some(Ok(Response::List(l))) => assert!(l.processes.is_empty(), "{l:?}"),
        other => panic!("unexpected watch frame: {other:?}"),
    }
    let mut req = spawn_req("sleep 100");
    req.name = Some("svc".into());
    let p = spawn_with(&alice, req).await;
    loop {
        match bounded("table change", STEP, watch.next()).await {
            Some(Ok(Response::List(l))) if l.processes.iter().any(|r| r.id == p.id) => break,
            Some(Ok(Response::List(_))) => {}
            other => panic!("unexpected watch frame: {other:?}"),
        }
    }
    drop(watch);

    let listed = bob.list(ListRequest::default()).step().await.unwrap();
    let row = listed.iter().find(|r| r.id == p.id).expect("bob sees it");
    assert_eq!(row.owner.name, "alice");
    assert_eq!(row.owner.kind, ClientKind::Other);
    assert_eq!(row.owner.pid, std::process::id());
    assert_eq!(row.name.as_deref(), Some("svc"));
    assert_eq!((row.pid, row.state), (p.pid, ProcState::Running));

    let by_owner = |owner: &str| ListRequest {
        owner: Some(owner.into()),
        ..ListRequest::default()
    };
    assert_eq!(bob.list(by_owner("alice")).step().await.unwrap().len(), 1);
    assert!(bob.list(by_owner("bob")).step().await.unwrap().is_empty());

    // Alice waits on it; Bob stops it; Alice's wait ends with Bob's stop.
    let waiting = {
        let alice = alice.clone();
        tokio::spawn(async move { wait_exit(&alice, p.id).await })
    };
    let stopped = bob
        .signal(SignalRequest {
            id: p.id,
            signal: Signal::Term,
            escalate: true,
            grace_ms: None,
            wait: true,
        })
        .step()
        .await
        .unwrap();
    assert_eq!(stopped.state, ProcState::Killed);
    let w = bounded("alice's wait", STEP, waiting).await.unwrap();
    assert_eq!(w.process.state, ProcState::Killed);
    let running = ListRequest {
        state: Some(ProcState::Running),
        ..ListRequest::default()
    };
    assert!(alice.list(running).step().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_wait_does_not_block_other_calls_on_the_connection() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = cuba_tests::spawn(&c, "sleep 100").await;
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move {
            c.wait(WaitRequest {
                id: p.id,
                since: None,
                spec: WaitSpec::exit(60_000, 1024),
            })
            .step()
            .await
        })
    };
    // Requests on the same connection are answered while the wait is pending.
    for _ in 0..5 {
        let status = bounded("status", STEP, c.status()).await.unwrap();
        assert_eq!(status.running, 1);
    }
    assert!(!waiter.is_finished());
    bounded(
        "stop",
        STEP,
        c.signal(SignalRequest {
            id: p.id,
            signal: Signal::Kill,
            escalate: false,
            grace_ms: None,
            wait: true,
        }),
    )
    .await
    .unwrap();
    let w = bounded("wait", STEP, waiter).await.unwrap().unwrap();
    assert_eq!(w.reason, WaitReason::Exited);
    assert_eq!(w.process.signal, Some(Signal::Kill));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_reuses_the_running_service_of_that_name() {
    let d = TestDaemon::start().await;
    let (a, b) = (d.client_named("a").await, d.client_named("b").await);
    let mut req = spawn_req("sleep 100");
    req.name = Some("web".into());
    // Two clients racing to ensure the same service get one process.
    let (ra, rb) = tokio::join!(a.ensure(req.clone()).step(), b.ensure(req.clone()).step());
    let ((pa, existing_a), (pb, existing_b)) = (ra.unwrap(), rb.unwrap());
    assert_eq!(pa.id, pb.id);
    assert!(existing_a != existing_b, "exactly one started it");
    assert_eq!(
        a.list(ListRequest::default()).step().await.unwrap().len(),
        1
    );
    // Another command under the same name is a new process.
    let mut other = req.clone();
    other.command = "sleep 101".into();
    let (po, existing) = a.ensure(other).step().await.unwrap();
    assert!(!existing && po.id != pa.id);
    // Once the service has ended, ensure starts it again.
    let stop = |id| SignalRequest {
        id,
        signal: Signal::Kill,
        escalate: false,
        grace_ms: None,
        wait: true,
    };
    a.signal(stop(pa.id)).step().await.unwrap();
    let (again, existing) = b.ensure(req.clone()).step().await.unwrap();
    assert!(!existing && again.id > po.id, "{again:?}");
    // Without a name there is nothing to find by.
    req.name = None;
    let err = a.ensure(req).step().await.unwrap_err();
    assert_eq!(
        err.kind(),
        Some(cuba_protocol::ErrorKind::BadRequest),
        "{err}"
    );
}

//! Connections as a resource: the cap on how many are open, idle ones closed with a notice
//! (and clients that reconnect without running anything twice), hellos over the limits or with
//! an environment no process could hold, running out of file descriptors, and memory given
//! back after large clients leave. Each test has its own daemon; the figures they measure are
//! printed with `--nocapture`.

#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::{Duration, Instant};

use cuba_protocol::client::{this_client, Client, ClientError};
use cuba_protocol::handshake::HandshakeError;
use cuba_protocol::{
    ClientInfo, ClientKind, ErrorKind, FollowRequest, ListRequest, ProcessInfo, Request, Response,
    ResponseFrame, StreamFilter, WaitReason, WaitRequest, WaitSpec,
};
use cuba_tests::procfs::vm_rss_kib;
use cuba_tests::{bounded, raw, read_all, spawn, spawn_req, text, wait_exit, wait_for};
use cuba_tests::{Step, TestDaemon, STEP};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

/// A new client runs `echo hi` and gets its output: the daemon serves normally.
async fn runs_normally(d: &TestDaemon) {
    let c = d.client().await;
    let p = spawn(&c, "echo hi").await;
    wait_exit(&c, p.id).await;
    assert_eq!(text(&read_all(&c, p.id).await), "hi\n");
}

/// The reason of the daemon's refusal of `client`, through the protocol's own client.
async fn refused(d: &TestDaemon, client: ClientInfo) -> String {
    match bounded("connect", STEP, Client::connect(d.socket(), client)).await {
        Err(ClientError::Handshake(HandshakeError::Refused(reason))) => reason,
        Err(e) => panic!("expected a refusal at the handshake, got: {e}"),
        Ok(_) => panic!("the daemon accepted the client"),
    }
}

/// The reason of the daemon's refusal of `hello`, on a raw socket; the daemon then closes.
async fn refused_raw(d: &TestDaemon, hello: &[u8]) -> String {
    let mut s = raw::connect(d.socket()).await;
    raw::write_frame_lenient(&mut s, hello).await;
    let reply = raw::read_frame(&mut s)
        .await
        .expect("no answer to the hello");
    let reason = raw::refusal(&reply).expect("a refusal, not a welcome");
    assert!(
        raw::closed(&mut s).await,
        "the refused connection stayed open"
    );
    reason
}

/// Closes a raw connection and waits until the daemon has closed its end too.
async fn close(mut s: UnixStream) {
    let _ = s.shutdown().await;
    assert!(
        raw::closed(&mut s).await,
        "the daemon kept the connection open"
    );
}

/// A client whose environment is exactly `env`.
fn client_with(env: Vec<(OsString, OsString)>) -> ClientInfo {
    let mut c = this_client(ClientKind::Other, "connections");
    c.env = env;
    c
}

fn var(name: &[u8], value: &[u8]) -> (OsString, OsString) {
    (
        OsString::from_vec(name.to_vec()),
        OsString::from_vec(value.to_vec()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_refused_until_one_closes() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_MAX_CONNECTIONS", "5")
        .start()
        .await;
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(raw::welcomed(d.socket()).await);
    }
    // The sixth: the protocol's client sees a handshake refusal at once, not a hang.
    let started = Instant::now();
    let reason = refused(&d, this_client(ClientKind::Other, "sixth")).await;
    eprintln!(
        "cap: 5 held, the 6th refused in {:?}: {reason}",
        started.elapsed()
    );
    assert!(
        reason.contains("at most 5 connections") && reason.contains("CUBA_EXEC_MAX_CONNECTIONS"),
        "{reason}"
    );
    // A raw client gets the same refusal frame.
    let reason = refused_raw(&d, &raw::hello(false)).await;
    assert!(reason.contains("at most 5 connections"), "{reason}");

    // Once one has closed (seen from both ends), a new client gets in and runs at once.
    close(held.pop().unwrap()).await;
    runs_normally(&d).await;
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_gets_a_notice_and_nothing_after_it_is_read() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_IDLE_TIMEOUT", "200ms")
        .start()
        .await;
    let mut s = raw::welcomed(d.socket()).await;
    let since = Instant::now();
    let frame = raw::read_frame(&mut s)
        .await
        .expect("closed without a notice");
    let after = since.elapsed();
    eprintln!("idle: notice after {after:?} idle (limit 200ms)");
    match raw::response(&frame) {
        ResponseFrame {
            id: 0,
            response: Response::Closing { reason },
        } => assert!(
            reason.contains("200ms") && reason.contains("CUBA_EXEC_IDLE_TIMEOUT"),
            "{reason}"
        ),
        other => panic!("expected the closing notice (id 0), got {other:?}"),
    }
    assert!(
        after >= Duration::from_millis(150),
        "closed too early: {after:?}"
    );
    // The daemon stopped reading before the notice: a spawn sent now never runs.
    let marker = format!("after-notice-{}", std::process::id());
    let spawn_frame = raw::request(1, Request::Spawn(spawn_req(&format!("echo {marker}"))));
    raw::write_frame_lenient(&mut s, &spawn_frame).await;
    assert!(raw::closed(&mut s).await, "the idle connection stayed open");
    let c = d.client().await;
    let list = c.list(ListRequest::default()).step().await.unwrap();
    assert!(
        list.iter().all(|p| !p.command.contains(&marker)),
        "a request sent after the notice ran: {list:?}"
    );
}

/// How [`spawn_like_link`] got its spawns through.
#[derive(Default)]
struct Tally {
    /// The connection was known dead before the spawn: a new one was made first.
    reconnected: u32,
    /// The spawn failed as never seen by the daemon and was sent again.
    resent: u32,
}

/// Spawns `command` as the MCP server's link does: a dead connection is replaced first, and a
/// request that failed is sent again only if the daemon cannot have seen it.
async fn spawn_like_link(
    d: &TestDaemon,
    c: &mut Client,
    command: &str,
    tally: &mut Tally,
) -> ProcessInfo {
    for _ in 0..5 {
        if !c.is_alive() {
            tally.reconnected += 1;
            *c = d.client().await;
        }
        match bounded("spawn", STEP, c.spawn(spawn_req(command))).await {
            Ok(p) => return p,
            Err(e) if e.nothing_sent() => tally.resent += 1,
            Err(e) => panic!("spawn of {command:?} lost after it may have been sent: {e}"),
        }
    }
    panic!("spawn of {command:?} never got through");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_reconnect_after_an_idle_close_and_run_each_command_once() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_IDLE_TIMEOUT", "200ms")
        .start()
        .await;
    let mut c = d.client().await;
    // The notice marks the connection dead (no event tells a client's user when).
    assert!(wait_for(|| !c.is_alive(), STEP).await, "still alive");
    let e = c.spawn(spawn_req("echo never")).await.unwrap_err();
    assert!(e.nothing_sent(), "{e}");
    c = d.client().await;

    // Requests sent around the moment the daemon gives up an idle connection: each one is
    // either served or known unseen and resent, never lost and never run twice. The pauses
    // are the idleness under test, spread across the limit (150-285 ms).
    let mut tally = Tally::default();
    let runs = 16;
    for i in 0..runs {
        tokio::time::sleep(Duration::from_millis(150 + 9 * i)).await;
        let p = spawn_like_link(&d, &mut c, &format!("echo run-{i}"), &mut tally).await;
        wait_exit(&c, p.id).await;
    }
    let list = c.list(ListRequest::default()).step().await.unwrap();
    for i in 0..runs {
        let command = format!("echo run-{i}");
        let n = list.iter().filter(|p| p.command == command).count();
        assert_eq!(n, 1, "{command:?} ran {n} times");
    }
    eprintln!(
        "idle: {runs} spawns 150-285ms after the last request (limit 200ms): {} on a new \
         connection, {} resent after the notice",
        tally.reconnected, tally.resent
    );
    // Up to 85 ms past the limit: some spawns met a connection the daemon gave up. (The exact
    // crossing is tested on each side alone: `an_idle_connection_gets_a_notice_and_nothing_
    // after_it_is_read` here, the client in protocol `client`.)
    assert!(
        tally.reconnected + tally.resent > 0,
        "no spawn met an idle close"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_wait_or_stream_keeps_its_connection() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_IDLE_TIMEOUT", "200ms")
        .start()
        .await;
    let c = d.client().await;
    let p = spawn(&c, "sleep 1; echo done").await;
    let req = WaitRequest {
        id: p.id,
        since: Some(0),
        spec: WaitSpec::exit(20_000, 1 << 16),
    };
    let w = c.wait(req).step().await.expect("the wait was cut");
    assert_eq!(w.reason, WaitReason::Exited);
    assert_eq!(text(&w.output.bytes()), "done\n");
    assert!(c.is_alive(), "the connection closed during a wait");

    // A stream (follow) longer than the limit is not cut either.
    let p = spawn(&c, "sleep 0.5; echo a; sleep 0.5; echo b").await;
    let follow = FollowRequest {
        id: p.id,
        since: Some(0),
        backlog: 0,
        stream: StreamFilter::Both,
    };
    let mut sub = c.subscribe(Request::Follow(follow)).step().await.unwrap();
    let mut out = Vec::new();
    while let Some(frame) = sub.next().step().await {
        if let Response::Output(o) = frame.expect("the stream was cut") {
            out.extend(o.bytes());
        }
    }
    assert_eq!(text(&out), "a\nb\n");
    assert!(c.is_alive());
    c.status().step().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_over_the_limits_is_refused_with_the_reason() {
    let d = TestDaemon::start().await;
    let many = (0..4097)
        .map(|i| var(format!("V{i}").as_bytes(), b"1"))
        .collect();
    let reason = refused(&d, client_with(many)).await;
    assert!(
        reason.contains("4097 variables") && reason.contains("4096"),
        "{reason}"
    );

    // Just over 1 MiB: within the first frame's limit, refused by the environment's.
    let big = vec![var(b"BIG", &vec![b'x'; 1024 * 1024])];
    let reason = refused(&d, client_with(big)).await;
    assert!(
        reason.contains("1048581 bytes") && reason.contains("1024 KiB"),
        "{reason}"
    );

    // Far over: refused from the frame's length, before the daemon reads (or reserves) it.
    let huge = vec![var(b"HUGE", &vec![b'x'; 7 * 1024 * 1024])];
    let reason = refused_raw(&d, &raw::hello_of(client_with(huge.clone()))).await;
    assert!(
        reason.contains("larger than") && reason.contains("KiB"),
        "{reason}"
    );
    let reason = refused(&d, client_with(huge)).await;
    assert!(reason.contains("larger than"), "{reason}");

    runs_normally(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_environment_no_process_could_hold_is_refused_by_name() {
    let d = TestDaemon::start().await;
    let cases: [(&[u8], &[u8], &str); 4] = [
        (
            b"BAD\0NAME",
            b"1",
            r#""BAD\x00NAME" has a NUL byte in its name"#,
        ),
        (b"A=B", b"1", r#""A=B" has '=' in its name"#),
        (b"", b"1", "has an empty name"),
        (b"HOME", b"/h\0x", r#""HOME" has a NUL byte in its value"#),
    ];
    for (name, value, expected) in cases {
        let env = vec![var(b"PATH", b"/usr/bin:/bin"), var(name, value)];
        let reason = refused_raw(&d, &raw::hello_of(client_with(env.clone()))).await;
        assert!(reason.contains(expected), "{reason}");
        let reason = refused(&d, client_with(env)).await;
        assert!(reason.contains(expected), "{reason}");
    }
    let mut nul_cwd = client_with(Vec::new());
    nul_cwd.cwd = OsString::from("/tmp\0x");
    let reason = refused(&d, nul_cwd).await;
    assert!(reason.contains(r#""/tmp\x00x""#), "{reason}");

    // A spawn's own environment and cwd get the same checks, as a bad request.
    let c = d.client().await;
    let mut req = spawn_req("true");
    req.env = vec![var(b"X\0Y", b"1")];
    let e = c.spawn(req).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
    assert!(e.to_string().contains(r#""X\x00Y""#), "{e}");
    let mut req = spawn_req("true");
    req.cwd = Some("/tmp\0x".into());
    let e = c.spawn(req).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");

    runs_normally(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_a_client_is_refused_not_left_waiting() {
    let d = TestDaemon::builder().open_files(64).start().await;
    let mut held = Vec::new();
    let reason = loop {
        assert!(held.len() < 200, "accept never ran out of descriptors");
        let mut s = raw::connect(d.socket()).await;
        raw::write_frame_lenient(&mut s, &raw::hello(false)).await;
        // Bounded well below the client's 10 s handshake timeout.
        let reply = raw::read_frame(&mut s)
            .await
            .expect("no answer to the hello");
        match raw::refusal(&reply) {
            None => held.push(s),
            Some(reason) => break reason,
        }
    };
    eprintln!(
        "descriptors: limit 64, {} connections held, then: {reason}",
        held.len()
    );
    assert!(reason.contains("out of file descriptors"), "{reason}");
    assert!(reason.contains("limit 64"), "{reason}");
    // The next client through the protocol's own client: refused, and quickly.
    let started = Instant::now();
    let reason = refused(&d, this_client(ClientKind::Other, "late")).await;
    eprintln!(
        "descriptors: the next client refused in {:?}",
        started.elapsed()
    );
    assert!(reason.contains("file descriptors"), "{reason}");

    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
            .unwrap()
            .count()
    };
    let open = fds();
    for s in held {
        close(s).await;
    }
    eprintln!(
        "descriptors: the daemon had {open} open, {} once they closed",
        fds()
    );
    runs_normally(&d).await;
    let warnings = d.log().matches("out of file descriptors").count();
    eprintln!("descriptors: {warnings} log lines about it");
    assert!(warnings >= 1, "{}", d.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_of_large_clients_is_returned_after_they_close() {
    const CLIENTS: usize = 40;
    let d = TestDaemon::start().await;
    let rss = || vm_rss_kib(d.pid()).expect("the daemon's VmRSS");
    // 15 variables of 64 KiB: just under the 1 MiB an environment may have.
    let env: Vec<_> = (0..15)
        .map(|i| {
            var(
                format!("BIG{i}").as_bytes(),
                &vec![b'a' + i as u8; 64 * 1024],
            )
        })
        .collect();
    let hello = raw::hello_of(client_with(env));
    let before = rss();
    let mut held = Vec::new();
    for _ in 0..CLIENTS {
        let mut s = raw::connect(d.socket()).await;
        raw::write_frame(&mut s, &hello).await;
        let reply = raw::read_frame(&mut s)
            .await
            .expect("no answer to the hello");
        assert_eq!(raw::refusal(&reply), None);
        held.push(s);
    }
    let during = rss();
    let grown = during.saturating_sub(before);
    assert!(
        grown >= 20 * 1024,
        "{CLIENTS} clients of ~1 MiB grew the daemon by {grown} KiB only"
    );
    for s in held {
        close(s).await;
    }
    let closed = Instant::now();
    let target = during - grown / 2;
    let returned = wait_for(|| rss() <= target, Duration::from_secs(5)).await;
    let (half, half_at) = (rss(), closed.elapsed());
    assert!(
        returned,
        "less than half of {grown} KiB was returned: {half} KiB"
    );
    // Only for the figures: where it settles (most of it, once the trim has run).
    wait_for(|| rss() <= before + grown / 10, Duration::from_secs(3)).await;
    eprintln!(
        "memory: daemon VmRSS {before} KiB before, {during} KiB with {CLIENTS} clients of \
         {} KiB hello each; after they closed: {half} KiB at {half_at:?}, {} KiB at {:?}",
        hello.len() / 1024,
        rss(),
        closed.elapsed()
    );
    runs_normally(&d).await;
}

//! Limits end to end: a flood of output keeps the daemon's memory and the spool bounded while
//! others are served, and `max_procs` refuses the next spawn at once instead of hanging.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use cuba_protocol::{ErrorKind, ProcState, ReadRequest, Signal, SignalRequest, StreamFilter};
use cuba_tests::procfs::{dir_size, vm_rss_kib};
use cuba_tests::{bounded, spawn, spawn_req, text, wait_exit, Step, TestDaemon, STEP};

const MIB: u64 = 1 << 20;
/// Spool cap of the flood test, and its segment size (an eighth of the cap).
const SPOOL_CAP: u64 = 16 * MIB;
const SEGMENT: u64 = SPOOL_CAP / 8;

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
async fn a_flood_of_output_keeps_memory_and_spool_bounded() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_SPOOL_SIZE", "16M")
        .start()
        .await;
    let c = d.client().await;
    let hog = spawn(&c, "cat /dev/urandom").await;
    let spool = d.state_dir().join("spool").join(hog.id.to_string());

    // Meanwhile another client is served as usual.
    let other = d.client_named("other").await;
    let alive = tokio::spawn(async move {
        let p = spawn(&other, "echo alive").await;
        wait_exit(&other, p.id).await
    });

    // Sample memory and spool size until 300 MB went through (no event says "N bytes").
    let target = 300 * 1000 * 1000;
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut max_rss, mut max_spool) = (0, 0);
    let info = loop {
        let info = bounded("info", STEP, c.info(hog.id)).await.unwrap();
        max_rss = max_rss.max(vm_rss_kib(d.pid()).unwrap_or(0));
        max_spool = max_spool.max(dir_size(&spool));
        if info.total_bytes() >= target {
            break info;
        }
        assert_eq!(info.state, ProcState::Running, "{info:?}");
        assert!(
            Instant::now() < deadline,
            "only {} bytes after 120 s",
            info.total_bytes()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let w = bounded("the other client", STEP, alive).await.unwrap();
    assert_eq!(text(&w.output.bytes()), "alive\n", "{w:?}");
    assert_eq!(w.process.exit_code, Some(0), "{w:?}");

    println!("cubad VmRSS peak {max_rss} KiB, spool peak {max_spool} bytes");
    assert!(max_rss < 64 * 1024, "cubad VmRSS reached {max_rss} KiB");
    assert!(
        max_spool <= SPOOL_CAP + SEGMENT,
        "spool reached {max_spool} bytes (cap {SPOOL_CAP})"
    );
    assert!(info.dropped_bytes > 0, "nothing was dropped: {info:?}");

    // A reader behind the kept bytes learns exactly how many it missed.
    let r = c
        .read(ReadRequest {
            id: hog.id,
            since: Some(SPOOL_CAP),
            max_bytes: 4096,
            stream: StreamFilter::Both,
        })
        .step()
        .await
        .unwrap();
    assert!(r.start > SPOOL_CAP, "{:?}", (r.start, r.dropped));
    assert_eq!(r.dropped, r.start - SPOOL_CAP);
    assert_eq!(r.bytes().len() as u64, r.next - r.start);
    // The head of the output is kept.
    let head = c
        .read(ReadRequest {
            id: hog.id,
            since: Some(0),
            max_bytes: 4096,
            stream: StreamFilter::Both,
        })
        .step()
        .await
        .unwrap();
    assert_eq!((head.start, head.dropped, head.next), (0, 0, 4096));

    let info = bounded("stop", STEP, c.signal(stop(hog.id, Signal::Kill)))
        .await
        .unwrap();
    assert_eq!(info.state, ProcState::Killed, "{info:?}");
    let after = dir_size(&spool);
    assert!(after <= SPOOL_CAP + SEGMENT, "spool is {after} bytes");
    assert!(vm_rss_kib(d.pid()).unwrap() < 64 * 1024);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_procs_refuses_the_next_spawn_at_once() {
    let d = TestDaemon::builder().max_procs(2).start().await;
    let c = d.client().await;
    // Finished processes do not count.
    let done = spawn(&c, "true").await;
    assert_eq!(wait_exit(&c, done.id).await.process.exit_code, Some(0));
    let a = spawn(&c, "sleep 100").await;
    let b = spawn(&c, "sleep 100").await;
    let err = bounded(
        "third spawn",
        Duration::from_secs(5),
        c.spawn(spawn_req("sleep 100")),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::Limit), "{err}");
    assert!(err.to_string().contains("max_procs"), "{err}");
    // Refused again, and the refusals left no record behind.
    let err = c.spawn(spawn_req("sleep 100")).step().await.unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::Limit), "{err}");
    let listed = c.list(Default::default()).step().await.unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");

    let info = bounded("stop", STEP, c.signal(stop(a.id, Signal::Term)))
        .await
        .unwrap();
    assert_eq!(info.state, ProcState::Killed);
    let again = spawn(&c, "echo again").await;
    assert_eq!(
        text(&wait_exit(&c, again.id).await.output.bytes()),
        "again\n"
    );
    let status = c.status().step().await.unwrap();
    assert_eq!((status.running, status.max_procs), (1, 2), "{status:?}");
    assert_eq!(c.info(b.id).step().await.unwrap().state, ProcState::Running);
}

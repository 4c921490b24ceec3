//! A full state directory: processes keep running, their output stays readable from memory,
//! replies, `info` and `status` say the spool stopped and what the log, journal and audit log
//! could not write, a kill still ends a process, and everything resumes once space is back.
//!
//! As root the state directory is a 2 MiB tmpfs the test fills (the daemon's log is in it too);
//! otherwise every file the daemon writes is limited to 2 MiB (`RLIMIT_FSIZE`): the spool still
//! stops past that size, and resumes in a new segment.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::{ListRequest, ProcState, ProcessInfo, Signal, SignalRequest};
use cuba_tests::daemon::SmallState;
use cuba_tests::{bounded, spawn, wait_exit, wait_match, TestDaemon, STEP};

const STATE_BYTES: u64 = 2 << 20;

/// Writes a file until the file system refuses (ENOSPC): the disk is full.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 16 * 1024];
    while f.write_all(&block).is_ok() {}
    // Smaller writes take the last partial block.
    while f.write_all(&block[..512]).is_ok() {}
    path
}

async fn info(c: &Client, id: u64) -> ProcessInfo {
    bounded("info", STEP, c.info(id)).await.unwrap()
}

async fn notices(c: &Client) -> Vec<String> {
    bounded("status", STEP, c.status()).await.unwrap().notices
}

async fn say(c: &Client, id: u64, line: &str) {
    let data = format!("{line}\n").into_bytes();
    bounded("stdin", STEP, c.stdin(id, data, false))
        .await
        .unwrap();
    wait_match(c, id, &format!("got {line}$")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_the_spool_not_the_daemon() {
    let mut d = TestDaemon::builder().small_state(STATE_BYTES).start().await;
    let tmpfs = d.small_state() == Some(SmallState::Tmpfs);
    let c = d.client().await;
    // Runs through the whole test, printing a line per line it reads.
    let reader = spawn(&c, "while read l; do echo \"got $l\"; done").await;
    say(&c, reader.id, "one").await;
    let sleeper = spawn(&c, "sleep 600").await;

    let filler = tmpfs.then(|| fill(d.state_dir()));
    // 3.3 MB of output: more than the disk (or a file) takes.
    let big = spawn(&c, "yes abcdefghij | head -n 300000; echo done").await;
    let w = wait_exit(&c, big.id).await;
    assert_eq!(
        (w.process.state, w.process.exit_code),
        (ProcState::Exited, Some(0))
    );
    let notice = w.process.spool.clone().unwrap_or_default();
    let why = if tmpfs {
        "no space left on device"
    } else {
        "file too large"
    };
    assert!(notice.contains(why), "the reply says why: {notice:?}");
    assert!(notice.contains("not kept on disk"), "{notice}");
    let total = w.process.stdout_bytes;
    assert_eq!(total, 300_000 * 11 + 5);
    assert!(
        w.process.dropped_bytes > 0 && w.process.dropped_bytes < total,
        "{:?}",
        w.process
    );
    // The end is still readable: memory has the latest.
    let tail = bounded(
        "read",
        STEP,
        c.read(cuba_protocol::ReadRequest {
            id: big.id,
            since: None,
            max_bytes: 100,
            stream: cuba_protocol::StreamFilter::Both,
        }),
    )
    .await
    .unwrap();
    assert!(cuba_tests::text(&tail.bytes()).ends_with("abcdefghij\ndone\n"));
    assert_eq!(info(&c, big.id).await.spool, w.process.spool);

    // The daemon is not wedged: normal runs work at once, output and all (enough of them
    // that the journal, audit log and log need pages the disk no longer has).
    let mut hi = big.clone();
    for _ in 0..30 {
        hi = spawn(&c, "echo hi; echo err >&2").await;
        let w = wait_exit(&c, hi.id).await;
        assert_eq!(w.process.exit_code, Some(0));
        let out = cuba_tests::text(&w.output.bytes());
        // Two pipes: either may be read first.
        assert!(out == "hi\nerr\n" || out == "err\nhi\n", "{out:?}");
    }
    // More than the page its spool file may still have room in: this write needs new space.
    say(&c, reader.id, &format!("two{}", "x".repeat(12_000))).await;
    // A kill still ends a process, with its final state.
    let killed = bounded(
        "kill",
        STEP,
        c.signal(SignalRequest {
            id: sleeper.id,
            signal: Signal::Kill,
            escalate: false,
            grace_ms: None,
            wait: true,
        }),
    )
    .await
    .unwrap();
    assert_eq!(killed.state, ProcState::Killed);

    if let Some(filler) = filler {
        let n = notices(&c).await;
        eprintln!("status notices on a full disk: {n:#?}");
        let has = |what: &str| n.iter().any(|l| l.starts_with(what));
        assert!(
            has("spool stopped: no space left on device; 1 running"),
            "{n:?}"
        );
        assert!(has("journal: "), "{n:?}");
        assert!(has("audit log: "), "{n:?}");
        assert!(has("log: "), "{n:?}");
        assert!(
            n.iter().all(|l| l.contains("no space left on device")),
            "{n:?}"
        );
        // Space again: the reader's spool resumes by itself on its next output.
        std::fs::remove_file(filler).unwrap();
        let mut resumed = false;
        for i in 0..100 {
            say(&c, reader.id, &format!("again {i}")).await;
            let spool = info(&c, reader.id).await.spool.unwrap_or_default();
            if spool.starts_with("spool was stopped (no space left on device)") {
                resumed = true;
                break;
            }
            // The spool retries once a second: the next line is the one that may resume it.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(resumed, "{:?}", info(&c, reader.id).await);
        let n = notices(&c).await;
        assert!(!n.iter().any(|l| l.starts_with("spool stopped")), "{n:?}");
    }
    // A process started now spools normally: every byte read back, none dropped.
    let back = spawn(&c, "echo back").await;
    let w = wait_exit(&c, back.id).await;
    assert_eq!(w.process.spool, None);
    assert_eq!(cuba_tests::read_all(&c, back.id).await, b"back\n");
    if tmpfs {
        // The journal wrote what it held back: nothing waits any more.
        let n = notices(&c).await;
        assert!(!n.iter().any(|l| l.contains("waiting")), "{n:?}");
    }

    // A new daemon finds every record in the journal, in its final state.
    d.restart().await;
    let c = d.client().await;
    let list = bounded("list", STEP, c.list(ListRequest::default()))
        .await
        .unwrap();
    let state = |id: u64| list.iter().find(|p| p.id == id).map(|p| p.state);
    assert_eq!(state(big.id), Some(ProcState::Exited), "{list:?}");
    assert_eq!(state(hi.id), Some(ProcState::Exited));
    assert_eq!(state(sleeper.id), Some(ProcState::Killed));
    assert_eq!(state(back.id), Some(ProcState::Exited));
}

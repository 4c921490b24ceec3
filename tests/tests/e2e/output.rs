//! Output end to end: cursor reads while the process writes, `Follow`, per-stream reads, short
//! processes keeping all their output, and command text beyond the single-argument limit.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::{
    FollowRequest, ProcState, ReadRequest, Request, Response, Stream, StreamFilter, WaitReason,
    WaitRequest, WaitSpec,
};
use cuba_tests::{
    bounded, read_all, read_stream, spawn, spawn_req, spawn_with, text, wait_exit, wait_for, Step,
    TestDaemon, STEP,
};

/// 2000 numbered lines over about a second.
const LINES: &str =
    "for i in $(seq 1 2000); do echo line$i; [ $((i % 100)) = 0 ] && sleep 0.05; done; true";

fn expected_lines() -> String {
    (1..=2000).map(|i| format!("line{i}\n")).collect()
}

/// Reads with `Read{since}` and the returned cursors until the process ends; between reads that
/// find nothing new it blocks on a `Wait` for the next byte (or the exit), never on a sleep.
async fn read_with_cursors(c: &Client, id: u64) -> Vec<u8> {
    let mut got = Vec::new();
    let mut cursor = 0;
    let mut exited = false;
    loop {
        let req = ReadRequest {
            id,
            since: Some(cursor),
            max_bytes: 1000,
            stream: StreamFilter::Both,
        };
        let r = bounded("read", STEP, c.read(req)).await.unwrap();
        assert_eq!(r.start, cursor, "a read skipped bytes: {r:?}");
        assert_eq!(r.dropped, 0);
        assert_eq!(r.next - r.start, r.bytes().len() as u64);
        got.extend(r.bytes());
        cursor = r.next;
        if r.more() {
            continue;
        }
        if exited {
            return got;
        }
        let wait = WaitRequest {
            id,
            since: Some(cursor),
            spec: WaitSpec {
                until: Some("(?s).".into()),
                quiet_ms: None,
                timeout_ms: 20_000,
                max_bytes: 1,
                stream: StreamFilter::Both,
            },
        };
        let w = bounded("wait for more", STEP, c.wait(wait)).await.unwrap();
        match w.reason {
            WaitReason::Matched(_) => {}
            WaitReason::Exited => exited = true,
            other => panic!("no output and no exit: {other:?}"),
        }
    }
}

/// Collects a `Follow` stream: output frames without gap or overlap, then the final row.
async fn follow_all(c: &Client, id: u64) -> (Vec<u8>, ProcState) {
    let req = FollowRequest {
        id,
        since: Some(0),
        backlog: 0,
        stream: StreamFilter::Both,
    };
    let mut sub = bounded("follow", STEP, c.subscribe(Request::Follow(req)))
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut cursor = 0;
    loop {
        let frame = bounded("follow frame", STEP, sub.next()).await;
        match frame {
            Some(Ok(Response::Output(o))) => {
                assert_eq!((o.start, o.dropped), (cursor, 0), "gap in follow: {o:?}");
                got.extend(o.bytes());
                cursor = o.next;
            }
            Some(Ok(Response::Process(p))) => {
                let end = bounded("follow end", STEP, sub.next()).await;
                assert!(
                    end.is_none(),
                    "the stream goes on after the final row: {end:?}"
                );
                assert_eq!(cursor, p.total_bytes(), "follow ended before the last byte");
                return (got, p.state);
            }
            other => panic!("unexpected follow frame: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_reads_and_follow_see_every_byte_once() {
    // A small memory buffer, so readers that fall behind are served from the spool.
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_BUFFER_SIZE", "4K")
        .start()
        .await;
    let c = d.client().await;
    let p = spawn(&c, LINES).await;
    let (read, (followed, state)) = tokio::join!(read_with_cursors(&c, p.id), follow_all(&c, p.id));
    let expected = expected_lines();
    assert_eq!(text(&read), expected, "cursor reads");
    assert_eq!(text(&followed), expected, "follow");
    assert_eq!(state, ProcState::Exited);
    // Read back once more after the end: from the spool, whole.
    assert_eq!(text(&read_all(&c, p.id).await), expected, "read after exit");
    let info = wait_exit(&c, p.id).await.process;
    assert_eq!(info.total_bytes(), expected.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_without_cursor_starts_at_the_backlog() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "echo first; echo last").await;
    wait_exit(&c, p.id).await;
    let req = FollowRequest {
        id: p.id,
        since: None,
        backlog: 5,
        stream: StreamFilter::Both,
    };
    let mut sub = c.subscribe(Request::Follow(req)).step().await.unwrap();
    let mut got = Vec::new();
    loop {
        match bounded("follow frame", STEP, sub.next()).await {
            Some(Ok(Response::Output(o))) => {
                assert_eq!(o.start, 6, "{o:?}");
                got.extend(o.bytes());
            }
            Some(Ok(Response::Process(info))) => {
                assert_eq!(info.state, ProcState::Exited);
                break;
            }
            other => panic!("unexpected follow frame: {other:?}"),
        }
    }
    assert_eq!(text(&got), "last\n");
    let end = bounded("follow end", STEP, sub.next()).await;
    assert!(
        end.is_none(),
        "the stream goes on after the final row: {end:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_filters_return_one_stream_with_the_right_tags() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    // The pause makes the order observable: two pipes written at the same instant have none.
    let p = spawn(&c, "echo out; sleep 0.2; echo err >&2").await;
    wait_exit(&c, p.id).await;
    let read = |stream| ReadRequest {
        id: p.id,
        since: Some(0),
        max_bytes: 1 << 16,
        stream,
    };
    let both = c.read(read(StreamFilter::Both)).step().await.unwrap();
    let tags: Vec<(Stream, String)> = both
        .chunks
        .iter()
        .map(|ch| (ch.stream, text(&ch.data)))
        .collect();
    assert_eq!(
        tags,
        vec![
            (Stream::Stdout, "out\n".to_string()),
            (Stream::Stderr, "err\n".to_string())
        ]
    );
    let out = c.read(read(StreamFilter::Stdout)).step().await.unwrap();
    assert_eq!(text(&out.bytes()), "out\n");
    assert!(out.chunks.iter().all(|ch| ch.stream == Stream::Stdout));
    assert_eq!(
        out.next, 8,
        "a filtered read still advances over the whole stream"
    );
    let err = c.read(read(StreamFilter::Stderr)).step().await.unwrap();
    assert_eq!(text(&err.bytes()), "err\n");
    assert!(err.chunks.iter().all(|ch| ch.stream == Stream::Stderr));
    assert_eq!(
        text(&read_stream(&c, p.id, StreamFilter::Stderr).await),
        "err\n"
    );
}

/// Starts `n` copies of `command`, `at_once` at a time over two connections; returns each
/// one's final row (from `Wait`, i.e. as reported at the exit) and its output read afterwards.
async fn run_many(
    d: &TestDaemon,
    command: &'static str,
    n: usize,
    at_once: usize,
) -> Vec<(cuba_protocol::ProcessInfo, Vec<u8>)> {
    let clients = [d.client().await, d.client().await];
    let mut results = Vec::new();
    for round in 0..n.div_ceil(at_once) {
        let mut tasks = Vec::new();
        for i in 0..at_once.min(n - round * at_once) {
            let c = clients[i % 2].clone();
            tasks.push(tokio::spawn(async move {
                let p = spawn(&c, command).await;
                let w = wait_exit(&c, p.id).await;
                (w.process, read_all(&c, p.id).await)
            }));
        }
        for t in tasks {
            results.push(bounded("short process", STEP, t).await.unwrap());
        }
    }
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_processes_keep_all_their_output() {
    let d = TestDaemon::builder().max_procs(64).start().await;
    // 50 at once, four times: a lost pipe read at the exit shows up within a few hundred.
    for (info, out) in run_many(&d, "echo out; echo err >&2; exit 3", 200, 50).await {
        assert_eq!(info.state, ProcState::Exited, "{info:?}");
        assert_eq!(info.exit_code, Some(3), "{info:?}");
        assert_eq!(
            (info.stdout_bytes, info.stderr_bytes),
            (4, 4),
            "the exit was reported before the output was in: {info:?}"
        );
        let out = text(&out);
        assert!(out == "out\nerr\n" || out == "err\nout\n", "{out:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_text_beyond_the_argument_limit_runs() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let command = format!(
        "echo start; : '{}'; echo \"$0\"; echo end",
        "x".repeat(140_000)
    );
    assert!(command.len() > 128 * 1024);
    let p = spawn(&c, &command).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0), "{:?}", w.process);
    // The shell reads the file it was handed, not a path a planted link could redirect.
    assert_eq!(text(&w.output.bytes()), "start\n/dev/fd/3\nend\n");
    assert_eq!(w.process.command.len(), command.len());
    // The script file the shell ran is removed once the process is done.
    let scripts = d.state_dir().join("scripts");
    let script = scripts.join(format!("{}.sh", p.id));
    assert!(
        wait_for(|| !script.exists(), Duration::from_secs(5)).await,
        "{} was left behind",
        script.display()
    );
    // A short command next to it still runs as `-c` text.
    let short = spawn_with(&c, spawn_req("echo short")).await;
    assert_eq!(
        text(&wait_exit(&c, short.id).await.output.bytes()),
        "short\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_text_at_the_argument_limit_runs() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    // Linux's limit counts the terminating NUL: 128 KiB of text is one byte too many for `-c`.
    for len in [128 * 1024 - 1, 128 * 1024, 128 * 1024 + 1] {
        let head = "echo ok; : '";
        let filler = "y".repeat(len - head.len() - 1);
        let command = format!("{head}{filler}'");
        assert_eq!(command.len(), len);
        let p = spawn(&c, &command).await;
        let w = wait_exit(&c, p.id).await;
        assert_eq!(
            (
                w.process.state,
                w.process.error.as_deref(),
                text(&w.output.bytes())
            ),
            (ProcState::Exited, None, "ok\n".to_string()),
            "command of {len} bytes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_falls_behind_is_resumed_without_loss() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_SPOOL_SIZE", "512M")
        .start()
        .await;
    let c = d.client().await;
    // Far more frames than a stream buffers for its reader.
    let total: u64 = 96_000_000;
    let p = spawn(&c, &format!("head -c {total} /dev/zero")).await;
    let req = FollowRequest {
        id: p.id,
        since: Some(0),
        backlog: 0,
        stream: StreamFilter::Both,
    };
    let mut sub = c.subscribe(Request::Follow(req)).step().await.unwrap();
    // Read nothing until the process has ended: the stream's buffer overflows meanwhile.
    let w = bounded("exit", Duration::from_secs(60), wait_exit(&c, p.id)).await;
    assert_eq!(w.process.total_bytes(), total);
    // Other calls on the same connection were never held up by the unread stream.
    assert_eq!(c.info(p.id).step().await.unwrap().id, p.id);
    let mut cursor = 0;
    loop {
        match bounded("follow frame", STEP, sub.next()).await {
            Some(Ok(Response::Output(o))) => {
                assert_eq!((o.start, o.dropped), (cursor, 0), "gap or overlap: {o:?}");
                assert!(o.chunks.iter().all(|ch| ch.data.iter().all(|b| *b == 0)));
                cursor = o.next;
            }
            Some(Ok(Response::Process(info))) => {
                assert_eq!(info.state, ProcState::Exited);
                break;
            }
            other => panic!("unexpected follow frame: {other:?}"),
        }
    }
    assert_eq!(cursor, total, "every byte arrived once");
}

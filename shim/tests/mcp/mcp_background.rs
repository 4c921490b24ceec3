//! Processes that outlive a call, through an in-process `CubaExec`: `run`'s auto-yield, `wait`
//! (exit, `until`, `quiet_ms`), incremental `status` reads with cursors, `send_input` and
//! `send_signal`.

use crate::common;

use std::time::Duration;

use common::mcp::{in_process, Mcp};
use common::TestDir;
use serde_json::{json, Value};

async fn setup() -> (TestDir, Mcp) {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "background-test").await;
    (t, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_auto_yields_then_wait_returns_the_rest() {
    let (_t, c) = setup().await;
    let r = c
        .call(
            "run",
            json!({ "command": "echo early; sleep 2; echo done", "yield_ms": 200 }),
        )
        .await;
    assert!(!r.is_error(), "a yielded run is no error: {}", r.text());
    assert_eq!(r.state(), "running");
    let id = r.id();
    let next = r.u64("next");
    let early = r.output().to_string();
    assert_eq!(early.len() as u64, next, "the output so far, up to `next`");
    assert!(r.text().contains("state:running"), "{}", r.text());
    let hint = r.str("hint");
    assert!(
        hint.contains(&format!("wait(id={id}, since={next})")),
        "the hint names the next call: {hint}"
    );

    let w = c.wait_exit(id, next).await;
    assert!(!w.is_error(), "{}", w.text());
    assert_eq!(w.state(), "exited");
    assert_eq!(w.sc()["exit_code"], json!(0));
    let all = format!("{early}{}", w.output());
    assert_eq!(
        all, "early\ndone\n",
        "the rest, after `since`, without repeats"
    );
    assert_eq!(w.u64("next"), 11);
    assert!(w.text().contains(" wait:exited"), "{}", w.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_since_returns_only_new_bytes() {
    let (_t, c) = setup().await;
    let cmd = "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.2; done";
    let id = c.start(cmd).await.id();
    let (mut seen, mut cursor, mut reads) = (String::new(), 0u64, 0);
    loop {
        let s = c.call("status", json!({ "id": id, "since": cursor })).await;
        assert!(!s.is_error(), "{}", s.text());
        let next = s.u64("next");
        assert!(next >= cursor, "the cursor never goes back");
        assert_eq!(
            s.output().len() as u64,
            next - cursor,
            "output is exactly the bytes between the cursors"
        );
        if !s.output().is_empty() {
            reads += 1;
        }
        seen.push_str(s.output());
        cursor = next;
        if s.state() != "running" {
            break;
        }
        // Block until more output (or the exit) instead of sleeping.
        let w = c
            .call(
                "wait",
                json!({ "id": id, "since": cursor, "until": "line", "timeout_ms": 10_000 }),
            )
            .await;
        assert_ne!(w.str("wait"), "timeout", "no new line within 10 s");
    }
    assert_eq!(seen, "line1\nline2\nline3\nline4\nline5\nline6\n");
    assert!(
        reads >= 3,
        "reads were incremental, got {reads} non-empty reads"
    );

    let again = c.call("status", json!({ "id": id, "since": cursor })).await;
    assert_eq!(again.output(), "", "nothing new after the end");
    let tail = c.call("status", json!({ "id": id, "tail_bytes": 6 })).await;
    assert_eq!(tail.output(), "line6\n", "without since: the tail");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_until_returns_the_matching_line_before_the_end() {
    let (t, c) = setup().await;
    let cmd = "echo booting; sleep 0.3; echo 'listening on port 8080'; exec sleep 30";
    let id = c.start(cmd).await.id();
    let w = c
        .call(
            "wait",
            json!({ "id": id, "until": "listening on port \\d+", "timeout_ms": 10_000 }),
        )
        .await;
    assert!(!w.is_error(), "{}", w.text());
    assert_eq!(w.str("wait"), "matched");
    assert_eq!(w.str("matched"), "listening on port 8080");
    assert_eq!(w.state(), "running", "the process keeps running");
    assert!(w.text().contains(" wait:matched"), "{}", w.text());
    assert!(
        w.text().contains("matched: listening on port 8080"),
        "{}",
        w.text()
    );
    assert!(w.output().contains("booting\n"), "{}", w.output());
    assert!(!t.marked(id).is_empty(), "wait never stops the process");
    c.call("send_signal", json!({ "id": id, "signal": "SIGKILL" }))
        .await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_quiet_ms_returns_when_output_stops() {
    let (_t, c) = setup().await;
    let id = c.start("echo ready; exec sleep 30").await.id();
    let w = c
        .call(
            "wait",
            json!({ "id": id, "quiet_ms": 300, "timeout_ms": 10_000 }),
        )
        .await;
    assert_eq!(w.str("wait"), "quiet", "{}", w.text());
    assert_eq!(w.state(), "running");
    assert_eq!(w.output(), "ready\n");

    let w = c
        .call("wait", json!({ "id": id, "since": 6, "timeout_ms": 200 }))
        .await;
    assert_eq!(w.str("wait"), "timeout", "{}", w.text());
    assert!(
        !w.is_error(),
        "a wait timeout is not an error: {}",
        w.text()
    );
    assert_eq!(w.state(), "running", "waiting never kills");
    c.call("send_signal", json!({ "id": id, "signal": "SIGKILL" }))
        .await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_input_round_trip_with_cat_and_eof() {
    let (_t, c) = setup().await;
    let id = c.start("cat").await.id();
    let s = c
        .call("send_input", json!({ "id": id, "text": "hello\n" }))
        .await;
    assert!(!s.is_error(), "{}", s.text());
    assert!(s.str("hint").contains("sent 6 bytes"), "{}", s.text());
    let w = c
        .call(
            "wait",
            json!({ "id": id, "until": "^hello$", "timeout_ms": 10_000 }),
        )
        .await;
    assert_eq!(w.str("wait"), "matched", "{}", w.text());
    assert_eq!(w.state(), "running", "cat waits for more");

    let s = c
        .call(
            "send_input",
            json!({ "id": id, "text": "bye\n", "eof": true }),
        )
        .await;
    assert!(s.str("hint").contains("closed stdin"), "{}", s.text());
    let w = c.wait_exit(id, 0).await;
    assert_eq!(w.sc()["exit_code"], json!(0));
    assert_eq!(w.output(), "hello\nbye\n");

    let empty = c.call("send_input", json!({ "id": id })).await;
    assert_eq!(empty.code(), Some("BAD_REQUEST"), "{}", empty.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_signal_sigterm_kills_without_error() {
    let (t, c) = setup().await;
    let id = c.start("sleep 30 & sleep 30; wait").await.id();
    assert!(
        common::wait_for(|| t.marked(id).len() >= 3, common::STEP).await,
        "the shell and both sleeps run: {:?}",
        t.marked(id)
    );
    let r = c.call("send_signal", json!({ "id": id })).await;
    assert!(
        !r.is_error(),
        "stopping on request is no error: {}",
        r.text()
    );
    assert_eq!(r.state(), "killed");
    assert!(r.code().is_none(), "{}", r.sc());
    assert!(r.text().contains("state:killed"), "{}", r.text());
    assert!(
        common::wait_for(|| t.marked(id).is_empty(), common::STEP).await,
        "the whole tree is gone: {:?}",
        t.marked(id)
    );
    let list = c.call("list_processes", json!({ "state": "killed" })).await;
    let rows = list.sc()["processes"].as_array().expect("rows").clone();
    assert!(rows.iter().any(|p| p["id"] == json!(id)), "{}", list.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_reading_its_stdin_is_reported_waiting_input() {
    let (_t, c) = setup().await;
    let r = c
        .call(
            "run",
            // A yield past the call's bound (STEP): only an answer at the prompt passes.
            json!({ "command": "printf 'name? '; read x; echo hi $x", "yield_ms": 60_000 }),
        )
        .await;
    let state = r.state().to_string();
    let id = r.id();
    c.call("send_input", json!({ "id": id, "eof": true })).await;
    assert_eq!(state, "waiting_input", "{}", r.text());
    assert!(r.text().contains("state:waiting_input"), "{}", r.text());
    assert!(
        r.str("hint").contains("waiting for input after \"name? \"")
            && r.str("hint").contains(&format!("send_input(id={id}")),
        "{}",
        r.text()
    );
    c.close().await;
}

// Where the daemon has a cgroup per process, a busy row carries its CPU time, in the row's
// structured content and its text line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_row_shows_its_cpu_time_where_the_daemon_has_cgroups() {
    let t = TestDir::with_daemon_env(&[("CUBA_EXEC_CGROUPS", "on")]).await;
    let c = in_process(&t.socket(), "background-test").await;
    let id = c.start("while :; do :; done").await.id();
    let mut row = Value::Null;
    for _ in 0..100 {
        let rows = c.rows(json!({ "state": "running" })).await;
        row = rows
            .into_iter()
            .find(|r| r["id"] == json!(id))
            .unwrap_or_default();
        if row["cpu_ms"].as_u64().is_some_and(|ms| ms > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Whether there should be a figure is the machine's to say, not the row's.
    let cgroups = cuba_tests::machine::per_process_cgroups();
    if row["cpu_ms"].is_null() && !cgroups {
        cuba_tests::machine::skip(
            "cpu_ms in list_processes",
            "no writable cgroup v2 tree here",
        );
    } else {
        assert!(row["cpu_ms"].as_u64().is_some_and(|ms| ms > 0), "{row}");
        let list = c
            .call("list_processes", json!({ "state": "running" }))
            .await;
        assert!(list.text().contains(" cpu:"), "{}", list.text());
    }
    c.call("send_signal", json!({ "id": id, "signal": "KILL" }))
        .await;
    assert_ne!(c.wait_exit(id, 0).await.state(), "running");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_of_a_command_that_fails_at_once_says_it_ended_with_its_output() {
    let mut t = TestDir::new();
    // Generous, so a loaded machine's slow shell is still seen; it returns at the exit.
    let grace = [("CUBA_EXEC_START_GRACE_MS", "20000")];
    let c = common::mcp::binary(&mut t, "background-test", &grace).await;
    let r = c
        .call(
            "start",
            json!({ "command": "echo port 8080 in use >&2; exit 3" }),
        )
        .await;
    assert!(r.is_error(), "{}", r.text());
    assert_eq!(r.code(), Some("EXIT"), "{}", r.text());
    assert!(r.text().contains("exit:3"), "{}", r.text());
    assert!(r.output().contains("port 8080 in use"), "{}", r.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_of_a_server_that_fails_after_its_banner_says_it_ended() {
    let mut t = TestDir::new();
    // A grace long enough for the banner on a loaded machine; a settle that ends at the exit.
    let env = [
        ("CUBA_EXEC_START_GRACE_MS", "3000"),
        ("CUBA_EXEC_START_SETTLE_MS", "20000"),
    ];
    let c = common::mcp::binary(&mut t, "background-test", &env).await;
    let text = "echo listening on 8080; sleep 4; echo address already in use >&2; exit 3";
    let r = c.call("start", json!({ "command": text })).await;
    assert!(r.is_error(), "{}", r.text());
    assert!(r.text().contains("exit:3"), "{}", r.text());
    assert!(r.output().contains("listening on 8080"), "{}", r.text());
    assert!(
        r.output().contains("address already in use"),
        "{}",
        r.text()
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_text_that_starts_with_a_dash_is_run_not_taken_for_an_option() {
    let mut t = TestDir::new();
    let c = common::mcp::binary(&mut t, "background-test", &[]).await;
    for text in [
        "-x-cuba 2>/dev/null; echo ran",
        "+x-cuba 2>/dev/null; echo ran",
    ] {
        let r = c.call("run", json!({ "command": text })).await;
        assert!(!r.is_error(), "{text}: {}", r.text());
        assert_eq!(r.output().trim(), "ran", "{text}: {}", r.text());
    }
    c.close().await;
}

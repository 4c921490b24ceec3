//! Persistent sessions through an in-process `CubaExec` (`run`/`start` with `session`): state
//! carries over between calls while each call has its own record, exit code and output; an
//! interrupt or a timeout ends only the command; a busy session refuses a second command; the
//! session's shell is listed and can be closed.
//!
//! These need a daemon with sessions (`cargo test -p cuba-exec --test mcp sessions::`).

use crate::common;

use common::mcp::{in_process, Mcp, Reply};
use common::TestDir;
use serde_json::{json, Value};

async fn setup() -> (TestDir, Mcp) {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "sessions-test").await;
    (t, c)
}

/// `run` of `command` in `session`, with `extra` arguments.
async fn run_in(c: &Mcp, session: &str, command: &str, extra: Value) -> Reply {
    let mut args = json!({ "command": command, "session": session });
    if let (Value::Object(a), Value::Object(e)) = (&mut args, extra) {
        a.extend(e);
    }
    c.call("run", args).await
}

/// The `list_processes` row of the shell of `session`.
async fn shell_row(c: &Mcp, session: &str) -> Value {
    let rows = c.rows(json!({})).await;
    rows.into_iter()
        .find(|r| r["kind"] == "session" && r["session"] == session)
        .unwrap_or_else(|| panic!("no shell of session {session} in the table"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_and_export_carry_over_and_each_call_has_its_exit_code() {
    let (_t, c) = setup().await;
    let first = run_in(&c, "dev", "cd /tmp", json!({})).await;
    assert!(!first.is_error(), "{}", first.text());
    assert_eq!(first.sc()["exit_code"], json!(0));
    assert_eq!(first.str("kind"), "in_session", "{}", first.sc());
    assert_eq!(first.str("session"), "dev");
    assert!(first.sc().get("tty").is_none(), "{}", first.sc());
    // The first call starts the session, and says so on a line of its own.
    let notice = first.str("notice");
    assert!(notice.contains("session dev"), "{notice}");
    let second_line = first.text().lines().nth(1).unwrap_or("");
    assert_eq!(second_line, format!("notice: {notice}"), "{}", first.text());
    assert!(first.text().contains(" session:dev "), "{}", first.text());

    let second = run_in(&c, "dev", "export FOO=bar", json!({})).await;
    assert!(!second.is_error(), "{}", second.text());
    assert_ne!(second.id(), first.id(), "each call is its own record");

    let third = run_in(&c, "dev", "echo $FOO; pwd; false", json!({})).await;
    assert!(third.is_error(), "exit 1 is an error: {}", third.text());
    assert_eq!(third.sc()["exit_code"], json!(1));
    assert_eq!(third.code(), Some("EXIT"));
    assert_eq!(third.output(), "bar\n/tmp\n");

    // The session's shell is one row of the table, recognisable as such.
    let shell = shell_row(&c, "dev").await;
    assert_eq!(shell["state"], "running", "{shell}");
    let list = c.call("list_processes", json!({})).await;
    let line = list
        .text()
        .lines()
        .find(|l| l.contains(" kind:session "))
        .unwrap_or_else(|| panic!("no session line in {}", list.text()));
    assert!(line.contains(" session:dev "), "{line}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_interrupts_a_backgrounded_command_and_keeps_the_session() {
    let (_t, c) = setup().await;
    run_in(&c, "i", "export KEEP=yes", json!({})).await;
    let r = run_in(
        &c,
        "i",
        "echo started; sleep 100",
        json!({ "yield_ms": 300 }),
    )
    .await;
    assert_eq!(r.state(), "running", "{}", r.text());
    let id = r.id();
    let w = c
        .call(
            "wait",
            json!({ "id": id, "until": "started", "timeout_ms": 10_000 }),
        )
        .await;
    assert_eq!(w.str("wait"), "matched", "{}", w.text());

    let s = c
        .call("send_signal", json!({ "id": id, "signal": "SIGINT" }))
        .await;
    assert!(!s.is_error(), "an interrupt on request: {}", s.text());
    assert_eq!(s.state(), "killed", "{}", s.text());

    let after = run_in(&c, "i", "echo still $KEEP", json!({})).await;
    assert!(!after.is_error(), "{}", after.text());
    assert_eq!(after.output(), "still yes\n");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_ends_only_the_command() {
    let (_t, c) = setup().await;
    let r = run_in(&c, "t", "sleep 100", json!({ "timeout_ms": 300 })).await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{}", r.text());
    let after = run_in(&c, "t", "echo alive", json!({})).await;
    assert_eq!(after.output(), "alive\n", "{}", after.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_session_refuses_a_second_command_and_closing_its_shell_ends_it() {
    let (_t, c) = setup().await;
    let r = c
        .call(
            "start",
            json!({ "command": "echo go; sleep 100", "session": "b" }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(r.str("kind"), "in_session");
    let id = r.id();
    c.call(
        "wait",
        json!({ "id": id, "until": "go", "timeout_ms": 10_000 }),
    )
    .await;
    let busy = run_in(&c, "b", "true", json!({})).await;
    assert_eq!(busy.code(), Some("INVALID_STATE"), "{}", busy.text());
    assert!(
        busy.text().contains("sleep 100"),
        "names the running command: {}",
        busy.text()
    );

    let shell = shell_row(&c, "b").await;
    let shell_id = shell["id"].as_u64().expect("an id");
    let s = c.call("send_signal", json!({ "id": shell_id })).await;
    assert_eq!(s.state(), "killed", "{}", s.text());
    let done = c.wait_exit(id, 0).await;
    assert_eq!(done.state(), "killed", "{}", done.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_in_a_session_waiting_for_input_is_answered() {
    let (_t, c) = setup().await;
    let r = run_in(
        &c,
        "r",
        "printf 'Name? '; read x; echo hi $x",
        json!({ "yield_ms": 20_000 }),
    )
    .await;
    assert_eq!(r.state(), "waiting_input", "{}", r.text());
    assert!(r.str("hint").contains("text=\"...\\n\""), "{}", r.text());
    let id = r.id();
    c.call(
        "send_input",
        json!({ "id": id, "text": "bob", "keys": ["Enter"] }),
    )
    .await;
    let done = c.wait_exit(id, 0).await;
    assert_eq!(done.output(), "Name? hi bob\n");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_in_a_session_interrupts_only_the_command() {
    let (_t, c) = setup().await;
    run_in(&c, "k", "export KEEP=1", json!({})).await;
    let command = "echo started; sleep 100";
    let handle = c
        .send_call(
            "run",
            json!({ "command": command, "session": "k", "yield_ms": 60_000 }),
        )
        .await;
    let row = c.find_running(command).await;
    let id = row["id"].as_u64().expect("an id");
    c.call(
        "wait",
        json!({ "id": id, "until": "started", "timeout_ms": 10_000 }),
    )
    .await;
    let cancel = handle.cancel(Some("test".into()));
    common::bounded("cancel", common::STEP, cancel)
        .await
        .expect("cannot send the cancellation");
    let done = c.wait_exit(id, 0).await;
    assert_eq!(done.state(), "killed", "{}", done.text());
    let after = run_in(&c, "k", "echo $KEEP", json!({})).await;
    assert_eq!(
        after.output(),
        "1\n",
        "the session survives: {}",
        after.text()
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_text_in_a_session_is_input_never_a_command() {
    let (t, c) = setup().await;
    let r = run_in(&c, "p", "true", json!({ "tty": true })).await;
    assert_eq!(r.code(), Some("BAD_REQUEST"), "{}", r.text());
    // The command reads its stdin text; what it leaves unread is never run by the shell.
    let marker = t.path().join("ran");
    let stdin = format!("bob\ntouch {}\n", marker.display());
    let args = json!({ "command": "read -r x; echo hi $x", "session": "p", "stdin": stdin });
    let r = c.call("run", args).await;
    assert_eq!(r.output(), "hi bob\n", "{}", r.text());
    let ok = run_in(&c, "p", "echo fine", json!({})).await;
    assert_eq!(ok.output(), "fine\n", "{}", ok.text());
    assert!(!marker.exists(), "unread stdin text ran as a command");
    c.close().await;
}

//! Processes on a terminal (`tty: true`) through an in-process `CubaExec`: a REPL answered with
//! keys, a full-screen program read with `view: "screen"`, a prompt that makes `run` return at
//! once, the model view of terminal output, and the refusals (size without a terminal, a screen
//! of a pipe process, an unknown key).

use crate::common;

use common::mcp::{in_process, Mcp, Reply};
use common::TestDir;
use serde_json::{json, Value};

async fn setup() -> (TestDir, Mcp) {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "terminals-test").await;
    (t, c)
}

/// `start` with `args` (a JSON object), asserting it started.
async fn start(c: &Mcp, args: Value) -> Reply {
    let r = c.call("start", args.clone()).await;
    assert!(!r.is_error(), "start {args} failed: {}", r.text());
    r
}

/// `wait` on `id` from `since` (plus `extra` arguments), bounded well inside the test's step.
async fn wait(c: &Mcp, id: u64, since: u64, extra: Value) -> Reply {
    let mut args = json!({ "id": id, "since": since, "timeout_ms": 15_000 });
    if let (Value::Object(a), Value::Object(e)) = (&mut args, extra) {
        a.extend(e);
    }
    c.call("wait", args).await
}

const CURSES: &str = r#"
import curses
def main(s):
    while True:
        s.clear()
        s.addstr(0, 2, "CUBA INSTALLER")
        s.addstr(2, 2, "press q to quit")
        s.refresh()
        if s.getch() == ord("q"):
            return
curses.wrapper(main)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_repl_on_a_tty_is_answered_with_keys() {
    let (_t, c) = setup().await;
    let r = start(&c, json!({ "command": "python3 -q", "tty": true })).await;
    let id = r.id();
    assert_eq!(
        r.sc()["tty"],
        json!({ "cols": 120, "rows": 40 }),
        "{}",
        r.text()
    );
    assert!(r.text().contains(" tty:120x40 "), "{}", r.text());
    assert!(r.str("hint").contains("view=\"screen\""), "{}", r.text());

    let w = wait(&c, id, 0, json!({})).await;
    assert_eq!(w.str("wait"), "waiting_input", "{}", w.text());
    assert!(w.output().ends_with(">>> "), "{:?}", w.output());
    let hint = w.str("hint");
    assert!(
        hint.contains("waiting for input after \">>> \"")
            && hint.contains(&format!(
                "send_input(id={id}, text=\"...\", keys=[\"Enter\"])"
            )),
        "{hint}"
    );

    let s = c
        .call(
            "send_input",
            json!({ "id": id, "text": "print(6*7)", "keys": ["Enter"] }),
        )
        .await;
    assert!(!s.is_error(), "{}", s.text());
    assert!(s.str("hint").contains("sent 11 bytes"), "{}", s.text());

    let w = wait(&c, id, w.u64("next"), json!({})).await;
    assert_eq!(w.str("wait"), "waiting_input", "{}", w.text());
    // The terminal's \r\n line ends reach the model as \n, nothing eaten.
    assert!(
        w.output().contains("print(6*7)\n42\n>>> "),
        "{:?}",
        w.output()
    );
    assert!(!w.output().contains('\r'), "{:?}", w.output());

    let s = c
        .call("send_input", json!({ "id": id, "keys": ["C-d"] }))
        .await;
    assert!(!s.is_error(), "{}", s.text());
    let done = c.wait_exit(id, w.u64("next")).await;
    assert_eq!(done.sc()["exit_code"], json!(0), "{}", done.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curses_program_is_read_as_a_screen() {
    let (_t, c) = setup().await;
    let command = format!("python3 -c '{CURSES}'");
    let id = start(
        &c,
        json!({ "command": command, "tty": true, "cols": 80, "rows": 24 }),
    )
    .await
    .id();

    // wait with view="screen": the wait ends at the prompt, the reply is the screen.
    let w = wait(&c, id, 0, json!({ "view": "screen" })).await;
    assert_eq!(w.str("wait"), "waiting_input", "{}", w.text());
    let screen = &w.sc()["screen"];
    assert_eq!(screen["cols"], json!(80), "{screen}");
    assert_eq!(screen["rows"], json!(24), "{screen}");
    assert_eq!(screen["alternate"], json!(true), "{screen}");
    assert_eq!(screen["lines"][0], json!("  CUBA INSTALLER"), "{screen}");
    assert_eq!(w.output(), "", "the screen replaces the output");
    let (header, body) = w.text().split_once('\n').expect("a header and a body");
    assert!(header.contains(" view:screen cursor:"), "{header}");
    assert!(
        body.contains("  CUBA INSTALLER\n\n  press q to quit"),
        "{body}"
    );

    let s = c
        .call("status", json!({ "id": id, "view": "screen" }))
        .await;
    assert!(!s.is_error(), "{}", s.text());
    assert!(s.text().contains("CUBA INSTALLER"), "{}", s.text());
    let cursor = s.sc()["screen"]["cursor"]
        .as_array()
        .expect("a cursor")
        .len();
    assert_eq!(cursor, 2, "[row, col]: {}", s.sc());

    c.call("send_input", json!({ "id": id, "text": "q" })).await;
    let done = c.wait_exit(id, 0).await;
    assert_eq!(done.sc()["exit_code"], json!(0), "{}", done.text());
    // The screen outlives the process, back on the normal screen.
    let s = c
        .call("status", json!({ "id": id, "view": "screen" }))
        .await;
    assert!(!s.is_error(), "{}", s.text());
    assert_eq!(s.sc()["screen"]["alternate"], json!(false), "{}", s.sc());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_on_a_tty_returns_at_a_prompt_long_before_yield_ms() {
    let (_t, c) = setup().await;
    // A yield past the call's bound (STEP): only an answer at the prompt passes.
    let r = c
        .call(
            "run",
            json!({
                "command": "bash -c 'read -p \"Name? \" x; echo hi $x'",
                "tty": true,
                "yield_ms": 60_000,
            }),
        )
        .await;
    assert_eq!(r.state(), "waiting_input", "{}", r.text());
    assert_eq!(r.output(), "Name? ");
    assert!(
        r.str("hint").contains("after \"Name? \"") && r.str("hint").contains("keys=[\"Enter\"]"),
        "{}",
        r.text()
    );
    let id = r.id();
    c.call(
        "send_input",
        json!({ "id": id, "text": "bob", "keys": ["Enter"] }),
    )
    .await;
    let done = c.wait_exit(id, 0).await;
    assert_eq!(done.output(), "Name? bob\nhi bob\n");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_run_gets_a_terminal_and_no_pipe_defaults() {
    let (_t, c) = setup().await;
    let probe = "test -t 0 && test -t 1 && echo term=$TERM pager=${PAGER:-unset}; stty size";
    let r = c
        .call(
            "run",
            json!({ "command": probe, "tty": true, "cols": 91, "rows": 17 }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let out = r.output();
    assert!(
        out.starts_with("term=") && !out.contains("term=dumb"),
        "{out:?}"
    );
    assert!(!out.contains("pager=cat"), "{out:?}");
    assert!(out.ends_with("\n17 91\n"), "{out:?}");
    // Without a terminal the defaults stay.
    let r = c
        .call("run", json!({ "command": "echo $TERM $PAGER" }))
        .await;
    assert_eq!(r.output(), "dumb cat\n");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_on_a_pipe_process_send_a_newline_for_enter() {
    let (_t, c) = setup().await;
    let id = c.start("read x; echo got $x").await.id();
    let s = c
        .call(
            "send_input",
            json!({ "id": id, "text": "abc", "keys": ["Enter"] }),
        )
        .await;
    assert!(s.str("hint").contains("sent 4 bytes"), "{}", s.text());
    let done = c.wait_exit(id, 0).await;
    assert_eq!(done.output(), "got abc\n");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_arguments_are_checked() {
    let (_t, c) = setup().await;
    for (tool, args) in [
        ("run", json!({ "command": "true", "cols": 80 })),
        ("start", json!({ "command": "true", "rows": 10 })),
        (
            "run",
            json!({ "command": "true", "tty": false, "cols": 80 }),
        ),
    ] {
        let r = c.call(tool, args.clone()).await;
        assert_eq!(r.code(), Some("BAD_REQUEST"), "{tool} {args}: {}", r.text());
        assert!(r.text().contains("tty: true"), "{}", r.text());
    }
    // The daemon checks the size itself.
    let r = c
        .call("run", json!({ "command": "true", "tty": true, "cols": 0 }))
        .await;
    assert_eq!(r.code(), Some("BAD_REQUEST"), "{}", r.text());

    let id = c.start("exec sleep 30").await.id();
    for tool in ["status", "wait"] {
        let r = c.call(tool, json!({ "id": id, "view": "screen" })).await;
        assert!(r.is_error(), "{tool}: {}", r.text());
        assert_eq!(r.code(), Some("BAD_REQUEST"), "{tool}: {}", r.text());
        assert!(r.text().contains("tty: true"), "{tool}: {}", r.text());
    }
    let r = c
        .call("status", json!({ "id": id, "view": "pixels" }))
        .await;
    assert!(r.is_error(), "{}", r.text());

    let r = c
        .call(
            "send_input",
            json!({ "id": id, "keys": ["Enter", "Hyper-Q"] }),
        )
        .await;
    assert_eq!(r.code(), Some("BAD_REQUEST"), "{}", r.text());
    assert!(
        r.text().contains("\"Hyper-Q\"") && r.text().contains("Enter, Tab"),
        "the known names are listed: {}",
        r.text()
    );
    c.call("send_signal", json!({ "id": id, "signal": "SIGKILL" }))
        .await;
    c.close().await;
}

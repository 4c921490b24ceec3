//! PTY processes: a program on a pseudo-terminal sees a terminal, its screen is rendered, keys
//! go through the line discipline, and a prompt read from the terminal is `WaitingInput`.

#![allow(clippy::unwrap_used)]

use cuba_protocol::client::Client;
use cuba_protocol::keys::key_bytes;
use cuba_protocol::{
    ErrorKind, ErrorReason, ProcState, SpawnRequest, TtySize, WaitReason, WaitRequest, WaitResult,
    WaitSpec,
};
use cuba_tests::{bounded, spawn, spawn_with, text, wait_exit, wait_match, Step, TestDaemon, STEP};

fn tty_req(command: &str) -> SpawnRequest {
    SpawnRequest {
        command: command.to_string(),
        tty: Some(TtySize::DEFAULT),
        ..SpawnRequest::default()
    }
}

async fn wait_input(c: &Client, id: u64, since: u64) -> WaitResult {
    let req = WaitRequest {
        id,
        since: Some(since),
        spec: WaitSpec::exit(15_000, 1 << 20),
    };
    bounded("wait", STEP, c.wait(req)).await.unwrap()
}

async fn keys(c: &Client, id: u64, text: &str, names: &[&str]) {
    let mut data = text.as_bytes().to_vec();
    for n in names {
        data.extend(key_bytes(n).unwrap());
    }
    c.stdin(id, data, false).step().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_process_sees_a_terminal_of_the_asked_size() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let mut req = tty_req("test -t 0 && test -t 1 && stty size && echo TERM=$TERM");
    req.tty = Some(TtySize { cols: 91, rows: 17 });
    let p = spawn_with(&c, req).await;
    assert_eq!(p.tty, Some(TtySize { cols: 91, rows: 17 }));
    let w = wait_exit(&c, p.id).await;
    assert_eq!(
        w.process.exit_code,
        Some(0),
        "{:?}",
        text(&w.output.bytes())
    );
    let out = text(&w.output.bytes());
    // The terminal's line discipline turns \n into \r\n.
    assert!(out.contains("17 91\r\n"), "{out:?}");
    // A terminal type: the client's own unless it is `dumb`, else xterm-256color.
    assert!(out.contains("TERM=xterm"), "{out:?}");
    // One stream: everything is stdout.
    assert_eq!(w.process.stderr_bytes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_repl_on_a_tty_answers_and_waits_for_input() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn_with(&c, tty_req("exec python3 -q")).await;
    let w = wait_input(&c, p.id, 0).await;
    assert_eq!(
        w.reason,
        WaitReason::WaitingInput,
        "{:?}",
        text(&w.output.bytes())
    );
    assert!(text(&w.output.bytes()).ends_with(">>> "));
    let since = w.output.next;
    keys(&c, p.id, "print(6*7)", &["Enter"]).await;
    let w = wait_input(&c, p.id, since).await;
    assert_eq!(w.reason, WaitReason::WaitingInput);
    assert!(
        text(&w.output.bytes()).contains("42\r\n"),
        "{:?}",
        text(&w.output.bytes())
    );
    // The screen shows the session like a terminal would.
    let screen = c.screen(p.id).step().await.unwrap();
    assert_eq!(screen.size, TtySize::DEFAULT);
    assert_eq!(screen.lines[0], ">>> print(6*7)");
    assert_eq!(screen.lines[1], "42");
    assert_eq!(screen.lines[2], ">>>");
    // C-d at the prompt ends it, as on a terminal.
    keys(&c, p.id, "", &["C-d"]).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_goes_through_the_line_discipline() {
    // Started as a background job of a script would be: SIGINT and SIGQUIT ignored. Commands
    // must still get them with their default effect.
    let d = TestDaemon::builder()
        .ignoring(&[libc::SIGINT, libc::SIGQUIT])
        .start()
        .await;
    let c = d.client().await;
    // The shell waits for `cat`, which reads the terminal. C-c is sent once `cat` is known to
    // be blocked reading (waiting_input, from the kernel's state): a shell between two
    // commands may swallow an interrupt (dash does, as in any terminal), a reading `cat`
    // cannot.
    let p = spawn_with(&c, tty_req("cat; echo after")).await;
    let w = wait_input(&c, p.id, 0).await;
    assert_eq!(w.reason, WaitReason::WaitingInput, "{:?}", w.process);
    keys(&c, p.id, "", &["C-c"]).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.state, ProcState::Signaled, "{:?}", w.process);
    assert_eq!(w.process.signal, Some(cuba_protocol::Signal::Int));
    assert!(!text(&w.output.bytes()).contains("after"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_p_prompts_on_a_terminal_and_is_waiting_input() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn_with(&c, tty_req("bash -c 'read -p \"Name? \" x; echo hi $x'")).await;
    let w = wait_input(&c, p.id, 0).await;
    assert_eq!(w.reason, WaitReason::WaitingInput);
    assert!(text(&w.output.bytes()).ends_with("Name? "));
    keys(&c, p.id, "bob", &["Enter"]).await;
    let w = wait_exit(&c, p.id).await;
    assert!(
        text(&w.output.bytes()).contains("hi bob"),
        "{:?}",
        text(&w.output.bytes())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curses_screen_is_rendered_and_follows_resizes() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let script = r#"
import curses
def main(s):
    while True:
        s.clear()
        h, w = s.getmaxyx()
        s.addstr(0, 2, "CUBA INSTALLER")
        s.addstr(2, 2, "size %dx%d" % (w, h))
        s.refresh()
        k = s.getch()
        if k == ord("q"):
            return
curses.wrapper(main)
"#;
    let p = spawn_with(&c, tty_req(&format!("exec python3 -c '{script}'"))).await;
    let w = wait_input(&c, p.id, 0).await;
    assert_eq!(w.reason, WaitReason::WaitingInput);
    let screen = c.screen(p.id).step().await.unwrap();
    assert!(screen.alternate);
    assert_eq!(
        screen.lines[0].trim(),
        "CUBA INSTALLER",
        "{:?}",
        screen.lines
    );
    assert_eq!(screen.lines[2].trim(), "size 120x40");
    let since = w.output.next;
    c.resize(
        p.id,
        TtySize {
            cols: 100,
            rows: 30,
        },
    )
    .step()
    .await
    .unwrap();
    wait_match(&c, p.id, "size 100x30").await;
    let _ = wait_input(&c, p.id, since).await;
    let screen = c.screen(p.id).step().await.unwrap();
    assert_eq!(
        screen.size,
        TtySize {
            cols: 100,
            rows: 30
        }
    );
    assert_eq!(screen.lines.len(), 30);
    assert_eq!(screen.lines[2].trim(), "size 100x30");
    keys(&c, p.id, "q", &[]).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0));
    // The screen outlives the process, back on the normal screen.
    let screen = c.screen(p.id).step().await.unwrap();
    assert!(!screen.alternate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screen_and_resize_need_a_terminal_and_sizes_are_checked() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn(&c, "sleep 30").await;
    let e = c.screen(p.id).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::InvalidState), "{e}");
    assert_eq!(e.reason(), Some(&ErrorReason::NoTerminal), "{e}");
    let e = c.resize(p.id, TtySize::DEFAULT).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::InvalidState), "{e}");
    assert_eq!(e.reason(), Some(&ErrorReason::NoTerminal), "{e}");
    let mut req = tty_req("true");
    req.tty = Some(TtySize { cols: 0, rows: 10 });
    let e = c.spawn(req).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
    let mut req = tty_req("true");
    req.tty = Some(TtySize {
        cols: 60000,
        rows: 60000,
    });
    let e = c.spawn(req).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::BadRequest), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_process_that_only_sleeps_is_not_waiting_input() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn_with(&c, tty_req("echo go; sleep 2; echo done")).await;
    let w = wait_input(&c, p.id, 0).await;
    assert_eq!(w.reason, WaitReason::Exited, "{:?}", w.process);
    assert!(text(&w.output.bytes()).contains("done"));
}

/// A terminal that never stops being readable (`yes`) does not hold the daemon: a short wait on
/// it ends at its timeout, and another client's command runs, while the flood goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_flood_leaves_the_daemon_to_others() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let yes = spawn_with(&c, tty_req("timeout 30 yes")).await;
    let short = WaitRequest {
        id: yes.id,
        since: Some(0),
        spec: WaitSpec::exit(100, 2048),
    };
    let w = bounded("wait", STEP, c.wait(short)).await.unwrap();
    // Before, the flood kept the daemon's thread until `yes` ended (exit 124 after 30 s).
    assert_eq!(w.reason, WaitReason::Timeout, "{:?}", w.process);
    assert_eq!(w.process.state, ProcState::Running);
    let other = d.client().await;
    let p = spawn(&other, "echo x").await;
    let done = wait_exit(&other, p.id).await;
    assert_eq!(text(&done.output.bytes()), "x\n");
    assert_eq!(
        c.info(yes.id).step().await.unwrap().state,
        ProcState::Running
    );
}

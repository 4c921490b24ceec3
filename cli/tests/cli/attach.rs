//! `attach`: a person answers a prompt through a pseudo-terminal; Ctrl-] detaches and the
//! process runs on; piped input is forwarded and its end only detaches (unless --eof).

use crate::common;

use std::fs::File;
use std::io::Write;
use std::process::{Child, Stdio};

use common::{wait_child, Collector, Env, OnPty};

/// `cubactl attach ARGS` on a fresh pseudo-terminal: the child, what it shows, and the
/// keyboard (the terminal's master side).
fn attach_on_pty(env: &Env, args: &[&str]) -> (Child, Collector, File) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let slave = File::from(pty.slave);
    let child = env
        .std_cmd()
        .arg("attach")
        .args(args)
        .stdin(Stdio::from(slave.try_clone().expect("dup")))
        .stdout(Stdio::from(slave.try_clone().expect("dup")))
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("attach");
    let master = File::from(pty.master);
    let screen = Collector::new(master.try_clone().expect("dup"));
    (child, screen, master)
}

#[test]
fn attach_answers_a_read_prompt() {
    let env = Env::new();
    let id = env.start(&["--", "printf 'Password: '; read -r pw; echo \"got:$pw\""]);
    let (mut child, mut screen, mut keyboard) =
        attach_on_pty(&env, &["--no-echo", &id.to_string()]);
    // The banner comes once the terminal is set up (no echo), then the prompt: type then.
    screen.wait_for("Ctrl-] detaches");
    screen.wait_for("Password: ");
    keyboard.write_all(b"hunter2\r").expect("type");
    screen.wait_for("got:hunter2");
    screen.wait_for(&format!("process {id} exited with code 0"));
    let status = wait_child(&mut child);
    assert!(status.success(), "{status}");
    let shown = screen.text();
    assert_eq!(
        shown.matches("hunter2").count(),
        1,
        "typed text was echoed: {shown:?}"
    );
}

#[test]
fn ctrl_bracket_detaches_and_the_process_runs_on() {
    let env = Env::new();
    let id = env.start(&["--", "echo waiting; read x; echo \"got $x\""]);
    let ids = id.to_string();
    let (mut child, mut screen, mut keyboard) = attach_on_pty(&env, &[&ids]);
    screen.wait_for("Ctrl-] detaches");
    keyboard.write_all(b"partial\x1d").expect("type");
    let status = wait_child(&mut child);
    assert!(status.success(), "{status}");
    screen.wait_for("detached");
    // Still running (blocked in `read`, which the daemon may already show as waiting for input).
    let state = env.row(id)["state"].clone();
    assert!(state == "running" || state == "waiting_input", "{state}");

    // Piped input is forwarded; its end detaches without closing the process's stdin.
    let out = env
        .cmd()
        .args(["attach", &ids])
        .write_stdin("yes\n")
        .output()
        .expect("attach");
    assert!(out.status.success(), "{}", common::show(&out));
    env.ok(&["wait", &ids, "--timeout", "20s"]);
    assert_eq!(env.ok(&["logs", &ids]), "waiting\ngot yes\n");
}

#[test]
fn eof_closes_stdin_only_when_asked() {
    let env = Env::new();
    let id = env.start(&["--", "cat; echo done"]);
    let ids = id.to_string();
    env.cmd()
        .args(["attach", &ids])
        .write_stdin("one\n")
        .assert()
        .success();
    assert_eq!(env.row(id)["state"], "running");
    env.cmd()
        .args(["attach", "--eof", &ids])
        .write_stdin("two\n")
        .assert()
        .success();
    env.ok(&["wait", &ids, "--timeout", "20s"]);
    assert_eq!(env.ok(&["logs", &ids]), "one\ntwo\ndone\n");
    // From a cursor on: after "one\n".
    assert_eq!(env.ok(&["logs", &ids, "--since", "4"]), "two\ndone\n");
}

/// A shell loop on a terminal that prints its size at start and whenever it changes: at once
/// on SIGWINCH, and at its next turn should bash have folded a SIGWINCH into the trap it was
/// running (it does under load).
const SIZE_REPORTER: &str = "bash -c 'last=; show() { s=$(stty size); [ \"$s\" = \"$last\" ] || \
     { echo \"$s\"; last=$s; }; }; trap show WINCH; show; while :; do sleep 0.1; show; done'";

#[test]
fn attach_to_a_terminal_passes_keys_through_and_detaches() {
    let env = Env::new();
    let id = env.start(&["--tty", "--", "python3 -q"]);
    let ids = id.to_string();
    common::wait_line(&env, id, ">>> ");
    env.ok(&["send", &ids, "x = 6 * 7", "--key", "Enter"]);
    // Echoed before attaching: the screen painted at attach then has it. (A python slow to
    // echo, under load, would otherwise echo it live, after the painted prompt and modes.)
    common::wait_line(&env, id, r"x = 6 \* 7");

    let mut pty = OnPty::spawn(&env, &["attach", &ids], 100, 30);
    let before = pty.initial.clone();
    // The screen is painted first: what was typed before is on it, the prompt last.
    pty.screen.wait_for(">>> x = 6 * 7");
    // Raw mode: keys reach python as typed, Ctrl-C included.
    pty.typed(b"print(x + 1)\r");
    pty.screen.wait_for("\r\n43\r\n");
    pty.typed(b"\x03");
    pty.screen.wait_for("KeyboardInterrupt");
    // What is typed before Ctrl-] still goes through; then it detaches.
    pty.typed(b"y = 1\r\x1d");
    let status = wait_child(&mut pty.child);
    assert!(status.success(), "{status}: {:?}", pty.screen.text());
    pty.screen.wait_for("detached; process");
    common::same_modes(&pty.modes(), &before);
    let row = env.row(id);
    assert!(
        row["state"] == "running" || row["state"] == "waiting_input",
        "{row}"
    );
    // The remote terminal took the size of the one attached.
    assert_eq!(row["tty"]["cols"], 100, "{row}");
    assert_eq!(row["tty"]["rows"], 30, "{row}");
    env.ok(&["send", &ids, "print(y * 5)", "--key", "Enter"]);
    common::wait_line(&env, id, r"^5\s*$");
}

#[test]
fn attach_to_a_terminal_follows_the_window_size() {
    let env = Env::new();
    let id = env.start(&["--tty", "--cols", "80", "--rows", "24", "--", SIZE_REPORTER]);
    common::wait_line(&env, id, "^24 80");
    let mut pty = OnPty::spawn(&env, &["attach", &id.to_string()], 100, 30);
    pty.screen.wait_for("30 100");
    pty.resize(90, 25);
    pty.screen.wait_for("25 90");
    pty.typed(b"\x1d");
    let status = wait_child(&mut pty.child);
    assert!(status.success(), "{status}");
    assert_eq!(env.row(id)["tty"]["cols"], 90);
}

#[test]
fn attach_ends_with_the_process_on_a_terminal() {
    let env = Env::new();
    let id = env.start(&["--tty", "--", "read -r line; echo \"got $line\"; exit 4"]);
    let mut pty = OnPty::spawn(&env, &["attach", &id.to_string()], 80, 24);
    let before = pty.initial.clone();
    // The cursor is placed once the screen is painted: the process's terminal is ours then.
    pty.screen.wait_for("\x1b[H\x1b[J");
    pty.typed(b"hello\r");
    pty.screen.wait_for("got hello");
    pty.screen
        .wait_for(&format!("process {id} exited with code 4"));
    let status = wait_child(&mut pty.child);
    assert!(status.success(), "{status}");
    common::same_modes(&pty.modes(), &before);
}

#[test]
fn the_terminal_is_restored_on_a_signal_and_on_an_error() {
    let env = Env::new();
    let id = env.start(&["--tty", "--", "echo ready; sleep 300"]);
    let ids = id.to_string();
    common::wait_line(&env, id, "ready");

    // SIGTERM to cubactl: it detaches, the process runs on.
    let mut pty = OnPty::spawn(&env, &["attach", &ids], 80, 24);
    let before = pty.initial.clone();
    pty.screen.wait_for("\x1b[H\x1b[Jready");
    let pid = nix::unistd::Pid::from_raw(pty.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let status = wait_child(&mut pty.child);
    assert!(status.success(), "{status}");
    pty.screen.wait_for("detached; process");
    common::same_modes(&pty.modes(), &before);
    assert_eq!(env.row(id)["state"], "running");

    // The daemon dies under an attached terminal: an error, and the modes come back all the same.
    let mut pty = OnPty::spawn(&env, &["attach", &ids], 80, 24);
    let before = pty.initial.clone();
    pty.screen.wait_for("\x1b[H\x1b[Jready");
    let lock = cuba_protocol::paths::lock_path(env.socket());
    let daemon: i32 = std::fs::read_to_string(lock)
        .expect("lock file")
        .trim()
        .parse()
        .expect("daemon pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL");
    let status = wait_child(&mut pty.child);
    assert_eq!(status.code(), Some(1), "{status}: {:?}", pty.screen.text());
    pty.screen.wait_for("cubactl: ");
    common::same_modes(&pty.modes(), &before);
}

#[test]
fn a_person_attaches_to_a_session_and_answers_its_command() {
    let env = Env::new();
    // An agent's session: a command left state behind, the next one asks a question.
    env.ok(&[
        "run",
        "--session",
        "agent",
        "--",
        "export FROM=agent; echo first-done",
    ]);
    let asking = env.start(&[
        "--session",
        "agent",
        "--",
        "echo asking; read -r name; echo hello $name from $FROM",
    ]);
    common::wait_line(&env, asking, "asking");
    let shell = env
        .ps()
        .into_iter()
        .find(|r| r["kind"] == "session")
        .expect("the session's shell is listed");
    let shell_id = shell["id"].to_string();
    let (mut child, mut screen, mut keyboard) = attach_on_pty(&env, &[&shell_id]);
    screen.wait_for("Ctrl-] detaches");
    // The session's transcript shows what its commands printed; the answer reaches the one
    // running.
    screen.wait_for("asking");
    keyboard.write_all(b"bob\r").expect("type");
    screen.wait_for("hello bob from agent");
    keyboard.write_all(b"\x1d").expect("detach");
    let status = wait_child(&mut child);
    assert!(status.success(), "{status}");
    // The session is still there for the agent's next command.
    assert_eq!(
        env.ok(&["run", "--session", "agent", "--", "echo $FROM"]),
        "agent\n"
    );
}

//! `attach`: a person answers a prompt through a pseudo-terminal; Ctrl-] detaches and the
//! process runs on; piped input is forwarded and its end only detaches (unless --eof).

mod common;

use std::fs::File;
use std::io::Write;
use std::process::{Child, Stdio};

use common::{wait_child, Collector, Env};

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
    assert_eq!(env.row(id)["state"], "Running");

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
    assert_eq!(env.row(id)["state"], "Running");
    env.cmd()
        .args(["attach", "--eof", &ids])
        .write_stdin("two\n")
        .assert()
        .success();
    env.ok(&["wait", &ids, "--timeout", "20s"]);
    assert_eq!(env.ok(&["logs", &ids]), "one\ntwo\ndone\n");
}

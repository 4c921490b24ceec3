//! Processes on a terminal (`--tty`): keys and the screen (`send --key`, `screen`), resizing,
//! `run --tty` here and elsewhere, and how `ps` and `info` show them.

use crate::common;

use common::{wait_child, wait_line, Env, OnPty};

#[test]
fn text_sent_before_the_program_reads_its_terminal_shows_once() {
    let env = Env::new();
    let id = env.start(&["--tty", "--", "python3 -q"]);
    let ids = id.to_string();
    // At once, before python has its prompt: the daemon holds it until python reads.
    env.ok(&["send", &ids, "print(6*7)", "--key", "Enter"]);
    wait_line(&env, id, r"^42\s*$");
    let screen = env.ok(&["screen", &ids]);
    assert_eq!(
        screen.matches("print(6*7)").count(),
        1,
        "typed once: {screen:?}"
    );
    assert!(screen.contains(">>> print(6*7)\n42\n"), "{screen:?}");
}

#[test]
fn keys_reach_a_program_on_a_terminal_and_its_screen_shows() {
    let env = Env::new();
    let id = env.start(&["--tty", "--", "python3 -q"]);
    let ids = id.to_string();
    wait_line(&env, id, ">>> ");
    env.ok(&["send", &ids, "print(6*7)", "--key", "Enter"]);
    wait_line(&env, id, r"^42\s*$");
    let screen = env.ok(&["screen", &ids]);
    assert!(screen.contains(">>> print(6*7)\n42\n>>>"), "{screen:?}");

    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["screen", &ids, "--json"])).expect("JSON");
    assert_eq!(json["size"]["cols"], 120, "{json}");
    assert_eq!(json["size"]["rows"], 40, "{json}");
    assert_eq!(json["lines"][1], "42", "{json}");
    assert_eq!(json["cursor_row"], 2, "{json}");
    assert!(json.get("formatted").is_none(), "{json}");

    // A key alone; C-c goes through the terminal as an interrupt.
    env.ok(&[
        "send",
        &ids,
        "while True: pass",
        "--key",
        "Enter",
        "--key",
        "Enter",
    ]);
    env.ok(&["send", &ids, "--key", "C-c"]);
    wait_line(&env, id, "KeyboardInterrupt");

    // ps and info say it runs on a terminal.
    let row = env.row(id);
    assert_eq!(row["kind"], "command", "{row}");
    assert_eq!(row["tty"]["cols"], 120, "{row}");
    let table = env.ok(&["ps"]);
    let header = table.lines().next().unwrap_or_default();
    assert!(header.contains("KIND"), "{table}");
    assert!(table.contains("tty:120x40"), "{table}");
    let info = env.ok(&["info", &ids]);
    assert!(info.contains("terminal   120x40"), "{info}");
    assert!(info.contains("kind       command"), "{info}");

    // A process on pipes has no screen, and ps needs no KIND column for it alone.
    let pipe = env.start(&["--", "sleep 300"]);
    let out = env.output(&["screen", &pipe.to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has no terminal") && err.contains("--tty"),
        "{err}"
    );
    env.ok(&["kill", &ids]);
    env.ok(&["prune"]);
    let table = env.ok(&["ps"]);
    assert!(!table.contains("KIND"), "{table}");
}

#[test]
fn unknown_keys_and_bad_flags_are_usage_errors() {
    let env = Env::new();
    let out = env.output(&["send", "1", "--key", "Bogus"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Bogus") && err.contains("unknown key") && err.contains("Enter, Tab"),
        "{err}"
    );
    for args in [
        &["send", "1"][..],
        &["run", "--cols", "80", "--", "true"],
        &["start", "--rows", "10", "--", "true"],
        &["run", "--tty", "--session", "dev", "--", "true"],
        &["start", "--no-stdin", "--session", "dev", "--", "true"],
        &["start", "--tty", "--cols", "0", "--", "true"],
        &["resize", "1", "80"],
        &["resize", "1", "0", "24"],
    ] {
        let out = env.output(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            common::show(&out)
        );
    }
    // None of that needed the daemon.
    assert!(!env.socket().exists());
}

#[test]
fn resize_reaches_the_program() {
    let env = Env::new();
    let id = env.start(&[
        "--tty",
        "--",
        "bash -c 'trap \"stty size\" WINCH; stty size; while :; do sleep 0.1; done'",
    ]);
    let ids = id.to_string();
    wait_line(&env, id, "^40 120");
    env.ok(&["resize", &ids, "50", "20"]);
    wait_line(&env, id, "^20 50");
    assert_eq!(env.row(id)["tty"]["cols"], 50);
    let out = env.output(&[
        "resize",
        &env.start(&["--", "sleep 300"]).to_string(),
        "80",
        "24",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no terminal"));
}

#[test]
fn run_tty_without_a_terminal_streams_and_exits_with_the_code() {
    let env = Env::new();
    let out = env.output(&[
        "run",
        "--tty",
        "--cols",
        "33",
        "--rows",
        "11",
        "--",
        "stty size; test -t 0 && test -t 1 && echo on a tty; exit 5",
    ]);
    assert_eq!(out.status.code(), Some(5), "{}", common::show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "11 33\r\non a tty\r\n"
    );
}

#[test]
fn run_tty_on_a_terminal_takes_it_over() {
    let env = Env::new();
    let mut pty = OnPty::spawn(&env, &["run", "--tty", "--", "python3 -q"], 77, 22);
    let before = pty.initial.clone();
    pty.screen.wait_for(">>> ");
    // Typed keys go through raw: line editing is python's own (Ctrl-A: start of line).
    pty.typed(b"(7)\x01print\r");
    pty.screen.wait_for("\r\n7\r\n");
    pty.typed(b"import os; print(os.get_terminal_size())\r");
    pty.screen.wait_for("columns=77, lines=22");
    pty.typed(b"exit(3)\r");
    let status = wait_child(&mut pty.child);
    assert_eq!(status.code(), Some(3), "{status}: {:?}", pty.screen.text());
    common::same_modes(&pty.modes(), &before);
}

#[test]
fn run_tty_detaches_with_ctrl_bracket() {
    let env = Env::new();
    let mut pty = OnPty::spawn(
        &env,
        &[
            "run",
            "--tty",
            "--name",
            "held",
            "--",
            "echo started; sleep 300",
        ],
        80,
        24,
    );
    let before = pty.initial.clone();
    pty.screen.wait_for("started");
    pty.typed(b"\x1d");
    let status = wait_child(&mut pty.child);
    assert!(status.success(), "{status}");
    pty.screen.wait_for("detached; process");
    common::same_modes(&pty.modes(), &before);
    let row = env
        .ps()
        .into_iter()
        .find(|r| r["name"] == "held")
        .expect("the run is in the table");
    assert_eq!(row["state"], "running", "{row}");
}

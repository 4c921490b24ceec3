//! `--session NAME`: commands share one long-lived shell (directory, variables), each with
//! its own record and exit code; `ps` and `info` show what is a session and what ran in one.

use crate::common;

use common::{wait_line, Env};

#[test]
fn a_session_keeps_state_between_runs() {
    let env = Env::new();
    let dir = env.dir().canonicalize().expect("dir");
    let dir = common::path_str(&dir);
    let first = env.output(&["run", "--session", "dev", "--", &format!("cd {dir}; X=42")]);
    assert!(first.status.success(), "{}", common::show(&first));
    assert!(
        String::from_utf8_lossy(&first.stderr).contains("session dev started"),
        "{}",
        common::show(&first)
    );
    assert_eq!(
        env.ok(&["run", "--session", "dev", "--", "echo $X from $PWD"]),
        format!("42 from {dir}\n")
    );
    let out = env.output(&["run", "--session", "dev", "--", "false"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));

    // Input reaches the command through the session's shell, which stays open.
    let out = env
        .cmd()
        .args(["run", "--session", "dev", "--", "read -r a; echo got $a"])
        .write_stdin("hello\n")
        .output()
        .expect("run");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "got hello\n");

    // start: in the background, in the same shell.
    let id = env.start(&["--session", "dev", "--", "echo $X again; sleep 300"]);
    wait_line(&env, id, "42 again");
    let row = env.row(id);
    assert_eq!(row["kind"], "in_session", "{row}");
    assert_eq!(row["session"], "dev", "{row}");
    let table = env.ok(&["ps"]);
    assert!(
        table.contains("session:dev") && table.contains("in:dev"),
        "{table}"
    );
    let info = env.ok(&["info", &id.to_string()]);
    assert!(info.contains("kind       in_session"), "{info}");
    assert!(info.contains("session    dev"), "{info}");

    // Killing the command interrupts it and keeps the session.
    env.ok(&["kill", &id.to_string()]);
    assert_eq!(
        env.ok(&["run", "--session", "dev", "--", "echo $X"]),
        "42\n"
    );
    let shell = env
        .ps()
        .into_iter()
        .find(|r| r["kind"] == "session")
        .expect("the session's shell is in the table");
    assert_eq!(shell["state"], "running", "{shell}");

    // The shell's row carries the session's name: killing it by that name closes the session.
    let out = env.ok(&["kill", "dev"]);
    assert!(
        out.contains(&format!("process {} (dev)", shell["id"])),
        "{out}"
    );
    assert_eq!(
        env.row(shell["id"].as_u64().expect("id"))["state"],
        "killed"
    );
}

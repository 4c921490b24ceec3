//! `tail`, `logs`, `wait` and `send`: reading output, following it live, and writing input.

use crate::common;

use std::process::Stdio;

use common::{wait_child, wait_line, Collector, Env};

#[test]
fn tail_follow_ends_with_the_process_and_its_status() {
    let env = Env::new();
    let id = env.start(&["--", "echo first; read x; echo \"got $x\"; exit 3"]);
    let ids = id.to_string();
    let mut child = env
        .std_cmd()
        .args(["tail", "-f", &ids])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tail -f");
    let mut out = Collector::new(child.stdout.take().expect("stdout"));
    let mut err = Collector::new(child.stderr.take().expect("stderr"));
    out.wait_for("first\n");
    env.ok(&["send", &ids, "hello"]);
    let status = wait_child(&mut child);
    // The process's own exit code, as `run` gives it.
    assert_eq!(status.code(), Some(3), "{status}");
    assert_eq!(out.finish(), "first\ngot hello\n");
    let err = err.finish();
    assert!(
        err.contains(&format!("process {id} exited with code 3")),
        "{err}"
    );

    // Without -f: the last lines, and nothing else.
    assert_eq!(env.ok(&["tail", "-n", "1", &ids]), "got hello\n");
    let json = env.ok(&["tail", "--json", "-n", "1", &ids]);
    assert!(
        json.contains(r#""stream":"stdout""#) && json.contains("got hello"),
        "{json}"
    );
}

#[test]
fn logs_print_everything_and_strip_escapes_on_request() {
    let env = Env::new();
    let id = env.start(&[
        "--",
        r"printf '\033[31mred\033[0m\n'; echo err >&2; seq 1 2000",
    ]);
    let ids = id.to_string();
    env.ok(&["wait", &ids, "--timeout", "20s"]);
    // stdout and stderr are separate pipes: only within one stream is the order fixed.
    let raw = env.ok(&["logs", "--stdout", &ids]);
    assert!(raw.starts_with("\x1b[31mred\x1b[0m\n1\n"), "{raw:?}");
    assert!(raw.ends_with("1999\n2000\n"));
    let all = env.ok(&["logs", &ids]);
    assert_eq!(all.lines().count(), 2002);
    let plain = env.ok(&["logs", "--plain", &ids]);
    assert!(
        !plain.contains('\x1b') && plain.contains("red\n"),
        "{plain:?}"
    );
    assert_eq!(plain.len(), all.len() - "\x1b[31m\x1b[0m".len());
    assert_eq!(env.ok(&["logs", "--stderr", &ids]), "err\n");
}

#[test]
fn wait_until_matches_and_times_out() {
    let env = Env::new();
    let id = env.start(&["--", "echo booting; echo 'listening on 8080'; sleep 300"]);
    assert_eq!(
        wait_line(&env, id, "listening on [0-9]+"),
        "listening on 8080"
    );
    let out = env.output(&[
        "wait",
        &id.to_string(),
        "--until",
        "never",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out"));
}

#[test]
fn send_with_eof_closes_stdin() {
    let env = Env::new();
    let id = env.start(&["--", "cat; echo done"]);
    let ids = id.to_string();
    env.ok(&["send", &ids, "one"]);
    env.ok(&["send", "--eof", &ids, "two"]);
    let out = env.ok(&["wait", &ids, "--timeout", "20s"]);
    assert!(out.is_empty());
    assert_eq!(env.ok(&["logs", &ids]), "one\ntwo\ndone\n");
    let again = env.output(&["send", &ids, "three"]);
    assert_eq!(again.status.code(), Some(1));
}

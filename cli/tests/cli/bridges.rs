//! Bridges that do not speak the protocol: what reaches the user says what happened (the first
//! bytes of a banner or of noise, no answer in time), and a failed bridge leaves nothing of its
//! process group behind.

use crate::common;

use std::path::PathBuf;
use std::process::Output;

use common::{path_str, show, Env};

/// A bridge `b` that runs `script` (a shell script written into the test's directory).
struct Bridge {
    env: Env,
    config: PathBuf,
    hosts: String,
}

impl Bridge {
    fn new(script: &str) -> Bridge {
        let env = Env::new();
        let path = env.dir().join("bridge.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).expect("write the bridge");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod the bridge");
        let config = env.dir().join("config.toml");
        std::fs::write(&config, "").expect("write config.toml");
        let hosts = format!("b=command:{}", path_str(&path));
        Bridge { env, config, hosts }
    }

    /// `cubactl --host b ARGS` with this bridge configured and `extra` in its environment.
    fn cubactl(&self, extra: &[(&str, &str)], args: &[&str]) -> Output {
        self.env
            .cmd()
            .env("CUBA_EXEC_HOSTS", &self.hosts)
            .env("CUBA_EXEC_CONFIG", &self.config)
            .env_remove("CUBA_EXEC_HOST")
            .env_remove("CUBA_EXEC_ALLOWED_HOSTS")
            .envs(extra.iter().copied())
            .args(["--host", "b"])
            .args(args)
            .output()
            .expect("run cubactl")
    }

    fn ps(&self, extra: &[(&str, &str)]) -> Output {
        self.cubactl(extra, &["ps"])
    }

    fn run(&self, extra: &[(&str, &str)]) -> Output {
        self.cubactl(extra, &["run", "--", "echo", "hi"])
    }
}

/// Live processes whose command line contains `text` (a killed one's is empty).
fn processes_with(text: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(text)
            })
        })
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_login_banner_is_shown_with_the_hint() {
    let b = Bridge::new("echo 'Welcome to build01 (Ubuntu)'; exec sleep 60");
    let out = b.ps(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("\"Welcome to build01 (Ubuntu)\""), "{err}");
    assert!(err.contains("login banner"), "{err}");
    assert!(
        !err.contains("SIGKILL"),
        "our own kill is not the cause: {err}"
    );
}

#[test]
fn noise_and_a_huge_length_are_shown_as_bytes() {
    for (script, shown) in [
        (
            "printf '\\377\\377\\377\\377\\001\\002'; exec sleep 60",
            "bytes ff ff ff ff 01 02",
        ),
        // A length of 2 GiB: not a frame this client reads.
        (
            "printf '\\200\\000\\000\\000CUBA'; exec sleep 60",
            "bytes 80 00 00 00 43 55 42 41",
        ),
    ] {
        let b = Bridge::new(script);
        let out = b.ps(&[]);
        assert_eq!(out.status.code(), Some(1), "{}", show(&out));
        let err = stderr(&out);
        assert!(
            err.contains(shown) && err.contains("cuba-exec's protocol"),
            "{err}"
        );
    }
}

#[test]
fn a_bridge_that_never_answers_is_said_to_have_given_no_answer() {
    let b = Bridge::new("exec sleep 60");
    let out = b.ps(&[("CUBA_EXEC_BRIDGE_TIMEOUT", "300ms")]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no answer through") && err.contains("within 0.3 s"),
        "{err}"
    );
    assert!(!err.contains("exited"), "{err}");
}

#[test]
fn a_failed_bridge_leaves_nothing_of_its_group() {
    // A marker only this test's orphan carries on its command line.
    let marker = format!("sleep 45.{}", std::process::id());
    let b = Bridge::new(&format!("{marker} & echo banner; wait"));
    let out = b.ps(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stderr(&out).contains("\"banner\""), "{}", show(&out));
    let left = processes_with(&marker);
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A bridge that passes the welcome of a real `cubactl bridge` through, then does `mode` (see
/// fixtures/after_welcome.py).
fn after_welcome(mode: &str) -> Bridge {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/after_welcome.py");
    Bridge::new(&format!(
        "exec python3 {} {mode} {} bridge",
        path_str(&fixture),
        path_str(&common::cubactl_bin())
    ))
}

#[test]
fn noise_after_the_welcome_is_quoted_and_nothing_is_sent() {
    let b = after_welcome("garbage");
    let out = b.run(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    assert!(
        err.contains("host b: after its welcome")
            && err.contains("bytes ff fe 00 01 67 61 72 62 61 67 65"),
        "{err}"
    );
    assert!(
        !err.contains("connection to cubad"),
        "not the local daemon: {err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("hi"),
        "{}",
        show(&out)
    );
}

#[test]
fn a_reply_begun_and_never_finished_ends_the_call() {
    let b = after_welcome("partial");
    // The limit covers the welcome too: long enough for python and the far daemon to start
    // on a busy machine.
    let out = b.run(&[("CUBA_EXEC_BRIDGE_TIMEOUT", "3s")]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the link to host b sent part of a reply (3 bytes), then nothing for 3 s"),
        "{err}"
    );
}

#[test]
fn a_bridge_that_closes_after_the_welcome_was_sent_nothing() {
    let b = after_welcome("close");
    let out = b.run(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    // Either seen at once (the bridge's exit), or after the request was written: then the
    // bytes still in its stdin say it never read them.
    assert!(
        err.contains("the request was not sent") || err.contains("exited (exit status: 0)"),
        "{err}"
    );
    assert!(err.contains("host b"), "names the host: {err}");
}

#[test]
fn a_bridge_that_closes_without_reading_the_request_was_sent_nothing() {
    let b = after_welcome("late");
    let out = b.run(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    // The request is still in the bridge's stdin: it never read it.
    assert!(err.contains("the request was not sent"), "{err}");
    assert!(err.contains("cubactl --host b"), "names the host: {err}");
}

#[test]
fn a_signal_while_the_start_goes_unanswered_ends_cubactl() {
    let b = after_welcome("partial");
    let fifo = b.env.dir().join("read");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let mut child = b
        .env
        .std_cmd()
        .env("CUBA_EXEC_HOSTS", &b.hosts)
        .env("CUBA_EXEC_CONFIG", &b.config)
        .env("AFTER_WELCOME_READ", &fifo)
        .env_remove("CUBA_EXEC_HOST")
        .env_remove("CUBA_EXEC_ALLOWED_HOSTS")
        .args(["--host", "b", "run", "--", "echo", "hi"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start cubactl");
    // Opening the FIFO returns once the bridge has the request (it opens its end then).
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::read_to_string(path));
    });
    let read = rx.recv_timeout(common::LIMIT);
    assert!(read.is_ok(), "the bridge never got the request");
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let ended = common::exited_within(child.id() as i32, common::LIMIT);
    if !ended {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("wait for cubactl");
    assert!(ended, "cubactl did not end on SIGTERM");
    assert_eq!(out.status.code(), Some(143), "{}", show(&out));
    assert!(
        stderr(&out).contains("interrupted before the start was confirmed"),
        "{}",
        show(&out)
    );
}

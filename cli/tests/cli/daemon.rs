//! `daemon status|start|stop|restart`: a restart in place keeps processes, `--kill` stops them,
//! and a restart over a daemon that speaks another protocol version replaces it.

use crate::common;

use std::process::Stdio;

use common::{exited_within, path_str, show, Collector, Env, LIMIT};

fn status_pid(env: &Env) -> u64 {
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["daemon", "status", "--json"])).expect("json");
    assert_eq!(json["running"], true);
    json["pid"].as_u64().expect("pid")
}

#[test]
fn status_start_stop_restart() {
    let env = Env::new();
    let out = env.output(&["daemon", "status"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not running"));
    assert!(!env.socket().exists(), "status must not start the daemon");

    assert!(env.ok(&["daemon", "start"]).contains("started cubad"));
    assert!(env.ok(&["daemon", "start"]).contains("already running"));
    let status = env.ok(&["daemon", "status"]);
    for field in [
        "version",
        "pid",
        "uptime",
        "socket",
        "state dir",
        "clients",
        "processes",
    ] {
        assert!(status.contains(field), "{field} missing: {status}");
    }
    assert!(status.contains(path_str(env.socket())), "{status}");
    let first = status_pid(&env);

    let id = env.start(&["--", "sleep 300"]);
    let out = env.output(&["daemon", "stop"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    // In place: the same pid, the process still running.
    let out = env.ok(&["daemon", "restart"]);
    assert!(
        out.contains(&format!("restarted in place (pid {first}")),
        "{out}"
    );
    assert_eq!(status_pid(&env), first);
    assert_eq!(env.row(id)["state"], "running");
    assert!(env
        .ok(&["daemon", "status"])
        .contains("in place (1 time(s)"));
    let out = env.ok(&["daemon", "restart", "--kill"]);
    assert!(out.contains(&format!("then cubad (pid {first})")), "{out}");
    assert!(exited_within(first as i32, LIMIT));
    let second = status_pid(&env);
    assert_ne!(first, second);
    assert_ne!(env.row(id)["state"], "running");

    assert!(env.ok(&["daemon", "stop"]).contains("stopped cubad"));
    assert!(exited_within(second as i32, LIMIT));
    assert_eq!(env.output(&["daemon", "status"]).status.code(), Some(1));
    assert!(env.ok(&["daemon", "stop"]).contains("not running"));
}

/// A stand-in for a daemon of another version: holds the lock with its pid and answers every
/// handshake with protocol version 999.
const OLD_DAEMON: &str = r#"
import fcntl, os, socket, struct, sys
path = sys.argv[1]
lock = open(path + ".lock", "w")
fcntl.flock(lock, fcntl.LOCK_EX)
lock.write(str(os.getpid())); lock.flush()
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen()
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.recv(65536)
    body = b"CUBA" + struct.pack(">II", 999, os.getpid()) + b"\x00"
    c.sendall(struct.pack(">I", len(body)) + body)
    c.close()
"#;

#[test]
fn restart_replaces_a_daemon_of_another_version() {
    let env = Env::new();
    let mut old = std::process::Command::new("python3")
        .args(["-c", OLD_DAEMON, path_str(env.socket())])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut ready = Collector::new(old.stdout.take().expect("stdout"));
    ready.wait_for("ready");

    let out = env.output(&["ps"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("protocol version 999") && err.contains("cubactl daemon restart"),
        "{err}"
    );

    let out = env.ok(&["daemon", "restart"]);
    assert!(
        out.contains(&format!("stopped cubad (pid {})", old.id())),
        "{out}"
    );
    assert!(out.contains("started cubad"), "{out}");
    common::wait_child(&mut old);
    status_pid(&env);
}

/// A daemon that ends during its hand-over (here: the new program reads the hand-over version
/// but exits at once when run) is reported as gone, not waited for until the time limit.
#[test]
fn an_upgrade_whose_daemon_ends_mid_hand_over_says_so() {
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let id = env.start(&["--", "sleep 100"]);
    let fake = env.dir().join("fake-cubad");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n[ \"$1\" = --handover-version ] && exec {} --handover-version\nexit 1\n",
            cuba_tests::bin("cubad").display()
        ),
    )
    .expect("write the fake");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let out = env.output(&["daemon", "upgrade", "--binary", path_str(&fake)]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ended during the hand-over"), "{err}");
    // The next daemon ends what the dead one ran and lists it as lost.
    env.ok(&["daemon", "start"]);
    assert_eq!(env.row(id)["state"], "lost", "{}", env.row(id));
}

#[test]
fn a_daemon_that_cannot_start_says_why_at_once() {
    let env = Env::new();
    // A socket directory others may enter: the daemon refuses it.
    let open = env.dir().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    // `cubactl ps` with one setting: it fails (exit 1); what it said.
    let failed_start = |key: &str, value: &std::path::Path| {
        let out = env
            .cmd()
            .env(key, value)
            .arg("ps")
            .output()
            .expect("run cubactl");
        assert_eq!(out.status.code(), Some(1), "{}", show(&out));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = failed_start("CUBA_EXEC_SOCKET", &open.join("s"));
    assert!(
        err.contains("is open to other users (mode 755)")
            && err.contains(&format!("chmod 700 {}", open.display())),
        "{err}"
    );
    assert!(
        !err.contains("did not open"),
        "not a wait for the socket: {err}"
    );

    // A config file with a key it does not know: the line is quoted.
    let config = env.dir().join("config.toml");
    std::fs::write(&config, "max_procs = 4\nbogus = 1\n").expect("write config");
    let err = failed_start("CUBA_EXEC_CONFIG", &config);
    assert!(
        err.contains("line 2") && err.contains("bogus = 1") && err.contains("unknown field"),
        "{err}"
    );
}

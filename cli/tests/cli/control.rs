//! `kill`, `run` and `prune`: stopping trees, foreground runs with exit codes and Ctrl-C.

use crate::common;

use std::process::Stdio;

use common::{alive, exited_within, wait_child, wait_line, Collector, Env, LIMIT};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

#[test]
fn kill_stops_the_whole_tree() {
    let env = Env::new();
    let id = env.start(&["--name", "tree", "--", "sleep 300 & echo $!; wait"]);
    let grandchild: i32 = wait_line(&env, id, r"^\d+$").parse().expect("pid");
    assert!(alive(grandchild));

    // By name: the running process called `tree`.
    let out = env.ok(&["kill", "tree"]);
    let says = format!("process {id} (tree) was killed by SIGTERM");
    assert!(out.contains(&says), "{out}");
    assert!(out.contains("2 processes in its tree"), "{out}");
    assert!(
        exited_within(grandchild, LIMIT),
        "grandchild {grandchild} survived"
    );
    assert!(!alive(grandchild));
    assert_eq!(env.row(id)["state"], "killed");

    // Already ended: says so, and what was asked holds (exit 0).
    let again = env.output(&["kill", &id.to_string()]);
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("already ended"));
}

#[test]
fn kill_all_and_by_owner() {
    let env = Env::new();
    let a = env.start(&["--", "sleep 300"]);
    let b = env.start(&["--", "trap '' TERM; echo armed; sleep 300"]);
    wait_line(&env, b, "armed");
    let none = env.ok(&["kill", "--owner", "nobody"]);
    assert!(none.is_empty());
    let out = env.ok(&["kill", "--all", "--grace", "200ms"]);
    assert!(
        out.contains(&format!("process {a} was killed by SIGTERM")),
        "{out}"
    );
    assert!(
        out.contains(&format!("process {b} was killed by SIGKILL")),
        "{out}"
    );
    assert!(out.contains("outlived the grace period"), "{out}");
    let json = env.ok(&["kill", "--all", "--json"]);
    assert!(json.is_empty() || json.trim() == "[]", "{json}");
}

#[test]
fn run_exits_with_the_command_code() {
    let env = Env::new();
    let out = env.output(&["run", "--", "echo out; echo err >&2; exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", common::show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");

    let out = env.output(&["run", "--", "kill -KILL $$"]);
    assert_eq!(out.status.code(), Some(137), "{}", common::show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SIGKILL"));

    // Several words are quoted one by one; options and env reach the command.
    let dir = env.dir();
    let out = env
        .cmd()
        .args([
            "run",
            "--cwd",
            common::path_str(dir),
            "-e",
            "GREETING=hi there",
        ])
        .args(["--", "sh", "-c", "echo \"$GREETING\" from \"$(pwd)\""])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", common::show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("hi there from {}\n", dir.display())
    );

    // Piped stdin reaches the command, and its end closes the command's stdin.
    let out = env
        .cmd()
        .args(["run", "--", "tr a-z A-Z"])
        .write_stdin("shout\n")
        .output()
        .expect("run");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "SHOUT\n");
}

/// `yes`, feeding a pipe until it is killed (when dropped).
struct Endless(std::process::Child);

impl Endless {
    fn start() -> Endless {
        let yes = std::process::Command::new("yes")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start yes");
        Endless(yes)
    }
}

impl Drop for Endless {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn run_with_endless_input_exits_with_the_code_of_a_command_that_reads_none() {
    // `yes | cubactl run -- …`: the command ends, or closes its stdin, while input still
    // flows. That is the command's business, not a failed delivery.
    let env = Env::new();
    let commands: [&[&str]; 2] = [
        &["sh", "-c", "exit 7"],
        // Its stdin closed while it runs on (for long enough that forwarding meets it).
        &["exec 0<&-; sleep 0.5; exit 7"],
    ];
    for command in commands {
        let mut yes = Endless::start();
        let feed = yes.0.stdout.take().expect("yes's stdout");
        let mut child = env
            .std_cmd()
            .args(["run", "--"])
            .args(command)
            .stdin(feed)
            .stderr(Stdio::piped())
            .spawn()
            .expect("run");
        let mut err = Collector::new(child.stderr.take().expect("stderr"));
        let status = wait_child(&mut child);
        let stderr = err.finish();
        assert_eq!(status.code(), Some(7), "{command:?}: {status}: {stderr}");
        assert!(!stderr.contains("not delivered"), "{command:?}: {stderr}");
    }
}

const READY_THEN_SLEEP: &str = "exec python3 -c 'import signal, time; \
    signal.signal(signal.SIGINT, signal.SIG_DFL); print(\"ready\", flush=True); time.sleep(300)'";

#[test]
fn run_forwards_ctrl_c_and_exits_130() {
    let env = Env::new();
    let mut child = env
        .std_cmd()
        // One process that is ready for the Ctrl-C once it says so: a shell between `echo` and
        // the next command can lose a SIGINT (dash does), which made this test flaky under load.
        .args(["run", "--name", "fg", "--", READY_THEN_SLEEP])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run");
    let mut out = Collector::new(child.stdout.take().expect("stdout"));
    out.wait_for("ready\n");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
    let status = wait_child(&mut child);
    assert_eq!(status.code(), Some(130), "{status}");

    let row = env
        .ps()
        .into_iter()
        .find(|r| r["name"] == "fg")
        .expect("the run is in the table");
    assert_eq!(row["state"], "killed", "{row}");
    assert_eq!(row["signal"], "SIGINT", "{row}");
}

#[test]
fn run_timeout_and_prune() {
    let env = Env::new();
    let out = env.output(&["run", "--timeout", "300ms", "--", "sleep 300"]);
    assert_eq!(out.status.code(), Some(143), "{}", common::show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out"));
    assert_eq!(env.ok(&["prune"]), "removed 1 finished record(s)\n");
    assert_eq!(env.ok(&["ps", "--json"]).trim(), "[]");
}

#[test]
fn ctrl_c_reaches_a_command_that_floods_output() {
    // The output loop must keep draining while the signal request is in flight: the reply
    // shares the connection with the flood.
    let env = Env::new();
    let mut child = env
        .std_cmd()
        .args(["run", "--", "echo ready >&2; exec yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let mut err = Collector::new(child.stderr.take().expect("stderr"));
    err.wait_for("ready\n");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
    let status = wait_child(&mut child);
    assert_eq!(status.code(), Some(130), "{status}: {}", err.finish());
}

#[test]
fn run_with_a_blocked_side_effect_is_refused() {
    let env = Env::new();
    // BREAKS_OPERATING_SYSTEM is in the daemon's default blocked set.
    let out = env.output(&[
        "run",
        "--side-effect",
        "MODIFIES_WORKSPACE_FILES",
        "--side-effect",
        "BREAKS_OPERATING_SYSTEM",
        "--",
        "echo ran",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("side_effects") && stderr.contains("BREAKS_OPERATING_SYSTEM"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ran"));
    let out = env.ok(&[
        "run",
        "--side-effect",
        "modifies_workspace_files",
        "--",
        "echo ran",
    ]);
    assert_eq!(out, "ran\n");
}

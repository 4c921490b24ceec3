//! Hosts: `--host NAME` on every command, `cubactl hosts`, `ps --all-hosts`. The other host is
//! a second daemon with its own socket and state dir, reached through a `command` bridge
//! (`env CUBA_EXEC_SOCKET=… cubactl bridge`), exactly as a remote one is through ssh.

use crate::common;

use std::path::PathBuf;
use std::process::{Output, Stdio};

use common::{exited_within, path_str, show, wait_child, Collector, Env, LIMIT};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

/// A program that does not exist, as a bridge.
const MISSING: &str = "/nonexistent/cuba-bridge";

/// This machine (`local`), host `other` and any extra hosts. Dropping it kills both daemons
/// and everything they ran (each [`Env`] does so for its own).
struct World {
    local: Env,
    other: Env,
    /// An empty settings file: the user's own config.toml (and its hosts) stays out.
    config: PathBuf,
    hosts: String,
}

impl World {
    /// `extra`: more `NAME=ssh:…` / `NAME=command:…` entries for CUBA_EXEC_HOSTS.
    fn new(extra: &[&str]) -> World {
        let local = Env::new();
        let other = Env::new();
        let config = local.dir().join("config.toml");
        std::fs::write(&config, "").expect("write config.toml");
        // The bridge inherits this client's environment: it is given the other daemon's.
        let bridge = format!(
            "other=command:env CUBA_EXEC_SOCKET={} CUBA_EXEC_STATE_DIR={} {} bridge",
            path_str(other.socket()),
            path_str(other.state_dir()),
            path_str(&common::cubactl_bin()),
        );
        let hosts = std::iter::once(bridge.as_str())
            .chain(extra.iter().copied())
            .collect::<Vec<_>>()
            .join(",");
        World {
            local,
            other,
            config,
            hosts,
        }
    }

    fn cmd(&self) -> assert_cmd::Command {
        let mut c = self.local.cmd();
        c.env("CUBA_EXEC_HOSTS", &self.hosts)
            .env("CUBA_EXEC_CONFIG", &self.config)
            .env_remove("CUBA_EXEC_HOST")
            .env_remove("CUBA_EXEC_ALLOWED_HOSTS");
        c
    }

    fn output(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run cubactl")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args);
        assert!(
            out.status.success(),
            "cubactl {args:?} failed: {}",
            show(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).expect("JSON")
    }

    /// `cubactl --host other start ARGS…` and the new id.
    fn start_there(&self, args: &[&str]) -> u64 {
        let mut all = vec!["--host", "other", "start"];
        all.extend_from_slice(args);
        let out = self.ok(&all);
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("start printed {out:?}"))
    }

    /// The other daemon's pid, from its own status (asked through the bridge).
    fn other_pid(&self) -> i32 {
        let status = self.json(&["--host", "other", "daemon", "status", "--json"]);
        assert_eq!(status["host"], "other", "{status}");
        status["pid"].as_i64().expect("pid") as i32
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn has(rows: &[Value], command: &str) -> bool {
    rows.iter().any(|r| r["command"] == command)
}

#[test]
fn every_command_reaches_the_other_daemon() {
    let w = World::new(&[]);
    let id = w.start_there(&["--", "sleep 300"]);
    let there = w.json(&["--host", "other", "ps", "--json"]);
    let rows = there.as_array().expect("rows");
    let row = rows
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{there}"));
    assert_eq!(row["command"], "sleep 300");
    assert_eq!(row["host"], "other");
    // This machine's measures do not apply to another host's pids.
    assert!(row["usage"].is_null(), "{row}");
    // It runs under the other daemon, not this machine's.
    assert!(has(&w.other.ps(), "sleep 300"));
    assert!(!has(&w.local.ps(), "sleep 300"));
    let table = w.ok(&["--host", "other", "ps"]);
    assert!(table.contains("sleep 300"), "{table}");
    let info = w.ok(&["--host", "other", "info", &id.to_string()]);
    // The other daemon's own figures (its cgroup) may show; this machine's measure may not.
    let local_measure = info.lines().any(|l| l.starts_with("memory "));
    assert!(info.contains("other") && !local_measure, "{info}");

    let out = w.ok(&["--host", "other", "kill", &id.to_string()]);
    assert!(out.contains("killed"), "{out}");
    assert_ne!(w.other.row(id)["state"], "running");

    let id = w
        .start_there(&["--", "echo one; echo two; echo three"])
        .to_string();
    let matched = w.ok(&[
        "--host", "other", "wait", &id, "--until", "^th", "-t", "20s",
    ]);
    assert_eq!(matched.trim(), "three");
    w.ok(&["--host", "other", "wait", &id, "--timeout", "20s"]);
    assert_eq!(w.ok(&["--host", "other", "logs", &id]), "one\ntwo\nthree\n");
    let tail = w.ok(&["--host", "other", "tail", "-n", "1", &id]);
    assert_eq!(tail, "three\n");
    let follow = w.ok(&["--host", "other", "tail", "-f", &id]);
    assert!(
        follow.contains("one") && follow.contains("three"),
        "{follow}"
    );

    let out = w.output(&[
        "--host",
        "other",
        "run",
        "--",
        "sh",
        "-c",
        "echo hi; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
}

const READY_THEN_SLEEP: &str = "exec python3 -c 'import signal, time; \
    signal.signal(signal.SIGINT, signal.SIG_DFL); print(\"ready\", flush=True); time.sleep(300)'";

#[test]
fn run_on_another_host_forwards_ctrl_c() {
    let w = World::new(&[]);
    let mut child = std::process::Command::new(common::cubactl_bin())
        .envs(w.local.vars())
        .env("CUBA_EXEC_HOSTS", &w.hosts)
        .env("CUBA_EXEC_CONFIG", &w.config)
        .env_remove("CUBA_EXEC_ALLOWED_HOSTS")
        // From the environment this time: CUBA_EXEC_HOST aims it too.
        .env("CUBA_EXEC_HOST", "other")
        .args(["run", "--name", "fg", "--", READY_THEN_SLEEP])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run");
    let mut out = Collector::new(child.stdout.take().expect("stdout"));
    out.wait_for("ready\n");
    // To cubactl alone, as a terminal's Ctrl-C would be: it forwards it; the bridge, in a
    // process group of its own, lives on.
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("SIGINT");
    let status = wait_child(&mut child);
    assert_eq!(status.code(), Some(130), "{status}");
    let row = w
        .other
        .ps()
        .into_iter()
        .find(|r| r["name"] == "fg")
        .expect("the run is in the other table");
    assert_eq!(row["signal"], "SIGINT", "{row}");
}

#[test]
fn hosts_lists_each_host_and_why_one_is_unreachable() {
    let w = World::new(&["dead=command:false", &format!("gone=command:{MISSING}")]);
    let list = w.json(&["hosts", "--json"]);
    let rows = list.as_array().expect("array");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["local", "dead", "gone", "other"], "{list}");
    let row = |n: &str| rows.iter().find(|r| r["name"] == n).expect("row");
    for good in ["local", "other"] {
        assert_eq!(row(good)["state"], "ok", "{list}");
        assert_eq!(row(good)["version"], env!("CARGO_PKG_VERSION"), "{list}");
        assert!(row(good)["os"].is_string() && row(good)["shell"].is_string());
    }
    assert_eq!(row("dead")["ok"], false);
    assert!(
        row("dead")["state"]
            .as_str()
            .is_some_and(|s| s.contains("exited")),
        "{list}"
    );
    assert!(
        row("gone")["state"]
            .as_str()
            .is_some_and(|s| s.contains(MISSING)),
        "{list}"
    );

    let table = w.ok(&["hosts"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[0].contains("STATE"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("local") && lines[1].ends_with("ok"),
        "{table}"
    );
    let other = lines
        .iter()
        .find(|l| l.starts_with("other"))
        .expect("other");
    assert!(
        other.ends_with("ok") && other.contains("cubactl bridge"),
        "{table}"
    );
    let dead = lines.iter().find(|l| l.starts_with("dead")).expect("dead");
    assert!(dead.contains("`false` exited"), "{table}");
}

#[test]
fn ps_all_hosts_shows_both_daemons() {
    let w = World::new(&["dead=command:false"]);
    w.local.start(&["--", "sleep 301"]);
    let there = w.start_there(&["--", "sleep 302"]);
    w.ok(&["--host", "other", "kill", &there.to_string()]);
    w.start_there(&["--", "sleep 303"]);

    let out = w.output(&["ps", "--all-hosts"]);
    assert!(out.status.success(), "{}", show(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("HOST"), "{table}");
    let line = |cmd: &str| lines.iter().find(|l| l.ends_with(cmd)).copied();
    assert!(
        line("sleep 301").is_some_and(|l| l.starts_with("local")),
        "{table}"
    );
    assert!(
        line("sleep 303").is_some_and(|l| l.starts_with("other")),
        "{table}"
    );
    assert!(line("sleep 302").is_some(), "{table}");
    // The dead host is one line on stderr; the others are not held up.
    let err = stderr(&out);
    assert!(
        err.starts_with("host dead: ") && err.lines().count() == 1,
        "{err}"
    );

    let rows = w.json(&["ps", "--all-hosts", "--running", "--json"]);
    let rows = rows.as_array().expect("rows");
    let host_of = |cmd: &str| {
        rows.iter()
            .find(|r| r["command"] == cmd)
            .map(|r| r["host"].clone())
    };
    assert_eq!(host_of("sleep 301"), Some("local".into()), "{rows:?}");
    assert_eq!(host_of("sleep 303"), Some("other".into()), "{rows:?}");
    assert_eq!(
        host_of("sleep 302"),
        None,
        "--running leaves the killed one out"
    );
    // An exported CUBA_EXEC_HOST does not narrow it; a typed --host contradicts it.
    let out = w
        .cmd()
        .env("CUBA_EXEC_HOST", "other")
        .args(["ps", "--all-hosts"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sleep 301"));
    let out = w.output(&["--host", "other", "ps", "--all-hosts"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    // A plain table is one host's: no HOST column there.
    assert!(!w.ok(&["ps"]).contains("HOST"));
}

#[test]
fn host_errors_say_what_is_wrong() {
    let w = World::new(&[&format!("gone=command:{MISSING}")]);
    let out = w.output(&["--host", "nosuch", "ps"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains("unknown host \"nosuch\""),
        "{}",
        show(&out)
    );

    let out = w
        .cmd()
        .env("CUBA_EXEC_ALLOWED_HOSTS", "local")
        .args(["--host", "other", "ps"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains("not allowed by policy"),
        "{}",
        show(&out)
    );

    let out = w.output(&["--host", "gone", "ps"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stderr(&out).contains(MISSING), "{}", show(&out));

    let out = w.output(&["--host", "other", "bridge"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", show(&out));

    // A broken hosts setting stops only what needs a host.
    let broken = |args: &[&str]| {
        w.cmd()
            .env("CUBA_EXEC_HOSTS", "no-equals-sign")
            .args(args)
            .output()
            .expect("run")
    };
    assert!(broken(&["ps"]).status.success());
    for args in [
        &["hosts"][..],
        &["ps", "--all-hosts"],
        &["--host", "x", "ps"],
    ] {
        let out = broken(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        assert!(stderr(&out).contains("CUBA_EXEC_HOSTS"), "{}", show(&out));
    }
}

#[test]
fn daemon_commands_on_another_host() {
    let w = World::new(&[]);
    let status = w.ok(&["--host", "other", "daemon", "status"]);
    assert!(status.contains(path_str(w.other.socket())), "{status}");
    let first = w.other_pid();
    let started = w.ok(&["--host", "other", "daemon", "start"]);
    assert!(started.contains(&format!("pid {first}")), "{started}");

    // In place: the same daemon carries on.
    let out = w.ok(&["--host", "other", "daemon", "restart"]);
    assert!(
        out.contains(&format!("restarted in place (pid {first}")),
        "{out}"
    );
    assert_eq!(w.other_pid(), first);
    let out = w.ok(&["--host", "other", "daemon", "restart", "--kill"]);
    assert!(out.contains("started cubad on host other"), "{out}");
    assert!(exited_within(first, LIMIT), "the old daemon is gone");
    let second = w.other_pid();
    assert_ne!(first, second);

    let out = w.ok(&["--host", "other", "daemon", "stop"]);
    assert!(
        out.contains(&format!("stopped cubad on host other (pid {second})")),
        "{out}"
    );
    assert!(exited_within(second, LIMIT));
    // This machine's daemon was never involved.
    assert!(!w.local.socket().exists());

    let out = w.output(&["--host", "other", "audit"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(stderr(&out).contains("on other itself"), "{}", show(&out));
}

#[test]
fn attach_on_a_terminal_answers_a_prompt_on_another_host() {
    let w = World::new(&[]);
    let id = w
        .start_there(&["--", "printf 'Name: '; read -r n; echo \"hello $n\""])
        .to_string();
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let tty = std::fs::File::from(pty.slave);
    let mut child = std::process::Command::new(common::cubactl_bin())
        .envs(w.local.vars())
        .env("CUBA_EXEC_HOSTS", &w.hosts)
        .env("CUBA_EXEC_CONFIG", &w.config)
        .env_remove("CUBA_EXEC_ALLOWED_HOSTS")
        .args(["--host", "other", "attach", &id])
        .stdin(Stdio::from(tty.try_clone().expect("dup")))
        .stdout(Stdio::from(tty.try_clone().expect("dup")))
        .stderr(Stdio::from(tty))
        .spawn()
        .expect("attach");
    let mut keyboard = std::fs::File::from(pty.master);
    let mut screen = Collector::new(keyboard.try_clone().expect("dup"));
    screen.wait_for("Ctrl-] detaches");
    screen.wait_for("Name: ");
    std::io::Write::write_all(&mut keyboard, b"there\r").expect("type");
    screen.wait_for("hello there");
    let status = wait_child(&mut child);
    assert!(status.success(), "{status}");
    assert_eq!(
        w.ok(&["--host", "other", "logs", &id]),
        "Name: hello there\n"
    );
}

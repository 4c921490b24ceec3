//! One vocabulary: errors worded and coded one way whatever the command, a usage line that does
//! not ask for what the environment gives, a start that says at once when the command cannot
//! run, AGE as age, one sentence for a refusal, and private directories.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use common::{show, Env};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_usage_line_does_not_ask_for_a_socket_the_environment_gives() {
    let env = Env::new();
    // Env sets CUBA_EXEC_SOCKET.
    let out = env.output(&["kill"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("Usage: cubactl kill <ID"), "{err}");
    assert!(!err.contains("--socket"), "{err}");
}

#[test]
fn an_unknown_process_is_not_found_in_the_same_words_everywhere() {
    let env = Env::new();
    for args in [
        &["kill", "999"][..],
        &["tail", "999"],
        &["info", "999"],
        &["logs", "999"],
    ] {
        let out = env.output(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        let err = stderr(&out);
        assert!(
            err.starts_with("cubactl: NOT_FOUND: no process with id 999"),
            "{args:?}: {err}"
        );
        assert!(err.contains("hint: `cubactl ps` lists"), "{args:?}: {err}");
    }
    for args in [&["info", "nosuchname"][..], &["kill", "nosuchname"]] {
        let out = env.output(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        let err = stderr(&out);
        assert!(
            err.starts_with("cubactl: NOT_FOUND: no process is named \"nosuchname\""),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn start_of_a_command_that_fails_at_once_says_so() {
    let env = Env::new();
    let out = env
        .cmd()
        // Generous, so a loaded machine's slow shell is still seen; it returns at the exit.
        .env("CUBA_EXEC_START_GRACE_MS", "20000")
        .args(["start", "--", "nosuchcmd-cuba"])
        .output()
        .expect("run cubactl");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("exited with code 127"), "{err}");
    assert!(err.contains("command not found"), "{err}");
    assert!(
        err.contains("nosuchcmd-cuba: not found"),
        "the shell's words: {err}"
    );
    assert!(out.stdout.is_empty(), "no id for a command that never ran");

    // A server that fails at once (its port taken, a bad flag) is said to have failed too.
    let out = env
        .cmd()
        .env("CUBA_EXEC_START_GRACE_MS", "20000")
        .args(["start", "--", "echo port 8080 in use >&2; exit 3"])
        .output()
        .expect("run cubactl");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    assert!(
        err.contains("exited with code 3") && err.contains("port 8080 in use"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{}", show(&out));

    // A command that runs is started as before: its id, exit 0.
    let id = env.start(&["--", "sleep 30"]);
    assert_eq!(env.row(id)["state"], "running");
}

#[test]
fn age_is_time_since_the_start_and_time_is_how_long_it_ran() {
    let env = Env::new();
    let id = env.start(&["--", "true"]);
    let until = Instant::now() + Duration::from_secs(10);
    while env.row(id)["state"] == "running" {
        assert!(Instant::now() < until, "true did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The age has to grow past what it ran: a second of real time is the thing measured.
    std::thread::sleep(Duration::from_millis(1100));
    let table = env.ok(&["ps"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let row: Vec<&str> = lines
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|r| r.first() == Some(&id.to_string().as_str()))
        .unwrap_or_else(|| panic!("no row {id}: {table}"));
    let cell = |name: &str| {
        let i = header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name}: {table}"));
        row[i]
    };
    assert!(
        cell("AGE").ends_with('s') && !cell("AGE").ends_with("ms"),
        "{table}"
    );
    assert!(cell("TIME").ends_with("ms"), "{table}");
}

#[test]
fn a_refusal_is_one_sentence_with_the_rule_the_command_and_the_fix() {
    let env = Env::new();
    let out = env
        .cmd()
        .env("CUBA_EXEC_BLOCKED_COMMANDS", "rm")
        .args(["start", "--", "echo ok && rm -rf /tmp/cuba-nothing"])
        .output()
        .expect("run cubactl");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    assert!(first.starts_with("cubactl: BLOCKED: "), "{err}");
    assert_eq!(first.matches("blocklist").count(), 1, "said once: {first}");
    assert!(first.contains("`rm -rf /tmp/cuba-nothing`"), "{first}");
    assert!(
        first.contains("CUBA_EXEC_BLOCKED_COMMANDS"),
        "the fix: {first}"
    );
}

#[test]
fn directories_open_to_others_are_refused_with_the_fix() {
    let root = tempfile::Builder::new()
        .prefix("cv")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let open = root.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let run = |socket: &std::path::Path, state: &std::path::Path| {
        std::process::Command::new(cuba_tests::bin("cubad"))
            .arg("--socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(state)
            .output()
            .expect("run cubad")
    };
    let out = run(&open.join("s"), &root.path().join("state"));
    assert!(!out.status.success(), "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("socket directory"), "{err}");
    assert!(
        err.contains(&format!("chmod 700 {}", open.display())),
        "{err}"
    );

    let private = root.path().join("private");
    let out = run(&private.join("s"), &open);
    assert!(!out.status.success(), "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("state directory"), "{err}");
    assert!(err.contains("CUBA_EXEC_STATE_DIR"), "{err}");
    // The socket's directory it made itself is private.
    let mode = std::fs::metadata(&private)
        .expect("made")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn json_output_is_the_documented_shape() {
    use cuba_tests::json_doc;
    let env = Env::new();
    let known = json_doc::names(true);
    let running = env.start(&["--name", "svc", "--", "sleep 30"]);
    let out = env
        .cmd()
        .env("CUBA_EXEC_START_GRACE_MS", "20000")
        .args(["start", "--json", "--", "echo hi; exit 3"])
        .output()
        .expect("run cubactl");
    // It ended at once with 3: still its JSON, and a failed start.
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let ended: serde_json::Value = serde_json::from_slice(&out.stdout).expect("start --json");
    json_doc::assert_documented(&ended, &known, "start --json");
    assert_eq!(ended["state"], "exited", "{ended}");
    assert_eq!(ended["exit_code"], 3, "{ended}");
    let killed = env.start(&["--", "sleep 30"]);
    let out = env.ok(&["kill", "--json", &killed.to_string()]);
    let rows: serde_json::Value = serde_json::from_str(&out).expect("kill --json");
    assert_eq!(rows[0]["state"], "killed", "{rows}");
    assert_eq!(rows[0]["signal"], "SIGTERM", "{rows}");
    for row in env.ps() {
        json_doc::assert_documented(&row, &known, "ps --json");
    }
    let row = env.row(running);
    assert_eq!(
        (&row["state"], &row["kind"], &row["owner_kind"]),
        (&"running".into(), &"command".into(), &"cli".into()),
        "{row}"
    );
    let info: serde_json::Value =
        serde_json::from_str(&env.ok(&["info", "--json", "svc"])).expect("info --json");
    json_doc::assert_documented(&info, &known, "info --json");
    // The page's own example holds to its table.
    for row in json_doc::example().as_array().expect("an array") {
        json_doc::assert_documented(row, &known, "the example");
    }
}

/// `cubactl run` says why the kernel killed a command, as MCP replies and `info` do.
#[cfg(target_os = "linux")]
#[test]
fn run_of_a_command_killed_for_memory_says_out_of_memory() {
    let env = Env::new();
    let out = env
        .cmd()
        .env("CUBA_EXEC_MEMORY_MAX", "32M")
        // `tail` keeps a line it has not seen the end of: 200 MB with no newline.
        .args(["run", "--", "head -c 200M /dev/zero | tail"])
        .output()
        .expect("run cubactl");
    // The shell's child died of SIGKILL; the shell exits 137.
    assert_eq!(out.status.code(), Some(137), "{}", show(&out));
    let err = stderr(&out);
    assert!(
        err.contains(": killed by the kernel: out of memory (memory_max 32 MiB)"),
        "{err}"
    );
}

#[test]
fn ended_processes_read_plainly_to_kill_and_tail() {
    let env = Env::new();
    let out = env.output(&["run", "--", "exit 4"]);
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    let id = env.ps()[0]["id"].as_u64().expect("an id").to_string();
    // Stopping what already ended is what was asked: exit 0, and it says so.
    let out = env.output(&["kill", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("had already ended"),
        "{}",
        show(&out)
    );
    // Nothing to show is said, not an empty screen.
    let out = env.output(&["tail", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stderr(&out).contains("[no output; process"),
        "{}",
        show(&out)
    );
    // `tail -f` ends with the process's own exit code, as `run` does.
    let out = env.output(&["tail", "-f", &id]);
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    // `-o` is ps's column choice elsewhere: not taken as an owner filter here.
    let out = env.output(&["ps", "-o", "pid"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let help = env.ok(&["daemon", "--help"]);
    assert!(
        help.contains("upgrade") && !help.contains("session-free"),
        "{help}"
    );
}

#[test]
fn a_second_process_of_a_running_name_is_started_with_a_notice() {
    let env = Env::new();
    let first = env.start(&["--name", "web", "--", "sleep 30"]);
    let out = env.output(&["start", "--name", "web", "--", "sleep 30"]);
    assert!(out.status.success(), "{}", show(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "process {first} is also named web and still running"
        )),
        "{err}"
    );
    // A name no running process has is started without a word.
    let out = env.output(&["start", "--name", "api", "--", "sleep 30"]);
    assert!(!stderr(&out).contains("also named"), "{}", show(&out));
}

#[test]
fn a_misspelt_option_is_an_error_never_the_command() {
    let env = Env::new();
    let out = env.output(&["run", "--nmae", "web", "--", "echo", "hi"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("--nmae"), "names the option: {err}");
    assert!(err.contains("--name"), "and the one meant: {err}");
    assert!(env.ps().is_empty(), "nothing was started: {:?}", env.ps());
    // Command text that starts with `-` is the command's, after `--`, on either side: the
    // shell runs it instead of taking it for an option of its own.
    let out = env.output(&["run", "--", "-x-cuba 2>/dev/null; echo ran; exit 4"]);
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    let out = env.output(&["run", "--", "+x-cuba 2>/dev/null; echo ran"]);
    assert!(out.status.success(), "{}", show(&out));
    // After its first word, a word that starts with `-` is the command's.
    let out = env.output(&["run", "echo", "-n", "plain"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "plain",
        "{}",
        show(&out)
    );
}

#[test]
fn start_ensure_returns_the_running_process_of_the_name() {
    let env = Env::new();
    let first = env.start(&["--name", "web", "--ensure", "--", "sleep 30"]);
    let out = env.output(&["start", "--name", "web", "--ensure", "--", "sleep 30"]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        first.to_string()
    );
    assert!(stderr(&out).contains("running already"), "{}", show(&out));
    assert_eq!(env.ps().len(), 1, "one web");
    // Without a name there is nothing to find.
    let out = env.output(&["start", "--ensure", "--", "sleep 30"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    // The hint of a second `web` names an option cubactl has.
    let out = env.output(&["start", "--name", "web", "--", "sleep 30"]);
    assert!(
        stderr(&out).contains("cubactl start --ensure"),
        "{}",
        show(&out)
    );
}

#[test]
fn start_of_a_server_that_fails_after_its_banner_says_so() {
    let env = Env::new();
    // A grace long enough for the banner on a loaded machine; a settle that ends at the exit.
    let out = env
        .cmd()
        .env("CUBA_EXEC_START_GRACE_MS", "3000")
        .env("CUBA_EXEC_START_SETTLE_MS", "20000")
        .args([
            "start",
            "--",
            "echo listening on 8080; sleep 4; echo address already in use >&2; exit 3",
        ])
        .output()
        .expect("run cubactl");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = stderr(&out);
    assert!(err.contains("exited with code 3"), "{err}");
    assert!(err.contains("address already in use"), "{err}");
    assert!(out.stdout.is_empty(), "no id: {}", show(&out));
    // One that prints nothing is not watched past the grace.
    let begun = Instant::now();
    let out = env
        .cmd()
        .env("CUBA_EXEC_START_GRACE_MS", "100")
        .env("CUBA_EXEC_START_SETTLE_MS", "20000")
        .args(["start", "--", "sleep 30"])
        .output()
        .expect("run cubactl");
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        begun.elapsed() < Duration::from_secs(15),
        "{:?}",
        begun.elapsed()
    );
}

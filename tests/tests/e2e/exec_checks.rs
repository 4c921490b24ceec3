//! Exec checks end to end: the corpus of ways to reach a blocked program that no parser can see
//! (`cuba_tests::exec_corpus`), each run by a real `cubad` against a marker file of its own,
//! through the protocol and through `cubactl run`. A case passes only if its marker survives
//! and the reply (a parse-time `BLOCKED`, or the record's exec refusal) and the audit log name
//! the decision. Run with `unresolved` at
//! both settings; an allowed build of thousands of execs runs untouched; `cubactl run` says
//! `BLOCKED`; an unprivileged daemon refuses a setuid program with a message naming the setting
//! and a root one runs it.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cuba_protocol::client::Client;
use cuba_protocol::{ErrorKind, ProcessInfo, SpawnRequest};
use cuba_tests::exec_corpus::{self, Case};
use cuba_tests::{machine, spawn_req, wait_exit, Step, TestDaemon};

fn in_dir(command: &str, cwd: &Path) -> SpawnRequest {
    SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..spawn_req(command)
    }
}

/// Whether this daemon checks execs; a skip (a failure in CI) when it cannot here.
async fn checking(c: &Client, what: &str) -> bool {
    let s = c.status().step().await.unwrap();
    if s.exec_checks.starts_with("on") {
        return true;
    }
    machine::skip(what, &format!("exec checks are {}", s.exec_checks));
    false
}

fn audit_names(d: &TestDaemon, id: u64) -> bool {
    let audit = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap_or_default();
    audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|l| {
            l["event"] == "exec"
                && l["id"] == id
                && l["program"].as_str().is_some_and(|p| !p.is_empty())
        })
}

fn names_rm(p: &ProcessInfo) -> bool {
    p.blocked
        .iter()
        .any(|b| b.program.ends_with("/rm") || b.message.contains("`rm`"))
}

/// Runs one case through the protocol: `None` when it passed, else what went wrong.
async fn by_protocol(d: &TestDaemon, c: &Client, case: &Case) -> Option<String> {
    let name = case.name;
    match c.spawn(in_dir(&case.command, &case.dir)).step().await {
        Err(e) if e.kind() == Some(ErrorKind::Blocked) => {
            // Refused before it ran: the early, explainable refusal.
            let said = e.to_string();
            if !Case::named(&said) && !said.contains("rm") {
                return Some(format!("{name}: refused without naming rm: {said}"));
            }
        }
        Err(e) => return Some(format!("{name}: {e}")),
        Ok(p) => {
            let done = wait_exit(c, p.id).await.process;
            if !case.intact() {
                return Some(format!("{name}: the marker is gone ({})", case.command));
            }
            if !names_rm(&done) {
                let out = cuba_tests::read_all(c, p.id).await;
                return Some(format!(
                    "{name}: the reply names no refused rm: {:?}, exit {:?}, output {:?}",
                    done.blocked,
                    done.exit_code,
                    String::from_utf8_lossy(&out)
                ));
            }
        }
    }
    (!case.audited(d.state_dir())).then(|| format!("{name}: no decision in the audit log"))
}

/// Runs one case as a person would, `cubactl run`: `None` when it passed.
async fn by_cubactl(d: &TestDaemon, case: &Case) -> Option<String> {
    let name = case.name;
    let out = d
        .cubactl(&["run", "--", &case.command])
        .current_dir(&case.dir)
        .output()
        .step()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    if !case.intact() {
        return Some(format!("{name} (cubactl): the marker is gone: {said}"));
    }
    if !Case::named(&said) {
        return Some(format!(
            "{name} (cubactl): nothing names the refused rm: {said}"
        ));
    }
    (!case.audited(d.state_dir()))
        .then(|| format!("{name} (cubactl): no decision in the audit log"))
}

async fn corpus(unresolved: &str) {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_UNRESOLVED", unresolved)
        .max_procs(40)
        .start()
        .await;
    let c = d.client().await;
    if !checking(
        &c,
        &format!("exec checks corpus, unresolved = {unresolved}"),
    )
    .await
    {
        return;
    }
    let mut failed = Vec::new();
    for one in exec_corpus::cases() {
        let case = Case::prepare(&d.dir().join("protocol"), one);
        failed.extend(by_protocol(&d, &c, &case).await);
        let case = Case::prepare(&d.dir().join("cubactl"), one);
        failed.extend(by_cubactl(&d, &case).await);
    }
    assert!(
        failed.is_empty(),
        "unresolved = {unresolved}:\n{}",
        failed.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_to_a_blocked_program_ends_at_its_exec_unresolved_allow() {
    corpus("allow").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_to_a_blocked_program_ends_at_its_exec_unresolved_refuse() {
    corpus("refuse").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_build_of_thousands_of_execs_runs_untouched() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    if !checking(&c, "exec checks: a build").await {
        return;
    }
    let dir = tempfile::tempdir_in(d.dir()).unwrap();
    let mut mk = String::from("all:");
    for i in 0..200 {
        mk.push_str(&format!(" t{i}"));
    }
    mk.push('\n');
    for i in 0..200 {
        // Each target: a shell and three programs.
        mk.push_str(&format!(
            "t{i}:\n\t@true && printf '' && test -d . && echo t{i} > /dev/null\n"
        ));
    }
    std::fs::write(dir.path().join("Makefile"), mk).unwrap();
    let text =
        "i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done; make -s -j2 && echo built";
    let p = c.spawn(in_dir(text, dir.path())).step().await.unwrap();
    // 2 800 checked execs: about 2 s alone, far more beside the whole suite on two cores.
    let done = cuba_tests::wait_exit_within(&c, p.id, Duration::from_secs(90)).await;
    assert_eq!(done.process.exit_code, Some(0), "{:?}", done.process);
    assert!(
        done.process.blocked.is_empty(),
        "{:?}",
        done.process.blocked
    );
    let out = cuba_tests::read_all(&c, p.id).await;
    assert!(String::from_utf8_lossy(&out).contains("built"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_run_says_blocked_with_the_program_and_the_rule() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    if !checking(&c, "exec checks: cubactl").await {
        return;
    }
    let marker = d.dir().join("marker");
    std::fs::write(&marker, "keep").unwrap();
    let text = format!("x=$(printf rm); $x {}; echo after", marker.display());
    let out = d.cubactl(&["run", &text]).output().step().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(marker.exists());
    assert!(stdout.contains("after"), "the shell goes on: {stdout}");
    assert!(
        stderr.contains("BLOCKED: /usr/bin/rm") && stderr.contains("rule blocklist"),
        "{stderr}"
    );
    let status = d
        .cubactl(&["daemon", "status"])
        .output()
        .step()
        .await
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("exec checks on (seccomp user notification"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_checks_off_and_required_say_so() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_EXEC_CHECKS", "off")
        .start()
        .await;
    let c = d.client().await;
    let s = c.status().step().await.unwrap();
    assert_eq!(s.exec_checks, "off (exec_checks = \"off\")");
    // Off: only the parse-time check stands, so a name found at run time runs.
    let marker = d.dir().join("marker");
    std::fs::write(&marker, "gone").unwrap();
    let text = format!("x=$(printf rm); $x {}", marker.display());
    let p = c.spawn(spawn_req(&text)).step().await.unwrap();
    let done = wait_exit(&c, p.id).await.process;
    assert!(!marker.exists() && done.blocked.is_empty(), "{done:?}");
}

/// Ends the unprivileged daemon (and what it started) however the test ends.
struct Unprivileged {
    child: std::process::Child,
    dir: PathBuf,
}

impl Drop for Unprivileged {
    fn drop(&mut self) {
        // SAFETY: kill with the daemon's pid; its children are in groups of their own.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
        let _ = std::process::Command::new("pkill")
            .args([
                "-KILL",
                "-U",
                "65534",
                "-f",
                &self.dir.display().to_string(),
            ])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn as_nobody(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    cmd.uid(65534)
        .gid(65534)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setuid_programs_are_refused_by_an_unprivileged_daemon_and_run_under_root() {
    if !machine::root() {
        machine::skip("exec checks as nobody", "the tests do not run as root");
        return;
    }
    // Root (CAP_SYS_ADMIN): no no_new_privs, so a setuid program works.
    let d = TestDaemon::start().await;
    let c = d.client().await;
    if !checking(&c, "exec checks: setuid").await {
        return;
    }
    let p = c
        .spawn(spawn_req("su root -c 'echo as-root'"))
        .step()
        .await
        .unwrap();
    let done = wait_exit(&c, p.id).await.process;
    assert_eq!(done.exit_code, Some(0), "{done:?}");
    assert!(done.blocked.is_empty(), "{:?}", done.blocked);

    let dir = tempfile::Builder::new()
        .prefix("cxn")
        .tempdir_in("/tmp")
        .unwrap()
        .keep();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o700)).unwrap();
    let socket = dir.join("s");
    let mut cubad = std::process::Command::new(cuba_tests::bin("cubad"));
    as_nobody(&mut cubad)
        .arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .env("CUBA_EXEC_CONFIG", "/dev/null")
        .env("HOME", &dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let guard = Unprivileged {
        child: cubad.spawn().unwrap(),
        dir: dir.clone(),
    };
    let cubactl = |args: &[&str]| {
        let mut cmd = std::process::Command::new(cuba_tests::bin("cubactl"));
        as_nobody(&mut cmd)
            .args(args)
            .env("CUBA_EXEC_SOCKET", &socket)
            .env("CUBA_EXEC_CONFIG", "/dev/null")
            .env("HOME", &dir)
            .env("NO_COLOR", "1");
        cmd.output().unwrap()
    };
    // Up when it answers (no event says the socket is bound).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        let out = cubactl(&["daemon", "status"]);
        if out.status.success() {
            break String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the nobody daemon did not answer"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.contains("no_new_privs"), "{status}");
    // Seen in the text, a setuid program is asked about before the command starts
    // (`asks/setuid.rs`); here it is denied.
    let out = cubactl(&["start", "su root -c 'echo as-root'"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let listed = String::from_utf8_lossy(&cubactl(&["approvals", "--json"]).stdout).into_owned();
    assert!(listed.contains("setuid: su"), "{listed}");
    assert!(cubactl(&["deny", &id]).status.success());
    // Found only at its exec, it is refused there, with the setting that would allow it.
    let out = cubactl(&["run", "x=$(printf su); $x root -c 'echo as-root'"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("rule privileges") && stderr.contains("exec_checks"),
        "{stderr}"
    );
    // And the blocklist holds as for root.
    let marker = dir.join("marker");
    std::fs::write(&marker, "keep").unwrap();
    std::os::unix::fs::chown(&marker, Some(65534), Some(65534)).unwrap();
    let text = format!("x=$(printf rm); $x {}", marker.display());
    let out = cubactl(&["run", &text]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(marker.exists(), "{stderr}");
    assert!(stderr.contains("BLOCKED: /usr/bin/rm"), "{stderr}");
    drop(guard);
}

/// A daemon whose blocklist names `run_b` (a copy of `sleep`), and `run_a` (a copy of `true`)
/// beside it in `dir`: the programs the racer swaps.
async fn racing_daemon() -> (TestDaemon, PathBuf) {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_BLOCKED_COMMANDS", "run_b")
        .start()
        .await;
    let dir = d.dir().join("race");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy("/bin/true", dir.join("run_a")).unwrap();
    std::fs::copy("/bin/sleep", dir.join("run_b")).unwrap();
    (d, dir)
}

/// Runs the racer with `args` under `d`: what it counted, after checking the reply names the
/// killed program and the audit log has an exec line for the process.
async fn race(d: &TestDaemon, dir: &Path, args: &str) -> String {
    let c = d.client().await;
    let racer = cuba_tests::bin("cuba-test-exec-racer");
    let command = format!("'{}' {args} 3 3000", racer.display());
    let p = c.spawn(in_dir(&command, dir)).step().await.unwrap();
    let done = wait_exit(&c, p.id).await.process;
    let out = String::from_utf8_lossy(&cuba_tests::read_all(&c, p.id).await).into_owned();
    assert_eq!(done.exit_code, Some(0), "a blocked program ran: {out}");
    // The race was run (three killed after their exec) and nothing blocked stayed up.
    assert!(out.contains("killed=3 ran=0"), "{out}");
    let killed = done
        .blocked
        .iter()
        .filter(|b| b.killed && b.program.ends_with("/run_b") && b.rule == "blocklist")
        .count();
    assert!(killed >= 1, "{:?}", done.blocked);
    assert!(audit_names(d, p.id));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_another_thread_changes_after_the_check_runs_nothing_refused_for_long() {
    let (d, dir) = racing_daemon().await;
    if !checking(&d.client().await, "exec checks: a thread's race").await {
        return;
    }
    let (a, b) = (dir.join("run_a"), dir.join("run_b"));
    race(
        &d,
        &dir,
        &format!("threads {} {}", a.display(), b.display()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_another_process_swaps_after_the_check_runs_nothing_refused_for_long() {
    let (d, dir) = racing_daemon().await;
    if !checking(&d.client().await, "exec checks: a link's race").await {
        return;
    }
    let (a, b) = (dir.join("run_a"), dir.join("run_b"));
    let link = dir.join("link");
    let args = format!("links {} {} {}", link.display(), a.display(), b.display());
    race(&d, &dir, &args).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_seccomp_is_forbidden_the_checks_say_why_and_the_parse_time_policy_stands() {
    let d = TestDaemon::builder().without_seccomp().start().await;
    let c = d.client().await;
    let s = c.status().step().await.unwrap();
    assert!(
        s.exec_checks
            .starts_with("unavailable (seccomp user notification is not available"),
        "{}",
        s.exec_checks
    );
    let status = d
        .cubactl(&["daemon", "status"])
        .output()
        .step()
        .await
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("exec checks unavailable ("), "{status}");
    // The early refusal stands: `rm` written out is refused before anything runs.
    let marker = d.dir().join("marker");
    std::fs::write(&marker, "keep").unwrap();
    let text = format!("rm {}", marker.display());
    let e = c.spawn(spawn_req(&text)).step().await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Blocked), "{e}");
    assert!(marker.exists());
    // Nothing else changes: commands run, and a name found at run time is not seen.
    let p = c.spawn(spawn_req("echo ran")).step().await.unwrap();
    assert_eq!(wait_exit(&c, p.id).await.process.exit_code, Some(0));
    drop(c);
    drop(d);

    // Required: no command starts, and the refusal says why.
    let d = TestDaemon::builder()
        .without_seccomp()
        .env("CUBA_EXEC_EXEC_CHECKS", "on")
        .start()
        .await;
    let c = d.client().await;
    let s = c.status().step().await.unwrap();
    assert!(
        s.exec_checks
            .contains("exec_checks = \"on\", so no command starts"),
        "{}",
        s.exec_checks
    );
    let p = c.spawn(spawn_req("echo ran")).step().await.unwrap();
    assert_eq!(p.state, cuba_protocol::ProcState::FailedToStart, "{p:?}");
    let why = p.error.unwrap_or_default();
    assert!(
        why.contains("exec checks are required (exec_checks = \"on\") and unavailable"),
        "{why}"
    );
}

//! Exec checks decide on the file the kernel runs in the caller's view: a command may not make
//! a namespace or change mounts (the view the checks would then judge it in would be its own),
//! unless the policy allows it, and then a file mounted over another in the command's own
//! namespace is judged as what it is; a file the daemon cannot read the size of a blocked one is
//! refused (an unprivileged daemon cannot read an execute-only copy); and an exec made by a
//! thread other than the first, which wins the race against the check, is looked at after it
//! happened under the process's number, and killed.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use cuba_protocol::client::Client;
use cuba_protocol::ProcessInfo;
use cuba_tests::{machine, read_all, spawn_req, wait_exit, Step, TestDaemon};

/// Whether this daemon checks execs; a skip (a failure in CI) when it cannot here.
async fn checking(c: &Client, what: &str) -> bool {
    let s = c.status().step().await.unwrap();
    if s.exec_checks.starts_with("on") {
        return true;
    }
    machine::skip(what, &format!("exec checks are {}", s.exec_checks));
    false
}

/// Runs `text`; its record once it has ended, and what it printed.
async fn ran(c: &Client, text: &str) -> (ProcessInfo, String) {
    let p = c.spawn(spawn_req(text)).step().await.unwrap();
    let done = wait_exit(c, p.id).await.process;
    let out = String::from_utf8_lossy(&read_all(c, p.id).await).into_owned();
    (done, out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_of_its_own_is_refused_unless_allowed_and_then_judged_in_it() {
    for allow in [false, true] {
        let mut b = TestDaemon::builder().env("CUBA_EXEC_BLOCKED_COMMANDS", "rm");
        if allow {
            b = b.env("CUBA_EXEC_NAMESPACES", "allow");
        }
        let d = b.start().await;
        let c = d.client().await;
        if !checking(&c, "exec checks in a namespace of the command's own").await {
            return;
        }
        let marker = d.dir().join("marker");
        let mounted = d.dir().join("innocent");
        std::fs::write(&marker, "keep").unwrap();
        std::fs::copy("/usr/bin/true", &mounted).unwrap();
        // In a new user and mount namespace, rm is bind-mounted over a harmless file's name,
        // which the daemon's own view still shows as the harmless file.
        let text = format!(
            "unshare -rm sh -c 'mount --bind /usr/bin/rm {t} && {t} {m}'; echo status=$?",
            t = mounted.display(),
            m = marker.display()
        );
        let (p, out) = ran(&c, &text).await;
        assert!(
            marker.exists(),
            "rm ran in the namespace (allow = {allow}): {out}"
        );
        let rules: Vec<&str> = p.blocked.iter().map(|b| b.rule.as_str()).collect();
        match allow {
            false => {
                assert_eq!(rules, ["namespaces"], "{out} {p:?}");
                assert!(p.blocked[0].message.contains("unshare"), "{p:?}");
            }
            true => assert!(
                p.blocked
                    .iter()
                    .any(|b| b.rule == "blocklist" && b.message.contains("the same file as `rm`")),
                "{out} {p:?}"
            ),
        }
        let status = c.status().step().await.unwrap();
        assert_eq!(
            status.exec_checks.contains("namespaces and mounts refused"),
            !allow,
            "{}",
            status.exec_checks
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execute_only_copy_the_daemon_cannot_read_is_refused() {
    if !machine::root() {
        return machine::skip(
            "an execute-only copy under an unprivileged daemon",
            "this test runs a daemon as nobody: it needs root",
        );
    }
    let user = (65534, 65534);
    let d = TestDaemon::builder().as_user(user.0, user.1).start().await;
    let dir = d.dir().join("work");
    std::fs::create_dir(&dir).unwrap();
    let copy = dir.join("quiet");
    let marker = dir.join("marker");
    std::fs::copy("/usr/bin/rm", &copy).unwrap();
    std::fs::write(&marker, "keep").unwrap();
    for p in [&dir, &copy, &marker] {
        std::os::unix::fs::chown(p, Some(user.0), Some(user.1)).unwrap();
    }
    // Runnable by its owner, readable by nobody: the daemon cannot hash it.
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o111)).unwrap();
    let out = d
        .cubactl(&[
            "run",
            "--",
            &format!("{} {}", copy.display(), marker.display()),
        ])
        .output()
        .step()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    let status = d
        .cubactl(&["daemon", "status"])
        .output()
        .step()
        .await
        .unwrap();
    if !String::from_utf8_lossy(&status.stdout).contains("exec checks on") {
        let s = String::from_utf8_lossy(&status.stdout).into_owned();
        return machine::skip(
            "an execute-only copy",
            &format!("exec checks are not on: {s}"),
        );
    }
    assert!(marker.exists(), "the copy ran: {said}");
    assert!(said.contains("cannot be told from a copy"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_won_by_an_exec_from_another_thread_is_killed_after_it() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_BLOCKED_COMMANDS", "run_b")
        .start()
        .await;
    let c = d.client().await;
    if !checking(&c, "exec checks: an exec from a second thread").await {
        return;
    }
    let dir = d.dir().join("race");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy("/bin/true", dir.join("run_a")).unwrap();
    std::fs::copy("/bin/sleep", dir.join("run_b")).unwrap();
    let racer = cuba_tests::bin("cuba-test-exec-racer");
    let text = format!(
        "cd {} && '{}' thread-exec {} {} 3 3000",
        dir.display(),
        racer.display(),
        dir.join("run_a").display(),
        dir.join("run_b").display()
    );
    let (p, out) = ran(&c, &text).await;
    assert_eq!(p.exit_code, Some(0), "a blocked program ran: {out}");
    assert!(out.contains("killed=3 ran=0"), "{out}");
    assert!(
        p.blocked
            .iter()
            .any(|b| b.killed && b.program.ends_with("/run_b")),
        "{:?}",
        p.blocked
    );
}

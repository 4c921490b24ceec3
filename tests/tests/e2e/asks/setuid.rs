//! Privileges by a person's approval: under a daemon of an ordinary user the exec checks set
//! `no_new_privs`, so a setuid program in a tree gains nothing. A command whose text runs
//! `sudo` is asked about before it starts (the question says what is given up); approved, that
//! one tree runs without the exec checks and the real `sudo -A` takes its password from
//! `cubactl answer`; denied, nothing runs. In the sandbox it is refused outright.

use cuba_tests::{machine, TestDaemon};

use super::cubactl;
use super::sudo::SudoUser;

const TEXT: &str = "sudo -A /usr/bin/true && echo sudo-ran; echo \"sudo $?\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sudo_under_exec_checks_is_asked_about_and_runs_once_approved() {
    let user = match SudoUser::make() {
        Ok(u) => u,
        Err(why) => return machine::skip("sudo asked about under exec checks", &why),
    };
    let d = TestDaemon::builder()
        .as_user(user.uid, user.gid)
        .start()
        .await;
    let (ok, status, said) = cubactl(&d, &["daemon", "status"], None).await;
    assert!(ok && status.contains("exec checks on"), "{status} {said}");

    // Asked first: held before it starts, with what approving gives up.
    let (ok, id, said) = cubactl(&d, &["start", TEXT], None).await;
    assert!(ok, "{said}\n{}", d.log());
    let id = id.trim().to_string();
    let (_, _, said) = cubactl(&d, &["wait", &id, "--timeout", "15s"], None).await;
    assert!(
        said.contains("awaits approval") || said.contains("approve"),
        "{said}"
    );
    let (ok, listed, _) = cubactl(&d, &["approvals", "--json"], None).await;
    assert!(ok && listed.contains("setuid: sudo"), "{listed}");
    assert!(listed.contains("without the exec checks"), "{listed}");
    let (ok, _, said) = cubactl(&d, &["approve", &id], None).await;
    assert!(ok, "{said}");
    // Approved, sudo runs for real and asks for its password through askpass.
    // The approval's launch follows the answer: a wait may still see the approval's end first.
    let mut said = String::new();
    for _ in 0..5 {
        said = cubactl(&d, &["wait", &id, "--timeout", "15s"], None)
            .await
            .2;
        if said.contains("asks for a password") {
            break;
        }
    }
    if !said.contains("asks for a password") {
        let (_, info, _) = cubactl(&d, &["info", &id, "--json"], None).await;
        let (_, out, _) = cubactl(&d, &["logs", &id], None).await;
        panic!("{said}\n{info}\n{out}");
    }
    let given = format!("{}\n", user.password);
    let (ok, _, said) = cubactl(&d, &["answer", &id], Some(&given)).await;
    assert!(ok, "{said}");
    let (_, _, said) = cubactl(&d, &["wait", &id, "--timeout", "15s"], None).await;
    assert!(said.contains("exited"), "{said}");
    let (_, out, _) = cubactl(&d, &["logs", &id], None).await;
    assert!(out.contains("sudo-ran") && out.contains("sudo 0"), "{out}");

    // Denied: it never runs.
    let (ok, id, said) = cubactl(&d, &["start", TEXT], None).await;
    assert!(ok, "{said}");
    let id = id.trim().to_string();
    let (_, _, _) = cubactl(&d, &["wait", &id, "--timeout", "15s"], None).await;
    let (ok, _, said) = cubactl(&d, &["deny", &id, "--reason", "not now"], None).await;
    assert!(ok, "{said}");
    let (_, info, _) = cubactl(&d, &["info", &id, "--json"], None).await;
    assert!(
        info.contains("denied") && info.contains("not now"),
        "{info}"
    );
    let (_, out, _) = cubactl(&d, &["logs", &id], None).await;
    assert!(!out.contains("sudo"), "{out}");

    // A command with no setuid program is not asked about.
    let (ok, out, said) = cubactl(&d, &["run", "--", "echo", "plain"], None).await;
    assert!(ok && out.contains("plain"), "{out} {said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sudo_in_the_sandbox_is_refused_with_the_reason() {
    let user = match SudoUser::make() {
        Ok(u) => u,
        Err(why) => return machine::skip("sudo refused in the sandbox", &why),
    };
    let work = tempfile::Builder::new()
        .prefix("cx-setuid-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::os::unix::fs::chown(work.path(), Some(user.uid), Some(user.gid)).unwrap();
    let d = TestDaemon::builder()
        .as_user(user.uid, user.gid)
        .env("CUBA_EXEC_SANDBOX", "workspace-write")
        .env("CUBA_EXEC_ALLOWED_DIRS", work.path().to_str().unwrap())
        .start()
        .await;
    let cwd = work.path().display().to_string();
    let (ok, _, said) = cubactl(&d, &["start", "--cwd", &cwd, TEXT], None).await;
    assert!(!ok, "refused before it starts: {said}");
    assert!(
        said.contains("setuid") && said.contains("sandbox"),
        "{said}"
    );
}

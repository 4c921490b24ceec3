//! Per-client policy: a client's own `CUBA_EXEC_*` policy variables (the environment in its
//! `Hello`) narrow the daemon's policy for that connection only and can never widen it; and a
//! connection made from inside a managed process tree (an agent's command running `cubactl`) is
//! held to the policy of the client that started the tree.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{ClientKind, ErrorKind, Request, Response, SpawnRequest, StreamFilter};
use cuba_tests::{
    bin, bounded, read_stream, spawn_req, spawn_with, text, wait_exit, wait_for, Step, TestDaemon,
    STEP,
};

/// A connection named `name` whose environment has no `CUBA_EXEC_*` variable but `vars`.
async fn client_with(d: &TestDaemon, name: &str, vars: &[(&str, &str)]) -> Client {
    cuba_tests::client_with(d, ClientKind::Other, name, vars).await
}

/// `command` with the daemon's socket in its environment and the blocklist variable it would
/// inherit from the agent cleared, so only the ancestry can hold a cubactl inside it to the
/// agent's policy.
fn reaching(d: &TestDaemon, command: &str) -> SpawnRequest {
    SpawnRequest {
        env: vec![
            ("CUBA_EXEC_SOCKET".into(), d.socket().into()),
            ("CUBA_EXEC_STATE_DIR".into(), d.state_dir().into()),
            ("CUBA_EXEC_BLOCKED_COMMANDS".into(), "".into()),
        ],
        ..spawn_req(command)
    }
}

fn in_dir(command: &str, cwd: &Path) -> SpawnRequest {
    SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..spawn_req(command)
    }
}

/// The error of a spawn the daemon must refuse with `BLOCKED`.
async fn blocked(c: &Client, req: SpawnRequest) -> String {
    let command = req.command.clone();
    let err: ClientError = c.spawn(req).step().await.expect_err(&command);
    assert_eq!(err.kind(), Some(ErrorKind::Blocked), "{command}: {err}");
    err.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_own_blocklist_applies_to_it_alone() {
    let d = TestDaemon::start().await;
    let narrow = client_with(&d, "narrow", &[("CUBA_EXEC_BLOCKED_COMMANDS", "curl")]).await;
    let plain = client_with(&d, "plain", &[]).await;

    let text = blocked(&narrow, spawn_req("echo a; curl x")).await;
    assert!(
        text.contains("blocklist") && text.contains("curl x"),
        "{text}"
    );
    assert!(
        text.contains("client policy") && text.contains("`narrow`"),
        "names whose rule tripped: {text}"
    );
    // Its list is added to the daemon's, not put in its place: `rm` stays blocked.
    let text = blocked(&narrow, spawn_req("rm -f nothing")).await;
    assert!(text.contains("daemon policy"), "{text}");

    match narrow
        .call(Request::PolicyCheck("ls | curl x".into()))
        .step()
        .await
    {
        Ok(Response::Policy(p)) => {
            assert!(!p.allowed);
            assert_eq!(p.rule.as_deref(), Some("blocklist"));
            assert_eq!(p.offending.as_deref(), Some("curl x"));
            assert!(p.message.contains("client policy"), "{}", p.message);
        }
        other => panic!("unexpected reply: {other:?}"),
    }

    // Another client is not narrowed by it.
    let p = spawn_with(
        &plain,
        spawn_req("curl --version >/dev/null 2>&1; echo ran"),
    )
    .await;
    let done = wait_exit(&plain, p.id).await;
    assert_eq!(cuba_tests::text(&done.output.bytes()), "ran\n");
    match plain
        .call(Request::PolicyCheck("curl x".into()))
        .step()
        .await
    {
        Ok(Response::Policy(p)) => assert!(p.allowed, "{p:?}"),
        other => panic!("unexpected reply: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_widen_the_daemons_policy() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    let work = base.join("work");
    let inner = work.join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_ALLOWED_DIRS", work.to_str().unwrap())
        .env("CUBA_EXEC_ALLOWED_COMMANDS", "echo,ls,true,rm")
        .env("CUBA_EXEC_BLOCKED_COMMANDS", "rm")
        .start()
        .await;

    // An empty blocklist, every directory, a longer allowlist: none of it widens anything.
    let wide = client_with(
        &d,
        "wide",
        &[
            ("CUBA_EXEC_BLOCKED_COMMANDS", ""),
            ("CUBA_EXEC_ALLOWED_DIRS", "/"),
            ("CUBA_EXEC_ALLOWED_COMMANDS", "echo,curl,rm"),
        ],
    )
    .await;
    let text = blocked(&wide, in_dir("rm -f nothing", &work)).await;
    assert!(
        text.contains("blocklist") && text.contains("daemon policy"),
        "{text}"
    );
    let text = blocked(&wide, in_dir("curl x", &work)).await;
    assert!(
        text.contains("allowlist") && text.contains("daemon policy"),
        "{text}"
    );
    let text = blocked(&wide, in_dir("echo hi", &base)).await;
    assert!(text.contains("allowed_dirs"), "{text}");
    // Its allowlist still narrows: `ls` is the daemon's but not the client's.
    let text = blocked(&wide, in_dir("ls", &work)).await;
    assert!(
        text.contains("allowlist") && text.contains("client policy"),
        "{text}"
    );
    let p = spawn_with(&wide, in_dir("echo ok", &work)).await;
    assert_eq!(wait_exit(&wide, p.id).await.process.exit_code, Some(0));

    // A root outside the daemon's allows nothing at all, not even inside the daemon's roots.
    let outside = client_with(
        &d,
        "outside",
        &[("CUBA_EXEC_ALLOWED_DIRS", base.to_str().unwrap())],
    )
    .await;
    let p = spawn_with(&outside, in_dir("echo ok", &work)).await;
    assert_eq!(wait_exit(&outside, p.id).await.process.exit_code, Some(0));
    let text = blocked(&outside, in_dir("echo hi", &base)).await;
    assert!(text.contains("allowed_dirs"), "{text}");
    let elsewhere = tempfile::tempdir().unwrap();
    let foreign = client_with(
        &d,
        "foreign",
        &[("CUBA_EXEC_ALLOWED_DIRS", elsewhere.path().to_str().unwrap())],
    )
    .await;
    let text = blocked(&foreign, in_dir("echo hi", &work)).await;
    assert!(
        text.contains("allowed_dirs") && text.contains("client policy"),
        "{text}"
    );
    let text = blocked(&foreign, in_dir("echo hi", elsewhere.path())).await;
    assert!(text.contains("allowed_dirs"), "{text}");

    // A client root inside the daemon's narrows to it.
    let deeper = client_with(
        &d,
        "deeper",
        &[("CUBA_EXEC_ALLOWED_DIRS", inner.to_str().unwrap())],
    )
    .await;
    let text = blocked(&deeper, in_dir("echo hi", &work)).await;
    assert!(
        text.contains("allowed_dirs") && text.contains("client policy"),
        "{text}"
    );
    let p = spawn_with(&deeper, in_dir("echo ok", &inner)).await;
    assert_eq!(wait_exit(&deeper, p.id).await.process.exit_code, Some(0));
}

/// `cubactl`, with no `CUBA_EXEC_*` setting of the test's own environment.
fn cubactl(d: &TestDaemon) -> Command {
    let mut cmd = Command::new(bin("cubactl"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CUBA_EXEC_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("CUBA_EXEC_SOCKET", d.socket())
        .env("CUBA_EXEC_STATE_DIR", d.state_dir());
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_inside_an_agents_process_is_held_to_the_agents_policy() {
    let d = TestDaemon::start().await;
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("from-inside");
    let agent = client_with(&d, "agent", &[("CUBA_EXEC_BLOCKED_COMMANDS", "touch")]).await;

    // The agent's command runs `cubactl start -- touch FILE`. The overlay clears the blocklist
    // variable the process would inherit from the agent's environment, so only the ancestry
    // (the marker the daemon plants) can hold the inner cubactl to the agent's policy.
    let command = format!(
        "{} start -- touch {}",
        bin("cubactl").display(),
        inside.display()
    );
    let req = reaching(&d, &command);
    let p = spawn_with(&agent, req).await;
    let done = wait_exit(&agent, p.id).await;
    let stderr = text(&read_stream(&agent, p.id, StreamFilter::Stderr).await);
    assert_ne!(done.process.exit_code, Some(0), "{stderr}");
    assert!(stderr.contains("BLOCKED"), "{stderr}");
    assert!(
        stderr.contains("touch") && stderr.contains("`agent`"),
        "names the agent's rule: {stderr}"
    );
    assert!(!inside.exists(), "the inner touch ran");
    let listed = agent.list(Default::default()).step().await.unwrap();
    assert_eq!(listed.len(), 1, "only the agent's command: {listed:?}");

    // Shedding the marker does not help: without it (`env -u`), in a session of its own
    // (`setsid -f`, reparented to the daemon), the inner cubactl is still refused. The agent's
    // command stays alive meanwhile (when it ends, the daemon stops what it left behind).
    let escaped = dir.path().join("escaped");
    let log = dir.path().join("escapee.log");
    let command = format!(
        "setsid -f env -u CUBA_EXEC_PROCESS {} start -- touch {} >{} 2>&1; sleep 60",
        bin("cubactl").display(),
        escaped.display(),
        log.display()
    );
    let req = reaching(&d, &command);
    spawn_with(&agent, req).await;
    let refused = || std::fs::read_to_string(&log).is_ok_and(|t| t.contains("BLOCKED"));
    assert!(
        wait_for(refused, Duration::from_secs(20)).await,
        "escapee: {:?}; daemon log:\n{}",
        std::fs::read_to_string(&log),
        d.log()
    );
    assert!(!escaped.exists(), "the escapee's touch ran");

    // The same command typed by a person (outside any managed tree) runs.
    let outside = dir.path().join("from-outside");
    let out = cubactl(&d)
        .args(["start", "--", "touch"])
        .arg(&outside)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        wait_for(|| outside.exists(), Duration::from_secs(20)).await,
        "touch from outside did not run: {out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_in_place_keeps_a_trees_policy() {
    let d = TestDaemon::start().await;
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("from-inside");
    let agent = client_with(&d, "agent", &[("CUBA_EXEC_BLOCKED_COMMANDS", "touch")]).await;
    // The inner cubactl runs only once the daemon has been upgraded (it waits for a line).
    let command = format!(
        "read go; {} start -- touch {}",
        bin("cubactl").display(),
        inside.display()
    );
    let req = reaching(&d, &command);
    let p = spawn_with(&agent, req).await;
    let up = bounded(
        "cubactl daemon upgrade",
        STEP,
        d.cubactl(&["daemon", "upgrade"]).output(),
    )
    .await
    .unwrap();
    assert!(up.status.success(), "{}", text(&up.stderr));
    let agent = client_with(&d, "agent", &[("CUBA_EXEC_BLOCKED_COMMANDS", "touch")]).await;
    agent
        .stdin(p.id, b"go\n".to_vec(), true)
        .step()
        .await
        .unwrap();
    let done = wait_exit(&agent, p.id).await;
    let stderr = text(&read_stream(&agent, p.id, StreamFilter::Stderr).await);
    assert_ne!(done.process.exit_code, Some(0), "{stderr}");
    assert!(stderr.contains("BLOCKED"), "{stderr}");
    assert!(!inside.exists(), "the inner touch ran after the upgrade");
}

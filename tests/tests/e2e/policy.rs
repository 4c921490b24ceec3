//! The command policy end to end: a real `cubad` refuses a blocked command and a cwd outside
//! the allowed directories with `BLOCKED`, keeps serving, writes the audit log, and
//! `cubactl policy check` explains a decision.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use cuba_protocol::{ErrorKind, Request, Response, SpawnRequest};
use cuba_tests::{bin, spawn_req, spawn_with, wait_exit, Step, TestDaemon};

fn in_dir(command: &str, cwd: &std::path::Path) -> SpawnRequest {
    SpawnRequest {
        cwd: Some(cwd.as_os_str().to_owned()),
        ..spawn_req(command)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_commands_and_foreign_dirs_are_refused_and_the_daemon_keeps_serving() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_ALLOWED_DIRS", root_path.to_str().unwrap())
        .start()
        .await;
    let c = d.client().await;

    let err = c
        .spawn(in_dir("echo ok && sudo rm -rf /tmp/x", &root_path))
        .step()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::Blocked), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("BLOCKED") && text.contains("blocklist"),
        "{text}"
    );
    assert!(
        text.contains("rm -rf /tmp/x"),
        "names the sub-command: {text}"
    );

    let err = c
        .spawn(in_dir("echo fine", std::path::Path::new("/")))
        .step()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::Blocked), "{err}");
    assert!(err.to_string().contains("allowed_dirs"), "{err}");

    // Still serving: an allowed command inside the root runs.
    let p = spawn_with(&c, in_dir("echo fine", &root_path)).await;
    let done = wait_exit(&c, p.id).await;
    assert_eq!(done.process.exit_code, Some(0));
    let listed = c.list(Default::default()).step().await.unwrap();
    assert_eq!(listed.len(), 1, "refusals leave no record: {listed:?}");

    match c
        .call(Request::PolicyCheck("ls | xargs rm".into()))
        .step()
        .await
    {
        Ok(Response::Policy(p)) => {
            assert!(!p.allowed);
            assert_eq!(p.rule.as_deref(), Some("blocklist"));
            assert_eq!(p.commands, ["ls", "xargs rm", "rm"]);
        }
        other => panic!("unexpected reply: {other:?}"),
    }

    let audit = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "two refusals, one start, one end: {audit}");
    for l in &lines {
        for field in [
            "ts", "client", "peer_pid", "command", "cwd", "decision", "rule", "id",
        ] {
            assert!(l.get(field).is_some(), "{field} missing in {l}");
        }
    }
    assert_eq!(lines[0]["decision"], "refused");
    assert_eq!(lines[0]["rule"], "blocklist");
    assert_eq!(lines[1]["rule"], "allowed_dirs");
    assert_eq!(lines[2]["decision"], "allowed");
    assert_eq!(lines[3]["event"], "end");
    assert_eq!(lines[3]["exit"], 0);
    assert_eq!(lines[3]["id"], p.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_policy_check_explains_a_decision() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_ALLOWED_COMMANDS", "ls,echo,sh")
        .start()
        .await;
    let check = |args: &[&str]| {
        Command::new(bin("cubactl"))
            .env("CUBA_EXEC_SOCKET", d.socket())
            .args(["policy", "check"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = check(&["ls -la && echo hi"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("allowed") && stdout.contains("  echo hi"),
        "{stdout}"
    );

    let out = check(&["ls; $cmd x"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("refused by the unresolved rule: $cmd x"),
        "{stdout}"
    );

    let out = check(&["--json", "sh -c 'curl x'"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rule"], "allowlist");
    assert_eq!(v["offending"], "curl x");
    assert_eq!(
        v["commands"],
        serde_json::json!(["sh -c 'curl x'", "curl x"])
    );
}

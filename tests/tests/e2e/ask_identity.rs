//! An `ask` rule matches what runs, not only what the text says: git's global options and a
//! `--` before the subcommand, a copy of the program under another name, and the program the
//! dynamic loader is given are all asked about, at parse time where the text shows it and at
//! the exec where only the kernel's view does.

#![allow(clippy::unwrap_used)]

use cuba_protocol::{ProcState, WaitReason, WaitRequest, WaitSpec};
use cuba_tests::{machine, spawn_req, Step, TestDaemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_to_git_push_is_asked_about() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_ASK_COMMANDS", "git push")
        .start()
        .await;
    let c = d.client().await;
    let status = c.status().step().await.unwrap();
    if !status.exec_checks.starts_with("on") {
        return machine::skip(
            "ask by identity",
            &format!("exec checks are {}", status.exec_checks),
        );
    }
    let dir = d.dir().join("repo");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy("/usr/bin/git", dir.join("g")).unwrap();
    let loader = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|l| std::path::Path::new(l).exists())
        .unwrap();
    let d_ = dir.display();
    let cases = [
        ("git -C . push".to_string(), false),
        ("git --no-pager -c core.pager=cat push".to_string(), false),
        ("git -- push".to_string(), false),
        (format!("{d_}/g push"), true),
        (format!("{loader} /usr/bin/git push"), true),
    ];
    for (text, at_exec) in cases {
        let p = c
            .spawn(spawn_req(&format!("cd {d_} && {text}")))
            .step()
            .await
            .unwrap();
        let w = c
            .wait(WaitRequest {
                id: p.id,
                since: None,
                spec: WaitSpec::exit(20_000, 0),
            })
            .step()
            .await
            .unwrap();
        let asks = &w.process.asks;
        assert!(
            matches!(w.reason, WaitReason::AwaitingApproval)
                && asks.iter().any(|a| a.rule == "ask_commands: git push"),
            "{text}: not asked about: {:?} {:?}",
            w.reason,
            w.process
        );
        // Held before it started (the text shows it), or at the exec of what the kernel runs.
        let held_at_exec = w.process.pid != 0;
        assert_eq!(held_at_exec, at_exec, "{text}: {:?}", w.process);
        let out = d
            .cubactl(&["deny", &p.id.to_string()])
            .output()
            .step()
            .await;
        assert!(out.unwrap().status.success());
        let done = cuba_tests::wait_exit(&c, p.id).await.process;
        assert_ne!(done.state, ProcState::AwaitingApproval);
    }
}

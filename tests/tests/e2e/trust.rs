//! The trust boundary's control verbs, attacked from inside a command the daemon runs: the
//! daemon's upgrade, restart, stop and reload, tokens and the HTTP endpoint are a person's, so
//! a command (and anything it starts, however it detaches) is refused, with the rule named and
//! an audit line; nothing a command wrote is ever run as the daemon, even when a person asks
//! for it; and a hand edit of the approvals or the tokens counts only once a person reloads.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cuba_protocol::client::Client;
use cuba_tests::http::HttpServer;
use cuba_tests::{read_all, spawn_req, wait_exit, Step, TestDaemon};
use serde_json::json;

/// Runs `text` as a command of `c` (an agent's) and returns everything it printed.
async fn inside(c: &Client, text: &str) -> String {
    let p = c.spawn(spawn_req(text)).step().await.unwrap();
    wait_exit(c, p.id).await;
    String::from_utf8_lossy(&read_all(c, p.id).await).into_owned()
}

/// `cubactl` as a command line aimed at `d`.
fn cubactl(d: &TestDaemon) -> String {
    format!(
        "'{}' --socket '{}'",
        cuba_tests::bin("cubactl").display(),
        d.socket().display()
    )
}

/// A script that says it is cubad (answers `--handover-version`) and leaves `marker` when run.
fn fake_daemon(path: &Path, marker: &Path) {
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\ntouch '{}'\n[ \"$1\" = --handover-version ] && echo 7 8 9 10 11\nexit 0\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn control_lines(d: &TestDaemon) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["event"] == "control")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_upgrade_restart_stop_or_reload_the_daemon() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let before = c.status().step().await.unwrap();
    let evil = d.dir().join("evil-cubad");
    let marker = d.dir().join("evil-ran");
    let ctl = cubactl(&d);
    // The script is written by the command itself, then offered as the new daemon: directly,
    // and from a double fork that left the tree's session with its environment cleared.
    let said = inside(
        &c,
        &format!(
            "cp /bin/sh {e}; printf '#!/bin/sh\\ntouch {m}\\necho 7 8 9 10 11\\n' > {e}; \
             {ctl} daemon upgrade --binary {e} 2>&1; {ctl} daemon restart 2>&1; \
             {ctl} daemon stop --force 2>&1; {ctl} daemon reload 2>&1; \
             (setsid env -i {ctl} daemon upgrade --binary {e} > {d}/detached.txt 2>&1 &); \
             sleep 0.1; while [ ! -s {d}/detached.txt ]; do sleep 0.05; done; cat {d}/detached.txt",
            m = marker.display(),
            e = evil.display(),
            d = d.dir().display(),
        ),
    )
    .await;
    for what in [
        "only a person can upgrade or restart the daemon (rule person_only)",
        "only a person can stop the daemon",
        "only a person can reload the daemon's approvals and tokens",
    ] {
        assert!(said.contains(what), "{what}: {said}");
    }
    assert_eq!(said.matches("upgrade or restart").count(), 3, "{said}");
    assert!(!marker.exists(), "the command's program ran as the daemon");
    let after = c.status().step().await.unwrap();
    assert_eq!((after.pid, after.upgrades), (before.pid, before.upgrades));
    let refused: Vec<_> = control_lines(&d)
        .into_iter()
        .filter(|l| l["decision"] == "refused" && l["rule"] == "person_only")
        .map(|l| l["command"].as_str().unwrap_or_default().to_string())
        .collect();
    for verb in ["daemon upgrade", "daemon stop", "daemon reload"] {
        assert!(refused.iter().any(|v| v == verb), "{verb}: {refused:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_runs_only_a_program_no_command_could_have_written() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let before = c.status().step().await.unwrap();
    let marker = d.dir().join("ran");
    // Asked by a person, from outside: a file others may write, and one owned by another user
    // (as a command of a non-root daemon would own what it wrote), are refused unrun.
    let open = d.dir().join("open-cubad");
    fake_daemon(&open, &marker);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let owned = d.dir().join("owned-cubad");
    fake_daemon(&owned, &marker);
    std::os::unix::fs::chown(&owned, Some(65534), Some(65534)).unwrap();
    for file in [&open, &owned] {
        let out = d
            .cubactl(&["daemon", "upgrade", "--binary", file.to_str().unwrap()])
            .output()
            .step()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains("could have written it") && err.contains("carries on"),
            "{err}"
        );
    }
    assert!(!marker.exists(), "a refused binary was run");
    let after = c.status().step().await.unwrap();
    assert_eq!((after.pid, after.upgrades), (before.pid, before.upgrades));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edit_of_the_approvals_counts_only_once_a_person_reloads() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_ASK_COMMANDS", "touch *")
        .start()
        .await;
    let c = d.client().await;
    let approvals = d.dir().join("approvals.toml");
    let marker = d.dir().join("touched");
    // The agent writes itself an approval of the rule, then runs what it approved.
    let said = inside(
        &c,
        &format!(
            "printf '[[approval]]\\nrule = \"ask_commands: touch *\"\\n' > {}; \
             {} daemon reload 2>&1",
            approvals.display(),
            cubactl(&d)
        ),
    )
    .await;
    assert!(said.contains("only a person can reload"), "{said}");
    let p = c
        .spawn(spawn_req(&format!("touch {}", marker.display())))
        .step()
        .await
        .unwrap();
    assert_eq!(p.state, cuba_protocol::ProcState::AwaitingApproval, "{p:?}");
    // The person sees the edit waiting, and can put it in effect.
    let out = d.cubactl(&["approvals"]).output().step().await.unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("edited, not in effect") && listed.contains("+ approval ask_commands"),
        "{listed}"
    );
    let out = d
        .cubactl(&["deny", &p.id.to_string()])
        .output()
        .step()
        .await;
    assert!(out.unwrap().status.success());
    let out = d
        .cubactl(&["daemon", "reload"])
        .output()
        .step()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("+ approval ask_commands: touch * anywhere"),
        "{said}"
    );
    let p = c
        .spawn(spawn_req(&format!("touch {}", marker.display())))
        .step()
        .await
        .unwrap();
    assert_ne!(p.state, cuba_protocol::ProcState::AwaitingApproval);
    wait_exit(&c, p.id).await;
    assert!(marker.exists());
    assert!(control_lines(&d)
        .iter()
        .any(|l| l["command"] == "daemon reload" && l["decision"] == "allowed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_can_neither_mint_a_token_nor_forge_one_into_the_file() {
    let d = TestDaemon::start().await;
    let s = HttpServer::start(&d, "", "").await;
    let c = d.client().await;
    let tokens = s.tokens_file().to_path_buf();
    let ctl = cubactl(&d);
    let said = inside(
        &c,
        &format!(
            "CUBA_EXEC_TOKENS={t} {ctl} token create mine 2>&1; \
             CUBA_EXEC_STATE_DIR={s} {ctl} http stop 2>&1; {ctl} http start 2>&1",
            t = tokens.display(),
            s = s.state_dir().display()
        ),
    )
    .await;
    assert!(said.contains("only a person can make a token"), "{said}");
    assert!(
        said.contains("only a person can stop the HTTP endpoint"),
        "{said}"
    );
    assert!(
        said.contains("only a person can start the HTTP endpoint"),
        "{said}"
    );
    assert!(!tokens.exists(), "no token was made");
    // A token written into the file by hand, as cubactl used to write it.
    let forged = "cubatok_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let hash = cuba_protocol::tokens::hash(forged);
    let said = inside(
        &c,
        &format!(
            "printf '[tokens.mine]\\nhash = \"{hash}\"\\ncreated = 1\\n' > {}; echo written",
            tokens.display()
        ),
    )
    .await;
    assert!(said.contains("written"), "{said}");
    let r = s.rpc(forged, None, "ping", json!({})).await;
    assert_eq!(r.status, 401, "a forged token was let in: {r:?}");
    // The endpoint is still the person's: stopped by a person only.
    let mut status = s.command(&cuba_tests::bin("cubactl"));
    let out = status
        .args(["http", "status"])
        .output()
        .step()
        .await
        .unwrap();
    assert!(out.status.success(), "the endpoint was stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_never_lands_in_the_working_directory() {
    // Settings of /dev/null, no tokens file named, no home to find the settings directory by.
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_TOKENS", "")
        .env("HOME", "")
        .env("XDG_CONFIG_HOME", "")
        .start()
        .await;
    let here = tempfile::tempdir().unwrap();
    let mut create = d.cubactl(&["token", "create", "laptop"]);
    create
        .current_dir(here.path())
        .env("CUBA_EXEC_CONFIG", "/dev/null");
    let out = cuba_tests::bounded("cubactl token create", cuba_tests::STEP, create.output())
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let daemon_cwd = std::fs::read_link(format!("/proc/{}/cwd", d.pid())).unwrap();
    for dir in [here.path(), daemon_cwd.as_path()] {
        assert!(
            !dir.join("tokens.toml").exists(),
            "a tokens file in a working directory: {}",
            dir.display()
        );
    }
    let file = d.state_dir().join("tokens.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("[tokens.laptop]"), "{text}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", file.display());
}

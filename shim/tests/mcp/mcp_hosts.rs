//! Hosts through MCP, end to end: the real `cuba-exec` binary reaching a second daemon through
//! a real `sshd` and `cubactl bridge`, as it reaches another machine.

use crate::common;

use std::time::Duration;

use common::hosts::{Hosts, LAPTOP_MARK, REMOTE_MARK, REMOTE_SECRET};
use common::mcp::reply_of;
use common::{wait_for, STEP};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_command_runs_in_the_remote_environment_and_cwd() {
    let mut w = Hosts::new().await;
    // The editor's narrowing: the remote daemon itself blocks nothing.
    let c = w
        .shim("agent", &[("CUBA_EXEC_BLOCKED_COMMANDS", "wget")])
        .await;
    let command = format!(
        "echo hi; pwd; echo ${}; echo ${{{}:-unset}}; echo ${}",
        REMOTE_MARK.0, LAPTOP_MARK.0, REMOTE_SECRET.0
    );
    let r = c
        .call("run", json!({ "command": command, "host": "box" }))
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert!(r.text().starts_with("[id:"), "{}", r.text());
    assert!(
        r.text().contains(" host:box "),
        "the header names the host: {}",
        r.text()
    );
    assert_eq!(r.sc()["host"], "box");
    let lines: Vec<&str> = r.output().lines().collect();
    let work = w.work.canonicalize().expect("the work dir");
    assert_eq!(
        lines[..4],
        ["hi", work.to_str().unwrap_or("?"), REMOTE_MARK.1, "unset"]
    );
    assert_eq!(
        lines[4], "[REDACTED]",
        "the remote secret is hidden: {lines:?}"
    );
    assert!(!r.text().contains(REMOTE_SECRET.1));
    // A relative cwd starts at the host's directory.
    std::fs::create_dir_all(w.work.join("sub")).expect("sub dir");
    let r = c
        .call(
            "run",
            json!({ "command": "pwd", "cwd": "sub", "host": "box" }),
        )
        .await;
    assert_eq!(r.output().trim(), work.join("sub").to_str().unwrap_or("?"));
    let r = c
        .call(
            "run",
            json!({ "command": "wget http://example.invalid/", "host": "box" }),
        )
        .await;
    assert_eq!(
        r.code(),
        Some("BLOCKED"),
        "narrowed there too: {}",
        r.text()
    );
    // The remote side sees who started its processes, and from where.
    let rows = c.rows(json!({ "host": "box" })).await;
    let owner = rows[0]["owner"].as_str().unwrap_or("");
    assert!(owner.starts_with("agent@"), "{rows:?}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_input_wait_status_list_and_kill_on_a_remote_host() {
    let mut w = Hosts::new().await;
    let c = w.shim("agent", &[]).await;
    let r = c
        .call(
            "start",
            json!({ "command": "echo ready; read x; echo got-$x; exec sleep 300", "host": "box" }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let id = r.id();
    assert!(r.sc()["hint"]
        .as_str()
        .unwrap_or("")
        .contains("(host=\"box\", id="));
    // The process is the remote daemon's: its table has it, this machine's has not.
    assert!(wait_for(|| !w.remote.marked(id).is_empty(), STEP).await);
    let rows = c.rows(json!({ "host": "box" })).await;
    assert!(
        rows.iter().any(|r| r["id"] == id && r["host"] == "box"),
        "{rows:?}"
    );
    let local = c.rows(json!({})).await;
    assert!(local.iter().all(|r| r["host"].is_null()), "{local:?}");
    let r = c
        .call("wait", json!({ "id": id, "until": "ready", "host": "box" }))
        .await;
    assert_eq!(r.str("wait"), "matched", "{}", r.text());
    let r = c
        .call(
            "send_input",
            json!({ "id": id, "text": "yes\n", "host": "box" }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let r = c
        .call("wait", json!({ "id": id, "until": "got-", "host": "box" }))
        .await;
    assert!(r.output().contains("got-yes"), "{}", r.text());
    let r = c.call("status", json!({ "id": id, "host": "box" })).await;
    assert_eq!(r.state(), "running", "{}", r.text());
    // The id means another process (or none) here.
    let here = c.call("status", json!({ "id": id })).await;
    assert!(
        here.is_error() && !here.text().contains("got-yes"),
        "{}",
        here.text()
    );
    let r = c
        .call("send_signal", json!({ "id": id, "host": "box" }))
        .await;
    assert_eq!(r.state(), "killed", "{}", r.text());
    assert!(wait_for(|| w.remote.marked(id).is_empty(), STEP).await);
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_tree_is_killed_whole() {
    let mut w = Hosts::new().await;
    let c = w.shim("agent", &[]).await;
    let r = c
        .call(
            "start",
            json!({ "command": "sleep 300 & sleep 300 & echo up; wait", "host": "box" }),
        )
        .await;
    let id = r.id();
    let r = c
        .call("wait", json!({ "id": id, "until": "up", "host": "box" }))
        .await;
    assert_eq!(r.str("wait"), "matched", "{}", r.text());
    assert!(wait_for(|| w.remote.marked(id).len() >= 3, STEP).await);
    let r = c
        .call(
            "send_signal",
            json!({ "id": id, "signal": "SIGKILL", "host": "box" }),
        )
        .await;
    assert!(!r.is_error() || r.state() == "killed", "{}", r.text());
    assert!(
        wait_for(|| w.remote.marked(id).is_empty(), STEP).await,
        "left on the remote: {:?}",
        w.remote.marked(id)
    );
    c.close().await;
}

/// The ssh link dies while a wait is under way: the wait goes on over a new link from the same
/// cursor, and the output read across the drop is every byte once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_ssh_mid_wait_loses_and_repeats_nothing() {
    let mut w = Hosts::new().await;
    let c = w.shim("agent", &[]).await;
    // It goes on once the test says so with a file: not by reading stdin, which would end
    // the wait at once (waiting for input).
    let go = w.work.join("go");
    let command = format!(
        "echo ready; while [ ! -e {} ]; do sleep 0.02; done; i=0; while [ $i -lt 200 ]; do \
         echo line-$i; i=$((i+1)); done; echo done",
        go.display()
    );
    let r = c
        .call("start", json!({ "command": command, "host": "box" }))
        .await;
    let id = r.id();
    let first = c
        .call("wait", json!({ "id": id, "until": "ready", "host": "box" }))
        .await;
    assert_eq!(first.output(), "ready\n", "{}", first.text());
    let since = first.u64("next");
    let pending = c
        .send_call(
            "wait",
            json!({ "id": id, "since": since, "until": "^done", "host": "box", "timeout_ms": 30000 }),
        )
        .await;
    // The process waits for the file, so the wait cannot end before the link is cut.
    let ssh = w.ssh_clients();
    assert_eq!(ssh.len(), 1, "one ssh client for box: {ssh:?}");
    cuba_tests::procfs::kill9(ssh[0]);
    assert!(wait_for(|| !cuba_tests::pid_alive(ssh[0]), STEP).await);
    std::fs::write(&go, "").expect("the go file");
    let r = reply_of(pending, STEP).await;
    assert_eq!(r.str("wait"), "matched", "{}", r.text());
    let mut want = String::new();
    for i in 0..200 {
        want.push_str(&format!("line-{i}\n"));
    }
    want.push_str("done\n");
    assert_eq!(r.output(), want, "the output after the cursor, once");
    let all = c
        .call("status", json!({ "id": id, "since": 0, "host": "box" }))
        .await;
    assert_eq!(all.output(), format!("ready\n{want}"));
    let now = w.ssh_clients();
    assert!(now.len() == 1 && now[0] != ssh[0], "a new link: {now:?}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_hosts_reports_a_dead_host_quickly_and_the_good_ones_unaffected() {
    let mut w = Hosts::new().await;
    let c = w.shim("agent", &[]).await;
    // The bound is the test: a dead host may not hold the listing up.
    let r = c
        .call_within("list_hosts", json!({}), Duration::from_secs(15))
        .await;
    let hosts = r.sc()["hosts"].as_array().expect("hosts").clone();
    let names: Vec<&str> = hosts.iter().filter_map(|h| h["host"].as_str()).collect();
    assert_eq!(names, ["local", "box", "down"], "{}", r.text());
    for h in &hosts[..2] {
        assert_eq!(h["reachable"], true, "{h}");
        assert_eq!(h["version"], cuba_protocol::VERSION, "{h}");
        let os = format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH);
        assert_eq!(h["os"], os.as_str(), "{h}");
        assert_eq!(h["shell"], "/bin/sh", "{h}");
    }
    let down = &hosts[2];
    assert_eq!(down["reachable"], false, "{down}");
    let error = down["error"].as_str().unwrap_or("");
    assert!(
        error.contains("cannot reach it") && error.contains("Connection refused"),
        "ssh's own reason: {error}"
    );
    // Every host's processes in one list; the dead host named, not fatal.
    let r = c
        .call("start", json!({ "command": "sleep 300", "host": "box" }))
        .await;
    let remote_id = r.id();
    let r = c.call("start", json!({ "command": "sleep 301" })).await;
    let local_id = r.id();
    let all = c.call("list_processes", json!({ "host": "*" })).await;
    assert!(!all.is_error(), "{}", all.text());
    let rows = all.sc()["processes"].as_array().expect("rows").clone();
    assert!(
        rows.iter()
            .any(|r| r["host"] == "box" && r["id"] == remote_id),
        "{rows:?}"
    );
    assert!(
        rows.iter()
            .any(|r| r["host"] == "local" && r["id"] == local_id),
        "{rows:?}"
    );
    assert_eq!(all.sc()["unreachable"][0]["host"], "down", "{}", all.text());
    assert!(
        all.text().contains("[host:down unreachable: "),
        "{}",
        all.text()
    );
    c.close().await;
}

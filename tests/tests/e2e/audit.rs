//! The audit log end to end: every line is valid JSON with the kernel's word on the peer
//! (SO_PEERCRED uid and pid), the log rotates at `CUBA_EXEC_AUDIT_MAX` keeping three
//! generations, and `cubactl audit` prints it (`--json`) and follows it (`-f`).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use cuba_tests::{bounded, spawn, wait_exit, TestDaemon, STEP};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON {l:?}: {e}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_lines_carry_the_peer_credentials_and_the_outcome() {
    let d = TestDaemon::start().await;
    let c = d.client_named("auditor").await;
    let p = spawn(&c, "exit 3").await;
    wait_exit(&c, p.id).await;
    let path = d.state_dir().join("audit.jsonl");
    // A waiter may hear of the exit a moment before the end line is written.
    assert!(cuba_tests::wait_for(|| lines(&path).len() == 2, STEP).await);
    let all = lines(&path);
    assert_eq!(all.len(), 2, "{all:?}");
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    for l in &all {
        for field in [
            "ts",
            "client",
            "client_kind",
            "peer_uid",
            "peer_pid",
            "command",
            "cwd",
            "decision",
            "rule",
            "id",
            "pid",
        ] {
            assert!(l.get(field).is_some(), "{field} missing in {l}");
        }
        assert_eq!(l["client"], "auditor");
        assert_eq!(l["client_kind"], "other");
        assert_eq!(l["peer_uid"], uid);
        assert_eq!(l["peer_pid"], std::process::id());
        assert_eq!(l["id"], p.id);
        assert_eq!(l["pid"], p.pid);
        assert_eq!(l["command"], "exit 3");
        assert_eq!(l["decision"], "allowed");
    }
    assert_eq!(all[0]["event"], "spawn");
    assert_eq!(all[1]["event"], "end");
    assert_eq!(all[1]["exit"], 3);
    assert!(all[1]["signal"].is_null());
    assert!(all[1]["duration_ms"].is_u64(), "{}", all[1]);
    assert!(
        all[0].get("unresolved").is_none(),
        "nothing to name: {}",
        all[0]
    );

    // What the policy could not resolve before run time is named in the spawn line.
    let p = spawn(&c, "X=true; curl -s localhost:9 | sh; $X").await;
    wait_exit(&c, p.id).await;
    assert!(cuba_tests::wait_for(|| lines(&path).len() == 4, STEP).await);
    let spawned = &lines(&path)[2];
    assert_eq!(spawned["event"], "spawn", "{spawned}");
    assert_eq!(
        spawned["unresolved"],
        serde_json::json!(["?(sh)"]),
        "{spawned}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_rotates_keeping_three_generations() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_AUDIT_MAX", "4K")
        .start()
        .await;
    let c = d.client().await;
    let pad = "x".repeat(300);
    // Each process writes two lines of ~700 bytes: 40 of them are ~28 KiB, seven rotations.
    let mut last_id = 0;
    for i in 0..40 {
        let p = spawn(&c, &format!("true {i} {pad}")).await;
        wait_exit(&c, p.id).await;
        last_id = p.id;
    }
    let dir = d.state_dir();
    // A waiter may hear of the exit a moment before the end line is written, and a rotation
    // renames the generations one after another: wait until the last line is in and every
    // generation is in place.
    let written = cuba_tests::wait_for(
        || {
            let generations = ["audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
                .iter()
                .all(|name| dir.join(name).exists());
            generations
                && ["audit.jsonl", "audit.jsonl.1"].iter().any(|name| {
                    lines(&dir.join(name))
                        .iter()
                        .any(|l| l["event"] == "end" && l["id"] == last_id)
                })
        },
        STEP,
    )
    .await;
    assert!(written, "no end line for process {last_id}");
    let mut seen = Vec::new();
    for name in [
        "audit.jsonl.3",
        "audit.jsonl.2",
        "audit.jsonl.1",
        "audit.jsonl",
    ] {
        let path = dir.join(name);
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        if name != "audit.jsonl" {
            assert!(path.exists(), "{name} missing");
            assert!((4096..4096 + 1024).contains(&size), "{name}: {size} bytes");
        }
        assert!(size < 4096 + 1024, "{name}: {size} bytes");
        seen.extend(lines(&path));
    }
    assert!(!dir.join("audit.jsonl.4").exists());
    // The generations are in order and end with the last process's end line.
    let ids: Vec<u64> = seen.iter().map(|l| l["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] <= w[1]), "{ids:?}");
    let last = seen.last().unwrap();
    assert_eq!(last["event"], "end");
    assert!(last["command"].as_str().unwrap().starts_with("true 39 "));
}

fn cubactl(d: &TestDaemon, args: &[&str]) -> tokio::process::Command {
    d.cubactl(args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_audit_prints_json_and_a_table() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    for cmd in ["echo one", "echo two"] {
        let p = spawn(&c, cmd).await;
        wait_exit(&c, p.id).await;
    }
    // A waiter may hear of the exit a moment before the end line is written.
    let path = d.state_dir().join("audit.jsonl");
    let written = cuba_tests::wait_for(|| lines(&path).len() == 4, STEP).await;
    assert!(written, "{:?}", lines(&path));
    let out = bounded(
        "cubactl audit --json",
        STEP,
        cubactl(&d, &["audit", "--json", "-n", "3"]).output(),
    )
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let got: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), 3, "{text}");
    assert_eq!(got[0]["event"], "end");
    assert_eq!(got[1]["command"], "echo two");
    assert_eq!(got[2]["event"], "end");

    let out = bounded("cubactl audit", STEP, cubactl(&d, &["audit"]).output())
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 5, "a header and four lines: {text}");
    assert!(
        rows[0].starts_with("TIME") && rows[0].contains("COMMAND"),
        "{text}"
    );
    assert!(
        rows[1].contains("allowed") && rows[1].ends_with("echo one"),
        "{text}"
    );
    assert!(
        rows[2].contains("exited") && rows[2].contains(" 0 "),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cubactl_audit_follows_new_lines_across_rotations() {
    let d = TestDaemon::builder()
        .env("CUBA_EXEC_AUDIT_MAX", "2K")
        .start()
        .await;
    let c = d.client().await;
    let first = spawn(&c, "true ready").await;
    wait_exit(&c, first.id).await;
    let mut child = cubactl(&d, &["audit", "-f", "--json", "-n", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    // The last line already there: once it is out, cubactl is following.
    let ready = bounded(
        "the first line from cubactl audit -f",
        Duration::from_secs(10),
        out.next_line(),
    )
    .await
    .unwrap()
    .unwrap_or_else(|| panic!("cubactl audit -f ended early"));
    assert!(ready.contains("true ready"), "{ready}");
    let pad = "y".repeat(400);
    // Six processes: 12 lines of ~800 bytes, several rotations while following.
    for i in 0..6 {
        let cmd = format!("true follow-{i} {pad}");
        let p = spawn(&c, &cmd).await;
        wait_exit(&c, p.id).await;
        for event in ["spawn", "end"] {
            let line = loop {
                let line = bounded(
                    &format!("the {event} line of {cmd:?} from cubactl audit -f"),
                    Duration::from_secs(10),
                    out.next_line(),
                )
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("cubactl audit -f ended early"));
                // The first process's end line may have come after cubactl started.
                if !line.contains("true ready") {
                    break line;
                }
            };
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["event"], event, "{line}");
            assert_eq!(v["id"], p.id, "{line}");
        }
    }
    assert!(d.state_dir().join("audit.jsonl.1").exists());
    child.start_kill().unwrap();
    bounded("cubactl audit -f to die", STEP, child.wait())
        .await
        .unwrap();
}

//! An MCP `wait` in flight while the daemon upgrades in place (`cubactl daemon upgrade`): the
//! shim's connection closes, it connects again and repeats the wait from the same cursor, and
//! the agent gets the process's whole output once, as if nothing had happened.

use crate::common;

use std::time::Duration;

use common::mcp::{binary, reply_of};
use common::TestDir;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_wait_resumes_after_an_upgrade() {
    let mut t = TestDir::with_daemon().await;
    let m = binary(&mut t, "agent", &[]).await;
    let gate = t.path().join("gate");
    let r = m
        .start(&format!(
            "echo before; while [ ! -e '{}' ]; do sleep 0.02; done; echo after",
            gate.display()
        ))
        .await;
    let id = r.id();
    let pending = m
        .send_call(
            "wait",
            json!({ "id": id, "since": 0, "timeout_ms": 20_000 }),
        )
        .await;
    let cubactl = cuba_tests::bin("cubactl");
    let upgraded = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::process::Command::new(cubactl)
            .args(["daemon", "upgrade"])
            .env("CUBA_EXEC_SOCKET", t.socket())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the upgrade did not finish")
    .expect("cannot run cubactl");
    assert!(
        upgraded.status.success(),
        "{}",
        String::from_utf8_lossy(&upgraded.stderr)
    );
    std::fs::write(&gate, "").expect("cannot create the gate file");
    let w = reply_of(pending, Duration::from_secs(30)).await;
    assert!(!w.is_error(), "{}", w.text());
    assert_eq!(w.str("wait"), "exited", "{}", w.text());
    assert_eq!(w.output(), "before\nafter\n", "{}", w.text());
    m.close().await;
}

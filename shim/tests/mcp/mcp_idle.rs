//! A daemon that closes idle connections (`CUBA_EXEC_IDLE_TIMEOUT`): the MCP server connects
//! again by itself, and a command sent just as the daemon gave the connection up is sent again
//! (the daemon's notice says it was never read), never reported as "may have run", never run
//! twice.

use crate::common;

use std::time::Duration;

use common::mcp::in_process;
use common::TestDir;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_around_an_idle_close_each_run_once() {
    let t = TestDir::with_daemon_env(&[("CUBA_EXEC_IDLE_TIMEOUT", "200ms")]).await;
    let c = in_process(&t.socket(), "idle-test").await;
    let runs = 12;
    for i in 0..runs {
        // The pause is the idleness under test, spread across the limit.
        tokio::time::sleep(Duration::from_millis(170 + 6 * i)).await;
        let r = c
            .call("start", json!({ "command": format!("echo idle-{i}") }))
            .await;
        assert!(!r.is_error(), "start {i}: {}", r.text());
    }
    let rows = c.rows(json!({ "limit": 100 })).await;
    for i in 0..runs {
        let command = format!("echo idle-{i}");
        let n = rows.iter().filter(|r| r["command"] == command).count();
        assert_eq!(n, 1, "{command:?} ran {n} times: {rows:?}");
    }
    c.close().await;
}

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
    // The daemon logs each idle close at debug level: the proof that the runs met some.
    let t = TestDir::with_daemon_env(&[
        ("CUBA_EXEC_IDLE_TIMEOUT", "200ms"),
        ("CUBA_EXEC_LOG", "info,cuba_daemon::serving::conn=debug"),
    ])
    .await;
    let c = in_process(&t.socket(), "idle-test").await;
    let runs = 12;
    for i in 0..runs {
        // The pause is the idleness under test, spread across the limit (150-260 ms).
        tokio::time::sleep(Duration::from_millis(150 + 10 * i)).await;
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
    // Pauses up to 60 ms past the limit: some of the starts met a connection the daemon gave up
    // (the exact crossing, a request in flight as the notice goes out, is tested on each side
    // alone: the daemon in e2e `connections`, the client in protocol `client`).
    let closes = t.log().matches("closing an idle connection").count();
    assert!(closes > 0, "no idle close in {runs} pauses: {}", t.log());
    c.close().await;
}

//! Exactly once through the real `cuba-exec` binary: a proxy between the shim and `cubad` cuts
//! the connection right after the daemon took a request (before any answer); the shim connects
//! again and sends the same request with the same token, and the daemon answers with the first
//! attempt's record instead of running the command again.

use crate::common;

use common::mcp::binary;
use common::TestDir;
use cuba_protocol::{Request, Response};
use cuba_tests::proxy::CutProxy;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_answer_was_lost_runs_once_and_the_model_gets_its_output() {
    let mut t = TestDir::with_daemon().await;
    let proxy = CutProxy::start(&t.path().join("p"), &t.socket(), |r| {
        matches!(r, Request::Run(_))
    });
    let marker = t.path().join("marker");
    let via = proxy.path().display().to_string();
    let c = binary(&mut t, "once-agent", &[("CUBA_EXEC_SOCKET", &via)]).await;
    let command = format!("echo x >> {}; echo done", marker.display());
    let r = c.call("run", json!({ "command": command })).await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(proxy.cuts(), 1, "the first attempt was cut");
    assert_eq!(r.output(), "done\n", "{}", r.text());
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default(),
        "x\n",
        "ran once"
    );
    let rows = c.rows(json!({})).await;
    assert_eq!(rows.len(), 1, "one record: {rows:?}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_whose_answer_was_lost_is_written_once() {
    let mut t = TestDir::with_daemon().await;
    let proxy = CutProxy::start(&t.path().join("p"), &t.socket(), |r| {
        matches!(r, Request::Stdin(_))
    });
    let via = proxy.path().display().to_string();
    let c = binary(&mut t, "once-input", &[("CUBA_EXEC_SOCKET", &via)]).await;
    let cat = c.start("cat").await;
    let r = c
        .call(
            "send_input",
            json!({ "id": cat.id(), "text": "once\n", "eof": true }),
        )
        .await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(proxy.cuts(), 1, "the first attempt was cut");
    let w = c.wait_exit(cat.id(), 0).await;
    assert_eq!(w.output(), "once\n", "{}", w.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_wait_was_lost_is_waited_for_again_not_run_again() {
    let mut t = TestDir::with_daemon().await;
    let proxy = CutProxy::start_at_reply(
        &t.path().join("p"),
        &t.socket(),
        |r| matches!(r, Request::Run(_)),
        |r| matches!(r, Response::Waited(_)),
    );
    let marker = t.path().join("marker");
    let via = proxy.path().display().to_string();
    let c = binary(&mut t, "once-wait", &[("CUBA_EXEC_SOCKET", &via)]).await;
    let command = format!("echo x >> {}; echo done", marker.display());
    let r = c.call("run", json!({ "command": command })).await;
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(proxy.cuts(), 1, "the wait's answer was cut");
    assert_eq!(r.output(), "done\n", "{}", r.text());
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default(),
        "x\n",
        "ran once"
    );
    c.close().await;
}

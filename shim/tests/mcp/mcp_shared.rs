//! One process table for every client: two independent in-process `CubaExec` servers on the
//! same socket see each other's processes, with owners taken from the MCP `clientInfo.name`;
//! and the per-process output resources `cuba://process/<id>/output`.

use crate::common;

use common::mcp::in_process;
use common::TestDir;
use rmcp::model::ReadResourceRequestParams;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_share_one_table_with_their_own_owner_names() {
    let t = TestDir::with_daemon().await;
    let alpha = in_process(&t.socket(), "agent-alpha").await;
    let beta = in_process(&t.socket(), "agent-beta").await;

    let a = alpha
        .call(
            "start",
            json!({ "command": "echo from-alpha; exec sleep 30", "name": "web" }),
        )
        .await;
    assert!(!a.is_error(), "{}", a.text());
    let b = beta.start("exec sleep 30").await;

    let rows = beta.rows(json!({})).await;
    let row_a = rows
        .iter()
        .find(|r| r["id"] == json!(a.id()))
        .unwrap_or_else(|| panic!("beta does not see alpha's process: {rows:?}"));
    assert_eq!(row_a["owner"], json!("agent-alpha"));
    assert_eq!(row_a["name"], json!("web"));
    assert_eq!(row_a["state"], json!("running"));
    let row_b = rows
        .iter()
        .find(|r| r["id"] == json!(b.id()))
        .expect("beta sees its own process");
    assert_eq!(row_b["owner"], json!("agent-beta"));

    let text = alpha.call("list_processes", json!({})).await;
    assert!(text.text().starts_with("[processes:2]"), "{}", text.text());
    assert!(
        text.text().contains("owner:agent-alpha name:web"),
        "{}",
        text.text()
    );
    assert!(text.text().contains("owner:agent-beta"), "{}", text.text());

    let only_alpha = beta.rows(json!({ "owner": "agent-alpha" })).await;
    assert_eq!(only_alpha.len(), 1, "{only_alpha:?}");
    assert_eq!(only_alpha[0]["id"], json!(a.id()));

    // The table is shared for actions too: beta reads and stops alpha's process.
    let w = beta
        .call("wait", json!({ "id": a.id(), "until": "from-alpha" }))
        .await;
    assert_eq!(w.str("wait"), "matched", "{}", w.text());
    let s = beta.call("send_signal", json!({ "id": a.id() })).await;
    assert_eq!(s.state(), "killed", "{}", s.text());
    let s = alpha.call("status", json!({ "id": a.id() })).await;
    assert_eq!(s.state(), "killed", "alpha sees beta's action");

    alpha
        .call("send_signal", json!({ "id": b.id(), "signal": "SIGKILL" }))
        .await;
    alpha.close().await;
    beta.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_process_output_is_a_resource() {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "resource-test").await;
    let r = c
        .call(
            "run",
            json!({ "command": "echo resource-text; echo line2" }),
        )
        .await;
    let id = r.id();
    let uri = format!("cuba://process/{id}/output");

    let list = common::bounded(
        "resources/list",
        common::STEP,
        c.service.list_all_resources(),
    )
    .await
    .expect("resources/list failed");
    let list = serde_json::to_value(&list).expect("resources serialise");
    let entry = list
        .as_array()
        .and_then(|l| l.iter().find(|r| r["uri"] == json!(uri)))
        .unwrap_or_else(|| panic!("{uri} not listed: {list}"));
    assert_eq!(entry["mimeType"], json!("text/plain"));
    assert_eq!(entry["size"], json!(r.u64("bytes")));

    let read = common::bounded(
        "resources/read",
        common::STEP,
        c.service
            .read_resource(ReadResourceRequestParams::new(uri.clone())),
    )
    .await
    .expect("resources/read failed");
    let read = serde_json::to_value(&read).expect("contents serialise");
    let contents = read["contents"].as_array().expect("contents array");
    assert_eq!(contents.len(), 1, "{read}");
    assert_eq!(contents[0]["uri"], json!(uri));
    assert_eq!(contents[0]["text"], json!("resource-text\nline2\n"));

    for bad in [
        "cuba://process/x/output",
        "file:///etc/passwd",
        "cuba://process/99999/output",
    ] {
        let err = common::bounded(
            "resources/read",
            common::STEP,
            c.service.read_resource(ReadResourceRequestParams::new(bad)),
        )
        .await;
        assert!(err.is_err(), "{bad} must be refused: {err:?}");
    }
    let still = c.call("run", json!({ "command": "echo ok" })).await;
    assert_eq!(still.output(), "ok\n");
    c.close().await;
}

//! The exec-check corpus (`cuba_tests::exec_corpus`) through MCP `run` of the real `cuba-exec`
//! binary, with `unresolved` at both settings (the client asks for the strict one for itself):
//! each case's marker survives, the reply names the refused `rm` (a `BLOCKED` line of an exec
//! refused, or the parse-time refusal), and the audit log has the decision.

use crate::common;

use common::mcp::binary;
use common::TestDir;
use cuba_tests::exec_corpus::{self, Case};
use serde_json::json;

async fn corpus(unresolved: &str) {
    let mut t = TestDir::with_daemon().await;
    let c = binary(
        &mut t,
        "exec-corpus",
        &[("CUBA_EXEC_UNRESOLVED", unresolved)],
    )
    .await;
    let me = cuba_protocol::client::this_client(cuba_protocol::ClientKind::Other, "status");
    let direct = cuba_protocol::client::Client::connect(&t.socket(), me)
        .await
        .expect("a direct connection");
    let status = direct.status().await.expect("the daemon's status");
    if !status.exec_checks.starts_with("on") {
        cuba_tests::machine::skip("exec corpus through MCP", &status.exec_checks);
        return;
    }
    let mut failed = Vec::new();
    for one in exec_corpus::cases() {
        let case = Case::prepare(&t.path().join("cases"), one);
        let args = json!({ "command": case.command, "cwd": case.dir });
        let r = c.call("run", args).await;
        let name = case.name;
        if !case.intact() {
            failed.push(format!("{name}: the marker is gone: {}", r.text()));
        } else if !Case::named(r.text()) && r.code() != Some("BLOCKED") {
            failed.push(format!(
                "{name}: the reply names no refused rm: {}",
                r.text()
            ));
        } else if !case.audited(&t.state()) {
            failed.push(format!("{name}: no decision in the audit log"));
        }
    }
    c.close().await;
    assert!(
        failed.is_empty(),
        "unresolved = {unresolved}:\n{}",
        failed.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_to_a_blocked_program_is_refused_through_mcp_unresolved_allow() {
    corpus("allow").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_to_a_blocked_program_is_refused_through_mcp_unresolved_refuse() {
    corpus("refuse").await;
}

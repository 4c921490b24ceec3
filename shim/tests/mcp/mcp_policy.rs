//! The command policy through MCP `run`, end to end: a script that reaches a shell on its stdin,
//! from a here-document, a process substitution or an escape is refused before anything runs
//! (the file it would delete is still there), and an allowed one runs with its exit code.

use crate::common;

use common::mcp::{binary, in_process};
use common::TestDir;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_that_reach_a_shell_are_held_to_the_blocklist() {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "policy-test").await;
    let marker = t.path().join("keep");
    std::fs::write(&marker, "x").expect("marker");
    let m = marker.display().to_string();
    for command in [
        format!("echo 'rm -f {m}' | sh"),
        format!("printf 'rm -f %s\\n' {m} | bash"),
        format!("sh <<EOF\nrm -f {m}\nEOF"),
        format!("bash -s <<< 'rm -f {m}'"),
        format!("source <(echo rm -f {m})"),
        format!("echo 'rm -f {m}' | sh /dev/stdin"),
        format!("$'\\x72m' -f {m}"),
        format!("$'\\162\\155' -f {m}"),
    ] {
        let r = c.call("run", json!({ "command": command })).await;
        assert_eq!(r.code(), Some("BLOCKED"), "{command}: {}", r.text());
        assert!(
            r.text().contains("`rm` is on the blocklist"),
            "{}",
            r.text()
        );
        assert!(marker.exists(), "{command} ran");
    }
    // Allowed scripts run as before, with their exit codes.
    let r = c
        .call("run", json!({ "command": "echo 'exit 3' | sh" }))
        .await;
    assert_eq!(r.sc()["exit_code"], 3, "{}", r.text());
    let r = c
        .call("run", json!({ "command": "sh <<EOF\necho hi\nEOF" }))
        .await;
    assert_eq!(
        (r.output(), &r.sc()["exit_code"]),
        ("hi\n", &json!(0)),
        "{}",
        r.text()
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_unseen_before_run_time_is_refused_in_the_strict_mode() {
    let mut t = TestDir::with_daemon().await;
    let marker = t.path().join("keep");
    std::fs::write(&marker, "x").expect("marker");
    let script = t.path().join("script.sh");
    std::fs::write(&script, format!("rm -f {}\n", marker.display())).expect("script");
    let command = format!("sh < {}", script.display());
    // A client asks for the strict mode for itself.
    let c = binary(&mut t, "strict", &[("CUBA_EXEC_UNRESOLVED", "refuse")]).await;
    let r = c.call("run", json!({ "command": command })).await;
    assert_eq!(r.code(), Some("BLOCKED"), "{}", r.text());
    assert!(r.text().contains("unresolved"), "{}", r.text());
    assert!(marker.exists(), "the unseen script ran");
    // Resolvable text still runs.
    let r = c
        .call("run", json!({ "command": "echo 'exit 4' | sh" }))
        .await;
    assert_eq!(r.sc()["exit_code"], 4, "{}", r.text());
    c.close().await;
}

/// A program only known at run time is refused at its exec (where the daemon checks execs):
/// the shell goes on, and the reply says `BLOCKED` with the program and the rule, in the text
/// and the structured content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_found_at_run_time_is_blocked_at_its_exec_and_the_reply_says_so() {
    let mut t = TestDir::with_daemon().await;
    let c = binary(&mut t, "exec-checks", &[]).await;
    let me = cuba_protocol::client::this_client(cuba_protocol::ClientKind::Other, "status");
    let direct = cuba_protocol::client::Client::connect(&t.socket(), me)
        .await
        .expect("a direct connection");
    let status = direct.status().await.expect("the daemon's status");
    if !status.exec_checks.starts_with("on") {
        cuba_tests::machine::skip("exec checks through MCP", &status.exec_checks);
        return;
    }
    let marker = t.path().join("keep");
    std::fs::write(&marker, "x").expect("marker");
    let command = format!("x=$(printf rm); $x {}; echo after", marker.display());
    let r = c.call("run", json!({ "command": command })).await;
    assert!(marker.exists(), "{}", r.text());
    assert!(r.text().contains("after"), "{}", r.text());
    assert!(
        r.text().contains("BLOCKED: /usr/bin/rm (`rm ") && r.text().contains("rule blocklist"),
        "{}",
        r.text()
    );
    let blocked = r.sc()["blocked"].as_array().cloned().unwrap_or_default();
    assert_eq!(blocked.len(), 1, "{}", r.sc());
    c.close().await;
}

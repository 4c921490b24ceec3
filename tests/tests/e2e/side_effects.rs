//! Side-effect declarations: a category in the daemon's blocked set is `BLOCKED` (audited, nothing
//! spawned), an allowed one runs, an unknown name is `BAD_REQUEST`, no declaration runs.

#![allow(clippy::unwrap_used)]

use cuba_protocol::{ErrorKind, ErrorReason, SpawnRequest};
use cuba_tests::{spawn_req, spawn_with, text, wait_exit, Step, TestDaemon};

fn declaring(command: &str, effects: &[&str]) -> SpawnRequest {
    SpawnRequest {
        side_effects: effects.iter().map(|e| e.to_string()).collect(),
        ..spawn_req(command)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_side_effects_are_checked_against_the_blocked_set() {
    let d = TestDaemon::builder()
        .env(
            "CUBA_EXEC_BLOCKED_SIDE_EFFECTS",
            "MAKES_NETWORK_REQUESTS,deletes_files",
        )
        .start()
        .await;
    let c = d.client().await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");

    // A blocked category: BLOCKED, naming the rule and the category; nothing is spawned.
    let command = format!("touch {}", marker.display());
    let err = c
        .spawn(declaring(
            &command,
            &["MODIFIES_WORKSPACE_FILES", "DELETES_FILES"],
        ))
        .step()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::Blocked), "{err}");
    assert_eq!(err.reason(), Some(&ErrorReason::SideEffectBlocked), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("side_effects") && msg.contains("DELETES_FILES"),
        "{msg}"
    );
    let err = c
        .ensure(SpawnRequest {
            name: Some("web".into()),
            ..declaring(&command, &["makes_network_requests"])
        })
        .step()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::Blocked), "ensure too: {err}");
    assert!(!marker.exists(), "a refused command must not run");
    let listed = c.list(Default::default()).step().await.unwrap();
    assert!(listed.is_empty(), "refusals leave no record: {listed:?}");

    // An unknown category: BAD_REQUEST listing the valid ones.
    let err = c
        .spawn(declaring("echo hi", &["network"]))
        .step()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ErrorKind::BadRequest), "{err}");
    assert!(err.to_string().contains("MAKES_NETWORK_REQUESTS"), "{err}");

    // An allowed category runs, and so does a request declaring nothing.
    let p = spawn_with(
        &c,
        declaring("echo declared", &["MODIFIES_WORKSPACE_FILES"]),
    )
    .await;
    let done = wait_exit(&c, p.id).await;
    assert_eq!(done.process.exit_code, Some(0));
    assert_eq!(text(&done.output.bytes()), "declared\n");
    let p = spawn_with(&c, spawn_req("echo plain")).await;
    let done = wait_exit(&c, p.id).await;
    assert_eq!(text(&done.output.bytes()), "plain\n");

    // Each refusal is audited with rule side_effects and the category.
    let audit = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap();
    let refused: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["decision"] == "refused")
        .collect();
    assert_eq!(refused.len(), 2, "{audit}");
    assert_eq!(refused[0]["rule"], "side_effects");
    assert_eq!(refused[0]["offending"], "DELETES_FILES");
    assert_eq!(refused[1]["offending"], "MAKES_NETWORK_REQUESTS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_setting_clears_the_default_blocked_set() {
    let d = TestDaemon::builder().start().await;
    let c = d.client().await;
    let err = c
        .spawn(declaring("echo hi", &["BREAKS_OPERATING_SYSTEM"]))
        .step()
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        Some(ErrorKind::Blocked),
        "blocked by default: {err}"
    );

    let d = TestDaemon::builder()
        .env("CUBA_EXEC_BLOCKED_SIDE_EFFECTS", "")
        .start()
        .await;
    let c = d.client().await;
    let p = spawn_with(&c, declaring("echo hi", &["BREAKS_OPERATING_SYSTEM"])).await;
    assert_eq!(wait_exit(&c, p.id).await.process.exit_code, Some(0));
}
